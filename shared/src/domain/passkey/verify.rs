//! Every check of a certificate (docs/VERIFY.md "What verify checks"), offline: Countersign's
//! JWS, each vote's assertion over its statement, the statements against the approval, the
//! payload's digest, every rule met by distinct people other than the requester, and — given a
//! file of pinned credentials — every credential pinned, with that key, for that person.

use std::collections::HashSet;

use p256::ecdsa::Signature;
use p256::ecdsa::signature::Verifier as _;
use serde::Deserialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::assertion::Expected;
use super::certificate::{Certificate, signing_input};
use super::jwk::Jwk;
use super::statement::{Statement, payload_sha256};
use super::unb64;
use crate::domain::Approver;

/// The credentials a verifier trusts (`countersign passkeys export`): which person each is,
/// with which public key.
#[derive(Debug, Clone, Deserialize)]
pub struct Pinned {
    pub credentials: Vec<PinnedCredential>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct PinnedCredential {
    pub credential_id: String,
    pub identity: String,
    pub public_key_jwk: Jwk,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    #[error("not a certificate: {0}")]
    Malformed(String),
    #[error("Countersign's signature does not verify: {0}")]
    CountersignSignature(String),
    #[error("the payload does not match its digest (payload_sha256)")]
    PayloadDigest,
    #[error("the payload given does not match the certificate's")]
    PayloadMismatch,
    #[error("vote {0}: {1}")]
    Vote(usize, String),
    #[error("vote {0}: the requester's vote ({1}) counts for no rule")]
    RequesterVote(usize, String),
    #[error("vote {0}: {1} votes twice")]
    DuplicatePerson(usize, String),
    #[error("vote {0}: credential {1} is not pinned for {2}")]
    NotPinned(usize, String, String),
    #[error("rule {0} is not met: {1} of the {2} approvals it requires")]
    RuleNotMet(String, usize, u32),
}

fn identity(raw: &str) -> String {
    Approver::parse(raw).map_or_else(|_| raw.to_owned(), |a| a.identity())
}

/// Checks `certificate` (its JSON as received) against Countersign's keys `jwks`; `pinned`, the
/// credentials to trust; `payload`, the action's payload as the target holds it. `Ok`: one line
/// per rule, saying who met it.
pub fn verify_certificate(
    certificate: &Value,
    jwks: &[Jwk],
    pinned: Option<&Pinned>,
    payload: Option<&Value>,
) -> Result<Vec<String>, VerifyError> {
    let parsed: Certificate = serde_json::from_value(certificate.clone())
        .map_err(|e| VerifyError::Malformed(e.to_string()))?;
    if parsed.v != 1 {
        return Err(VerifyError::Malformed(format!("version {}", parsed.v)));
    }
    check_jws(certificate, &parsed.signature, jwks)?;
    if payload_sha256(&parsed.action.payload) != parsed.payload_sha256 {
        return Err(VerifyError::PayloadDigest);
    }
    if let Some(payload) = payload
        && payload.as_object() != Some(&parsed.action.payload)
    {
        return Err(VerifyError::PayloadMismatch);
    }
    let requester = parsed.requested_by.as_deref().map(identity);
    let mut places = HashSet::new();
    let mut signers = HashSet::new();
    let mut approving = Vec::new();
    for (i, vote) in parsed.votes.iter().enumerate() {
        let n = i + 1;
        let fail = |why: &str| VerifyError::Vote(n, why.to_owned());
        let statement = serde_json::from_str::<Value>(&vote.statement)
            .ok()
            .and_then(|v| Statement::from_value(&v))
            .ok_or_else(|| fail("its statement is not a vote statement"))?;
        if statement.canonical() != vote.statement {
            return Err(fail("its statement is not in its RFC 8785 form"));
        }
        if statement.tenant != parsed.tenant || statement.approval_id != parsed.approval_id {
            return Err(fail("its statement names another approval"));
        }
        if statement.action_type != parsed.action.kind
            || statement.payload_sha256 != parsed.payload_sha256
        {
            return Err(fail("its statement names another action or payload"));
        }
        if statement.vote != "approve" {
            return Err(fail("it does not approve"));
        }
        let key = vote
            .public_key_jwk
            .verifying_key()
            .ok_or_else(|| fail("its public key is not a P-256 key"))?;
        let assertion = vote
            .assertion()
            .ok_or_else(|| fail("its assertion is not base64url"))?;
        let challenge: [u8; 32] = Sha256::digest(vote.statement.as_bytes()).into();
        assertion
            .verify(
                &key,
                Expected {
                    challenge: &challenge,
                    origin: None,
                    rp_id: None,
                },
            )
            .map_err(|e| fail(&e.to_string()))?;
        let place = identity(&statement.approver);
        let signer = identity(statement.by.as_deref().unwrap_or(&statement.approver));
        if identity(&vote.identity) != signer {
            return Err(fail("its identity is not the statement's voter"));
        }
        if requester.as_deref() == Some(place.as_str()) || requester.as_deref() == Some(&signer) {
            return Err(VerifyError::RequesterVote(n, statement.approver));
        }
        if !places.insert(place.clone()) || !signers.insert(signer.clone()) {
            return Err(VerifyError::DuplicatePerson(n, vote.identity.clone()));
        }
        if let Some(pinned) = pinned {
            let held = pinned.credentials.iter().any(|c| {
                c.credential_id == vote.credential_id
                    && identity(&c.identity) == signer
                    && c.public_key_jwk.same_key(&vote.public_key_jwk)
            });
            if !held {
                return Err(VerifyError::NotPinned(
                    n,
                    vote.credential_id.clone(),
                    vote.identity.clone(),
                ));
            }
        }
        approving.push((place, statement.approver));
    }
    let mut lines = Vec::new();
    for rule in &parsed.policy.rules {
        let listed: HashSet<String> = rule.approvers.iter().map(|a| identity(a)).collect();
        let by: Vec<&str> = approving
            .iter()
            .filter(|(place, _)| listed.contains(place))
            .map(|(_, shown)| shown.as_str())
            .collect();
        if by.len() < rule.min_approvals as usize {
            return Err(VerifyError::RuleNotMet(
                rule.name.clone(),
                by.len(),
                rule.min_approvals,
            ));
        }
        lines.push(format!(
            "rule {}: met, {} of {} required, by {}",
            rule.name,
            by.len(),
            rule.min_approvals,
            by.join(", ")
        ));
    }
    if lines.is_empty() {
        return Err(VerifyError::Malformed("it names no rule".to_owned()));
    }
    Ok(lines)
}

fn check_jws(certificate: &Value, jws: &str, jwks: &[Jwk]) -> Result<(), VerifyError> {
    let bad = |why: &str| VerifyError::CountersignSignature(why.to_owned());
    let mut parts = jws.split('.');
    let (Some(header_b64), Some(""), Some(signature_b64), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad("not a detached compact JWS (header..signature)"));
    };
    let header: Value = unb64(header_b64)
        .and_then(|h| serde_json::from_slice(&h).ok())
        .ok_or_else(|| bad("its header is not base64url JSON"))?;
    if header.get("alg").and_then(Value::as_str) != Some("ES256") {
        return Err(bad("its alg is not ES256"));
    }
    let kid = header
        .get("kid")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let key = jwks
        .iter()
        .find(|k| k.kid.as_deref() == Some(kid))
        .ok_or_else(|| bad(&format!("no key {kid:?} in the JWKS")))?
        .verifying_key()
        .ok_or_else(|| bad("its key is not a P-256 key"))?;
    let signature = unb64(signature_b64)
        .and_then(|s| Signature::from_slice(&s).ok())
        .ok_or_else(|| bad("its signature is not an ES256 signature (r ‖ s)"))?;
    key.verify(
        signing_input(header_b64, certificate).as_bytes(),
        &signature,
    )
    .map_err(|_| bad("the signature does not match the certificate"))
}
