//! AWS faults on the wire. moto never throttles, fails or loses a response, so the app's AWS
//! clients go through a fault-injecting proxy (`support/fault_proxy.rs`, seeded) while
//! approvals are created, replayed, decided by API and webhook, executed, and resumed by an
//! operator. Every fault class must leave the client-visible answers right (a create 201, a
//! decision 200, a webhook processed/duplicate, an operator 202 — or a 503 problem+json with
//! Retry-After, which the client retries), no 5xx but that 503, one effect per approval, and
//! every approval at its end.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use countersign::webhook::WebhookSecret;
use countersign_tests::fault_proxy::{Fault, FaultProxy, Rule};
use countersign_tests::{
    ACME_SECRET, ALICE, DECIDER_A, KEY_A, TestApp, decided_event, decision_body, execute_key,
    signed_delivery,
};
use futures::StreamExt;
use serde_json::{Value, json};

const APPROVALS: usize = 30;

/// What the API answered, by (operation, status).
type Answers = std::sync::Mutex<BTreeMap<(&'static str, u16), usize>>;

/// Sends until the answer is not a 503 (which must be a problem+json with Retry-After); any
/// other 5xx fails the test.
async fn until_served(
    answers: &Answers,
    op: &'static str,
    request: impl Fn() -> reqwest::RequestBuilder,
) -> (u16, bool, Value) {
    for _ in 0..50 {
        let response = request().send().await.expect("HTTP");
        let status = response.status().as_u16();
        let replayed = response
            .headers()
            .get("idempotent-replayed")
            .is_some_and(|v| v == "true");
        let retry_after = response.headers().get("retry-after").cloned();
        let content_type = response.headers().get("content-type").cloned();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        *answers.lock().unwrap().entry((op, status)).or_insert(0) += 1;
        if status == 503 {
            assert!(retry_after.is_some(), "503 without Retry-After: {body}");
            assert_eq!(
                content_type.as_ref().and_then(|v| v.to_str().ok()),
                Some("application/problem+json")
            );
            assert_eq!(body["code"], "unavailable");
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        }
        assert!(status < 500, "{op}: {status} {body}");
        return (status, replayed, body);
    }
    panic!("{op}: still 503 after 50 tries");
}

/// A fault proxy in front of the tests' local AWS (or whatever `AWS_ENDPOINT_URL` names).
async fn proxy(seed: u64) -> FaultProxy {
    let upstream = countersign_tests::aws_endpoint()
        .or_else(|| std::env::var("AWS_ENDPOINT_URL").ok())
        .expect("an AWS endpoint");
    FaultProxy::start(&upstream, seed).await
}

async fn scenario(name: &str, seed: u64, rules: Vec<Rule>) -> BTreeMap<(String, Fault), usize> {
    let proxy = proxy(seed).await;
    // A lease (5 s) that holds an attempt through the SDK's backoff, as a deployed one (the
    // template's 40 s and more) does: with the tests' usual 2 s, a begin or an end write slowed
    // by retries outlives the lease, and the job is taken over and its target called again.
    let t = TestApp::start_jobs_via(
        &[
            ("JOB_MAX_ATTEMPTS", "8"),
            ("JOB_VISIBILITY_TIMEOUT_SECONDS", "6"),
        ],
        Some(proxy.sdk_config().await),
    )
    .await;
    proxy.set_rules(rules);
    let answers = Answers::default();
    let secret = WebhookSecret::parse(ACME_SECRET).unwrap();
    let started = Instant::now();

    let ids: Vec<(String, &'static str, usize)> = futures::stream::iter(0..APPROVALS)
        .map(|i| {
            let (t, answers, secret) = (&t, &answers, &secret);
            async move {
                let action = if i % 5 == 4 { "reject_once" } else { "deploy" };
                let key = format!("{name}-{i}");
                let body =
                    json!({"action": {"type": action, "payload": {"i": i}}, "approvers": [ALICE]})
                        .to_string();
                let create = || {
                    t.http
                        .post(t.url("/approvals"))
                        .bearer_auth(KEY_A)
                        .header("content-type", "application/json")
                        .header("idempotency-key", &key)
                        .body(body.clone())
                };
                let (status, _, created) = until_served(answers, "create", create).await;
                assert_eq!(status, 201, "create: {created}");
                let (status, replayed, again) = until_served(answers, "create", create).await;
                assert_eq!((status, replayed), (201, true), "a replay: {again}");
                assert_eq!(again["id"], created["id"]);
                let id = created["id"].as_str().unwrap().to_owned();

                if i % 4 == 3 {
                    let event = decided_event(&id, "approve", ALICE);
                    let event_id = format!("msg_{name}_{i}");
                    let url = t.url("/webhooks/acme");
                    let deliver = || signed_delivery(&t.http, &url, secret, &event_id, &event);
                    for _ in 0..2 {
                        let (status, _, answer) = until_served(answers, "webhook", deliver).await;
                        assert_eq!(status, 200, "{answer}");
                        assert!(matches!(
                            answer["status"].as_str(),
                            Some("processed" | "duplicate")
                        ));
                        assert_eq!(answer["outcome"], "applied", "{answer}");
                    }
                } else {
                    let decide = || {
                        t.http
                            .post(t.url(&format!("/approvals/{id}/decision")))
                            .bearer_auth(DECIDER_A)
                            .json(&decision_body("approve", ALICE))
                    };
                    let (status, _, answer) = until_served(answers, "decide", decide).await;
                    assert_eq!(status, 200, "{answer}");
                }
                (id, action, i)
            }
        })
        .buffer_unordered(4)
        .collect()
        .await;

    let answered_in = started.elapsed();

    // Every execution ends; the refused ones are resumed by an operator (retried on 503 with
    // the same Idempotency-Key), then succeed.
    let deadline = Instant::now() + Duration::from_secs(180);
    let mut resumed = std::collections::HashSet::new();
    loop {
        let mut left = 0;
        for (id, _, _) in &ids {
            let read = || {
                t.http
                    .get(t.url(&format!("/approvals/{id}")))
                    .bearer_auth(KEY_A)
            };
            let (_, _, approval) = until_served(&answers, "get", read).await;
            match approval["execution"]["status"].as_str() {
                Some("succeeded") => {}
                Some("failed") if !resumed.contains(id) => {
                    let key = format!("resume-{id}");
                    let retry = || t.retry_request(id, Some(&key));
                    let (status, _, answer) = until_served(&answers, "retry", retry).await;
                    assert_eq!(status, 202, "{answer}");
                    resumed.insert(id.clone());
                    left += 1;
                }
                Some("needs_reconciliation") => panic!("{approval}"),
                _ => left += 1,
            }
        }
        if left == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{left} approvals not at their end"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let injected = proxy.injected();
    proxy.set_rules(Vec::new());

    let mut calls = 0;
    for (id, action, i) in &ids {
        let key = execute_key(&format!("{name}-{i}"), id);
        assert_eq!(t.downstream().effects(&key), 1, "{key}: one effect");
        calls += t.downstream().calls(&key);
        if resumed.contains(id) != (*action == "reject_once") {
            let approval = t.get(KEY_A, id).await.json();
            panic!("{key}: resumed by an operator exactly when its target refused it: {approval}");
        }
    }
    println!(
        "{name} (seed {seed}): {} faults injected in {:.1} s (requests answered in {:.1} s): \
         {injected:?}\n  answers: {:?}\n  \
         {APPROVALS} approvals, all succeeded with one effect each; {calls} calls downstream \
         ({} expected without faults)",
        injected.values().sum::<usize>(),
        started.elapsed().as_secs_f64(),
        answered_in.as_secs_f64(),
        answers.lock().unwrap(),
        APPROVALS + APPROVALS / 5,
    );
    injected
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn responses_lost_after_the_write_applied_change_no_answer() {
    // Operations with few requests get a higher rate, so that each is hit in every run (the
    // seed fixes the draws, not the order concurrent requests arrive in).
    let lost = |operation, probability| Rule {
        operation,
        fault: Fault::LostAfterApplied,
        probability,
    };
    let injected = scenario(
        "lost",
        7,
        vec![lost("SendMessageBatch", 0.5), lost("*", 0.15)],
    )
    .await;
    let total: usize = injected.values().sum();
    assert!(total >= 40, "only {total} faults injected");
    for op in ["TransactWriteItems", "SendMessageBatch"] {
        assert!(
            injected.keys().any(|(o, _)| o == op),
            "no lost response for {op}: {injected:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn throttling_and_server_errors_are_retried_with_backoff() {
    let injected = scenario(
        "throttled",
        11,
        vec![
            Rule {
                operation: "*",
                fault: Fault::Throttled,
                probability: 0.1,
            },
            Rule {
                operation: "*",
                fault: Fault::ServerError,
                probability: 0.1,
            },
        ],
    )
    .await;
    let total: usize = injected.values().sum();
    assert!(total >= 70, "only {total} faults injected");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn transaction_conflicts_are_retried() {
    let injected = scenario(
        "conflict",
        13,
        vec![Rule {
            operation: "TransactWriteItems",
            fault: Fault::TransactionConflict,
            probability: 0.4,
        }],
    )
    .await;
    let total: usize = injected.values().sum();
    assert!(total >= 50, "only {total} faults injected");
}

/// Throttled beyond the SDK's retries: the API answers 503 problem+json with Retry-After, writes
/// nothing, and the same request succeeds once the store answers again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_store_throttled_beyond_retries_is_a_503_to_retry() {
    let proxy = proxy(3).await;
    let t = TestApp::start_jobs_via(&[], Some(proxy.sdk_config().await)).await;
    proxy.set_rules(vec![Rule {
        operation: "TransactWriteItems",
        fault: Fault::Throttled,
        probability: 1.0,
    }]);
    let body =
        json!({"action": {"type": "deploy", "payload": {}}, "approvers": [ALICE]}).to_string();
    let refused = t
        .send_any(
            t.http
                .post(t.url("/approvals"))
                .bearer_auth(KEY_A)
                .header("content-type", "application/json")
                .header("idempotency-key", "throttled-1")
                .body(body.clone()),
        )
        .await;
    assert_eq!(refused.status, 503, "{}", refused.text());
    assert_eq!(refused.code(), "unavailable");
    assert_eq!(refused.headers.get("retry-after").unwrap(), "1");
    assert!(
        !refused.text().contains("Throttling"),
        "no SDK message: {}",
        refused.text()
    );
    assert_eq!(t.approval_count().await, 0);
    println!("injected: {:?}", proxy.injected());
    proxy.set_rules(Vec::new());
    let created = t.create(KEY_A, "throttled-1", &body).await;
    assert_eq!(created.status, 201);
}

/// After the call, the target's answer exists only in the worker until its end is written: a
/// store that refuses that write for a while (throttled beyond the SDK's three tries) must not
/// send the job round again — here the refusal would turn into a success on a second call.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_attempts_end_is_written_through_a_throttled_store() {
    let proxy = proxy(5).await;
    // A lease (9 s) long enough for the SDK's retries of several tries of the write.
    let t = TestApp::start_jobs_via(
        &[("JOB_VISIBILITY_TIMEOUT_SECONDS", "10")],
        Some(proxy.sdk_config().await),
    )
    .await;
    let body = json!({"action": {"type": "slow_reject_once", "payload": {}}, "approvers": [ALICE]})
        .to_string();
    let id = t.create_ok(KEY_A, "end-write-1", &body).await;
    // The approver's notification is a job too: its attempt ends before the test begins.
    let ledger = &t.app.config.tables.execution_ledger;
    countersign_tests::eventually("the notification's end written", || async {
        t.item(ledger, &format!("{id}#notify"))
            .await
            .is_some_and(|item| countersign_tests::attr_s(&item, "status") == "succeeded")
    })
    .await;
    let decided = t
        .decide(DECIDER_A, &id, decision_body("approve", ALICE))
        .await;
    assert_eq!(decided.status, 200, "{}", decided.text());

    // The call is in flight (its answer comes a second later): from now on, every update (the
    // end is one write of the approval, which carries its execution's ledger) is throttled,
    // until the worker's first write of the end has used up the SDK's tries.
    let key = &execute_key("end-write-1", &id);
    let began = Instant::now();
    while t.downstream().calls(key) == 0 {
        assert!(began.elapsed() < Duration::from_secs(20), "never called");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    proxy.set_rules(vec![Rule {
        operation: "UpdateItem",
        fault: Fault::Throttled,
        probability: 1.0,
    }]);
    let throttled = || {
        proxy
            .injected()
            .get(&("UpdateItem".to_owned(), Fault::Throttled))
            .copied()
            .unwrap_or(0)
    };
    while throttled() < 3 {
        assert!(began.elapsed() < Duration::from_secs(20), "no end written");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    proxy.set_rules(Vec::new());

    let done = t
        .wait_for_execution(KEY_A, &id, Duration::from_secs(30))
        .await;
    assert_eq!(done["execution"]["status"], "failed", "{done}");
    assert_eq!(done["execution"]["attempts"], 1, "{done}");
    assert_eq!(t.downstream().calls(key), 1, "the target was called once");
    println!("throttled updates: {}", throttled());
}
