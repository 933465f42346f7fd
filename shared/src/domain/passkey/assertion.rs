//! A WebAuthn assertion (`navigator.credentials.get`) checked against the statement it must
//! sign (WebAuthn Level 3 §7.2): ECDSA P-256 over `authenticator_data ‖
//! SHA-256(client_data_json)`, type `webauthn.get`, the challenge, user presence and
//! verification, and — where the checker knows them — the origin and the relying party.

use p256::ecdsa::signature::Verifier as _;
use p256::ecdsa::{Signature, VerifyingKey};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::b64;

/// The most bytes of each part of an assertion a vote keeps (its item's size is bounded): a
/// credential id (WebAuthn allows 1023 bytes; platform authenticators use 16 to 64), the
/// authenticator data (37 bytes without extensions), the client data (about 150 bytes).
pub const MAX_CREDENTIAL_ID_BYTES: usize = 256;
pub const MAX_AUTHENTICATOR_DATA_BYTES: usize = 512;
pub const MAX_CLIENT_DATA_BYTES: usize = 1024;
/// A DER ECDSA P-256 signature is at most 72 bytes.
pub const MAX_SIGNATURE_BYTES: usize = 72;

/// Authenticator data's flags (§6.1): user present, user verified.
const FLAG_UP: u8 = 0x01;
const FLAG_UV: u8 = 0x04;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assertion {
    pub credential_id: Vec<u8>,
    pub authenticator_data: Vec<u8>,
    pub client_data_json: Vec<u8>,
    /// DER-encoded ECDSA signature, as the authenticator returns it.
    pub signature: Vec<u8>,
}

/// What the assertion must say. The service knows its origin and relying party; an offline
/// verifier checks what the certificate itself carries.
#[derive(Debug, Clone, Copy)]
pub struct Expected<'a> {
    pub challenge: &'a [u8; 32],
    pub origin: Option<&'a str>,
    pub rp_id: Option<&'a str>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AssertionError {
    #[error("the assertion is malformed: {0}")]
    Malformed(&'static str),
    #[error("the client data is not of a webauthn.get")]
    Type,
    #[error("the assertion signs another statement (its challenge differs)")]
    Challenge,
    #[error("the assertion was made on another origin ({0})")]
    Origin(String),
    #[error("the assertion was made for another relying party")]
    RelyingParty,
    #[error("the authenticator did not verify the user (the UV flag is off)")]
    UserVerification,
    #[error("the assertion's signature does not verify with the credential's public key")]
    Signature,
}

#[derive(Deserialize)]
struct ClientData {
    #[serde(rename = "type")]
    kind: String,
    challenge: String,
    origin: String,
    #[serde(rename = "crossOrigin", default)]
    cross_origin: bool,
}

impl Assertion {
    /// The origin the browser reports in the client data, if it parses.
    pub fn origin(&self) -> Option<String> {
        serde_json::from_slice::<ClientData>(&self.client_data_json)
            .ok()
            .map(|c| c.origin)
    }

    pub fn verify(&self, key: &VerifyingKey, expected: Expected<'_>) -> Result<(), AssertionError> {
        if self.credential_id.len() > MAX_CREDENTIAL_ID_BYTES
            || self.authenticator_data.len() > MAX_AUTHENTICATOR_DATA_BYTES
            || self.client_data_json.len() > MAX_CLIENT_DATA_BYTES
            || self.signature.len() > MAX_SIGNATURE_BYTES
        {
            return Err(AssertionError::Malformed(
                "a part is longer than a vote keeps",
            ));
        }
        let client: ClientData = serde_json::from_slice(&self.client_data_json)
            .map_err(|_| AssertionError::Malformed("client_data_json is not its JSON"))?;
        if client.kind != "webauthn.get" {
            return Err(AssertionError::Type);
        }
        if client.challenge.trim_end_matches('=') != b64(expected.challenge) {
            return Err(AssertionError::Challenge);
        }
        if let Some(origin) = expected.origin
            && (client.origin != origin || client.cross_origin)
        {
            return Err(AssertionError::Origin(client.origin));
        }
        // rpIdHash (32) ‖ flags (1) ‖ signCount (4) ‖ …
        if self.authenticator_data.len() < 37 {
            return Err(AssertionError::Malformed("authenticator_data is too short"));
        }
        if let Some(rp_id) = expected.rp_id
            && self.authenticator_data[..32] != Sha256::digest(rp_id.as_bytes())[..]
        {
            return Err(AssertionError::RelyingParty);
        }
        let flags = self.authenticator_data[32];
        if flags & FLAG_UP == 0 || flags & FLAG_UV == 0 {
            return Err(AssertionError::UserVerification);
        }
        let signature =
            Signature::from_der(&self.signature).map_err(|_| AssertionError::Signature)?;
        let mut signed = self.authenticator_data.clone();
        signed.extend_from_slice(&Sha256::digest(&self.client_data_json));
        key.verify(&signed, &signature)
            .map_err(|_| AssertionError::Signature)
    }
}
