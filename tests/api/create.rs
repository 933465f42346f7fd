//! POST /approvals: one approval per idempotency key, however often and however concurrently
//! the client retries.

use std::time::Duration;

use countersign_tests::{
    ALICE, BOB, DECIDER_A, KEY_A, TestApp, decision_body, deploy_body, execute_key,
};
use futures::future::join_all;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_creates_with_one_key_make_one_approval() {
    let t = TestApp::start().await;
    let body = deploy_body(1042, &[ALICE, BOB]);
    let replies = join_all((0..32).map(|_| t.create(KEY_A, "deploy-prod-1042", &body))).await;

    assert!(
        replies.iter().all(|r| r.status == 201),
        "statuses: {:?}",
        replies.iter().map(|r| r.status).collect::<Vec<_>>()
    );
    let first = &replies[0].body;
    assert!(replies.iter().all(|r| &r.body == first), "bodies differ");
    assert_eq!(replies.iter().filter(|r| r.replayed()).count(), 31);
    let location = replies[0].headers["location"].to_str().unwrap().to_owned();
    assert!(
        replies
            .iter()
            .all(|r| r.headers["location"] == location.as_str())
    );
    assert_eq!(t.approval_count().await, 1);
    assert_eq!(
        t.count_items(&t.app.config.tables.idempotency_keys).await,
        1
    );
}

#[tokio::test]
async fn reordered_body_replays_and_changed_body_conflicts() {
    let t = TestApp::start().await;
    let original = r#"{"action": {"type": "deploy", "payload": {"service": "api", "build": 1042}}, "approvers": ["alice@example.com"], "context": {"summary": "deploy"}}"#;
    let reordered = r#"{"context":{"summary":"deploy"},
        "approvers":["alice@example.com"],   "action":{"payload":{"build":1042,"service":"api"},"type":"deploy"}}"#;
    let changed = r#"{"action": {"type": "deploy", "payload": {"service": "api", "build": 1043}}, "approvers": ["alice@example.com"], "context": {"summary": "deploy"}}"#;

    let first = t.create(KEY_A, "k-1", original).await;
    assert_eq!(first.status, 201);
    assert!(!first.replayed());

    let replay = t.create(KEY_A, "k-1", reordered).await;
    assert_eq!(replay.status, 201);
    assert!(replay.replayed());
    assert_eq!(replay.body, first.body, "a replay is byte-identical");

    let record_before = t
        .item(&t.app.config.tables.idempotency_keys, "tenant-a#k-1")
        .await;
    let conflict = t.create(KEY_A, "k-1", changed).await;
    assert_eq!(conflict.status, 409);
    assert_eq!(conflict.code(), "idempotency_key_reused");
    assert_eq!(t.approval_count().await, 1, "nothing written");
    let record_after = t
        .item(&t.app.config.tables.idempotency_keys, "tenant-a#k-1")
        .await;
    assert_eq!(record_before, record_after, "the record is untouched");
}

#[tokio::test]
async fn expired_idempotency_record_no_longer_blocks_its_key() {
    // The shortest retention the contract allows: 24 h.
    let t = TestApp::start_with(&[("IDEMPOTENCY_TTL_SECONDS", "86400")]).await;
    let body = deploy_body(7, &[ALICE]);
    let first = t.create_ok(KEY_A, "k-expiring", &body).await;

    // Within the retention window the key replays.
    let replay = t.create(KEY_A, "k-expiring", &body).await;
    assert!(replay.replayed());
    assert_eq!(replay.json()["id"], first.as_str());

    t.clock.advance(86_401);
    let record = t
        .item(&t.app.config.tables.idempotency_keys, "tenant-a#k-expiring")
        .await;
    assert!(
        record.is_some(),
        "the expired record is still present (TTL deletes late)"
    );

    let again = t.create(KEY_A, "k-expiring", &body).await;
    assert_eq!(again.status, 201);
    assert!(!again.replayed(), "an expired record does not replay");
    let second = again.json()["id"].as_str().unwrap().to_owned();
    assert_ne!(second, first);

    // A different body after expiry is a new request too, not a conflict.
    t.clock.advance(86_401);
    let other = t
        .create(KEY_A, "k-expiring", &deploy_body(8, &[ALICE]))
        .await;
    assert_eq!(other.status, 201);
    assert!(!other.replayed());
    assert_eq!(t.approval_count().await, 3);
}

#[tokio::test]
async fn created_approval_reads_back_as_pending_with_its_location() {
    let t = TestApp::start().await;
    let created = t
        .create(KEY_A, "k-read", &deploy_body(1, &[ALICE, BOB]))
        .await;
    assert_eq!(created.status, 201);
    let id = created.json()["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("apr_"));
    assert_eq!(
        created.headers["location"],
        format!("/approvals/{id}").as_str()
    );

    let read = t.get(KEY_A, &id).await;
    assert_eq!(read.status, 200);
    let approval = read.json();
    assert_eq!(approval, created.json(), "GET shows what create answered");
    assert_eq!(approval["status"], "pending");
    assert_eq!(approval["action"]["payload"]["build"], 1);
    assert_eq!(approval["approvers"][1], BOB);
    assert_eq!(approval["idempotency_key"], "k-read");
    assert_eq!(approval["decision"], serde_json::Value::Null);
    assert_eq!(approval["execution"]["status"], "not_started");
}

/// A create key used again once its record expired makes another approval, and that approval's
/// execution is its own: the key sent downstream names the approval, so a target that dedupes
/// by it performs the second action instead of answering with the first one's stored result.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_expired_key_used_again_executes_a_second_action_at_a_deduping_target() {
    let t = TestApp::start_jobs(&[("IDEMPOTENCY_TTL_SECONDS", "86400")]).await;
    let body = deploy_body(7, &[ALICE]);
    let mut ids = Vec::new();
    for round in 0..2 {
        let id = t.create_ok(KEY_A, "k-again", &body).await;
        let decided = t
            .decide(DECIDER_A, &id, decision_body("approve", ALICE))
            .await;
        assert_eq!(decided.status, 200, "{}", decided.text());
        let done = t
            .wait_for_execution(KEY_A, &id, Duration::from_secs(60))
            .await;
        assert_eq!(done["execution"]["status"], "succeeded", "round {round}");
        ids.push(id);
        t.clock.advance(86_401);
    }
    assert_ne!(ids[0], ids[1], "the expired key made another approval");
    for id in &ids {
        let key = execute_key("k-again", id);
        assert_eq!(
            (t.downstream().calls(&key), t.downstream().effects(&key)),
            (1, 1),
            "{key}: performed once, for this approval"
        );
    }
}
