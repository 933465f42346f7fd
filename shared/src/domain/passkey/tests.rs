//! The statement, the assertion and the certificate's checks, with real P-256 signatures (the
//! software authenticator's and a local stand-in for Countersign's KMS key).

use p256::ecdsa::signature::Signer as _;
use p256::ecdsa::{Signature, SigningKey};
use serde_json::{Map, Value, json};

use super::certificate::{CertifiedAction, PolicyEvidence, RuleEvidence};
use super::soft::SoftAuthenticator;
use super::*;

const ORIGIN: &str = "https://approvals.example.com";
const RP: &str = "approvals.example.com";

fn payload() -> Map<String, Value> {
    json!({"amount": 120, "currency": "EUR", "order": "o_17"})
        .as_object()
        .cloned()
        .unwrap_or_default()
}

fn statement(approver: &str, vote: &str, nonce: &str) -> Statement {
    Statement {
        tenant: "acme".into(),
        approval_id: "apr_1".into(),
        action_type: "refund".into(),
        payload_sha256: payload_sha256(&payload()),
        vote: vote.into(),
        approver: approver.into(),
        by: None,
        policy_version: Some(3),
        nonce: nonce.into(),
    }
}

fn vote_of(signer: &SoftAuthenticator, statement: &Statement, identity: &str) -> CertificateVote {
    let assertion = signer.assert(&statement.challenge());
    CertificateVote {
        statement: statement.canonical(),
        credential_id: b64(&assertion.credential_id),
        authenticator_data: b64(&assertion.authenticator_data),
        client_data_json: b64(&assertion.client_data_json),
        signature: b64(&assertion.signature),
        public_key_jwk: signer.jwk(),
        identity: identity.into(),
        iss: "https://id.example.com".into(),
        sub: format!("sub-{identity}"),
        registered_at: "2026-12-01T09:00:00Z".into(),
    }
}

fn countersign_key() -> (SigningKey, Jwk) {
    let key = SigningKey::from_slice(&[9u8; 32]).expect("a valid scalar");
    let mut jwk = Jwk::of(key.verifying_key());
    jwk.kid = Some("k1".into());
    (key, jwk)
}

fn seal(certificate: &Certificate) -> Value {
    let (key, _) = countersign_key();
    let (header, input) = certificate.to_sign("k1");
    let signature: Signature = key.sign(input.as_bytes());
    certificate.sealed(&header, &signature.to_bytes())
}

struct Fixture {
    alice: SoftAuthenticator,
    bob: SoftAuthenticator,
    certificate: Certificate,
}

fn two_of_two() -> Fixture {
    let alice = SoftAuthenticator::new(1, RP, ORIGIN);
    let bob = SoftAuthenticator::new(2, RP, ORIGIN);
    let certificate = Certificate {
        v: 1,
        approval_id: "apr_1".into(),
        tenant: "acme".into(),
        requested_by: Some("carol@example.com".into()),
        action: CertifiedAction {
            kind: "refund".into(),
            payload: payload(),
        },
        payload_sha256: payload_sha256(&payload()),
        policy: PolicyEvidence {
            version: Some(3),
            sha256: Some("ab".repeat(32)),
            rules: vec![RuleEvidence {
                name: "finance".into(),
                group: None,
                min_approvals: 2,
                approvers: vec!["alice@example.com".into(), "bob@example.com".into()],
            }],
        },
        votes: vec![
            vote_of(
                &alice,
                &statement("alice@example.com", "approve", "n1"),
                "alice@example.com",
            ),
            vote_of(
                &bob,
                &statement("bob@example.com", "approve", "n2"),
                "bob@example.com",
            ),
        ],
        decided_at: "2026-12-07T10:00:00Z".into(),
        issued_at: "2026-12-07T10:00:01Z".into(),
        signature: String::new(),
    };
    Fixture {
        alice,
        bob,
        certificate,
    }
}

fn pinned(signers: &[(&SoftAuthenticator, &str)]) -> Pinned {
    serde_json::from_value(json!({"credentials": signers.iter().map(|(s, who)| json!({
        "credential_id": b64(&s.credential_id), "identity": who, "public_key_jwk": s.jwk(),
    })).collect::<Vec<_>>()}))
    .expect("pinned credentials")
}

fn check(certificate: &Value) -> Result<Vec<String>, VerifyError> {
    let (_, jwk) = countersign_key();
    verify_certificate(certificate, &[jwk], None, None)
}

#[test]
fn a_statement_is_its_rfc_8785_form_and_its_challenge_that_forms_digest() {
    let mut s = statement("alice@example.com", "approve", "n1");
    s.by = Some("dan@example.com".into());
    let text = s.canonical();
    // Keys sorted, no whitespace: the bytes any RFC 8785 implementation produces.
    assert!(
        text.starts_with(r#"{"action":{"payload_sha256":""#),
        "{text}"
    );
    assert!(text.contains(
        r#""approver":"alice@example.com","by":"dan@example.com","nonce":"n1","policy_version":3"#
    ));
    assert_eq!(
        Statement::from_value(&serde_json::from_str(&text).unwrap()),
        Some(s.clone())
    );
    let digest: [u8; 32] = <sha2::Sha256 as sha2::Digest>::digest(text.as_bytes()).into();
    assert_eq!(s.challenge(), digest);
    // The payload's digest ignores key order and whitespace, not values.
    let reordered = serde_json::from_str::<Map<String, Value>>(
        r#"{ "order": "o_17", "currency": "EUR", "amount": 120 }"#,
    )
    .unwrap();
    assert_eq!(payload_sha256(&reordered), payload_sha256(&payload()));
    let mut changed = payload();
    changed.insert("amount".into(), json!(121));
    assert_ne!(payload_sha256(&changed), payload_sha256(&payload()));
}

#[test]
fn an_assertion_verifies_only_over_its_statement_origin_relying_party_and_with_uv() {
    let alice = SoftAuthenticator::new(1, RP, ORIGIN);
    let s = statement("alice@example.com", "approve", "n1");
    let key = alice.jwk().verifying_key().expect("P-256");
    let expected = |challenge| Expected {
        challenge,
        origin: Some(ORIGIN),
        rp_id: Some(RP),
    };
    let challenge = s.challenge();
    assert_eq!(
        alice.assert(&challenge).verify(&key, expected(&challenge)),
        Ok(())
    );
    let other = statement("alice@example.com", "approve", "n2").challenge();
    assert_eq!(
        alice.assert(&other).verify(&key, expected(&challenge)),
        Err(AssertionError::Challenge)
    );
    assert!(matches!(
        alice
            .assert_from(&challenge, "https://evil.example.net")
            .verify(&key, expected(&challenge)),
        Err(AssertionError::Origin(_))
    ));
    let elsewhere = SoftAuthenticator::new(1, "example.net", ORIGIN);
    assert_eq!(
        elsewhere
            .assert(&challenge)
            .verify(&key, expected(&challenge)),
        Err(AssertionError::RelyingParty)
    );
    let mut touch_only = SoftAuthenticator::new(1, RP, ORIGIN);
    touch_only.user_verified = false;
    assert_eq!(
        touch_only
            .assert(&challenge)
            .verify(&key, expected(&challenge)),
        Err(AssertionError::UserVerification)
    );
    let bob = SoftAuthenticator::new(2, RP, ORIGIN);
    assert_eq!(
        bob.assert(&challenge).verify(&key, expected(&challenge)),
        Err(AssertionError::Signature)
    );
}

#[test]
fn a_two_of_two_certificate_verifies_with_one_line_per_rule() {
    let f = two_of_two();
    let sealed = seal(&f.certificate);
    let lines = check(&sealed).expect("verifies");
    assert_eq!(
        lines,
        ["rule finance: met, 2 of 2 required, by alice@example.com, bob@example.com"]
    );
    // Pinned, and given the payload the target holds (its keys in another order).
    let (_, jwk) = countersign_key();
    let pins = pinned(&[(&f.alice, "alice@example.com"), (&f.bob, "Bob@Example.com")]);
    let held = json!({"order": "o_17", "amount": 120, "currency": "EUR"});
    assert!(verify_certificate(&sealed, &[jwk], Some(&pins), Some(&held)).is_ok());
}

#[test]
fn verify_fails_with_its_reason_on_each_change() {
    let f = two_of_two();
    let sealed = seal(&f.certificate);
    let (_, jwk) = countersign_key();

    // A changed payload: Countersign's signature no longer covers it; re-signed (by whoever
    // holds the key), the digest or the votes' statements no longer match.
    let mut changed = sealed.clone();
    changed["action"]["payload"]["amount"] = json!(12000);
    assert!(matches!(
        check(&changed),
        Err(VerifyError::CountersignSignature(_))
    ));
    let mut resigned = f.certificate.clone();
    resigned
        .action
        .payload
        .insert("amount".into(), json!(12000));
    assert_eq!(check(&seal(&resigned)), Err(VerifyError::PayloadDigest));
    resigned.payload_sha256 = payload_sha256(&resigned.action.payload);
    assert!(
        matches!(check(&seal(&resigned)), Err(VerifyError::Vote(1, why)) if why.contains("another action or payload"))
    );
    let other_payload = json!({"amount": 1});
    assert_eq!(
        verify_certificate(
            &sealed,
            std::slice::from_ref(&jwk),
            None,
            Some(&other_payload)
        ),
        Err(VerifyError::PayloadMismatch)
    );

    // A changed vote: its statement rejects now, the assertion is over the old one.
    let mut vote_changed = f.certificate.clone();
    vote_changed.votes[1].statement = statement("bob@example.com", "approve", "n3").canonical();
    assert!(
        matches!(check(&seal(&vote_changed)), Err(VerifyError::Vote(2, why)) if why.contains("another statement"))
    );

    // A vote removed: the rule is no longer met.
    let mut removed = f.certificate.clone();
    removed.votes.pop();
    assert_eq!(
        check(&seal(&removed)),
        Err(VerifyError::RuleNotMet("finance".into(), 1, 2))
    );

    // The requester's vote (validly signed by the requester's own passkey).
    let carol = SoftAuthenticator::new(3, RP, ORIGIN);
    let mut requester = f.certificate.clone();
    requester.policy.rules[0]
        .approvers
        .push("carol@example.com".into());
    requester.votes[1] = vote_of(
        &carol,
        &statement("carol@example.com", "approve", "n4"),
        "carol@example.com",
    );
    assert!(matches!(
        check(&seal(&requester)),
        Err(VerifyError::RequesterVote(2, _))
    ));

    // The same person twice (another of their passkeys, another nonce).
    let alice_again = SoftAuthenticator::new(4, RP, ORIGIN);
    let mut twice = f.certificate.clone();
    twice.votes[1] = vote_of(
        &alice_again,
        &statement("Alice@Example.com", "approve", "n5"),
        "alice@example.com",
    );
    assert!(matches!(
        check(&seal(&twice)),
        Err(VerifyError::DuplicatePerson(2, _))
    ));

    // A bad Countersign signature: another key, or a key the JWKS does not have.
    let forged = {
        let key = SigningKey::from_slice(&[8u8; 32]).expect("a valid scalar");
        let (header, input) = f.certificate.to_sign("k1");
        let signature: Signature = key.sign(input.as_bytes());
        f.certificate.sealed(&header, &signature.to_bytes())
    };
    assert!(
        matches!(check(&forged), Err(VerifyError::CountersignSignature(why)) if why.contains("does not match"))
    );
    let mut unknown = f.certificate.clone();
    unknown.signature = String::new();
    let (header, _) = unknown.to_sign("k2");
    assert!(
        matches!(check(&unknown.sealed(&header, &[0; 64])), Err(VerifyError::CountersignSignature(why)) if why.contains("no key"))
    );

    // A credential not pinned: Bob's passkey is not in the file (or is, for someone else).
    let only_alice = pinned(&[(&f.alice, "alice@example.com")]);
    assert!(matches!(
        verify_certificate(&sealed, std::slice::from_ref(&jwk), Some(&only_alice), None),
        Err(VerifyError::NotPinned(2, _, _))
    ));
    let swapped = pinned(&[
        (&f.alice, "alice@example.com"),
        (&f.bob, "alice@example.com"),
    ]);
    assert!(matches!(
        verify_certificate(&sealed, &[jwk], Some(&swapped), None),
        Err(VerifyError::NotPinned(2, _, _))
    ));
}
