//! Opaque page cursors: a position in a query, bound to the query it came from (the tenant and
//! the filters, or the approval) by an HMAC, so a cursor that was altered or belongs to another
//! query is refused instead of reading from wherever it points.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, KeyInit, Mac};
use serde_json::Value;
use sha2::Sha256;
use subtle::ConstantTimeEq;

use crate::review_token::TokenSecret;

/// The keys cursors are signed with (derived from each of `DECISION_TOKEN_SECRET`'s, by id: the
/// first signs).
#[derive(Clone)]
pub struct CursorKey(Vec<(String, Vec<u8>)>);

impl std::fmt::Debug for CursorKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CursorKey(…)")
    }
}

impl CursorKey {
    pub fn new(secret: &TokenSecret) -> Self {
        Self(secret.derive("countersign page cursor v1"))
    }

    fn tag(key: &[u8], scope: &str, payload: &str) -> [u8; 32] {
        let mut mac =
            <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC takes keys of any length");
        mac.update(scope.as_bytes());
        mac.update(b"\n");
        mac.update(payload.as_bytes());
        mac.finalize().into_bytes().into()
    }

    /// The cursor for `position` (where the next page starts) in the query `scope`.
    /// `{key id}.{payload}.{tag}`.
    pub fn seal(&self, scope: &str, position: &Value) -> String {
        let (id, key) = &self.0[0];
        let payload = URL_SAFE_NO_PAD.encode(position.to_string());
        let tag = URL_SAFE_NO_PAD.encode(Self::tag(key, scope, &payload));
        format!("{id}.{payload}.{tag}")
    }

    /// The position in a cursor made by [`CursorKey::seal`] for the same `scope`; `None` for
    /// anything else.
    pub fn open(&self, scope: &str, cursor: &str) -> Option<Value> {
        let parts: Vec<&str> = cursor.split('.').collect();
        // A cursor from before key ids (two parts) is tried under every key.
        let (keys, payload, tag): (Vec<&[u8]>, _, _) = match parts[..] {
            [id, payload, tag] => (
                self.0
                    .iter()
                    .filter(|(k, _)| k == id)
                    .map(|(_, key)| key.as_slice())
                    .collect(),
                payload,
                tag,
            ),
            [payload, tag] => (
                self.0.iter().map(|(_, k)| k.as_slice()).collect(),
                payload,
                tag,
            ),
            _ => return None,
        };
        let tag = URL_SAFE_NO_PAD.decode(tag).ok()?;
        let verified = keys
            .iter()
            .any(|key| bool::from(Self::tag(key, scope, payload).as_slice().ct_eq(&tag)));
        if !verified {
            return None;
        }
        let json = URL_SAFE_NO_PAD.decode(payload).ok()?;
        serde_json::from_slice(&json).ok()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn during_a_rotation_a_cursor_of_either_key_opens() {
        let old = TokenSecret::parse(&"o".repeat(32)).unwrap();
        let both = TokenSecret::parse(&format!(r#"["{}", "{}"]"#, "n".repeat(32), "o".repeat(32)))
            .unwrap();
        let new = TokenSecret::parse(&"n".repeat(32)).unwrap();
        let position = json!({"id": "apr_1"});
        let sealed_before = CursorKey::new(&old).seal("q", &position);
        let sealed_during = CursorKey::new(&both).seal("q", &position);
        assert_eq!(
            CursorKey::new(&both).open("q", &sealed_before),
            Some(position.clone())
        );
        assert_eq!(
            CursorKey::new(&new).open("q", &sealed_during),
            Some(position.clone())
        );
        assert_eq!(CursorKey::new(&old).open("q", &sealed_during), None);
        let legacy = sealed_before.split_once('.').unwrap().1;
        assert_eq!(CursorKey::new(&both).open("q", legacy), Some(position));
    }

    #[test]
    fn a_cursor_opens_only_in_its_own_query_and_unaltered() {
        let key = CursorKey::new(&TokenSecret::parse(&"k".repeat(32)).unwrap());
        let cursor = key.seal("acme\nstatus=pending", &json!({"id": "apr_1"}));
        assert_eq!(
            key.open("acme\nstatus=pending", &cursor),
            Some(json!({"id": "apr_1"}))
        );
        assert_eq!(key.open("globex\nstatus=pending", &cursor), None);
        assert_eq!(key.open("acme\n", &cursor), None);
        let mut altered = cursor.clone().into_bytes();
        altered[2] ^= 1;
        assert_eq!(
            key.open("acme\nstatus=pending", &String::from_utf8(altered).unwrap()),
            None
        );
        assert_eq!(key.open("acme\nstatus=pending", "nonsense"), None);
        let other = CursorKey::new(&TokenSecret::parse(&"j".repeat(32)).unwrap());
        assert_eq!(other.open("acme\nstatus=pending", &cursor), None);
    }
}
