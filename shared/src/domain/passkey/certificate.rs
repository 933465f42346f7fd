//! The certificate of an approved passkey-only approval: the action, its digest, the policy
//! that required the votes (its rules with their approvers), every vote's statement and
//! assertion with the credential's public key, and Countersign's ES256 signature over the rest
//! (a compact JWS with a detached payload, RFC 7515 appendix F: the payload is the RFC 8785
//! form of the certificate without `signature`).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::jwk::Jwk;
use super::{b64, unb64};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Certificate {
    pub v: u32,
    pub approval_id: String,
    pub tenant: String,
    pub requested_by: Option<String>,
    pub action: CertifiedAction,
    pub payload_sha256: String,
    pub policy: PolicyEvidence,
    pub votes: Vec<CertificateVote>,
    pub decided_at: String,
    pub issued_at: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub signature: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CertifiedAction {
    #[serde(rename = "type")]
    pub kind: String,
    pub payload: Map<String, Value>,
}

/// The policy that required the votes: the deployment's version and digest (absent when the
/// requester's own rules, or the create's list, decided), and the rules as the approval holds
/// them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyEvidence {
    pub version: Option<u32>,
    pub sha256: Option<String>,
    pub rules: Vec<RuleEvidence>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuleEvidence {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    pub min_approvals: u32,
    pub approvers: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CertificateVote {
    /// The statement's RFC 8785 form: the exact text whose SHA-256 is the challenge.
    pub statement: String,
    pub credential_id: String,
    pub authenticator_data: String,
    pub client_data_json: String,
    pub signature: String,
    pub public_key_jwk: Jwk,
    /// Whose passkey signed: the approver, or their delegate.
    pub identity: String,
    pub iss: String,
    pub sub: String,
    pub registered_at: String,
}

impl CertificateVote {
    pub fn assertion(&self) -> Option<super::Assertion> {
        Some(super::Assertion {
            credential_id: unb64(&self.credential_id)?,
            authenticator_data: unb64(&self.authenticator_data)?,
            client_data_json: unb64(&self.client_data_json)?,
            signature: unb64(&self.signature)?,
        })
    }
}

/// The JWS protected header of a certificate signed by key `kid`.
pub fn jws_header(kid: &str) -> String {
    b64(serde_json::json!({"alg": "ES256", "kid": kid})
        .to_string()
        .as_bytes())
}

/// The bytes a certificate's JWS signs: `BASE64URL(header) . BASE64URL(payload)`, the payload
/// being the RFC 8785 form of `certificate` without `signature`.
pub fn signing_input(header_b64: &str, certificate: &Value) -> String {
    let mut unsigned = certificate.clone();
    if let Some(object) = unsigned.as_object_mut() {
        object.remove("signature");
    }
    let canonical = serde_json_canonicalizer::to_vec(&unsigned).unwrap_or_default();
    format!("{header_b64}.{}", b64(&canonical))
}

/// The detached compact JWS: `header..signature` (the payload left out).
pub fn detached(header_b64: &str, signature: &[u8]) -> String {
    format!("{header_b64}..{}", b64(signature))
}

impl Certificate {
    /// The JWS header for key `kid` and the bytes it signs: give them to the signer (KMS), then
    /// [`Certificate::sealed`] with its `r ‖ s` signature.
    pub fn to_sign(&self, kid: &str) -> (String, String) {
        let header = jws_header(kid);
        let value = serde_json::to_value(self).unwrap_or_default();
        let input = signing_input(&header, &value);
        (header, input)
    }

    /// The certificate's JSON with its `signature` (`r ‖ s`, 64 bytes) by the header's key.
    pub fn sealed(&self, header_b64: &str, signature: &[u8]) -> Value {
        let mut value = serde_json::to_value(self).unwrap_or_default();
        if let Some(object) = value.as_object_mut() {
            object.insert(
                "signature".to_owned(),
                Value::String(detached(header_b64, signature)),
            );
        }
        value
    }
}
