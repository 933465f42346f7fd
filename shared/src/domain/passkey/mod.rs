//! Votes a third party can verify (docs/VERIFY.md), pure: the statement a passkey signs
//! (statement.rs), a WebAuthn assertion checked against it (assertion.rs), a P-256 public key
//! as a JWK (jwk.rs), and the certificate of an approved passkey-only approval with every check
//! `countersign verify` makes of it (certificate.rs, its checks in verify.rs). The service and
//! the verifier run the same code.

pub mod assertion;
pub mod certificate;
pub mod jwk;
mod of_approval;
pub mod soft;
pub mod statement;
mod verify;

#[cfg(test)]
mod tests;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// Binary fields travel as unpadded base64url (WebAuthn's and JOSE's spelling).
pub fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// Unpadded base64url back to bytes (padding tolerated: some encoders add it).
pub fn unb64(text: &str) -> Option<Vec<u8>> {
    URL_SAFE_NO_PAD.decode(text.trim_end_matches('=')).ok()
}

pub use assertion::{
    Assertion, AssertionError, Expected, MAX_AUTHENTICATOR_DATA_BYTES, MAX_CLIENT_DATA_BYTES,
    MAX_CREDENTIAL_ID_BYTES, MAX_SIGNATURE_BYTES,
};
pub use certificate::{Certificate, CertificateVote, PolicyEvidence, RuleEvidence};
pub use jwk::Jwk;
pub use of_approval::{certificate_of, sealed_certificate};
pub use statement::{Statement, payload_sha256};
pub use verify::{Pinned, VerifyError, verify_certificate};
