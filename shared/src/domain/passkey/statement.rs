//! The vote statement a passkey signs: RFC 8785 canonical JSON of what the vote says, about
//! which approval, over which exact payload (its digest), with a single-use nonce. The
//! assertion's challenge is its SHA-256, so the signature covers every field.

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

/// Hex SHA-256 of the payload's RFC 8785 form: the digest a statement names.
pub fn payload_sha256(payload: &Map<String, Value>) -> String {
    let canonical = serde_json_canonicalizer::to_vec(payload).unwrap_or_default();
    hex::encode(Sha256::digest(&canonical))
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Statement {
    pub tenant: String,
    pub approval_id: String,
    pub action_type: String,
    pub payload_sha256: String,
    /// `approve` or `reject`.
    pub vote: String,
    /// The place the vote fills.
    pub approver: String,
    /// The delegate who cast it, in `approver`'s place.
    pub by: Option<String>,
    pub policy_version: Option<u32>,
    pub nonce: String,
}

impl Statement {
    pub fn to_value(&self) -> Value {
        let mut statement = json!({
            "v": 1,
            "tenant": self.tenant,
            "approval_id": self.approval_id,
            "action": {"type": self.action_type, "payload_sha256": self.payload_sha256},
            "vote": self.vote,
            "approver": self.approver,
            "nonce": self.nonce,
        });
        if let Some(object) = statement.as_object_mut() {
            if let Some(by) = &self.by {
                object.insert("by".to_owned(), json!(by));
            }
            if let Some(version) = self.policy_version {
                object.insert("policy_version".to_owned(), json!(version));
            }
        }
        statement
    }

    /// Its RFC 8785 form: the bytes whose digest is signed.
    pub fn canonical(&self) -> String {
        serde_json_canonicalizer::to_string(&self.to_value()).unwrap_or_default()
    }

    /// The WebAuthn challenge: SHA-256 of the canonical form.
    pub fn challenge(&self) -> [u8; 32] {
        Sha256::digest(self.canonical().as_bytes()).into()
    }

    /// A statement read back from its JSON (a certificate's), when it has every field.
    pub fn from_value(value: &Value) -> Option<Self> {
        let object = value.as_object()?;
        let text = |name: &str| object.get(name)?.as_str().map(str::to_owned);
        if object.get("v")?.as_u64()? != 1 {
            return None;
        }
        let action = object.get("action")?.as_object()?;
        Some(Self {
            tenant: text("tenant")?,
            approval_id: text("approval_id")?,
            action_type: action.get("type")?.as_str()?.to_owned(),
            payload_sha256: action.get("payload_sha256")?.as_str()?.to_owned(),
            vote: text("vote")?,
            approver: text("approver")?,
            by: match object.get("by") {
                None => None,
                Some(by) => Some(by.as_str()?.to_owned()),
            },
            policy_version: match object.get("policy_version") {
                None => None,
                Some(version) => Some(u32::try_from(version.as_u64()?).ok()?),
            },
            nonce: text("nonce")?,
        })
    }
}
