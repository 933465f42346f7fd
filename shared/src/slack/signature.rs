//! Slack's request signature: `X-Slack-Signature: v0=` + hex HMAC-SHA256(signing secret,
//! `v0:{X-Slack-Request-Timestamp}:{raw body}`), the timestamp within five minutes of now.
//! (slack-morphism's verifier reads the system clock; this one takes `now`, the app's clock.)

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

use super::SlackSecret;
use crate::domain::EpochSeconds;

pub const TIMESTAMP_HEADER: &str = "x-slack-request-timestamp";
pub const SIGNATURE_HEADER: &str = "x-slack-signature";
/// How far a request's timestamp may be from now: Slack's own five minutes.
pub const MAX_AGE_SECONDS: i64 = 300;

/// Why a request is not Slack's (for the log; the caller answers 401 whatever it is).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("a signature or timestamp header is missing")]
    Missing,
    #[error("the timestamp is not integer seconds")]
    BadTimestamp,
    #[error("the timestamp is more than five minutes from now")]
    Stale,
    #[error("the signature does not match")]
    Mismatch,
}

/// The signature Slack sends with `body` at `timestamp`.
pub fn sign(secret: &SlackSecret, timestamp: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.expose().as_bytes())
        .expect("HMAC takes a key of any length");
    mac.update(b"v0:");
    mac.update(timestamp.as_bytes());
    mac.update(b":");
    mac.update(body);
    format!("v0={}", hex::encode(mac.finalize().into_bytes()))
}

/// Checks a request's headers against its raw body, in constant time.
pub fn verify(
    secret: &SlackSecret,
    timestamp: Option<&str>,
    signature: Option<&str>,
    body: &[u8],
    now: EpochSeconds,
) -> Result<(), SignatureError> {
    let (Some(timestamp), Some(signature)) = (timestamp, signature) else {
        return Err(SignatureError::Missing);
    };
    let sent: EpochSeconds = timestamp
        .parse()
        .map_err(|_| SignatureError::BadTimestamp)?;
    let expected = sign(secret, timestamp, body);
    if !bool::from(expected.as_bytes().ct_eq(signature.as_bytes())) {
        return Err(SignatureError::Mismatch);
    }
    if now.abs_diff(sent) > MAX_AGE_SECONDS.unsigned_abs() {
        return Err(SignatureError::Stale);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret() -> SlackSecret {
        SlackSecret::new("8f742231b10e8888abcd99yyyzzz85a5")
    }

    /// Slack's own example ("Verifying requests from Slack").
    #[test]
    fn slacks_documented_example_verifies() {
        let body = b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
        let signature = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";
        assert_eq!(sign(&secret(), "1531420618", body), signature);
        assert_eq!(
            verify(
                &secret(),
                Some("1531420618"),
                Some(signature),
                body,
                1_531_420_618 + 300
            ),
            Ok(())
        );
        assert_eq!(
            verify(
                &secret(),
                Some("1531420618"),
                Some(signature),
                body,
                1_531_420_618 + 301
            ),
            Err(SignatureError::Stale)
        );
        let mut forged = body.to_vec();
        forged[0] = b'T';
        assert_eq!(
            verify(
                &secret(),
                Some("1531420618"),
                Some(signature),
                &forged,
                1_531_420_618
            ),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify(&secret(), None, Some(signature), body, 1_531_420_618),
            Err(SignatureError::Missing)
        );
        assert_eq!(
            verify(
                &secret(),
                Some("soon"),
                Some(signature),
                body,
                1_531_420_618
            ),
            Err(SignatureError::BadTimestamp)
        );
    }
}
