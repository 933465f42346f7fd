//! API keys kept in the keys table (docs/KEYS.md): `csk_<key id>_<secret>_<check>`.
//! The key id names the table item; the secret is 32 base62 characters (190 random bits); the
//! check is the CRC-32 of everything before it in 6 base62 characters, so a mistyped or made-up
//! key is refused before any DynamoDB call, and secret scanners recognise the shape. The table
//! keeps only the SHA-256 of the whole key.

use std::fmt;

use rand::Rng;
use sha2::{Digest, Sha256};

use super::{Approver, EpochSeconds, TenantId};

const PREFIX: &str = "csk_";
const KEY_ID_LEN: usize = 16;
const SECRET_LEN: usize = 32;
const CHECK_LEN: usize = 6;
const BASE32: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
const BASE62: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// A table key's id: 16 lower-case base32 characters (80 random bits). Not secret: it is the
/// item's key, shown by `keys list` and recorded as the actor's `key_id`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(transparent)]
pub struct KeyId(String);

impl KeyId {
    pub fn parse(raw: &str) -> Option<Self> {
        (raw.len() == KEY_ID_LEN && raw.bytes().all(|b| BASE32.contains(&b)))
            .then(|| Self(raw.to_owned()))
    }

    pub fn random() -> Self {
        let mut rng = rand::rng();
        Self(
            (0..KEY_ID_LEN)
                .map(|_| char::from(BASE32[rng.random_range(0..BASE32.len())]))
                .collect(),
        )
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A whole table key, as presented or as just created. Its `Debug` never shows the secret.
#[derive(Clone, PartialEq, Eq)]
pub struct TableKey {
    id: KeyId,
    text: String,
}

impl fmt::Debug for TableKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TableKey").field("id", &self.id).finish()
    }
}

impl TableKey {
    /// A presented key of the table's shape whose check holds; `None` for anything else (a
    /// legacy key, a typo, a made-up key) — decided without any I/O.
    pub fn parse(raw: &str) -> Option<Self> {
        let rest = raw.strip_prefix(PREFIX)?;
        let mut parts = rest.split('_');
        let (id, secret, check) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some()
            || secret.len() != SECRET_LEN
            || !secret.bytes().all(|b| BASE62.contains(&b))
            || check.len() != CHECK_LEN
        {
            return None;
        }
        let id = KeyId::parse(id)?;
        let body = &raw[..raw.len() - CHECK_LEN - 1];
        // Not a secret comparison: the check is derived from the presented text itself.
        (check == checksum(body)).then(|| Self {
            id,
            text: raw.to_owned(),
        })
    }

    /// A new key with a fresh random secret under `id`.
    pub fn generate(id: KeyId) -> Self {
        let mut rng = rand::rng();
        let secret: String = (0..SECRET_LEN)
            .map(|_| char::from(BASE62[rng.random_range(0..BASE62.len())]))
            .collect();
        let body = format!("{PREFIX}{id}_{secret}");
        let text = format!("{body}_{}", checksum(&body));
        Self { id, text }
    }

    pub fn id(&self) -> &KeyId {
        &self.id
    }

    /// The key itself: shown once, at creation, and never stored.
    pub fn expose(&self) -> &str {
        &self.text
    }

    /// What the table keeps: the SHA-256 of the whole key.
    pub fn digest(&self) -> [u8; 32] {
        Sha256::digest(self.text.as_bytes()).into()
    }
}

/// CRC-32 (IEEE) of `body`, in 6 base62 characters (62⁶ > 2³²).
fn checksum(body: &str) -> String {
    let mut n = u64::from(crc32fast::hash(body.as_bytes()));
    let mut digits = [b'0'; CHECK_LEN];
    for digit in digits.iter_mut().rev() {
        *digit = BASE62[(n % 62) as usize];
        n /= 62;
    }
    digits.iter().map(|&b| char::from(b)).collect()
}

/// A key's item in the keys table.
#[derive(Clone, PartialEq, Eq)]
pub struct KeyRecord {
    pub id: KeyId,
    pub tenant: TenantId,
    pub principal: Approver,
    /// The role names (checked against the roles Countersign knows when the key is used).
    pub roles: Vec<String>,
    /// SHA-256 of the whole key.
    pub key_hash: [u8; 32],
    pub created_at: EpochSeconds,
    /// Who created it: the AWS identity that ran `countersign keys create`, as it says.
    pub created_by: String,
    pub description: Option<String>,
    pub expires_at: Option<EpochSeconds>,
    pub revoked_at: Option<EpochSeconds>,
    pub last_used_at: Option<EpochSeconds>,
}

impl fmt::Debug for KeyRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the hash.
        f.debug_struct("KeyRecord")
            .field("id", &self.id)
            .field("tenant", &self.tenant)
            .field("principal", &self.principal)
            .field("roles", &self.roles)
            .field("expires_at", &self.expires_at)
            .field("revoked_at", &self.revoked_at)
            .finish()
    }
}

impl KeyRecord {
    /// Whether the key may be used at `now`: not revoked, and not past its expiry (to the
    /// second: a key that expires at `t` is refused from `t` on).
    pub fn usable_at(&self, now: EpochSeconds) -> bool {
        self.revoked_at.is_none() && self.expires_at.is_none_or(|at| now < at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_key_parses_back_to_its_id() {
        for _ in 0..200 {
            let key = TableKey::generate(KeyId::random());
            let text = key.expose();
            assert!(text.starts_with("csk_"));
            assert_eq!(text.len(), 4 + 16 + 1 + 32 + 1 + 6);
            assert_eq!(TableKey::parse(text), Some(key.clone()));
        }
    }

    #[test]
    fn any_changed_character_fails_the_check() {
        let key = TableKey::generate(KeyId::random());
        let text = key.expose().to_owned();
        let mut refused = 0;
        for at in 4..text.len() {
            let original = text.as_bytes()[at];
            if original == b'_' {
                continue;
            }
            let replacement = if original == b'a' { b'b' } else { b'a' };
            let mut changed = text.clone().into_bytes();
            changed[at] = replacement;
            let changed = String::from_utf8(changed).unwrap();
            assert_eq!(TableKey::parse(&changed), None, "position {at}");
            refused += 1;
        }
        assert_eq!(refused, text.len() - 4 - 2);
    }

    #[test]
    fn other_shapes_are_not_table_keys() {
        let key = TableKey::generate(KeyId::random());
        let text = key.expose();
        for raw in [
            "",
            "csk_",
            "acme-key-0123456789",
            &text[..text.len() - 1],
            &format!("{text}_x"),
            &text.replacen("csk_", "CSK_", 1),
            &text.to_uppercase(),
        ] {
            assert_eq!(TableKey::parse(raw), None, "{raw}");
        }
    }

    #[test]
    fn debug_output_shows_no_secret() {
        let key = TableKey::generate(KeyId::random());
        let shown = format!("{key:?}");
        assert!(!shown.contains(key.expose()), "{shown}");
        assert!(shown.contains(key.id().as_str()));
    }

    #[test]
    fn expiry_holds_to_the_second_and_revocation_always() {
        let record = KeyRecord {
            id: KeyId::random(),
            tenant: TenantId::parse("acme").unwrap(),
            principal: Approver::parse("ci@acme").unwrap(),
            roles: vec!["requester".into()],
            key_hash: [0; 32],
            created_at: 0,
            created_by: "test".into(),
            description: None,
            expires_at: Some(100),
            revoked_at: None,
            last_used_at: None,
        };
        assert!(record.usable_at(99));
        assert!(!record.usable_at(100));
        let revoked = KeyRecord {
            expires_at: None,
            revoked_at: Some(5),
            ..record
        };
        assert!(!revoked.usable_at(0));
    }
}
