//! Review-link tokens: an HMAC-SHA256 (key `DECISION_TOKEN_SECRET`) that binds one approval (of
//! one tenant), one approver and an expiry. Minted by the notify job, verified by the review
//! page; never returned by the API. The tenant travels in the token because the review page has
//! no API key to scope its read with.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::domain::{ApprovalId, Approver, EpochSeconds, TenantId};

/// The token key. Its Debug output never shows it.
#[derive(Clone)]
pub struct TokenSecret(Vec<u8>);

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

    pub fn parse(raw: &str) -> Result<Self, String> {
        if raw.len() < Self::MIN_BYTES {
            return Err(format!("must be at least {} characters", Self::MIN_BYTES));
        }
        Ok(Self(raw.as_bytes().to_vec()))
    }

    /// A key for another purpose, derived from this one (HMAC of the purpose's label), so one
    /// configured secret serves both without one purpose's MAC ever verifying for the other.
    pub(crate) fn derive(&self, label: &str) -> Vec<u8> {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.0)
            .expect("HMAC takes keys of any length");
        mac.update(label.as_bytes());
        mac.finalize().into_bytes().to_vec()
    }

    fn mac(
        &self,
        tenant: &str,
        approval: &ApprovalId,
        approver: &str,
        expires_at: EpochSeconds,
    ) -> Hmac<Sha256> {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.0)
            .expect("HMAC takes keys of any length");
        // Newline-separated: no field can contain one (tenant and approval ids are restricted,
        // approvers have no control characters), so the fields cannot shift.
        mac.update(
            format!("countersign-review-v1\n{tenant}\n{approval}\n{expires_at}\n{approver}")
                .as_bytes(),
        );
        mac
    }

    /// `{expiry}.{base64url(tenant)}.{base64url(approver)}.{base64url(mac)}`.
    pub fn mint(
        &self,
        tenant: &TenantId,
        approval: &ApprovalId,
        approver: &Approver,
        expires_at: EpochSeconds,
    ) -> String {
        let tag = self
            .mac(tenant.as_str(), approval, approver.as_str(), expires_at)
            .finalize()
            .into_bytes();
        format!(
            "{expires_at}.{}.{}.{}",
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
        let [expiry, tenant, approver, tag] = parts[..] else {
            return Err(TokenError::Malformed);
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
        self.mac(&tenant, approval, &approver, expires_at)
            .verify_slice(&tag)
            .map_err(|_| TokenError::BadSignature)?;
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
        let parts: Vec<_> = token.split('.').collect();
        let later = format!("2000.{}.{}.{}", parts[1], parts[2], parts[3]);
        assert_eq!(
            secret().verify(&later, &id, 0),
            Err(TokenError::BadSignature)
        );
        let bob = URL_SAFE_NO_PAD.encode("bob@example.com");
        let swapped = format!("{}.{}.{bob}.{}", parts[0], parts[1], parts[3]);
        assert_eq!(
            secret().verify(&swapped, &id, 0),
            Err(TokenError::BadSignature)
        );
        let globex = URL_SAFE_NO_PAD.encode("globex");
        let moved = format!("{}.{globex}.{}.{}", parts[0], parts[2], parts[3]);
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
            "1.YQ.YQ.YQ.YQ",
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
