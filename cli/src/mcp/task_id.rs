//! MCP task ids. A task is an approval, so its id carries what answering it needs — which tool
//! made it, the approval's id and, for `permission_prompt`, the `tool_use_id` its claim is keyed
//! by — and nothing is kept in the server: a restarted server answers the same task.
//!
//! `base64url(payload) "." base64url(HMAC-SHA256(k, label ‖ base64url(payload)))`, where `k` is
//! itself an HMAC of the configured API key. Only a server holding that key can mint or read
//! one: another tenant's key (or another key of the same tenant), a forged or a truncated id all
//! fail the tag, compared in constant time, and are "not found". The payload is not secret (the
//! agent knows the approval and its own tool call) but it is opaque: clients must not read it.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

/// What a task stands for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "k", rename_all = "snake_case")]
pub enum TaskRef {
    /// `request_approval`: the approval, whose JSON is the result once it is decided.
    Request { id: String },
    /// `permission_prompt`: the approval of one tool call, claimed under `tool_use_id`.
    Permission { id: String, tool_use_id: String },
}

impl TaskRef {
    pub fn approval_id(&self) -> &str {
        match self {
            Self::Request { id } | Self::Permission { id, .. } => id,
        }
    }
}

/// The key task ids are signed with, derived from the configured API key. Its Debug output
/// never shows it.
#[derive(Clone)]
pub struct TaskKey([u8; 32]);

impl std::fmt::Debug for TaskKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TaskKey(…)")
    }
}

/// Bound into every tag, so that no other MAC made with the same key verifies as a task id.
const LABEL: &[u8] = b"countersign-mcp-task-v1\n";
/// Longest id accepted before any work: a payload holds an approval id and a tool_use_id.
const MAX_LEN: usize = 2048;

impl TaskKey {
    /// Derived from `api_key`: ids minted under one key verify under that key only.
    pub fn from_api_key(api_key: &str) -> Self {
        let mut mac = mac(b"countersign mcp task ids v1");
        mac.update(api_key.as_bytes());
        Self(mac.finalize().into_bytes().into())
    }

    /// The id of `task`.
    pub fn mint(&self, task: &TaskRef) -> String {
        // A derived enum of strings always serializes.
        let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(task).unwrap_or_default());
        let tag = URL_SAFE_NO_PAD.encode(self.tag(&payload).finalize().into_bytes());
        format!("{payload}.{tag}")
    }

    /// The task `id` stands for, when this key minted it; `None` for anything else.
    pub fn open(&self, id: &str) -> Option<TaskRef> {
        if id.len() > MAX_LEN {
            return None;
        }
        let (payload, tag) = id.split_once('.')?;
        let tag = URL_SAFE_NO_PAD.decode(tag).ok()?;
        // `verify_slice` compares in constant time (and refuses a tag of another length).
        self.tag(payload).verify_slice(&tag).ok()?;
        let payload = URL_SAFE_NO_PAD.decode(payload).ok()?;
        serde_json::from_slice(&payload).ok()
    }

    fn tag(&self, payload: &str) -> Hmac<Sha256> {
        let mut mac = mac(&self.0);
        mac.update(LABEL);
        mac.update(payload.as_bytes());
        mac
    }
}

fn mac(key: &[u8]) -> Hmac<Sha256> {
    // HMAC takes keys of any length: this cannot fail.
    <Hmac<Sha256> as KeyInit>::new_from_slice(key)
        .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn permission() -> TaskRef {
        TaskRef::Permission {
            id: "apr_01JD3ZZZZZZZZZZZZZZZZZZZZZ".into(),
            tool_use_id: "toolu_01.x/y".into(),
        }
    }

    #[test]
    fn an_id_opens_under_its_key_only() {
        let key = TaskKey::from_api_key("ci-key-0123456789abcdef");
        for task in [permission(), TaskRef::Request { id: "apr_1".into() }] {
            let id = key.mint(&task);
            assert_eq!(key.open(&id), Some(task.clone()));
            assert!(
                id.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)),
                "{id}"
            );
            let other = TaskKey::from_api_key("key-b-0123456789abcdef");
            assert_eq!(other.open(&id), None, "another key's id is unknown");
        }
    }

    #[test]
    fn a_forged_or_damaged_id_is_unknown() {
        let key = TaskKey::from_api_key("ci-key-0123456789abcdef");
        let id = key.mint(&permission());
        let (payload, tag) = id.split_once('.').unwrap();
        let forged_payload = URL_SAFE_NO_PAD.encode(
            serde_json::to_vec(&TaskRef::Request {
                id: "apr_other".into(),
            })
            .unwrap(),
        );
        let short_tag = &tag[..tag.len() - 2];
        for bad in [
            String::new(),
            "garbage".to_owned(),
            format!("{forged_payload}.{tag}"),
            format!("{payload}.{short_tag}"),
            format!("{payload}.{tag}A"),
            format!("{payload}.!!"),
            format!("{payload}x.{tag}"),
            format!("{}.{tag}", "A".repeat(MAX_LEN)),
        ] {
            assert_eq!(key.open(&bad), None, "{bad}");
        }
        assert!(!format!("{key:?}").contains(&format!("{:?}", key.0)));
    }
}
