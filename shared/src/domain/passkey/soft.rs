//! A software authenticator: a P-256 key that makes WebAuthn's registration ("none"
//! attestation) and assertions as a platform authenticator does. For the tests and the
//! benchmark, which must make real signatures without a browser; never used by the service.

use p256::ecdsa::signature::Signer as _;
use p256::ecdsa::{Signature, SigningKey};
use sha2::{Digest, Sha256};

use super::assertion::Assertion;
use super::b64;
use super::jwk::Jwk;

pub struct SoftAuthenticator {
    key: SigningKey,
    pub credential_id: Vec<u8>,
    pub rp_id: String,
    pub origin: String,
    /// Whether it sets the UV flag (a passkey does; a bare security key touch does not).
    pub user_verified: bool,
}

/// CBOR (RFC 8949) heads: major type and a length that fits in one or two bytes.
fn head(major: u8, len: usize, out: &mut Vec<u8>) {
    match len {
        0..=23 => out.push(major << 5 | len as u8),
        24..=255 => out.extend([major << 5 | 24, len as u8]),
        _ => out.extend([major << 5 | 25, (len >> 8) as u8, len as u8]),
    }
}

fn text(value: &str, out: &mut Vec<u8>) {
    head(3, value.len(), out);
    out.extend_from_slice(value.as_bytes());
}

fn bytes(value: &[u8], out: &mut Vec<u8>) {
    head(2, value.len(), out);
    out.extend_from_slice(value);
}

impl SoftAuthenticator {
    /// A key from `seed` (any 32 bytes but zero), its credential id derived from it.
    pub fn new(seed: u8, rp_id: &str, origin: &str) -> Self {
        let mut secret = [seed.max(1); 32];
        secret[0] = 0x5a;
        let key = SigningKey::from_slice(&secret).unwrap_or_else(|_| unreachable_key());
        Self {
            credential_id: Sha256::digest([b"credential".as_slice(), &secret].concat())[..16]
                .to_vec(),
            key,
            rp_id: rp_id.to_owned(),
            origin: origin.to_owned(),
            user_verified: true,
        }
    }

    pub fn jwk(&self) -> Jwk {
        Jwk::of(self.key.verifying_key())
    }

    fn flags(&self, extra: u8) -> u8 {
        0x01 | if self.user_verified { 0x04 } else { 0 } | extra
    }

    /// `navigator.credentials.create`'s answer for `challenge` (base64url, as the options
    /// carry it): the JSON webauthn-rs reads (`RegisterPublicKeyCredential`).
    pub fn register(&self, challenge_b64: &str) -> serde_json::Value {
        let client_data = serde_json::json!({
            "type": "webauthn.create", "challenge": challenge_b64, "origin": self.origin,
            "crossOrigin": false,
        })
        .to_string();
        let point = self.key.verifying_key().to_sec1_point(false);
        let xy = point.as_bytes();
        let mut cose = vec![0xa5, 0x01, 0x02, 0x03, 0x26, 0x20, 0x01, 0x21];
        bytes(&xy[1..33], &mut cose);
        cose.push(0x22);
        bytes(&xy[33..65], &mut cose);
        let mut auth_data = Sha256::digest(self.rp_id.as_bytes()).to_vec();
        auth_data.push(self.flags(0x40));
        auth_data.extend([0, 0, 0, 0]);
        auth_data.extend([0u8; 16]);
        auth_data.extend((self.credential_id.len() as u16).to_be_bytes());
        auth_data.extend(&self.credential_id);
        auth_data.extend(cose);
        let mut attestation = Vec::new();
        head(5, 3, &mut attestation);
        text("fmt", &mut attestation);
        text("none", &mut attestation);
        text("attStmt", &mut attestation);
        head(5, 0, &mut attestation);
        text("authData", &mut attestation);
        bytes(&auth_data, &mut attestation);
        serde_json::json!({
            "id": b64(&self.credential_id),
            "rawId": b64(&self.credential_id),
            "type": "public-key",
            "extensions": {},
            "response": {
                "attestationObject": b64(&attestation),
                "clientDataJSON": b64(client_data.as_bytes()),
            },
        })
    }

    /// `navigator.credentials.get`'s answer for `challenge`, from `origin`.
    pub fn assert_from(&self, challenge: &[u8; 32], origin: &str) -> Assertion {
        let client_data = serde_json::json!({
            "type": "webauthn.get", "challenge": b64(challenge), "origin": origin,
            "crossOrigin": false,
        })
        .to_string()
        .into_bytes();
        let mut auth_data = Sha256::digest(self.rp_id.as_bytes()).to_vec();
        auth_data.push(self.flags(0));
        auth_data.extend([0, 0, 0, 1]);
        let mut signed = auth_data.clone();
        signed.extend_from_slice(&Sha256::digest(&client_data));
        let signature: Signature = self.key.sign(&signed);
        Assertion {
            credential_id: self.credential_id.clone(),
            authenticator_data: auth_data,
            client_data_json: client_data,
            signature: signature.to_der().as_bytes().to_vec(),
        }
    }

    pub fn assert(&self, challenge: &[u8; 32]) -> Assertion {
        let origin = self.origin.clone();
        self.assert_from(challenge, &origin)
    }
}

/// A fixed valid scalar (`from_slice` refuses only zero or one beyond the order, which the
/// seeds above never are).
fn unreachable_key() -> SigningKey {
    SigningKey::from_slice(&[7u8; 32]).unwrap_or_else(|_| unreachable_key())
}
