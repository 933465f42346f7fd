//! Ask before you retry (SPEC "Reconciling an unknown outcome"): an attempt whose outcome is
//! unknown at a target that does not dedupe is settled by asking the target's status URL —
//! never by calling it again blindly — and every question and answer is in the trail.

use std::time::Duration;

use countersign_tests::{KEY_A, TestApp, eventually};
use serde_json::{Value, json};

const ALICE: &str = "alice@example.com";
const WAIT: Duration = Duration::from_secs(60);

async fn approved(t: &TestApp, key: &str, kind: &str) -> String {
    let body = json!({"action": {"type": kind, "payload": {}}, "approvers": [ALICE]}).to_string();
    let id = t.create_ok(KEY_A, key, &body).await;
    let reply = t
        .decide(
            KEY_A,
            &id,
            json!({"decision": "approve", "approver": ALICE}),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    id
}

/// The approval as stored, read without the app (its reads would be counted).
async fn stored_execution(t: &TestApp, id: &str) -> Value {
    let item = t
        .item(&t.app.config.tables.approvals, &format!("tenant-a#{id}"))
        .await
        .expect("the approval");
    let approval = countersign::store::items_to_approval(&item).expect("an approval");
    json!(approval.view(0))["execution"].clone()
}

async fn wait_until_ended(t: &TestApp, id: &str) -> Value {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let execution = stored_execution(t, id).await;
        if matches!(
            execution["status"].as_str(),
            Some("succeeded" | "failed" | "needs_reconciliation")
        ) {
            return execution;
        }
        assert!(std::time::Instant::now() < deadline, "{execution}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn trail_types(t: &TestApp, id: &str) -> Vec<String> {
    let reply = t
        .send(
            t.http
                .get(t.url(&format!("/approvals/{id}/events")))
                .bearer_auth(KEY_A),
        )
        .await;
    reply.json()["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| e["type"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_502_without_acting_is_not_found_and_called_again_after_acting_is_succeeded() {
    let t = TestApp::start_jobs(&[]).await;
    let before = approved(&t, "s-before", "unsafe_502_before").await;
    let done = wait_until_ended(&t, &before).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    let key = "tenant-a:s-before";
    assert_eq!(
        (t.downstream().calls(key), t.downstream().effects(key)),
        (2, 1)
    );
    assert_eq!(done["status_checks"][0]["answer"], "not_found");

    t.calls.take();
    let after = approved(&t, "s-after", "unsafe_502_after").await;
    let done = wait_until_ended(&t, &after).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(done["attempts"], 1);
    let key = "tenant-a:s-after";
    assert_eq!(
        (t.downstream().calls(key), t.downstream().effects(key)),
        (1, 1),
        "no second call"
    );
    assert_eq!(t.downstream().status_queries(key), 1);
    // Round trips: the status query adds none. Two writes per job (begin and complete; notify
    // and execute), besides create and decide, the dispatcher's batch writes (events, listing
    // index) and the local runner's own bookkeeping (PutItem: its stream position).
    eventually("the notification is recorded", || async {
        t.downstream().calls(&format!("{after}:notify:{ALICE}")) == 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let calls = t.calls.take();
    let writes: Vec<&String> = calls
        .iter()
        .filter(|c| !c.starts_with("Batch") && !matches!(c.as_str(), "Query" | "PutItem"))
        .collect();
    assert_eq!(
        writes,
        [
            "TransactWriteItems", // create
            "UpdateItem",         // decide
            "TransactWriteItems",
            "TransactWriteItems",
            "TransactWriteItems",
            "TransactWriteItems",
        ],
        "{calls:?}"
    );
    eventually("the check is in the trail", || async {
        let types = trail_types(&t, &after).await;
        let checked = types.iter().position(|t| t == "execution.status_checked");
        let succeeded = types.iter().position(|t| t == "execution.succeeded");
        checked.is_some() && checked < succeeded
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pending_twice_then_succeeded_and_a_status_url_that_is_down_goes_to_an_operator() {
    let t = TestApp::start_jobs(&[("JOB_MAX_ATTEMPTS", "3")]).await;
    let pending = approved(&t, "s-pending", "unsafe_pending").await;
    let down = approved(&t, "s-down", "unsafe_status_down").await;

    let done = wait_until_ended(&t, &pending).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    let key = "tenant-a:s-pending";
    assert_eq!(t.downstream().calls(key), 1, "called once");
    assert_eq!(t.downstream().status_queries(key), 3);
    let answers: Vec<&str> = done["status_checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter_map(|c| c["answer"].as_str())
        .collect();
    assert_eq!(answers, ["pending", "pending", "succeeded"]);

    let done = wait_until_ended(&t, &down).await;
    assert_eq!(done["status"], "needs_reconciliation", "{done}");
    let key = "tenant-a:s-down";
    assert_eq!(
        t.downstream().calls(key),
        1,
        "the action was called exactly once"
    );
    assert_eq!(
        t.downstream().status_queries(key),
        3,
        "asked once per attempt"
    );
    let error = done["last_error"].as_str().unwrap_or_default();
    assert!(error.contains("HTTP 503"), "{error}");
    eventually("every check is in the trail", || async {
        trail_types(&t, &down)
            .await
            .iter()
            .filter(|t| *t == "execution.status_checked")
            .count()
            == 3
    })
    .await;
}
