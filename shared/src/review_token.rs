//! Review-link tokens: an HMAC-SHA256 (key `DECISION_TOKEN_SECRET`) that binds one approval (of
//! one tenant), one approver and an expiry. Minted by the notify job, verified by the review
//! page; never returned by the API. The tenant travels in the token because the review page has
//! no API key to scope its read with.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::domain::{ApprovalId, Approver, EpochSeconds, TenantId};

/// The token keys: one, or several while the secret is rotated (`DECISION_TOKEN_SECRET` as a
/// JSON list, the first signing). Tokens and cursors carry the id of the key that signed them
/// and verify under that listed key; a token minted before key ids existed verifies under any.
/// Its Debug output never shows a key.
#[derive(Clone)]
pub struct TokenSecret(Vec<SigningKey>);

#[derive(Clone)]
pub(crate) struct SigningKey {
    /// Not secret: 8 characters of an HMAC of the key, naming it in tokens and cursors.
    pub(crate) id: String,
    pub(crate) key: Vec<u8>,
}

impl SigningKey {
    fn new(key: Vec<u8>) -> Self {
        let mut mac =
            <Hmac<Sha256> as KeyInit>::new_from_slice(&key).expect("HMAC takes keys of any length");
        mac.update(b"countersign key id v1");
        let id = URL_SAFE_NO_PAD.encode(&mac.finalize().into_bytes()[..6]);
        Self { id, key }
    }
}

impl std::fmt::Debug for TokenSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenSecret(…)")
    }
}

/// What a valid token grants: deciding one tenant's approval as one approver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewGrant {
    pub tenant: TenantId,
    pub approver: Approver,
    pub expires_at: EpochSeconds,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("the token is malformed")]
    Malformed,
    #[error("the token does not verify for this approval")]
    BadSignature,
    #[error("the token has expired")]
    Expired,
}

impl TokenSecret {
    pub const MIN_BYTES: usize = 32;

    /// One secret, or a JSON list of them (`["new…", "old…"]`: the first signs, every one
    /// verifies). Each at least 32 characters.
    pub fn parse(raw: &str) -> Result<Self, String> {
        let secrets: Vec<String> = if raw.trim_start().starts_with('[') {
            // serde's message could quote a value: only where.
            serde_json::from_str(raw).map_err(|e| {
                format!(
                    "a list must be a JSON array of strings: error at column {}",
                    e.column()
                )
            })?
        } else {
            vec![raw.to_owned()]
        };
        if secrets.is_empty() {
            return Err("the list is empty".to_owned());
        }
        let mut keys: Vec<SigningKey> = Vec::new();
        for (i, secret) in secrets.into_iter().enumerate() {
            if secret.len() < Self::MIN_BYTES {
                return Err(format!(
                    "secret {i} must be at least {} characters",
                    Self::MIN_BYTES
                ));
            }
            let key = SigningKey::new(secret.into_bytes());
            if keys.iter().any(|k| k.id == key.id) {
                return Err(format!("secret {i} is listed twice"));
            }
            keys.push(key);
        }
        Ok(Self(keys))
    }

    /// Each key for another purpose, derived from it (HMAC of the purpose's label), so one
    /// configured secret serves both without one purpose's MAC ever verifying for the other;
    /// with the id of the key it came from.
    pub(crate) fn derive(&self, label: &str) -> Vec<(String, Vec<u8>)> {
        self.0
            .iter()
            .map(|k| {
                let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&k.key)
                    .expect("HMAC takes keys of any length");
                mac.update(label.as_bytes());
                (k.id.clone(), mac.finalize().into_bytes().to_vec())
            })
            .collect()
    }

    fn mac(
        key: &SigningKey,
        tenant: &str,
        approval: &ApprovalId,
        approver: &str,
        expires_at: EpochSeconds,
    ) -> Hmac<Sha256> {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&key.key)
            .expect("HMAC takes keys of any length");
        // Newline-separated: no field can contain one (tenant and approval ids are restricted,
        // approvers have no control characters), so the fields cannot shift.
        mac.update(
            format!("countersign-review-v1\n{tenant}\n{approval}\n{expires_at}\n{approver}")
                .as_bytes(),
        );
        mac
    }

    /// `{key id}.{expiry}.{base64url(tenant)}.{base64url(approver)}.{base64url(mac)}`, signed
    /// with the first key.
    pub fn mint(
        &self,
        tenant: &TenantId,
        approval: &ApprovalId,
        approver: &Approver,
        expires_at: EpochSeconds,
    ) -> String {
        let key = &self.0[0];
        let tag = Self::mac(
            key,
            tenant.as_str(),
            approval,
            approver.as_str(),
            expires_at,
        )
        .finalize()
        .into_bytes();
        format!(
            "{}.{expires_at}.{}.{}.{}",
            key.id,
            URL_SAFE_NO_PAD.encode(tenant.as_str()),
            URL_SAFE_NO_PAD.encode(approver.as_str()),
            URL_SAFE_NO_PAD.encode(tag)
        )
    }

    /// What a token grants, if it verifies for `approval` and has not expired. The MAC is
    /// compared in constant time.
    pub fn verify(
        &self,
        token: &str,
        approval: &ApprovalId,
        now: EpochSeconds,
    ) -> Result<ReviewGrant, TokenError> {
        let parts: Vec<&str> = token.split('.').collect();
        // The signing key's id first; a token from before key ids (four parts) is tried under
        // every listed key.
        let (keys, expiry, tenant, approver, tag): (Vec<&SigningKey>, _, _, _, _) = match parts[..]
        {
            [id, expiry, tenant, approver, tag] => (
                self.0.iter().filter(|k| k.id == id).collect(),
                expiry,
                tenant,
                approver,
                tag,
            ),
            [expiry, tenant, approver, tag] => {
                (self.0.iter().collect(), expiry, tenant, approver, tag)
            }
            _ => return Err(TokenError::Malformed),
        };
        // One spelling per expiry: no sign, no leading zeros.
        if expiry.is_empty()
            || expiry.len() > 18
            || expiry.starts_with('0')
            || !expiry.bytes().all(|b| b.is_ascii_digit())
        {
            return Err(TokenError::Malformed);
        }
        let expires_at: EpochSeconds = expiry.parse().map_err(|_| TokenError::Malformed)?;
        let decode = |part: &str| {
            URL_SAFE_NO_PAD
                .decode(part)
                .ok()
                .and_then(|bytes| String::from_utf8(bytes).ok())
                .ok_or(TokenError::Malformed)
        };
        let (tenant, approver) = (decode(tenant)?, decode(approver)?);
        let tag = URL_SAFE_NO_PAD
            .decode(tag)
            .map_err(|_| TokenError::Malformed)?;
        let verified = keys.iter().any(|key| {
            Self::mac(key, &tenant, approval, &approver, expires_at)
                .verify_slice(&tag)
                .is_ok()
        });
        if !verified {
            return Err(TokenError::BadSignature);
        }
        if now >= expires_at {
            return Err(TokenError::Expired);
        }
        Ok(ReviewGrant {
            tenant: TenantId::parse(&tenant).map_err(|_| TokenError::Malformed)?,
            approver: Approver::parse(&approver).map_err(|_| TokenError::Malformed)?,
            expires_at,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret() -> TokenSecret {
        TokenSecret::parse("a-test-secret-of-at-least-32-bytes!").unwrap()
    }

    fn acme() -> TenantId {
        TenantId::parse("acme").unwrap()
    }

    #[test]
    fn a_token_verifies_for_its_approval_and_approver_until_it_expires() {
        let id = ApprovalId::generate();
        let alice = Approver::parse("alice@example.com").unwrap();
        let token = secret().mint(&acme(), &id, &alice, 1_000);
        assert!(
            token
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)),
            "URL-safe"
        );
        let grant = secret().verify(&token, &id, 999).unwrap();
        assert_eq!(
            (grant.tenant, grant.approver, grant.expires_at),
            (acme(), alice, 1_000)
        );
        assert_eq!(
            secret().verify(&token, &id, 1_000),
            Err(TokenError::Expired)
        );
    }

    #[test]
    fn during_a_rotation_tokens_of_either_key_verify_and_carry_their_key_id() {
        let id = ApprovalId::generate();
        let alice = Approver::parse("alice@example.com").unwrap();
        let old = "an-old-secret-of-at-least-32-bytes!!";
        let new = "a-new-secret-of-at-least-32-bytes!!!";
        let before = TokenSecret::parse(old).unwrap();
        let rotating = TokenSecret::parse(&format!(r#"["{new}", "{old}"]"#)).unwrap();
        let after = TokenSecret::parse(new).unwrap();
        let minted_before = before.mint(&acme(), &id, &alice, 1_000);
        let minted_during = rotating.mint(&acme(), &id, &alice, 1_000);
        assert!(
            rotating.verify(&minted_before, &id, 0).is_ok(),
            "the old key's token"
        );
        assert!(rotating.verify(&minted_during, &id, 0).is_ok());
        assert!(
            after.verify(&minted_during, &id, 0).is_ok(),
            "signed with the first, new"
        );
        assert_eq!(
            before.verify(&minted_during, &id, 0),
            Err(TokenError::BadSignature)
        );
        assert_eq!(
            after.verify(&minted_before, &id, 0),
            Err(TokenError::BadSignature)
        );
        assert_ne!(
            minted_before.split('.').next(),
            minted_during.split('.').next(),
            "each key has its own id"
        );
        // A token minted before key ids: four parts, tried under every listed key.
        let legacy = minted_before.split_once('.').unwrap().1;
        assert!(rotating.verify(legacy, &id, 0).is_ok());
        for bad in [
            "[]",
            r#"["short"]"#,
            "[1]",
            r#"["a-secret-of-at-least-32-bytes!!!!!", "a-secret-of-at-least-32-bytes!!!!!"]"#,
        ] {
            assert!(TokenSecret::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn tampered_or_foreign_tokens_are_refused() {
        let id = ApprovalId::generate();
        let alice = Approver::parse("alice@example.com").unwrap();
        let token = secret().mint(&acme(), &id, &alice, 1_000);
        assert_eq!(
            secret().verify(&token, &ApprovalId::generate(), 0),
            Err(TokenError::BadSignature)
        );
        let other_key = TokenSecret::parse("another-secret-of-at-least-32-bytes").unwrap();
        assert_eq!(
            other_key.verify(&token, &id, 0),
            Err(TokenError::BadSignature)
        );
        // The key id, then expiry, tenant, approver and MAC.
        let parts: Vec<_> = token.split('.').skip(1).collect();
        let kid = token.split('.').next().unwrap();
        let later = format!("{kid}.2000.{}.{}.{}", parts[1], parts[2], parts[3]);
        assert_eq!(
            secret().verify(&later, &id, 0),
            Err(TokenError::BadSignature)
        );
        let bob = URL_SAFE_NO_PAD.encode("bob@example.com");
        let swapped = format!("{kid}.{}.{}.{bob}.{}", parts[0], parts[1], parts[3]);
        assert_eq!(
            secret().verify(&swapped, &id, 0),
            Err(TokenError::BadSignature)
        );
        let globex = URL_SAFE_NO_PAD.encode("globex");
        let moved = format!("{kid}.{}.{globex}.{}.{}", parts[0], parts[2], parts[3]);
        assert_eq!(
            secret().verify(&moved, &id, 0),
            Err(TokenError::BadSignature)
        );
        for bad in [
            "",
            "x",
            "1.2",
            "abc.def.ghi.jkl",
            "-1.YQ.YQ.YQ",
            "1.YQ.YQ",
            "k.1.YQ.YQ.YQ.YQ",
            "01.YQ.YQ.YQ",
        ] {
            assert_eq!(
                secret().verify(bad, &id, 0),
                Err(TokenError::Malformed),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn short_secrets_are_refused_and_never_printed() {
        assert!(TokenSecret::parse("short").is_err());
        assert_eq!(format!("{:?}", secret()), "TokenSecret(…)");
    }
}
