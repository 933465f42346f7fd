//! The approval's life told outward (docs/EVENTS.md): the audit trail derived from committed
//! state, once per transition however often the stream and the queue redeliver, and the
//! callbacks that carry it to a subscriber — through the real router, dispatcher and executor
//! against the local AWS. (What the scheduled runs add to it — expiry, re-queues — is in
//! scheduled.rs.)

use std::collections::BTreeMap;
use std::time::Duration;

use countersign_tests::receiver::CallbackReceiver;
use countersign_tests::{
    ALICE, BOB, CAROL, CreateBody, KEY_A, KEY_B, TestApp, event_types, events_of_type, eventually,
    execute_key,
};
use serde_json::{Value, json};

use crate::helpers::{CALLBACK_SECRET, deploy, subscription};

fn two_of_three(kind: &str) -> String {
    CreateBody::new(kind, &[ALICE, BOB, CAROL])
        .payload(json!({"build": 7}))
        .policy(json!({"rules": [{"name": "eng", "approvers": [ALICE, BOB, CAROL], "min_approvals": 2}]}))
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_approval_tells_its_whole_life_once_whatever_is_redelivered() {
    let t = TestApp::start_jobs(&[("JOB_VISIBILITY_TIMEOUT_SECONDS", "2")]).await;
    let id = t
        .create_ok(KEY_A, "life-1", &two_of_three("flaky_once"))
        .await;
    for approver in [ALICE, BOB] {
        t.approve(&id, approver).await;
    }
    let approval = t
        .wait_for_execution(KEY_A, &id, Duration::from_secs(60))
        .await;
    assert_eq!(approval["execution"]["status"], "succeeded");
    assert_eq!(
        approval["execution"]["attempts"], 2,
        "one transient failure, then success"
    );
    eventually("every event is recorded", || async {
        let trail = event_types(&t.trail(KEY_A, &id, 50).await);
        trail.iter().filter(|t| *t == "notification.sent").count() == 3
            && trail.iter().any(|t| t == "execution.succeeded")
    })
    .await;

    let expected = [
        "approval.created",
        "approval.vote_recorded",
        "approval.vote_recorded",
        "approval.approved",
        "execution.queued",
        "execution.attempt_started",
        "execution.attempt_ended",
        "execution.attempt_started",
        "execution.attempt_ended",
        "execution.succeeded",
    ];
    let check = |events: &[Value]| {
        let (sent, rest): (Vec<&Value>, Vec<&Value>) = events
            .iter()
            .partition(|e| e["type"] == "notification.sent");
        let rest: Vec<Value> = rest.into_iter().cloned().collect();
        assert_eq!(
            event_types(&rest),
            expected,
            "the trail, in order: {events:#?}"
        );
        assert_eq!(rest[1]["actor"]["approver"], ALICE);
        assert_eq!(rest[2]["actor"]["approver"], BOB);
        assert_eq!(rest[3]["actor"]["approver"], BOB, "the deciding vote");
        assert_eq!(rest[6]["data"]["outcome"], "retryable");
        assert_eq!(rest[6]["data"]["error"], "HTTP 503");
        assert_eq!(rest[8]["data"]["outcome"], "succeeded");
        let mut notified: Vec<&str> = sent
            .iter()
            .map(|e| e["data"]["approver"].as_str().unwrap_or_default())
            .collect();
        notified.sort_unstable();
        assert_eq!(
            notified,
            [ALICE, BOB, CAROL],
            "one notification.sent per approver"
        );
        let ids: std::collections::BTreeSet<&str> =
            events.iter().filter_map(|e| e["id"].as_str()).collect();
        assert_eq!(ids.len(), events.len(), "no event twice");
        assert!(
            events
                .iter()
                .all(|e| e["id"].as_str().is_some_and(|i| i.starts_with("evt_")))
        );
    };
    // Pages of 4, 1 and 50 tell the same trail.
    let first = t.trail(KEY_A, &id, 4).await;
    check(&first);
    assert_eq!(t.trail(KEY_A, &id, 1).await, first);
    assert_eq!(t.trail(KEY_A, &id, 50).await, first);

    // Redeliver every stream record twice: the dispatcher derives the same events and sends
    // every job again (each job message twice more); the executor's ledger dedupes the jobs.
    let changes = t.whole_stream().await;
    assert_eq!(changes.len(), 7, "create, 2 votes, 2 × (begin, end)");
    let dispatcher =
        countersign::jobs::Dispatcher::new(t.function(countersign::Function::Dispatch));
    for _ in 0..2 {
        let sent = dispatcher.dispatch(&changes).await.expect("dispatch again");
        assert_eq!(
            sent, 2,
            "the notify job (three approvers) and the execute job again"
        );
    }
    eventually("the redelivered jobs were handled", || async {
        t.queue_depth(&t.queues().queue_url).await == 0
    })
    .await;
    assert_eq!(
        t.trail(KEY_A, &id, 50).await,
        first,
        "redelivery added no event"
    );
    assert_eq!(
        t.downstream().calls(&execute_key("life-1", &id)),
        2,
        "no third call"
    );

    // Another tenant sees nothing; a cursor is bound to its approval and can't be altered.
    let other = t.get_path(KEY_B, &format!("/approvals/{id}/events")).await;
    assert_eq!(other.status, 404);
    let page = t
        .get_path(KEY_A, &format!("/approvals/{id}/events?limit=2"))
        .await
        .json();
    let cursor = page["next_cursor"]
        .as_str()
        .expect("a next page")
        .to_owned();
    let id2 = t.create_ok(KEY_A, "life-2", &two_of_three("deploy")).await;
    let mut tampered = cursor.clone().into_bytes();
    tampered[1] ^= 1;
    for (approval, cursor) in [
        (id2.as_str(), cursor.clone()),
        (id.as_str(), String::from_utf8(tampered).unwrap()),
    ] {
        let reply = t
            .get_path(
                KEY_A,
                &format!("/approvals/{approval}/events?cursor={cursor}"),
            )
            .await;
        assert_eq!(reply.status, 400);
        assert_eq!(reply.code(), "invalid_cursor");
    }
    for query in ["limit=0", "limit=101", "limit=x", "colour=red"] {
        let reply = t
            .get_path(KEY_A, &format!("/approvals/{id}/events?{query}"))
            .await;
        assert_eq!(reply.problem(), (400, "invalid_request".into()), "{query}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn callbacks_reach_a_receiver_that_fails_twice_once_per_event_each_signed() {
    let receiver = CallbackReceiver::start(CALLBACK_SECRET, 2);
    let subscriptions = subscription(
        &receiver.url,
        Some(&["approval.approved", "execution.succeeded"]),
    );
    let t = TestApp::start_jobs(&[
        ("EVENT_SUBSCRIPTIONS", &subscriptions),
        ("JOB_VISIBILITY_TIMEOUT_SECONDS", "2"),
    ])
    .await;
    let id = t.create_ok(KEY_A, "cb-1", &deploy(&[ALICE])).await;
    t.approve(&id, ALICE).await;
    t.wait_for_execution(KEY_A, &id, Duration::from_secs(60))
        .await;
    eventually("both callbacks are delivered", || async {
        let trail = event_types(&t.trail(KEY_A, &id, 100).await);
        trail.iter().filter(|t| *t == "callback.delivered").count() == 2
    })
    .await;

    let events = t.trail(KEY_A, &id, 100).await;
    let delivered = events_of_type(&events, "callback.delivered");
    let mut by_type = BTreeMap::new();
    for event in &delivered {
        by_type.insert(
            event["data"]["event_type"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            event["data"]["event_id"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        );
        // It sorts right after the event it delivered.
        let at = events
            .iter()
            .position(|e| e["id"] == event["data"]["event_id"]);
        let own = events.iter().position(|e| e["id"] == event["id"]);
        assert!(
            at.is_some() && own.is_some_and(|o| Some(o) > at),
            "{events:#?}"
        );
    }
    assert_eq!(
        by_type.keys().collect::<Vec<_>>(),
        ["approval.approved", "execution.succeeded"]
    );

    let lines = receiver.lines();
    assert!(
        lines.iter().all(|l| l.get("refused").is_none()),
        "every delivery verified: {lines:#?}"
    );
    for (kind, event_id) in &by_type {
        let deliveries: Vec<&Value> = lines
            .iter()
            .filter(|l| l["delivery"] == event_id.as_str())
            .collect();
        let answers: Vec<u64> = deliveries
            .iter()
            .filter_map(|l| l["answer"].as_u64())
            .collect();
        assert_eq!(
            answers,
            [500, 500, 204],
            "{kind}: 500 twice, then accepted once"
        );
        assert!(
            deliveries
                .iter()
                .all(|l| l["type"] == kind.as_str() && l["verified"] == true)
        );
        let handled = lines
            .iter()
            .filter(|l| l["handled"] == event_id.as_str())
            .count();
        assert_eq!(handled, 1, "{kind}: handled once");
    }
    let other_types = lines
        .iter()
        .filter_map(|l| l["type"].as_str())
        .filter(|t| !by_type.contains_key(*t))
        .count();
    assert_eq!(other_types, 0, "only the subscribed types are delivered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_callback_the_receiver_never_accepts_ends_as_callback_failed() {
    let receiver = CallbackReceiver::start(CALLBACK_SECRET, 1_000);
    let subscriptions = subscription(&receiver.url, Some(&["approval.created"]));
    let t = TestApp::start_jobs(&[
        ("EVENT_SUBSCRIPTIONS", &subscriptions),
        ("JOB_VISIBILITY_TIMEOUT_SECONDS", "1"),
        ("JOB_MAX_ATTEMPTS", "2"),
    ])
    .await;
    let id = t.create_ok(KEY_A, "cb-2", &deploy(&[ALICE])).await;
    eventually("the callback is given up", || async {
        event_types(&t.trail(KEY_A, &id, 100).await).contains(&"callback.failed".to_owned())
    })
    .await;
    let events = t.trail(KEY_A, &id, 100).await;
    let failed = events_of_type(&events, "callback.failed");
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["data"]["event_type"], "approval.created");
    assert_eq!(failed[0]["data"]["error"], "HTTP 500");
    let deliveries = receiver
        .lines()
        .iter()
        .filter(|l| l.get("delivery").is_some())
        .count();
    assert_eq!(deliveries, 2, "JOB_MAX_ATTEMPTS deliveries");
    assert!(!event_types(&events).contains(&"callback.delivered".to_owned()));
}

/// The README shows the receiver the tests run: its code block is the example's marked part.
#[test]
fn the_readme_receiver_is_the_one_the_tests_run() {
    let root = countersign_tests::workspace_root();
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let example =
        std::fs::read_to_string(root.join("examples/callback_receiver.py")).expect("example");
    let marked = example
        .split_once("# README: receive\n")
        .and_then(|(_, rest)| rest.split_once("# README: end"))
        .map(|(core, _)| core)
        .expect("the example's marked part");
    assert!(
        readme.contains(&format!("```python\n{marked}```")),
        "README.md's receiver differs from examples/callback_receiver.py's marked part"
    );
}

/// A notifier answering 401 (its credentials rotated) and a callback receiver refusing the
/// signature (the subscription's secret rotated on one side only): neither is retried (a 4xx
/// will not change), neither is lost silently — `notification.failed` and `callback.failed` are
/// in the trail, and each message goes on to the jobs DLQ, whose alarm someone watches.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_notification_or_callback_refused_by_its_receiver_is_recorded_and_reaches_the_dlq() {
    let receiver = CallbackReceiver::start("whsec_cm90YXRlZC1vbi10aGUtcmVjZWl2ZXItc2lkZS0wMTI=", 0);
    let subscriptions = subscription(&receiver.url, Some(&["approval.created"]));
    let t = TestApp::start_jobs(&[
        ("EVENT_SUBSCRIPTIONS", &subscriptions),
        ("JOB_VISIBILITY_TIMEOUT_SECONDS", "1"),
        ("JOB_MAX_ATTEMPTS", "2"),
    ])
    .await;
    t.downstream()
        .refuse_notifications(axum::http::StatusCode::UNAUTHORIZED);
    let id = t.create_ok(KEY_A, "refused-1", &deploy(&[ALICE])).await;
    eventually("both refusals are in the trail", || async {
        let types = event_types(&t.trail(KEY_A, &id, 100).await);
        types.contains(&"notification.failed".to_owned())
            && types.contains(&"callback.failed".to_owned())
    })
    .await;
    let events = t.trail(KEY_A, &id, 100).await;
    let notified = events_of_type(&events, "notification.failed");
    assert_eq!(notified.len(), 1, "{events:#?}");
    assert_eq!(notified[0]["data"]["approver"], ALICE);
    assert_eq!(notified[0]["data"]["error"], "HTTP 401");
    let called_back = events_of_type(&events, "callback.failed");
    assert_eq!(called_back.len(), 1);
    assert_eq!(called_back[0]["data"]["error"], "HTTP 400");
    assert!(!event_types(&events).contains(&"notification.sent".to_owned()));
    eventually("both messages reach the DLQ", || async {
        t.queue_depth(&t.queues().dlq_url).await >= 2
    })
    .await;
    assert_eq!(
        t.downstream().calls(&format!("{id}:notify:{ALICE}")),
        1,
        "a refusal is not retried"
    );
}

/// A stream batch holding an approval's insert and its decision (routine when dispatch is
/// behind): both changes make the same listing-index keys. DynamoDB refuses a BatchWriteItem that
/// names one key twice — the whole batch, so the shard would stall and its jobs be lost — and the
/// local stack refuses it as DynamoDB does. The dispatcher writes each key once, with the latest
/// status.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stream_batch_with_an_insert_and_its_decision_is_dispatched_and_indexed_once() {
    let t = TestApp::start_jobs(&[]).await;
    t.stop_runner().await;
    let id = t.create_ok(KEY_A, "batch-1", &deploy(&[ALICE, BOB])).await;
    t.approve(&id, ALICE).await;
    let changes = t.whole_stream().await;
    assert_eq!(changes.len(), 2, "the insert and the decision");
    let dispatcher =
        countersign::jobs::Dispatcher::new(t.function(countersign::Function::Dispatch));
    let sent = dispatcher
        .dispatch(&changes)
        .await
        .expect("one batch with both changes of the approval");
    assert_eq!(
        sent, 2,
        "the notify job (two approvers) and the execute job"
    );
    let listed = t
        .get_path(
            KEY_A,
            &format!("/approvals?approver={ALICE}&status=approved"),
        )
        .await;
    assert_eq!(
        listed.json()["approvals"][0]["id"],
        id.as_str(),
        "{}",
        listed.text()
    );
    let pending = t
        .get_path(
            KEY_A,
            &format!("/approvals?approver={ALICE}&status=pending"),
        )
        .await;
    assert_eq!(
        pending.json()["approvals"],
        json!([]),
        "indexed with its latest status"
    );
}

/// A subscription's secret rotated without a cutover: while `secret` lists the new and the old
/// one, each delivery carries a signature per secret (Standard Webhooks' space-separated
/// `v1,…`), so a receiver still on the old secret and one already on the new verify alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn during_a_rotation_a_callback_verifies_under_the_old_and_the_new_secret() {
    let new = "whsec_bmV3LWNhbGxiYWNrLXNlY3JldC0wMTIzNDU2Nzg5YWJjZGVm";
    for receiver_knows in [CALLBACK_SECRET, new] {
        let receiver = CallbackReceiver::start(receiver_knows, 0);
        let subscriptions = json!({"tenant-a": {
            "url": receiver.url, "secret": [new, CALLBACK_SECRET], "types": ["approval.created"],
        }})
        .to_string();
        let t = TestApp::start_jobs(&[("EVENT_SUBSCRIPTIONS", &subscriptions)]).await;
        let id = t.create_ok(KEY_A, "rotating", &deploy(&[ALICE])).await;
        eventually("the callback delivered", || async {
            event_types(&t.trail(KEY_A, &id, 100).await).contains(&"callback.delivered".to_owned())
        })
        .await;
        let verified = receiver
            .lines()
            .iter()
            .filter(|l| l["verified"] == json!(true))
            .count();
        assert_eq!(
            verified, 1,
            "the receiver on {receiver_knows:.12}… verified it"
        );
    }
}
