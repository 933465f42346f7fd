//! Review-link tokens: an HMAC-SHA256 (key `DECISION_TOKEN_SECRET`) that binds one approval, one
//! approver and an expiry. Minted by the notify job, verified by the review page; never returned
//! by the API.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::domain::{ApprovalId, Approver, EpochSeconds};

/// The token key. Its Debug output never shows it.
#[derive(Clone)]
pub struct TokenSecret(Vec<u8>);

impl std::fmt::Debug for TokenSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenSecret(…)")
    }
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

    fn mac(&self, approval: &ApprovalId, approver: &str, expires_at: EpochSeconds) -> Hmac<Sha256> {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.0)
            .expect("HMAC takes keys of any length");
        // Newline-separated: approval ids and expiries contain none, so the fields cannot shift.
        mac.update(
            format!("countersign-review-v1\n{approval}\n{expires_at}\n{approver}").as_bytes(),
        );
        mac
    }

    /// `{expiry}.{base64url(approver)}.{base64url(mac)}`.
    pub fn mint(
        &self,
        approval: &ApprovalId,
        approver: &Approver,
        expires_at: EpochSeconds,
    ) -> String {
        let tag = self
            .mac(approval, approver.as_str(), expires_at)
            .finalize()
            .into_bytes();
        format!(
            "{expires_at}.{}.{}",
            URL_SAFE_NO_PAD.encode(approver.as_str()),
            URL_SAFE_NO_PAD.encode(tag)
        )
    }

    /// The approver a token was minted for, if it verifies for `approval` and has not expired.
    /// The MAC is compared in constant time.
    pub fn verify(
        &self,
        token: &str,
        approval: &ApprovalId,
        now: EpochSeconds,
    ) -> Result<Approver, TokenError> {
        let mut parts = token.splitn(3, '.');
        let (Some(expiry), Some(approver), Some(tag)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(TokenError::Malformed);
        };
        if expiry.is_empty() || expiry.len() > 18 || !expiry.bytes().all(|b| b.is_ascii_digit()) {
            return Err(TokenError::Malformed);
        }
        let expires_at: EpochSeconds = expiry.parse().map_err(|_| TokenError::Malformed)?;
        let approver = URL_SAFE_NO_PAD
            .decode(approver)
            .map_err(|_| TokenError::Malformed)?;
        let approver = String::from_utf8(approver).map_err(|_| TokenError::Malformed)?;
        let tag = URL_SAFE_NO_PAD
            .decode(tag)
            .map_err(|_| TokenError::Malformed)?;
        self.mac(approval, &approver, expires_at)
            .verify_slice(&tag)
            .map_err(|_| TokenError::BadSignature)?;
        if now >= expires_at {
            return Err(TokenError::Expired);
        }
        Approver::parse(&approver).map_err(|_| TokenError::Malformed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret() -> TokenSecret {
        TokenSecret::parse("a-test-secret-of-at-least-32-bytes!").unwrap()
    }

    #[test]
    fn a_token_verifies_for_its_approval_and_approver_until_it_expires() {
        let id = ApprovalId::generate();
        let alice = Approver::parse("alice@example.com").unwrap();
        let token = secret().mint(&id, &alice, 1_000);
        assert!(
            token
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)),
            "URL-safe"
        );
        assert_eq!(secret().verify(&token, &id, 999), Ok(alice));
        assert_eq!(
            secret().verify(&token, &id, 1_000),
            Err(TokenError::Expired)
        );
    }

    #[test]
    fn tampered_or_foreign_tokens_are_refused() {
        let id = ApprovalId::generate();
        let alice = Approver::parse("alice@example.com").unwrap();
        let token = secret().mint(&id, &alice, 1_000);
        assert_eq!(
            secret().verify(&token, &ApprovalId::generate(), 0),
            Err(TokenError::BadSignature)
        );
        let other_key = TokenSecret::parse("another-secret-of-at-least-32-bytes").unwrap();
        assert_eq!(
            other_key.verify(&token, &id, 0),
            Err(TokenError::BadSignature)
        );
        let (_, rest) = token.split_once('.').unwrap();
        assert_eq!(
            secret().verify(&format!("2000.{rest}"), &id, 0),
            Err(TokenError::BadSignature)
        );
        let bob = URL_SAFE_NO_PAD.encode("bob@example.com");
        let parts: Vec<_> = token.split('.').collect();
        let swapped = format!("{}.{bob}.{}", parts[0], parts[2]);
        assert_eq!(
            secret().verify(&swapped, &id, 0),
            Err(TokenError::BadSignature)
        );
        for bad in ["", "x", "1.2", "abc.def.ghi", "-1.YQ.YQ"] {
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
