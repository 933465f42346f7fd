//! GitHub's webhook signature: `X-Hub-Signature-256: sha256=` + hex HMAC-SHA256(webhook secret,
//! raw body), compared in constant time with the signature under each of the App's secrets.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

use super::GithubSecret;

pub const SIGNATURE_HEADER: &str = "x-hub-signature-256";

/// Why a delivery is not the App's (for the log; the caller answers 401 whatever it is).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("the X-Hub-Signature-256 header is missing")]
    Missing,
    #[error("the signature matches none of the App's webhook secrets")]
    Mismatch,
}

/// The header GitHub sends with `body`.
pub fn sign(secret: &GithubSecret, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.expose().as_bytes())
        .expect("HMAC takes a key of any length");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// Checks the header against the raw body under every secret (one during a rotation's overlap),
/// each in constant time.
pub fn verify(
    secrets: &[GithubSecret],
    header: Option<&str>,
    body: &[u8],
) -> Result<(), SignatureError> {
    let header = header.ok_or(SignatureError::Missing)?;
    let mut matched = false;
    for secret in secrets {
        // Every secret is tried: the time taken does not tell which one matched.
        matched |= bool::from(sign(secret, body).as_bytes().ct_eq(header.as_bytes()));
    }
    if matched {
        Ok(())
    } else {
        Err(SignatureError::Mismatch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn githubs_own_example_verifies_and_a_changed_byte_does_not() {
        // GitHub's documented example: secret "It's a Secret to Everybody", payload
        // "Hello, World!".
        let secret = GithubSecret::new("It's a Secret to Everybody");
        let body = b"Hello, World!";
        let header = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
        assert_eq!(sign(&secret, body), header);
        assert_eq!(
            verify(std::slice::from_ref(&secret), Some(header), body),
            Ok(())
        );
        assert_eq!(
            verify(
                std::slice::from_ref(&secret),
                Some(header),
                b"Hello, World?"
            ),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify(std::slice::from_ref(&secret), None, body),
            Err(SignatureError::Missing)
        );
        let old = GithubSecret::new("old");
        assert_eq!(
            verify(&[secret, old.clone()], Some(&sign(&old, body)), body),
            Ok(()),
            "the old secret verifies during a rotation"
        );
        assert_eq!(
            verify(&[GithubSecret::new("new")], Some(&sign(&old, body)), body),
            Err(SignatureError::Mismatch),
            "a stale secret does not"
        );
    }
}
