//! The certificate of a passkey-only approval: issued by the dispatch function (KMS on the
//! local AWS, the template's grants), served at `GET /approvals/{id}/certificate`, verified
//! with the JWKS and the exported credentials, and carried by a claim's answer.

use countersign::domain::passkey::{Jwk, Pinned, verify_certificate};
use countersign_tests::passkeys::{authenticator, register, sign_vote};
use countersign_tests::sign_in::{SignInStack, two_of_two};
use countersign_tests::{ALICE, BOB, CreateBody, KEY_A, TestApp};
use serde_json::{Value, json};

/// The Rust target example of docs/VERIFY.md, compiled and run here.
#[path = "../../examples/verify/verify_certificate.rs"]
mod target_example;

/// The Python example of docs/VERIFY.md on `certificate` (and `payload`): its exit code and
/// output.
fn python_verifies(certificate: &Value, jwks: &Value, payload: Option<&Value>) -> (i32, String) {
    let dir = std::env::temp_dir().join(format!("verify-py-{}", ulid::Ulid::new()));
    std::fs::create_dir_all(&dir).expect("a directory");
    let mut args = vec![
        countersign_tests::workspace_root().join("examples/verify/verify_certificate.py"),
        dir.join("cert.json"),
        dir.join("jwks.json"),
    ];
    std::fs::write(&args[1], certificate.to_string()).expect("write");
    std::fs::write(&args[2], jwks.to_string()).expect("write");
    if let Some(payload) = payload {
        args.push(dir.join("payload.json"));
        std::fs::write(&args[3], payload.to_string()).expect("write");
    }
    let out = std::process::Command::new(countersign_tests::python())
        .args(&args)
        .output()
        .expect("run the Python example");
    let _ = std::fs::remove_dir_all(&dir);
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

async fn certificate(t: &TestApp, id: &str) -> countersign_tests::Reply {
    t.send(
        t.http
            .get(t.url(&format!("/approvals/{id}/certificate")))
            .bearer_auth(KEY_A),
    )
    .await
}

/// The certificate once issued (the stream's dispatch signs it a moment after the vote).
async fn issued(t: &TestApp, id: &str) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let reply = certificate(t, id).await;
        if reply.status == 200 {
            return reply.json();
        }
        assert_eq!(reply.json()["code"], "no_certificate", "{}", reply.text());
        assert!(
            std::time::Instant::now() < deadline,
            "no certificate issued"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

pub async fn jwks(t: &TestApp) -> Vec<Jwk> {
    let reply = t
        .send(t.http.get(t.url("/.well-known/countersign/jwks.json")))
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(reply.headers["cache-control"], "public, max-age=300");
    serde_json::from_value(reply.json()["keys"].clone()).expect("JWKs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_two_of_two_yields_a_certificate_that_verifies_and_a_claim_carries_it() {
    let s = SignInStack::start_for_passkeys(json!({}), &[]).await;
    let t = &s.t;
    let mut body: Value = serde_json::from_str(&two_of_two(7, &[ALICE, BOB])).expect("a body");
    body["assurance"] = json!("passkey");
    let id = t.create_ok(KEY_A, "cert-1", &body.to_string()).await;
    let agent = CreateBody::new("agent", &[ALICE])
        .payload(json!({"tool_name": "Bash", "input": {"command": "make deploy"}}))
        .with("assurance", json!("passkey"))
        .to_string();
    let claimed = t.create_ok(KEY_A, "cert-2", &agent).await;
    let pending = certificate(t, &id).await;
    assert_eq!(pending.status, 404);
    assert_eq!(pending.json()["code"], "no_certificate");

    let (alice_key, bob_key) = (authenticator(&s, 11), authenticator(&s, 12));
    let alice = s.sign_in(ALICE, &t.review_link(&id, ALICE)).await;
    let bob = s.sign_in(BOB, &t.review_link(&id, BOB)).await;
    assert_eq!(register(&s, &alice.cookie, &alice_key).await.status, 303);
    assert_eq!(register(&s, &bob.cookie, &bob_key).await.status, 303);
    let review = t.review_link(&id, ALICE);
    let voted = sign_vote(
        &s,
        (&id, &review),
        ALICE,
        "approve",
        &alice_key,
        &alice.cookie,
    )
    .await;
    assert_eq!(voted.status, 303, "{}", voted.text());
    let review = t.review_link(&id, BOB);
    let voted = sign_vote(&s, (&id, &review), BOB, "approve", &bob_key, &bob.cookie).await;
    assert_eq!(voted.status, 303, "{}", voted.text());

    let cert = issued(t, &id).await;
    let keys = jwks(t).await;
    let lines = verify_certificate(&cert, &keys, None, None).expect("the certificate verifies");
    assert_eq!(
        lines,
        [format!(
            "rule both: met, 2 of 2 required, by {ALICE}, {BOB}"
        )]
    );
    // Pinned to the passkeys as registered.
    let pinned: Pinned = serde_json::from_value(json!({"credentials": [
        {"credential_id": countersign::domain::passkey::b64(&alice_key.credential_id), "identity": ALICE, "public_key_jwk": alice_key.jwk()},
        {"credential_id": countersign::domain::passkey::b64(&bob_key.credential_id), "identity": BOB, "public_key_jwk": bob_key.jwk()},
    ]}))
    .expect("pins");
    assert!(verify_certificate(&cert, &keys, Some(&pinned), None).is_ok());
    // The examples a target copies: Python (every check) and Rust (Countersign's signature and
    // the payload it was sent), each refusing a changed payload.
    let jwks_value = json!({"keys": keys});
    let (code, text) = python_verifies(&cert, &jwks_value, Some(&cert["action"]["payload"]));
    assert_eq!(
        (code, text.trim()),
        (
            0,
            format!("rule both: met, 2 of 2 required, by {ALICE}, {BOB}").as_str()
        )
    );
    let mut changed = cert.clone();
    changed["action"]["payload"]["build"] = json!(8);
    let (code, text) = python_verifies(&changed, &jwks_value, None);
    assert_eq!(code, 1, "{text}");
    let (code, text) = python_verifies(&cert, &jwks_value, Some(&json!({"build": 8})));
    assert_eq!(code, 1, "{text}");
    let mut removed = cert.clone();
    removed["votes"].as_array_mut().map(Vec::pop);
    assert_eq!(
        python_verifies(&removed, &jwks_value, None).0,
        1,
        "a vote removed"
    );
    let payload = cert["action"]["payload"].clone();
    assert_eq!(
        target_example::verify_certificate(&cert, &jwks_value, &id, &payload),
        Ok(())
    );
    assert!(target_example::verify_certificate(&changed, &jwks_value, &id, &payload).is_err());
    assert!(
        target_example::verify_certificate(&cert, &jwks_value, &id, &json!({"build": 8})).is_err()
    );
    assert!(target_example::verify_certificate(&cert, &jwks_value, "apr_other", &payload).is_err());
    // The same certificate every time (its seal is stored once).
    assert_eq!(certificate(t, &id).await.json(), cert);
    assert_eq!(cert["requested_by"], json!("tenant-a"));
    assert_eq!(cert["votes"].as_array().map(Vec::len), Some(2));
    println!(
        "a 2-of-2 certificate: {} bytes\n{}",
        cert.to_string().len(),
        serde_json::to_string_pretty(&cert).unwrap_or_default()
    );

    // An approval-only type: claimed once the certificate is issued, and the answer carries it.
    let review = t.review_link(&claimed, ALICE);
    let voted = sign_vote(
        &s,
        (&claimed, &review),
        ALICE,
        "approve",
        &alice_key,
        &alice.cookie,
    )
    .await;
    assert_eq!(voted.status, 303, "{}", voted.text());
    let claim = || {
        t.send(
            t.http
                .post(t.url(&format!("/approvals/{claimed}/execution/claim")))
                .bearer_auth(KEY_A)
                .header("idempotency-key", "claim-1"),
        )
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let answer = loop {
        let reply = claim().await;
        if reply.status == 200 {
            break reply.json();
        }
        assert_eq!(reply.status, 409, "{}", reply.text());
        assert_eq!(reply.json()["code"], "certificate_pending");
        assert!(std::time::Instant::now() < deadline, "never claimable");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert_eq!(answer["execution"]["status"], "running");
    let lines = verify_certificate(&answer["certificate"], &keys, None, None).expect("verifies");
    assert_eq!(
        lines,
        [format!("rule approvers: met, 1 of 1 required, by {ALICE}")]
    );
    let again = claim().await;
    assert_eq!(again.status, 200, "a replay");
    assert_eq!(again.json()["certificate"], answer["certificate"]);
}
