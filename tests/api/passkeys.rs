//! Passkey-only approvals through the real HTTP stack, the real store and a real OpenID
//! Provider, signed by a software authenticator (real P-256 signatures): registration on the
//! passkeys page, votes on the review page, and every other way to vote refused, recording
//! nothing.

use countersign_tests::passkeys::{
    authenticator, passkey_form, post_registration, post_vote, register, registration, remove,
    sign_vote,
};
use countersign_tests::sign_in::{SignInStack, hidden, two_of_two};
use countersign_tests::slack::{FakeSlack, U_ALICE};
use countersign_tests::{
    ACME_SECRET, ALICE, ALICE_KEY, ApiKeys, BOB, CAROL, DECIDER_A, KEY_A, TENANT_A, decided_event,
    decision_body, test_api_keys,
};
use serde_json::{Value, json};

fn passkey_only(build: u64, approvers: &[&str]) -> String {
    let mut body: Value = serde_json::from_str(&two_of_two(build, approvers)).expect("a body");
    body["assurance"] = json!("passkey");
    body.to_string()
}

/// Carol's own approver key (a delegate's).
const CAROL_KEY: &str = "carol-key-0123456789abcdef";

/// The API keys of the test apps, and Alice's and Carol's own (approvers' keys).
fn keys() -> String {
    let mut all: Vec<Value> = serde_json::from_str(&test_api_keys()).expect("keys");
    let alice: Vec<Value> = serde_json::from_str(
        &ApiKeys::new()
            .key(ALICE, &["approver"], ALICE_KEY)
            .key(CAROL, &["approver"], CAROL_KEY)
            .to_string(),
    )
    .expect("keys");
    all.extend(alice);
    Value::from(all).to_string()
}

async fn votes(s: &SignInStack, id: &str) -> Vec<Value> {
    s.approval(id).await["votes"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passkeys_meet_a_two_of_two_and_every_other_vote_is_refused_recording_nothing() {
    let slack = FakeSlack::start().await;
    let split = slack.split_env();
    let keys = keys();
    let mut overrides: Vec<(&str, &str)> = split.iter().map(|(k, v)| (*k, v.as_str())).collect();
    overrides.push(("API_KEYS", &keys));
    let s = SignInStack::start_for_passkeys(json!({}), &overrides).await;
    let t = &s.t;
    let id = t
        .create_ok(KEY_A, "pk-1", &passkey_only(1, &[ALICE, BOB]))
        .await;
    let other = t
        .create_ok(KEY_A, "pk-2", &passkey_only(2, &[ALICE, BOB]))
        .await;
    assert_eq!(s.approval(&id).await["assurance"], "passkey");
    // Its execute job carries the payload twice: a payload written out past half the usual
    // room is refused (here 7,000 numbers sent as `1e15`, 119 KB written), which a plain
    // approval takes.
    let numbers = vec!["1e15"; 7_000].join(",");
    let large = |assurance: &str| {
        format!(
            r#"{{"action": {{"type": "deploy", "payload": {{"n": [{numbers}]}}}}, "approvers": ["{ALICE}"]{assurance}}}"#
        )
    };
    let refused = t
        .create(KEY_A, "pk-large", &large(r#", "assurance": "passkey""#))
        .await;
    assert_eq!(refused.status, 400, "{}", refused.text());
    assert_eq!(refused.json()["errors"][0]["field"], "action.payload");
    assert_eq!(
        t.create(KEY_A, "pk-large-plain", &large("")).await.status,
        201
    );

    // Every way to vote but a passkey: 403 passkey_required (or its channel's refusal), and
    // nothing recorded.
    for (key, body) in [
        (DECIDER_A, decision_body("approve", ALICE)),
        (DECIDER_A, decision_body("reject", BOB)),
        (ALICE_KEY, json!({"decision": "approve"})),
    ] {
        let reply = t.decide(key, &id, body).await;
        assert_eq!(reply.status, 403, "{}", reply.text());
        assert_eq!(reply.json()["code"], "passkey_required");
    }
    let delivered = t
        .deliver(
            "acme",
            ACME_SECRET,
            "msg_pk_1",
            &decided_event(&id, "approve", ALICE),
        )
        .await;
    assert_eq!(
        delivered.json(),
        json!({"status": "processed", "outcome": "passkey_required"})
    );
    // A delegate without a passkey of their own: Carol, in Alice's place, with her key.
    let until = countersign::domain::rfc3339(t.clock.now() + 86_400);
    let delegated = t
        .send(
            t.http
                .put(t.url(&format!("/delegations/{ALICE}")))
                .bearer_auth(ALICE_KEY)
                .json(&json!({"delegate": CAROL, "until": until})),
        )
        .await;
    assert_eq!(delegated.status, 200, "{}", delegated.text());
    let in_place = t
        .decide(CAROL_KEY, &id, decision_body("approve", ALICE))
        .await;
    assert_eq!(in_place.status, 403, "{}", in_place.text());
    assert_eq!(in_place.json()["code"], "passkey_required");
    let clicked = t
        .click(&slack, U_ALICE, "countersign.approve", &id, false)
        .await;
    assert!(clicked.status < 300, "{}", clicked.text());
    let review = t.review_link(&id, ALICE);
    let alice = s.sign_in(ALICE, &review).await;
    let page = s.get(&review, Some(&alice.cookie)).await.text();
    assert!(page.contains("You have no passkey yet"), "{page}");
    // A form post without a passkey (the session's CSRF token is the passkeys page's too).
    let passkeys_page = s
        .get(
            &countersign_tests::passkeys::passkeys_path(),
            Some(&alice.cookie),
        )
        .await
        .text();
    let csrf = hidden(&passkeys_page, "csrf").expect("csrf");
    let token = t.review_token(TENANT_A, &id, ALICE);
    let plain = s.approve(&id, &token, &csrf, &alice.cookie).await;
    assert_eq!(plain.status, 403, "{}", plain.text());
    assert!(plain.text().contains("passkey"));
    assert!(votes(&s, &id).await.is_empty(), "nothing recorded");

    // Alice registers a passkey on her page: listed there; a second one, removed again.
    let alice_key = authenticator(&s, 1);
    let added = register(&s, &alice.cookie, &alice_key).await;
    assert_eq!(added.status, 303, "{}", added.text());
    let listed = s
        .get(
            &countersign_tests::passkeys::passkeys_path(),
            Some(&alice.cookie),
        )
        .await
        .text();
    let alice_id = countersign::domain::passkey::b64(&alice_key.credential_id);
    assert!(listed.contains(&alice_id), "{listed}");
    let again = register(&s, &alice.cookie, &alice_key).await;
    // Excluded by the registration's options (webauthn-rs), and by the write's condition.
    assert!(
        [400, 409].contains(&again.status) && again.text().contains("No passkey was changed"),
        "the same passkey twice: {}",
        again.text()
    );
    let spare = authenticator(&s, 2);
    assert_eq!(register(&s, &alice.cookie, &spare).await.status, 303);
    let spare_id = countersign::domain::passkey::b64(&spare.credential_id);
    assert_eq!(remove(&s, &alice.cookie, &spare_id).await.status, 303);

    // Refused passkey votes, each recording nothing.
    let page = s.get(&review, Some(&alice.cookie)).await;
    assert!(
        page.text().contains("<script>"),
        "the page carries our script"
    );
    let csp = page.headers["content-security-policy"]
        .to_str()
        .unwrap_or_default();
    assert!(
        csp.contains("script-src 'sha256-") && csp.contains("default-src 'none'"),
        "{csp}"
    );
    let form = passkey_form(&s, &review, &alice.cookie)
        .await
        .expect("the page asks for a passkey");
    let statement = form.statement(&id, "approve", ALICE, None);
    let refused = |label: &'static str| {
        move |reply: countersign_tests::Reply| {
            assert_eq!(reply.status, 403, "{label}: {}", reply.text());
            assert!(reply.text().contains("Nothing was recorded"), "{label}");
        }
    };
    // Over another approval's statement.
    let elsewhere = form.statement(&other, "approve", ALICE, None);
    let reply = post_vote(
        &s,
        &id,
        &form,
        "approve",
        &alice_key.assert(&elsewhere.challenge()),
        &alice.cookie,
    )
    .await;
    refused("another approval's statement")(reply);
    // Over another payload.
    let mut changed = statement.clone();
    changed.payload_sha256 = "0".repeat(64);
    let reply = post_vote(
        &s,
        &id,
        &form,
        "approve",
        &alice_key.assert(&changed.challenge()),
        &alice.cookie,
    )
    .await;
    refused("another payload")(reply);
    // The form's digest changed to match (the nonce binds the page's digest).
    let mut lying = form.clone();
    lying.payload_sha256 = changed.payload_sha256.clone();
    let reply = post_vote(
        &s,
        &id,
        &lying,
        "approve",
        &alice_key.assert(&changed.challenge()),
        &alice.cookie,
    )
    .await;
    refused("a digest the page did not show")(reply);
    // Without user verification.
    let mut touch = authenticator(&s, 1);
    touch.user_verified = false;
    let reply = post_vote(
        &s,
        &id,
        &form,
        "approve",
        &touch.assert(&statement.challenge()),
        &alice.cookie,
    )
    .await;
    refused("user verification off")(reply);
    // From a credential never registered, and from the removed one.
    let stranger = authenticator(&s, 7);
    let reply = post_vote(
        &s,
        &id,
        &form,
        "approve",
        &stranger.assert(&statement.challenge()),
        &alice.cookie,
    )
    .await;
    refused("an unregistered credential")(reply);
    let reply = post_vote(
        &s,
        &id,
        &form,
        "approve",
        &spare.assert(&statement.challenge()),
        &alice.cookie,
    )
    .await;
    refused("a removed credential")(reply);
    // From another origin.
    let reply = post_vote(
        &s,
        &id,
        &form,
        "approve",
        &alice_key.assert_from(&statement.challenge(), "https://evil.example.net"),
        &alice.cookie,
    )
    .await;
    refused("another origin")(reply);
    // Bob's session posting Alice's form (its nonce is bound to her session).
    let bob = s.sign_in(BOB, &t.review_link(&id, BOB)).await;
    let bob_key = authenticator(&s, 3);
    assert_eq!(register(&s, &bob.cookie, &bob_key).await.status, 303);
    let bobs = form.statement(&id, "approve", BOB, None);
    let reply = post_vote(
        &s,
        &id,
        &form,
        "approve",
        &bob_key.assert(&bobs.challenge()),
        &bob.cookie,
    )
    .await;
    refused("another session's nonce")(reply);
    assert!(votes(&s, &id).await.is_empty(), "nothing recorded");

    // Alice's passkey vote: recorded with its credential; the same form again repeats it.
    let signed = alice_key.assert(&statement.challenge());
    let voted = post_vote(&s, &id, &form, "approve", &signed, &alice.cookie).await;
    assert_eq!(voted.status, 303, "{}", voted.text());
    let replayed = post_vote(&s, &id, &form, "approve", &signed, &alice.cookie).await;
    assert_eq!(replayed.status, 303, "a replay lands on the outcome");
    let recorded = votes(&s, &id).await;
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    assert_eq!(recorded[0]["passkey"], alice_id.as_str());

    // Bob in two tabs, signing at once: one vote.
    let bob_review = t.review_link(&id, BOB);
    let tabs = futures::future::join_all((0..6).map(|_| {
        sign_vote(
            &s,
            (&id, &bob_review),
            BOB,
            "approve",
            &bob_key,
            &bob.cookie,
        )
    }))
    .await;
    assert!(
        tabs.iter().all(|r| r.status == 303),
        "{:?}",
        tabs.iter().map(|r| r.status).collect::<Vec<_>>()
    );
    let approval = s.approval(&id).await;
    assert_eq!(approval["status"], "approved", "{approval}");
    assert_eq!(approval["votes"].as_array().map(Vec::len), Some(2));

    // A stale page: its nonce is older than 5 minutes.
    let carol_review = t.review_link(&other, BOB);
    let stale = passkey_form(&s, &carol_review, &bob.cookie)
        .await
        .expect("a form");
    t.clock.advance(301);
    let late = stale.statement(&other, "approve", BOB, None);
    let reply = post_vote(
        &s,
        &other,
        &stale,
        "approve",
        &bob_key.assert(&late.challenge()),
        &bob.cookie,
    )
    .await;
    refused("a stale nonce")(reply);
    assert!(votes(&s, &other).await.is_empty());

    // Registration needs a sign-in within 5 minutes: Carol's is older now.
    let carol = s.sign_in(CAROL, &format!("/inbox/{TENANT_A}")).await;
    let offered = registration(&s, &carol.cookie).await;
    assert!(offered.is_none(), "no registration offered");
    let page = s
        .get(
            &countersign_tests::passkeys::passkeys_path(),
            Some(&carol.cookie),
        )
        .await
        .text();
    assert!(page.contains("Sign in again to add a passkey"), "{page}");
    // A registration begun in Alice's session before is refused now too.
    t.clock.advance(-301);
    let (state, csrf, challenge) = registration(&s, &alice.cookie).await.expect("fresh again");
    t.clock.advance(301);
    let late = post_registration(
        &s,
        &alice.cookie,
        &authenticator(&s, 5),
        (&state, &csrf, &challenge),
    )
    .await;
    assert_eq!(late.status, 403, "{}", late.text());
    let listed = s
        .get(
            &countersign_tests::passkeys::passkeys_path(),
            Some(&alice.cookie),
        )
        .await
        .text();
    assert!(!listed.contains(&countersign::domain::passkey::b64(
        &authenticator(&s, 5).credential_id
    )));
}
