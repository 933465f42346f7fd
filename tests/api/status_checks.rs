//! Ask before you retry (docs/TARGETS.md "Ask before you retry"): an attempt whose outcome is
//! unknown at a target that does not dedupe is settled by asking the target's status URL —
//! never by calling it again blindly — and every question and answer is in the trail.

use std::time::Duration;

use countersign_tests::{ALICE, CreateBody, KEY_A, TestApp, eventually, execute_key};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(60);

async fn approved(t: &TestApp, key: &str, kind: &str) -> String {
    let body = CreateBody::new(kind, &[ALICE])
        .payload(json!({}))
        .to_string();
    t.create_approved(key, &body, ALICE).await
}

/// The approval as stored, read without the app (its reads would be counted).
async fn stored_execution(t: &TestApp, id: &str) -> Value {
    json!(t.stored_approval(id).await.view(0))["execution"].clone()
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
    let reply = t.get_path(KEY_A, &format!("/approvals/{id}/events")).await;
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
    let key = &execute_key("s-before", &before);
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
    let key = &execute_key("s-after", &after);
    assert_eq!(
        (t.downstream().calls(key), t.downstream().effects(key)),
        (1, 1),
        "no second call"
    );
    assert_eq!(t.downstream().status_queries(key), 1);
    // Round trips: the status query adds none. Two writes for the notify job (a begin, one item
    // alone, and a complete with its events); the execute job's ledger is on its approval, so
    // each of its writes is one update: its call ends in doubt, so it writes its begin and an
    // `unknown` end, and comes back after the target's status delay: a begin the ledger
    // refuses (it reads the attempt from the refusal), the query, and the end it leads to.
    // Besides create and decide, the dispatcher's batch writes (events, listing index) and the
    // local runner's own bookkeeping (PutItem: its stream position).
    eventually("the notification is recorded", || async {
        t.downstream().calls(&format!("{after}:notify:{ALICE}")) == 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let calls = t.calls.take();
    let mut writes: Vec<&str> = calls
        .iter()
        .map(String::as_str)
        .filter(|c| !c.starts_with("Batch") && !matches!(*c, "Query" | "PutItem"))
        .collect();
    // The notification runs beside the decision and the execution: in any order.
    writes.sort_unstable();
    assert_eq!(
        writes,
        [
            "TransactWriteItems", // create
            "TransactWriteItems", // the notification's complete
            "UpdateItem",         // the execution's begin, its unknown end,
            "UpdateItem",         // the begin the ledger refuses,
            "UpdateItem",         // and the end the status query leads to
            "UpdateItem",
            "UpdateItem", // decide
            "UpdateItem", // the notification's begin
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
    // The first receive calls (and its call ends in doubt); each later one asks the target.
    let t = TestApp::start_jobs(&[("JOB_MAX_ATTEMPTS", "4")]).await;
    let pending = approved(&t, "s-pending", "unsafe_pending").await;
    let down = approved(&t, "s-down", "unsafe_status_down").await;

    let done = wait_until_ended(&t, &pending).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    let key = &execute_key("s-pending", &pending);
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
    let key = &execute_key("s-down", &down);
    assert_eq!(
        t.downstream().calls(key),
        1,
        "the action was called exactly once"
    );
    assert_eq!(
        t.downstream().status_queries(key),
        3,
        "asked once per receive after the call"
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

/// Seed 002's payment: a gateway answers 504 at once while the backend still acts, and records
/// the key 3 s later. The target's `not_found` is believed only when asked its status delay (5 s
/// here) after the call ended, so the executor asks once, after the delay, hears `succeeded`,
/// and never calls again: one call, one effect.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_504_whose_backend_acts_3_s_later_is_asked_after_the_delay_one_effect() {
    let t = TestApp::start_jobs(&[]).await;
    let id = approved(&t, "s-late", "unsafe_504_acts_later").await;
    let done = wait_until_ended(&t, &id).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    let key = execute_key("s-late", &id);
    assert_eq!(
        (t.downstream().calls(&key), t.downstream().effects(&key)),
        (1, 1),
        "one call, one effect"
    );
    assert_eq!(
        t.downstream().status_queries(&key),
        1,
        "asked once, after the delay"
    );
    let asked = &done["status_checks"];
    assert_eq!(asked.as_array().map(Vec::len), Some(1), "{done}");
    assert_eq!(asked[0]["answer"], "succeeded");
    let called = t.downstream().first_arrival(&key).expect("called");
    let queried = t.downstream().first_status_query(&key).expect("asked");
    let waited = queried.duration_since(called);
    println!("504 at once, acted 3 s later: asked {waited:?} after the call");
    assert!(
        waited >= Duration::from_secs(5),
        "asked before the delay: {waited:?}"
    );
}

/// An operator's retry after `needs_reconciliation` asks first, as every automatic retry does
/// (issue 36): a target whose status now says it acted records `succeeded` without a call; one
/// that says it never took the key (`not_found`) is called, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_operator_retry_asks_the_target_before_it_calls_again() {
    let t = TestApp::start_jobs(&[("JOB_MAX_ATTEMPTS", "2")]).await;
    let acted = approved(&t, "s-op-acted", "unsafe_acted_status_later").await;
    let not_acted = approved(&t, "s-op-not-acted", "unsafe_not_acted_status_later").await;
    for id in [&acted, &not_acted] {
        let done = wait_until_ended(&t, id).await;
        assert_eq!(done["status"], "needs_reconciliation", "{done}");
    }
    let acted_key = &execute_key("s-op-acted", &acted);
    let not_acted_key = &execute_key("s-op-not-acted", &not_acted);
    assert_eq!(t.downstream().calls(acted_key), 1);
    assert_eq!(t.downstream().effects(acted_key), 1, "it acted");
    assert_eq!(t.downstream().calls(not_acted_key), 1);
    assert_eq!(t.downstream().effects(not_acted_key), 0, "it did not");
    let asked_before = t.downstream().status_queries(acted_key);

    t.downstream().bring_status_up();
    for id in [&acted, &not_acted] {
        let retried = t.send(t.retry_request(id, None)).await;
        assert_eq!(retried.status, 202, "{}", retried.text());
    }
    let done = wait_until_ended(&t, &acted).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(t.downstream().calls(acted_key), 1, "not called again");
    assert_eq!(t.downstream().effects(acted_key), 1, "one effect");
    assert_eq!(
        t.downstream().status_queries(acted_key),
        asked_before + 1,
        "asked once"
    );
    let done = wait_until_ended(&t, &not_acted).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(t.downstream().calls(not_acted_key), 2, "called once more");
    assert_eq!(t.downstream().effects(not_acted_key), 1, "one effect");
}
