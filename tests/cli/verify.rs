//! `countersign verify`, offline: a certificate made with real P-256 signatures (software
//! authenticators for the passkeys, a local key standing in for Countersign's KMS key, its JWKS
//! a file), then changed each way a forger would — each refused with exit 1 and its reason.
//! And `countersign passkeys list | export | revoke` over the local AWS: the export is what
//! `--credentials` pins.

use std::time::Duration;

use assert_cmd::Command;
use countersign::domain::passkey::certificate::{
    CertificateVote, CertifiedAction, PolicyEvidence, RuleEvidence,
};
use countersign::domain::passkey::soft::SoftAuthenticator;
use countersign::domain::passkey::{Certificate, Jwk, Statement, b64, payload_sha256};
use countersign::domain::{Approver, TenantId};
use countersign::store::PasskeyRecord;
use countersign_tests::runtime_api::function_binary;
use p256::ecdsa::signature::Signer as _;
use p256::ecdsa::{Signature, SigningKey};
use serde_json::{Map, Value, json};

use crate::harness::{assert_has, run, start, stderr, stdout};

const ORIGIN: &str = "https://approvals.example.com";
const RP: &str = "approvals.example.com";
const ALICE: &str = "alice@example.com";
const BOB: &str = "bob@example.com";
const CAROL: &str = "carol@example.com";

fn payload() -> Map<String, Value> {
    json!({"service": "api", "build": 42})
        .as_object()
        .cloned()
        .unwrap_or_default()
}

fn statement(approver: &str, nonce: &str) -> Statement {
    Statement {
        tenant: "tenant-a".into(),
        approval_id: "apr_01JEXAMPLE0000000000000000".into(),
        action_type: "deploy".into(),
        payload_sha256: payload_sha256(&payload()),
        vote: "approve".into(),
        approver: approver.into(),
        by: None,
        policy_version: None,
        nonce: nonce.into(),
    }
}

fn vote(key: &SoftAuthenticator, statement: &Statement, identity: &str) -> CertificateVote {
    let assertion = key.assert(&statement.challenge());
    CertificateVote {
        statement: statement.canonical(),
        credential_id: b64(&assertion.credential_id),
        authenticator_data: b64(&assertion.authenticator_data),
        client_data_json: b64(&assertion.client_data_json),
        signature: b64(&assertion.signature),
        public_key_jwk: key.jwk(),
        identity: identity.into(),
        iss: "https://id.example.com".into(),
        sub: format!("sub-{identity}"),
        registered_at: "2026-12-01T09:00:00Z".into(),
    }
}

fn countersign_key(seed: u8) -> SigningKey {
    SigningKey::from_slice(&[seed; 32]).expect("a valid scalar")
}

fn sealed(certificate: &Certificate, key: &SigningKey) -> Value {
    let (header, input) = certificate.to_sign("k1");
    let signature: Signature = key.sign(input.as_bytes());
    certificate.sealed(&header, &signature.to_bytes())
}

fn two_of_two(alice: &SoftAuthenticator, bob: &SoftAuthenticator) -> Certificate {
    Certificate {
        v: 1,
        approval_id: "apr_01JEXAMPLE0000000000000000".into(),
        tenant: "tenant-a".into(),
        requested_by: Some(CAROL.into()),
        action: CertifiedAction {
            kind: "deploy".into(),
            payload: payload(),
        },
        payload_sha256: payload_sha256(&payload()),
        policy: PolicyEvidence {
            version: None,
            sha256: None,
            rules: vec![RuleEvidence {
                name: "both".into(),
                group: None,
                min_approvals: 2,
                approvers: vec![ALICE.into(), BOB.into()],
            }],
        },
        votes: vec![
            vote(alice, &statement(ALICE, "n1"), ALICE),
            vote(bob, &statement(BOB, "n2"), BOB),
        ],
        decided_at: "2026-12-07T10:00:00Z".into(),
        issued_at: "2026-12-07T10:00:01Z".into(),
        signature: String::new(),
    }
}

fn verify(dir: &std::path::Path, certificate: &Value, extra: &[&str]) -> Command {
    let path = dir.join(format!("cert-{}.json", ulid::Ulid::new()));
    std::fs::write(&path, certificate.to_string()).expect("write the certificate");
    let mut command = Command::new(function_binary("countersign", "debug"));
    command
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .arg("verify")
        .arg(&path)
        .arg("--jwks")
        .arg(dir.join("jwks.json"))
        .args(extra)
        .timeout(Duration::from_secs(60));
    command
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_accepts_a_certificate_and_refuses_each_change_with_its_reason() {
    let dir = std::env::temp_dir().join(format!("verify-{}", ulid::Ulid::new()));
    std::fs::create_dir_all(&dir).expect("a directory");
    let key = countersign_key(9);
    let mut jwk = Jwk::of(key.verifying_key());
    jwk.kid = Some("k1".into());
    std::fs::write(dir.join("jwks.json"), json!({"keys": [jwk]}).to_string()).expect("jwks");
    let (alice, bob) = (
        SoftAuthenticator::new(1, RP, ORIGIN),
        SoftAuthenticator::new(2, RP, ORIGIN),
    );
    let pins = json!({"credentials": [
        {"credential_id": b64(&alice.credential_id), "identity": ALICE, "public_key_jwk": alice.jwk()},
        {"credential_id": b64(&bob.credential_id), "identity": BOB, "public_key_jwk": bob.jwk()},
    ]});
    std::fs::write(dir.join("pins.json"), pins.to_string()).expect("pins");
    let only_alice = json!({"credentials": [pins["credentials"][0]]});
    std::fs::write(dir.join("alice.json"), only_alice.to_string()).expect("pins");
    std::fs::write(
        dir.join("payload.json"),
        Value::Object(payload()).to_string(),
    )
    .expect("payload");
    std::fs::write(
        dir.join("other.json"),
        json!({"service": "api", "build": 43}).to_string(),
    )
    .expect("payload");
    let base = two_of_two(&alice, &bob);
    let good = sealed(&base, &key);
    let pinned = dir.join("pins.json").display().to_string();
    let held = dir.join("payload.json").display().to_string();

    let ok = run(verify(
        &dir,
        &good,
        &["--credentials", &pinned, "--payload", &held],
    ))
    .await;
    ok.success();
    let ok = run(verify(
        &dir,
        &good,
        &["--credentials", &pinned, "--payload", &held],
    ))
    .await;
    assert_eq!(
        stdout(&ok).trim(),
        format!("rule both: met, 2 of 2 required, by {ALICE}, {BOB}")
    );

    let mut changed_payload = good.clone();
    changed_payload["action"]["payload"]["build"] = json!(666);
    let mut changed_vote = base.clone();
    changed_vote.votes[1].statement = statement(BOB, "n9").canonical();
    let mut removed = base.clone();
    removed.votes.pop();
    let carol = SoftAuthenticator::new(3, RP, ORIGIN);
    let mut requester = base.clone();
    requester.policy.rules[0].approvers.push(CAROL.into());
    requester.votes[1] = vote(&carol, &statement(CAROL, "n3"), CAROL);
    let again = SoftAuthenticator::new(4, RP, ORIGIN);
    let mut duplicated = base.clone();
    duplicated.votes[1] = vote(&again, &statement("Alice@Example.com", "n4"), ALICE);
    let forged = sealed(&base, &countersign_key(8));
    let alice_only = dir.join("alice.json").display().to_string();
    let other = dir.join("other.json").display().to_string();
    let cases: Vec<(&str, Value, Vec<&str>, &str)> = vec![
        (
            "a changed payload",
            changed_payload,
            vec![],
            "Countersign's signature does not verify",
        ),
        (
            "the payload the target holds differs",
            good.clone(),
            vec!["--payload", &other],
            "the payload given does not match",
        ),
        (
            "a changed vote",
            sealed(&changed_vote, &key),
            vec![],
            "vote 2: the assertion signs another statement",
        ),
        (
            "a vote removed",
            sealed(&removed, &key),
            vec![],
            "rule both is not met: 1 of the 2",
        ),
        (
            "a requester's vote",
            sealed(&requester, &key),
            vec![],
            "the requester's vote",
        ),
        (
            "a duplicated person",
            sealed(&duplicated, &key),
            vec![],
            "votes twice",
        ),
        (
            "a bad Countersign signature",
            forged,
            vec![],
            "the signature does not match the certificate",
        ),
        (
            "a credential not pinned",
            good.clone(),
            vec!["--credentials", &alice_only],
            "is not pinned",
        ),
    ];
    for (label, certificate, extra, reason) in cases {
        let refused = run(verify(&dir, &certificate, &extra)).await;
        assert_eq!(refused.get_output().status.code(), Some(1), "{label}");
        assert_has(&stderr(&refused), reason);
        assert!(stdout(&refused).is_empty(), "{label}: nothing on stdout");
    }
    // An unreadable certificate is a usage error, not a verdict.
    let mut missing = verify(&dir, &good, &[]);
    missing.arg("--jwks").arg(dir.join("absent.json"));
    let missing = run(missing).await;
    assert_eq!(missing.get_output().status.code(), Some(4));
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn passkeys_are_listed_exported_and_revoked_over_aws_credentials() {
    let t = start().await;
    let table = t.app.store.tables().api_keys.clone();
    let passkeys = |args: &[&str]| {
        let mut command = Command::new(function_binary("countersign", "debug"));
        command
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .env("KEYS_TABLE", &table)
            .arg("passkeys")
            .args(args)
            .timeout(Duration::from_secs(60));
        if let Some(endpoint) = countersign_tests::aws_endpoint() {
            command.env("AWS_ENDPOINT_URL", endpoint);
        }
        command
    };
    let tenant = TenantId::parse("tenant-a").expect("tenant");
    for (seed, who) in [(1u8, ALICE), (2, BOB), (3, ALICE)] {
        let key = SoftAuthenticator::new(seed, RP, ORIGIN);
        t.app
            .store
            .add_passkey(&PasskeyRecord {
                tenant: tenant.clone(),
                identity: Approver::parse(who).expect("identity"),
                credential_id: b64(&key.credential_id),
                public_key: key.jwk(),
                iss: "https://id.example.com".into(),
                sub: format!("sub-{who}"),
                registered_at: 1_765_000_000 + i64::from(seed),
            })
            .await
            .expect("a passkey");
    }
    let listed = run(passkeys(&["list", "--tenant", "tenant-a"])).await;
    let text = stdout(&listed.success());
    assert_eq!(text.lines().count(), 3, "{text}");
    let alices = run(passkeys(&[
        "list",
        "--tenant",
        "tenant-a",
        "--identity",
        "Alice@Example.com",
    ]))
    .await;
    assert_eq!(stdout(&alices.success()).lines().count(), 2);
    let exported = run(passkeys(&["export", "--tenant", "tenant-a"])).await;
    let exported: Value = serde_json::from_str(&stdout(&exported.success())).expect("JSON");
    let credentials = exported["credentials"].as_array().expect("credentials");
    assert_eq!(credentials.len(), 3);
    let bob_key = SoftAuthenticator::new(2, RP, ORIGIN);
    let bob_id = b64(&bob_key.credential_id);
    let bob = credentials
        .iter()
        .find(|c| c["credential_id"] == bob_id.as_str())
        .expect("Bob's passkey");
    assert_eq!(bob["identity"], BOB);
    assert_eq!(bob["public_key_jwk"], json!(bob_key.jwk()));
    let revoked = run(passkeys(&[
        "revoke",
        "--tenant",
        "tenant-a",
        "--identity",
        BOB,
        &bob_id,
    ]))
    .await;
    assert_has(&stdout(&revoked.success()), "revoked");
    let again = run(passkeys(&[
        "revoke",
        "--tenant",
        "tenant-a",
        "--identity",
        BOB,
        &bob_id,
    ]))
    .await;
    assert_eq!(
        again.get_output().status.code(),
        Some(1),
        "no such passkey any more"
    );
    assert!(
        t.app
            .store
            .passkeys(&tenant, &Approver::parse(BOB).expect("bob"))
            .await
            .expect("read")
            .is_empty()
    );
}
