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

/// The key cursors are signed with (derived from `DECISION_TOKEN_SECRET`).
#[derive(Clone)]
pub struct CursorKey(Vec<u8>);

impl std::fmt::Debug for CursorKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CursorKey(…)")
    }
}

impl CursorKey {
    pub fn new(secret: &TokenSecret) -> Self {
        Self(secret.derive("countersign page cursor v1"))
    }

    fn tag(&self, scope: &str, payload: &str) -> [u8; 32] {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.0)
            .expect("HMAC takes keys of any length");
        mac.update(scope.as_bytes());
        mac.update(b"\n");
        mac.update(payload.as_bytes());
        mac.finalize().into_bytes().into()
    }

    /// The cursor for `position` (where the next page starts) in the query `scope`.
    pub fn seal(&self, scope: &str, position: &Value) -> String {
        let payload = URL_SAFE_NO_PAD.encode(position.to_string());
        let tag = URL_SAFE_NO_PAD.encode(self.tag(scope, &payload));
        format!("{payload}.{tag}")
    }

    /// The position in a cursor made by [`CursorKey::seal`] for the same `scope`; `None` for
    /// anything else.
    pub fn open(&self, scope: &str, cursor: &str) -> Option<Value> {
        let (payload, tag) = cursor.split_once('.')?;
        let tag = URL_SAFE_NO_PAD.decode(tag).ok()?;
        if !bool::from(self.tag(scope, payload).as_slice().ct_eq(&tag)) {
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
