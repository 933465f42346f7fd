//! POST /webhooks/{source}: a signed webhook proves where an event came from; the inbox proves
//! it has not been handled before.

use countersign_tests::{
    ACME_SECRET, ALICE, BOB, DECIDER_A, KEY_A, KEY_B, MALLORY, OTHER_SECRET, ROTATING_NEW_SECRET,
    ROTATING_OLD_SECRET, TestApp, attr_s, decided_event, decision_body, deploy_body,
};
use futures::future::join_all;
use serde_json::json;

async fn pending_approval(t: &TestApp) -> String {
    t.create_ok(
        KEY_A,
        &format!("k-{}", ulid::Ulid::new()),
        &deploy_body(1, &[ALICE, BOB]),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn webhook_redelivery_changes_nothing() {
    let t = TestApp::start().await;
    let id = pending_approval(&t).await;
    let body = decided_event(&id, "approve", ALICE);

    // 20 concurrent deliveries of one event, then 5 redeliveries re-signed with fresh timestamps.
    let mut replies =
        join_all((0..20).map(|_| t.deliver("acme", ACME_SECRET, "msg_redelivered", &body))).await;
    for i in 1..=5 {
        t.clock.advance(60);
        let timestamp = t.clock.now() + i; // a fresh timestamp, within the window
        replies.push(
            t.deliver_at("acme", ACME_SECRET, "msg_redelivered", &body, timestamp)
                .await,
        );
    }

    assert!(replies.iter().all(|r| r.status == 200));
    let statuses: Vec<_> = replies.iter().map(|r| r.json()).collect();
    assert_eq!(
        statuses
            .iter()
            .filter(|s| s["status"] == "processed")
            .count(),
        1
    );
    assert_eq!(
        statuses
            .iter()
            .filter(|s| s["status"] == "duplicate")
            .count(),
        24
    );
    assert!(
        statuses.iter().all(|s| s["outcome"] == "applied"),
        "{statuses:?}"
    );

    let approval = t.get(KEY_A, &id).await.json();
    assert_eq!(approval["status"], "approved");
    assert_eq!(approval["decision"]["channel"], "webhook");
    assert_eq!(approval["decision"]["webhook_event_id"], "msg_redelivered");
    assert_eq!(approval["decision"]["approver"], ALICE);
    assert_eq!(t.count_items(&t.app.config.tables.webhook_inbox).await, 1);

    let inbox = t
        .inbox_item("acme", "msg_redelivered")
        .await
        .expect("recorded");
    assert_eq!(attr_s(&inbox, "outcome"), "applied");
    assert_eq!(attr_s(&inbox, "approval_id"), id);
    assert_eq!(attr_s(&inbox, "event_type"), "approval.decided");
    assert!(attr_s(&inbox, "request_id").starts_with("req_"));
    assert_eq!(attr_s(&inbox, "body_sha256").len(), 64);
}

#[tokio::test]
async fn forged_deliveries_are_refused_and_record_nothing() {
    let t = TestApp::start().await;
    let id = pending_approval(&t).await;
    let body = decided_event(&id, "approve", ALICE);
    // Integer seconds pass while the test runs: the window's exact edges (±300 accepted, ±301
    // refused) are unit-tested with a fixed clock; here the stale and future cases keep a margin.
    let now = t.clock.now();
    let sign = |secret: &str, ts: i64, body: &str| {
        countersign::webhook::WebhookSecret::parse(secret)
            .unwrap()
            .sign("msg_forged", ts, body.as_bytes())
    };
    let ts = now.to_string();
    let good = sign(ACME_SECRET, now, &body);
    let tampered = body.replace("approve", "reject");
    // (case, webhook-id, webhook-timestamp, webhook-signature, body)
    type Forged = (
        &'static str,
        Option<String>,
        Option<String>,
        Option<String>,
        String,
    );
    let cases: Vec<Forged> = vec![
        (
            "tampered body",
            Some("msg_forged".into()),
            Some(ts.clone()),
            Some(good.clone()),
            tampered,
        ),
        (
            "wrong secret",
            Some("msg_forged".into()),
            Some(ts.clone()),
            Some(sign(OTHER_SECRET, now, &body)),
            body.clone(),
        ),
        (
            "stale",
            Some("msg_forged".into()),
            Some((now - 400).to_string()),
            Some(sign(ACME_SECRET, now - 400, &body)),
            body.clone(),
        ),
        (
            "future",
            Some("msg_forged".into()),
            Some((now + 400).to_string()),
            Some(sign(ACME_SECRET, now + 400, &body)),
            body.clone(),
        ),
        (
            "unsigned",
            Some("msg_forged".into()),
            Some(ts.clone()),
            None,
            body.clone(),
        ),
        (
            "no id",
            None,
            Some(ts.clone()),
            Some(good.clone()),
            body.clone(),
        ),
        (
            "no timestamp",
            Some("msg_forged".into()),
            None,
            Some(good.clone()),
            body.clone(),
        ),
        (
            "malformed signature",
            Some("msg_forged".into()),
            Some(ts.clone()),
            Some("v1 garbage".into()),
            body.clone(),
        ),
        (
            "timestamp off by one",
            Some("msg_forged".into()),
            Some((now + 1).to_string()),
            Some(good.clone()),
            body.clone(),
        ),
        (
            "other event id",
            Some("msg_other".into()),
            Some(ts.clone()),
            Some(good.clone()),
            body.clone(),
        ),
    ];
    for (name, id_header, ts_header, sig_header, body) in cases {
        let reply = t
            .deliver_raw(
                "acme",
                id_header.as_deref(),
                ts_header.as_deref(),
                sig_header.as_deref(),
                &body,
            )
            .await;
        assert_eq!(reply.status, 401, "{name}: {}", reply.text());
        assert_eq!(reply.code(), "invalid_signature", "{name}");
    }
    assert_eq!(
        t.count_items(&t.app.config.tables.webhook_inbox).await,
        0,
        "nothing recorded"
    );
    assert_eq!(t.get(KEY_A, &id).await.json()["status"], "pending");

    let genuine = t.deliver("acme", ACME_SECRET, "msg_forged", &body).await;
    assert_eq!(
        genuine.json(),
        json!({"status": "processed", "outcome": "applied"})
    );
}

#[tokio::test]
async fn a_delivery_signed_with_the_older_secret_is_accepted_during_rotation() {
    let t = TestApp::start().await;
    let id = pending_approval(&t).await;
    let old = t
        .deliver(
            "rotating",
            ROTATING_OLD_SECRET,
            "msg_rot_1",
            &json!({"type": "ping"}).to_string(),
        )
        .await;
    assert_eq!(
        old.json(),
        json!({"status": "processed", "outcome": "ignored"})
    );
    let new = t
        .deliver(
            "rotating",
            ROTATING_NEW_SECRET,
            "msg_rot_2",
            &decided_event(&id, "reject", ALICE),
        )
        .await;
    assert_eq!(
        new.json(),
        json!({"status": "processed", "outcome": "applied"})
    );
    let retired = t
        .deliver(
            "acme",
            ROTATING_OLD_SECRET,
            "msg_rot_3",
            &json!({"type": "ping"}).to_string(),
        )
        .await;
    assert_eq!(
        retired.status, 401,
        "a secret is only valid for its own source"
    );
}

#[tokio::test]
async fn events_that_cannot_apply_are_recorded_and_acknowledged() {
    let t = TestApp::start().await;
    let decided = pending_approval(&t).await;
    let approve = decision_body("approve", ALICE);
    assert_eq!(t.decide(DECIDER_A, &decided, approve).await.status, 200);
    let pending = pending_approval(&t).await;
    let tenant_b = t.create_ok(KEY_B, "b-1", &deploy_body(1, &[ALICE])).await;

    let cases = [
        (
            "superseded",
            "acme",
            ACME_SECRET,
            decided_event(&decided, "reject", BOB),
        ),
        (
            "not_an_approver",
            "acme",
            ACME_SECRET,
            decided_event(&pending, "approve", MALLORY),
        ),
        (
            "unknown_approval",
            "acme",
            ACME_SECRET,
            decided_event("apr_01JD3ZZZZZZZZZZZZZZZZZZZZZ", "approve", ALICE),
        ),
        (
            "unknown_approval",
            "acme",
            ACME_SECRET,
            decided_event("not-an-id", "approve", ALICE),
        ),
        (
            "unknown_approval",
            "acme",
            ACME_SECRET,
            decided_event(&tenant_b, "approve", ALICE),
        ),
        (
            "ignored",
            "acme",
            ACME_SECRET,
            json!({"type": "invoice.paid", "data": {"id": 1}}).to_string(),
        ),
    ];
    for (i, (outcome, source, secret, body)) in cases.iter().enumerate() {
        let event_id = format!("msg_case_{i}");
        let reply = t.deliver(source, secret, &event_id, body).await;
        assert_eq!(reply.status, 200, "{outcome}");
        assert_eq!(
            reply.json(),
            json!({"status": "processed", "outcome": outcome}),
            "case {i}"
        );
        let item = t.inbox_item(source, &event_id).await.expect("recorded");
        assert_eq!(attr_s(&item, "outcome"), *outcome);
        // A redelivery answers the original outcome.
        let again = t.deliver(source, secret, &event_id, body).await;
        assert_eq!(
            again.json(),
            json!({"status": "duplicate", "outcome": outcome}),
            "case {i}"
        );
    }
    assert_eq!(
        t.get(KEY_A, &decided).await.json()["decision"]["channel"],
        "api",
        "the first decision stands"
    );
    assert_eq!(t.get(KEY_A, &pending).await.json()["status"], "pending");
    assert_eq!(
        t.get(KEY_B, &tenant_b).await.json()["status"],
        "pending",
        "another tenant's approval is untouched"
    );
}

#[tokio::test]
async fn bad_requests_get_their_codes() {
    let t = TestApp::start().await;
    let unknown = t
        .deliver("nope", ACME_SECRET, "msg_1", r#"{"type": "ping"}"#)
        .await;
    unknown.assert_problem(404, "not_found");
    // A source name that does not decode to UTF-8 is no configured source: a problem, too.
    let undecodable = t
        .deliver("%FF", ACME_SECRET, "msg_1", r#"{"type": "ping"}"#)
        .await;
    undecodable.assert_problem(404, "not_found");

    let big = json!({"type": "ping", "data": "x".repeat(256 * 1024)}).to_string();
    let too_large = t.deliver("acme", ACME_SECRET, "msg_2", &big).await;
    too_large.assert_problem(413, "payload_too_large");

    for body in [
        "not json",
        "[]",
        r#"{"data": {}}"#,
        &decided_event("apr_x", "maybe", ALICE),
    ] {
        let reply = t.deliver("acme", ACME_SECRET, "msg_3", body).await;
        assert_eq!(reply.problem(), (400, "invalid_request".into()), "{body}");
    }
    assert_eq!(t.count_items(&t.app.config.tables.webhook_inbox).await, 0);
    let later = t
        .deliver("acme", ACME_SECRET, "msg_3", r#"{"type": "ping"}"#)
        .await;
    assert_eq!(
        later.json()["status"],
        "processed",
        "a refused delivery did not consume the id"
    );
}

#[tokio::test]
async fn webhook_deliveries_are_one_round_trip() {
    let t = TestApp::start().await;
    let id = pending_approval(&t).await;
    t.calls.take();
    let body = decided_event(&id, "approve", ALICE);
    assert_eq!(
        t.deliver("acme", ACME_SECRET, "msg_rt", &body).await.json()["status"],
        "processed"
    );
    assert_eq!(t.calls.take(), ["TransactWriteItems"], "first delivery");
    assert_eq!(
        t.deliver("acme", ACME_SECRET, "msg_rt", &body).await.json()["status"],
        "duplicate"
    );
    assert_eq!(t.calls.take(), ["TransactWriteItems"], "duplicate");
    let ping = json!({"type": "ping"}).to_string();
    assert_eq!(
        t.deliver("acme", ACME_SECRET, "msg_ping", &ping)
            .await
            .json()["status"],
        "processed"
    );
    assert_eq!(t.calls.take(), ["PutItem"], "ignored event");
    assert_eq!(
        t.deliver("acme", ACME_SECRET, "msg_x", "{}").await.status,
        400
    );
    assert!(t.calls.take().is_empty(), "an invalid event costs nothing");
}
