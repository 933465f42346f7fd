//! Standard Webhooks 1.0 signatures: HMAC-SHA256 over `{id}.{timestamp}.{raw body}`, sent as
//! space-separated `v1,<base64>` entries, with secrets `whsec_<base64>` and a ±5 minute window.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

use crate::domain::EpochSeconds;

/// How far a timestamp may be from now, either way (300 s accepted, 301 s refused).
pub const TOLERANCE_SECONDS: i64 = 300;

/// A source's signing key, decoded from `whsec_<base64>`.
#[derive(Clone)]
pub struct WebhookSecret(Vec<u8>);

impl std::fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WebhookSecret(…)")
    }
}

impl WebhookSecret {
    pub fn parse(raw: &str) -> Result<Self, &'static str> {
        let encoded = raw
            .strip_prefix("whsec_")
            .ok_or("secrets look like whsec_<base64>")?;
        let key = STANDARD
            .decode(encoded)
            .map_err(|_| "the part after whsec_ is not base64")?;
        if key.is_empty() {
            return Err("the secret is empty");
        }
        Ok(Self(key))
    }

    fn tag(&self, id: &str, timestamp: &str, body: &[u8]) -> [u8; 32] {
        // HMAC takes keys of any length; parse() guarantees a non-empty one.
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.0)
            .expect("HMAC takes keys of any length");
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.as_bytes());
        mac.update(b".");
        mac.update(body);
        mac.finalize().into_bytes().into()
    }

    /// The `webhook-signature` entry a sender with this secret sends (for tests and the demo).
    pub fn sign(&self, id: &str, timestamp: EpochSeconds, body: &[u8]) -> String {
        format!(
            "v1,{}",
            STANDARD.encode(self.tag(id, &timestamp.to_string(), body))
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("the {0} header is missing")]
    MissingHeader(&'static str),
    #[error("webhook-timestamp is not integer seconds")]
    MalformedTimestamp,
    #[error("webhook-timestamp is more than 5 minutes old")]
    Stale,
    #[error("webhook-timestamp is more than 5 minutes ahead")]
    Future,
    #[error("no v1 signature matches")]
    NoMatch,
}

impl SignatureError {
    /// The `Reason` of the `WebhookRefused` metric.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::MissingHeader(_) => "missing_header",
            Self::MalformedTimestamp => "malformed_timestamp",
            Self::Stale => "stale",
            Self::Future => "future",
            Self::NoMatch => "signature",
        }
    }
}

/// Verifies a delivery against every secret of its source (several during a rotation). The
/// signature is computed over the raw body bytes as received, never over re-serialised JSON, and
/// compared in constant time.
pub fn verify(
    secrets: &[WebhookSecret],
    id: Option<&str>,
    timestamp: Option<&str>,
    signature: Option<&str>,
    body: &[u8],
    now: EpochSeconds,
) -> Result<(), SignatureError> {
    let id = id.ok_or(SignatureError::MissingHeader("webhook-id"))?;
    let timestamp = timestamp.ok_or(SignatureError::MissingHeader("webhook-timestamp"))?;
    let signature = signature.ok_or(SignatureError::MissingHeader("webhook-signature"))?;

    let seconds = parse_timestamp(timestamp)?;
    if now - seconds > TOLERANCE_SECONDS {
        return Err(SignatureError::Stale);
    }
    if seconds - now > TOLERANCE_SECONDS {
        return Err(SignatureError::Future);
    }

    let candidates: Vec<Vec<u8>> = signature
        .split(' ')
        .filter_map(|entry| entry.strip_prefix("v1,"))
        .filter_map(|encoded| STANDARD.decode(encoded).ok())
        .collect();
    let mut matched = subtle::Choice::from(0);
    for secret in secrets {
        let expected = secret.tag(id, timestamp, body);
        for candidate in &candidates {
            matched |= expected.as_slice().ct_eq(candidate);
        }
    }
    if bool::from(matched) {
        Ok(())
    } else {
        Err(SignatureError::NoMatch)
    }
}

/// Base-10 integer seconds, digits only: no sign, no spaces, no fractions.
fn parse_timestamp(raw: &str) -> Result<EpochSeconds, SignatureError> {
    if raw.is_empty() || raw.len() > 18 || !raw.bytes().all(|b| b.is_ascii_digit()) {
        return Err(SignatureError::MalformedTimestamp);
    }
    raw.parse().map_err(|_| SignatureError::MalformedTimestamp)
}

#[cfg(test)]
mod tests {
    use super::*;

    // The official Standard Webhooks test vectors.
    const SECRET_1: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const ID_1: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const TS_1: i64 = 1_614_265_330;
    const BODY_1: &str = r#"{"test": 2432232314}"#;
    const SIG_1: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

    const SECRET_2: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
    const ID_2: &str = "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk";
    const TS_2: i64 = 1_649_367_553;
    const BODY_2: &str = r#"{"email":"test@example.com","username":"test_user"}"#;
    const SIG_2: &str = "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw=";

    fn secret(raw: &str) -> Vec<WebhookSecret> {
        vec![WebhookSecret::parse(raw).unwrap()]
    }

    /// Verifies vector 1 with `signature` and `timestamp` headers, at clock `now`.
    fn check(signature: &str, timestamp: &str, now: i64) -> Result<(), SignatureError> {
        verify(
            &secret(SECRET_1),
            Some(ID_1),
            Some(timestamp),
            Some(signature),
            BODY_1.as_bytes(),
            now,
        )
    }

    #[test]
    fn official_vectors_sign_and_verify() {
        let s1 = WebhookSecret::parse(SECRET_1).unwrap();
        assert_eq!(s1.sign(ID_1, TS_1, BODY_1.as_bytes()), SIG_1);
        let s2 = WebhookSecret::parse(SECRET_2).unwrap();
        assert_eq!(s2.sign(ID_2, TS_2, BODY_2.as_bytes()), SIG_2);

        assert_eq!(check(SIG_1, "1614265330", TS_1), Ok(()));
        let v2 = verify(
            &secret(SECRET_2),
            Some(ID_2),
            Some("1649367553"),
            Some(SIG_2),
            BODY_2.as_bytes(),
            TS_2,
        );
        assert_eq!(v2, Ok(()));
    }

    #[test]
    fn a_changed_or_truncated_signature_is_refused() {
        let last_changed = format!("{}{}", &SIG_1[..SIG_1.len() - 2], "A=");
        for signature in [
            last_changed.as_str(),
            "v1,",
            &SIG_1[..SIG_1.len() - 4],
            "v2,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
            "",
        ] {
            assert_eq!(
                check(signature, "1614265330", TS_1),
                Err(SignatureError::NoMatch),
                "{signature:?}"
            );
        }
    }

    #[test]
    fn the_window_is_300_seconds_either_way() {
        assert_eq!(check(SIG_1, "1614265330", TS_1 + 300), Ok(()));
        assert_eq!(check(SIG_1, "1614265330", TS_1 - 300), Ok(()));
        assert_eq!(check(SIG_1, "1614265330", TS_1 + 299), Ok(()));
        assert_eq!(
            check(SIG_1, "1614265330", TS_1 + 301),
            Err(SignatureError::Stale)
        );
        assert_eq!(
            check(SIG_1, "1614265330", TS_1 - 301),
            Err(SignatureError::Future)
        );
    }

    #[test]
    fn timestamps_are_strict_integer_seconds() {
        for ts in [
            "hello",
            "",
            " 1614265330",
            "1614265330.0",
            "+1614265330",
            "-1",
            "1614265330 ",
            "99999999999999999999",
        ] {
            assert_eq!(
                check(SIG_1, ts, TS_1),
                Err(SignatureError::MalformedTimestamp),
                "{ts:?}"
            );
        }
    }

    #[test]
    fn the_timestamp_header_must_be_the_signed_one() {
        assert_eq!(
            check(SIG_1, "1614265331", TS_1),
            Err(SignatureError::NoMatch)
        );
        assert_eq!(
            check(SIG_1, "1614265329", TS_1),
            Err(SignatureError::NoMatch)
        );
    }

    #[test]
    fn each_header_is_required() {
        let body = BODY_1.as_bytes();
        let s = secret(SECRET_1);
        let ts = Some("1614265330");
        assert_eq!(
            verify(&s, None, ts, Some(SIG_1), body, TS_1),
            Err(SignatureError::MissingHeader("webhook-id"))
        );
        assert_eq!(
            verify(&s, Some(ID_1), None, Some(SIG_1), body, TS_1),
            Err(SignatureError::MissingHeader("webhook-timestamp"))
        );
        assert_eq!(
            verify(&s, Some(ID_1), ts, None, body, TS_1),
            Err(SignatureError::MissingHeader("webhook-signature"))
        );
    }

    #[test]
    fn decoys_pass_only_with_one_valid_entry() {
        let decoys = "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= v2,abc v1,!!notbase64!! v1a,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
        assert_eq!(
            check(decoys, "1614265330", TS_1),
            Err(SignatureError::NoMatch)
        );
        assert_eq!(
            check(&format!("{decoys} {SIG_1}"), "1614265330", TS_1),
            Ok(())
        );
        assert_eq!(
            check(&format!("{SIG_1} {decoys}"), "1614265330", TS_1),
            Ok(())
        );
    }

    #[test]
    fn any_configured_secret_verifies_during_a_rotation() {
        let both = vec![
            WebhookSecret::parse(SECRET_2).unwrap(),
            WebhookSecret::parse(SECRET_1).unwrap(),
        ];
        let got = verify(
            &both,
            Some(ID_1),
            Some("1614265330"),
            Some(SIG_1),
            BODY_1.as_bytes(),
            TS_1,
        );
        assert_eq!(got, Ok(()));
        let wrong = secret(SECRET_2);
        let got = verify(
            &wrong,
            Some(ID_1),
            Some("1614265330"),
            Some(SIG_1),
            BODY_1.as_bytes(),
            TS_1,
        );
        assert_eq!(got, Err(SignatureError::NoMatch));
    }

    #[test]
    fn the_body_is_verified_byte_for_byte() {
        let respaced = r#"{"test":2432232314}"#;
        let got = verify(
            &secret(SECRET_1),
            Some(ID_1),
            Some("1614265330"),
            Some(SIG_1),
            respaced.as_bytes(),
            TS_1,
        );
        assert_eq!(got, Err(SignatureError::NoMatch));
    }

    #[test]
    fn empty_and_malformed_secrets_are_refused() {
        for raw in [
            "",
            "whsec_",
            "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            "whsec_!!!",
        ] {
            assert!(WebhookSecret::parse(raw).is_err(), "{raw:?} accepted");
        }
        assert_eq!(
            format!("{:?}", WebhookSecret::parse(SECRET_1).unwrap()),
            "WebhookSecret(…)"
        );
    }
}
