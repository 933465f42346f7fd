//! Metrics (docs/OPERATIONS.md): what each operation writes as CloudWatch Embedded Metric
//! Format documents, read back as written, checked against EMF's rules, and counted exactly.

use std::collections::BTreeMap;
use std::time::Duration;

use axum::http::StatusCode;
use countersign::observe::{Dimension, Metric};
use countersign_tests::{
    ACME_SECRET, ALICE, BOB, DECIDER_A, KEY_A, TestApp, decided_event, decision_body, eventually,
};
use serde_json::{Value, json};

use crate::helpers::{CALLBACK_SECRET, action_body, deploy};

/// What a set of documents counted: `Name{Dimension=value,…}` (every dimension of the document,
/// sorted) → the summed count, or the number of values of a duration.
pub type Counts = BTreeMap<String, u64>;

const UNITS: &[&str] = &["Count", "Milliseconds"];

/// Checks one document against EMF's rules and Countersign's metric list; returns it parsed.
pub fn valid_document(line: &str) -> Value {
    let doc: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
    let aws = &doc["_aws"];
    let timestamp = aws["Timestamp"]
        .as_u64()
        .unwrap_or_else(|| panic!("integer ms Timestamp: {line}"));
    assert!(
        timestamp > 1_600_000_000_000,
        "a millisecond timestamp: {line}"
    );
    let directives = aws["CloudWatchMetrics"]
        .as_array()
        .expect("CloudWatchMetrics");
    assert!(!directives.is_empty(), "{line}");
    for directive in directives {
        assert_eq!(directive["Namespace"], "Countersign", "{line}");
        let metrics = directive["Metrics"].as_array().expect("Metrics");
        assert!(
            !metrics.is_empty() && metrics.len() <= 100,
            "1 to 100 metrics: {line}"
        );
        let sets = directive["Dimensions"].as_array().expect("Dimensions");
        for set in sets {
            let set = set.as_array().expect("a dimension set");
            assert!(set.len() <= 30, "at most 30 dimensions: {line}");
            for name in set {
                let name = name.as_str().expect("a dimension name");
                let value = doc[name]
                    .as_str()
                    .unwrap_or_else(|| panic!("{name}'s value: {line}"));
                assert!(!value.is_empty() && value.len() <= 1024, "{line}");
            }
        }
        for definition in metrics {
            let name = definition["Name"].as_str().expect("Name");
            let metric = Metric::ALL
                .iter()
                .find(|m| m.name() == name)
                .unwrap_or_else(|| panic!("{name} is not in the metric list"));
            let unit = definition["Unit"].as_str().expect("Unit");
            assert!(
                UNITS.contains(&unit) && unit == metric.unit().as_str(),
                "{line}"
            );
            // The document's dimensions are the metric's own and Function (Tenant when asked).
            for set in sets {
                for dimension in set.as_array().expect("a set") {
                    let dimension = dimension.as_str().unwrap_or_default();
                    assert!(
                        dimension == Dimension::Function.as_str()
                            || dimension == Dimension::Tenant.as_str()
                            || metric.dimensions().iter().any(|d| d.as_str() == dimension),
                        "{name} does not carry {dimension}: {line}"
                    );
                }
            }
            match &doc[name] {
                Value::Number(n) => assert!(n.as_u64().is_some(), "{line}"),
                Value::Array(values) => {
                    assert!(!values.is_empty() && values.len() <= 100, "{line}");
                    assert!(values.iter().all(Value::is_u64), "{line}");
                }
                other => panic!("{name}'s value {other}: {line}"),
            }
        }
    }
    doc
}

/// Validates every document and adds up what they count.
pub fn counts(lines: &[String]) -> Counts {
    let mut counts = Counts::new();
    for line in lines {
        let doc = valid_document(line);
        for directive in doc["_aws"]["CloudWatchMetrics"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let mut dimensions: Vec<String> = directive["Dimensions"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|set| set.as_array().cloned().unwrap_or_default())
                .filter_map(|d| d.as_str().map(str::to_owned))
                .collect();
            dimensions.sort();
            dimensions.dedup();
            let labels: Vec<String> = dimensions
                .iter()
                .map(|d| format!("{d}={}", doc[d].as_str().unwrap_or_default()))
                .collect();
            for definition in directive["Metrics"].as_array().into_iter().flatten() {
                let name = definition["Name"].as_str().unwrap_or_default();
                let value = match &doc[name] {
                    Value::Array(values) => values.len() as u64,
                    value => match definition["Unit"].as_str() {
                        Some("Milliseconds") => 1,
                        _ => value.as_u64().unwrap_or_default(),
                    },
                };
                *counts
                    .entry(format!("{name}{{{}}}", labels.join(",")))
                    .or_default() += value;
            }
        }
    }
    counts
}

/// Expected counts, written as `("Name", "Function=…,Dimension=…", n)` (dimensions sorted).
fn expect(rows: &[(&str, &str, u64)]) -> Counts {
    rows.iter()
        .map(|(name, labels, n)| (format!("{name}{{{labels}}}"), *n))
        .collect()
}

/// What the app wrote since the last take, counted.
fn taken(t: &TestApp) -> Counts {
    counts(&t.metrics.take())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_request_writes_what_it_did_and_nothing_else() {
    let t = TestApp::start().await;
    t.metrics.take();
    let body = deploy(&[ALICE, BOB]);

    let id = t.create_ok(KEY_A, "m-1", &body).await;
    assert_eq!(
        taken(&t),
        expect(&[(
            "ApprovalCreated",
            "ActionType=deploy,Channel=api,Function=api",
            1
        )])
    );
    let replay = t.create(KEY_A, "m-1", &body).await;
    assert!(replay.replayed());
    assert_eq!(
        taken(&t),
        expect(&[("CreateReplayed", "ActionType=deploy,Function=api", 1)])
    );
    t.create(KEY_A, "m-1", &deploy(&[ALICE]))
        .await
        .assert_problem(409, "idempotency_key_reused");
    t.create(KEY_A, "m-2", &action_body("launch", &[ALICE]))
        .await
        .assert_problem(400, "unknown_action_type");
    assert_eq!(
        taken(&t),
        expect(&[
            (
                "RequestRefused",
                "Function=api,Reason=idempotency_key_reused",
                1
            ),
            (
                "RequestRefused",
                "Function=api,Reason=unknown_action_type",
                1
            ),
        ])
    );
    // A read writes nothing.
    t.get(KEY_A, &id).await;
    assert_eq!(taken(&t), Counts::new());

    t.approve(&id, ALICE).await;
    assert_eq!(
        taken(&t),
        expect(&[("VoteCounted", "Channel=api,Function=decide", 1)])
    );
    t.decide(DECIDER_A, &id, decision_body("reject", BOB))
        .await
        .assert_problem(409, "already_decided");
    assert_eq!(
        taken(&t),
        expect(&[
            (
                "RequestRefused",
                "Function=decide,Reason=already_decided",
                1
            ),
            ("VoteRefused", "Function=decide,Reason=already_decided", 1),
        ])
    );

    // Webhooks: applied, delivered again, forged, from nowhere.
    let pending = t.create_ok(KEY_A, "m-3", &body).await;
    t.metrics.take();
    let event = decided_event(&pending, "approve", ALICE);
    assert_eq!(
        t.deliver("acme", ACME_SECRET, "msg_m1", &event)
            .await
            .status,
        200
    );
    assert_eq!(
        t.deliver("acme", ACME_SECRET, "msg_m1", &event)
            .await
            .status,
        200
    );
    let forged = "whsec_Zm9yZ2VkLXNlY3JldC0wMTIzNDU2Nzg5YWJjZGVm";
    t.deliver("acme", forged, "msg_m2", &event)
        .await
        .assert_problem(401, "invalid_signature");
    t.deliver("nope", ACME_SECRET, "msg_m3", &event)
        .await
        .assert_problem(404, "not_found");
    assert_eq!(
        taken(&t),
        expect(&[
            (
                "RequestRefused",
                "Function=webhook,Reason=invalid_signature",
                1
            ),
            ("RequestRefused", "Function=webhook,Reason=not_found", 1),
            ("VoteCounted", "Channel=webhook,Function=webhook", 1),
            ("WebhookDuplicate", "Function=webhook", 1),
            ("WebhookRefused", "Function=webhook,Reason=signature", 1),
            (
                "WebhookRefused",
                "Function=webhook,Reason=unknown_source",
                1
            ),
        ])
    );
}

/// Waits until what the app wrote, added up since `counted` began, is `expected`.
async fn counted_becomes(t: &TestApp, counted: &mut Counts, expected: &Counts) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        for (key, n) in taken(t) {
            *counted.entry(key).or_default() += n;
        }
        if counted == expected {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "counted:\n{counted:#?}\nexpected:\n{expected:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn decisions_executions_and_their_calls_are_counted_once_by_outcome() {
    let subscription =
        json!({"tenant-a": {"url": "{downstream}/flaky-once", "secret": CALLBACK_SECRET,
                              "types": ["approval.cancelled"]}})
        .to_string();
    let t = TestApp::start_jobs(&[("EVENT_SUBSCRIPTIONS", &subscription)]).await;
    let mut counted = Counts::new();

    // Approved and executed; rejected; cancelled (its one callback fails once, then is delivered).
    let approved = t.create_ok(KEY_A, "e-1", &deploy(&[ALICE])).await;
    t.approve(&approved, ALICE).await;
    let rejected = t.create_ok(KEY_A, "e-2", &deploy(&[ALICE])).await;
    t.decide(DECIDER_A, &rejected, decision_body("reject", ALICE))
        .await;
    let cancelled = t.create_ok(KEY_A, "e-3", &deploy(&[ALICE])).await;
    assert_eq!(
        t.cancel(KEY_A, &cancelled, "no longer needed").await.status,
        200
    );
    counted_becomes(
        &t,
        &mut counted,
        &expect(&[
            (
                "ApprovalCreated",
                "ActionType=deploy,Channel=api,Function=api",
                3,
            ),
            ("ApprovalDecided", "Function=dispatch,Outcome=approved", 1),
            ("ApprovalDecided", "Function=dispatch,Outcome=cancelled", 1),
            ("ApprovalDecided", "Function=dispatch,Outcome=rejected", 1),
            ("CallbackFailed", "Function=executor", 1),
            ("DecisionToEffect", "ActionType=deploy,Function=executor", 1),
            ("ExecutionAttempt", "ActionType=deploy,Function=executor", 1),
            ("ExecutionEnded", "Function=executor,Outcome=succeeded", 1),
            ("JobRetried", "Function=executor", 1),
            ("TimeToDecision", "Function=dispatch,Outcome=approved", 1),
            ("TimeToDecision", "Function=dispatch,Outcome=rejected", 1),
            ("VoteCounted", "Channel=api,Function=decide", 2),
        ]),
    )
    .await;
    eventually("the cancel's callback delivered", || async {
        t.downstream().calls_to("/flaky-once").len() == 2
    })
    .await;

    // Expired: the sweep stores it, dispatch counts the outcome.
    counted.clear();
    let expiring = json!({"action": {"type": "deploy", "payload": {}}, "approvers": [ALICE],
                          "expires_in_seconds": 60})
    .to_string();
    t.create_ok(KEY_A, "e-0", &expiring).await;
    t.clock.advance(120);
    countersign::jobs::Expirer::new(t.function(countersign::Function::Sweeper))
        .run()
        .await
        .expect("the sweep");
    counted_becomes(
        &t,
        &mut counted,
        &expect(&[
            (
                "ApprovalCreated",
                "ActionType=deploy,Channel=api,Function=api",
                1,
            ),
            ("ApprovalDecided", "Function=dispatch,Outcome=expired", 1),
            ("SweepItems", "Function=sweeper", 1),
        ]),
    )
    .await;

    // Failed (the target refuses), needs reconciliation (a target that does not dedupe never
    // answered), and unknown until the status URL said it succeeded.
    counted.clear();
    t.metrics.take();
    for (key, action) in [
        ("e-4", "reject_once"),
        ("e-5", "unsafe_hang"),
        ("e-6", "unsafe_502_after"),
    ] {
        let id = t
            .create_ok(KEY_A, key, &action_body(action, &[ALICE]))
            .await;
        t.approve(&id, ALICE).await;
    }
    counted_becomes(
        &t,
        &mut counted,
        &expect(&[
            (
                "ApprovalCreated",
                "ActionType=reject_once,Channel=api,Function=api",
                1,
            ),
            (
                "ApprovalCreated",
                "ActionType=unsafe_502_after,Channel=api,Function=api",
                1,
            ),
            (
                "ApprovalCreated",
                "ActionType=unsafe_hang,Channel=api,Function=api",
                1,
            ),
            ("ApprovalDecided", "Function=dispatch,Outcome=approved", 3),
            (
                "DecisionToEffect",
                "ActionType=reject_once,Function=executor",
                1,
            ),
            (
                "DecisionToEffect",
                "ActionType=unsafe_502_after,Function=executor",
                1,
            ),
            (
                "ExecutionAttempt",
                "ActionType=reject_once,Function=executor",
                1,
            ),
            (
                "ExecutionAttempt",
                "ActionType=unsafe_502_after,Function=executor",
                1,
            ),
            (
                "ExecutionAttempt",
                "ActionType=unsafe_hang,Function=executor",
                1,
            ),
            ("ExecutionEnded", "Function=executor,Outcome=failed", 1),
            (
                "ExecutionEnded",
                "Function=executor,Outcome=needs_reconciliation",
                1,
            ),
            ("ExecutionEnded", "Function=executor,Outcome=succeeded", 1),
            ("JobRetried", "Function=executor", 1),
            ("StatusQuery", "Function=executor,Outcome=succeeded", 1),
            ("TimeToDecision", "Function=dispatch,Outcome=approved", 3),
            ("VoteCounted", "Channel=api,Function=decide", 3),
        ]),
    )
    .await;

    // Notifications the notifier refuses: one per approver.
    counted.clear();
    t.metrics.take();
    t.downstream().refuse_notifications(StatusCode::FORBIDDEN);
    t.create_ok(KEY_A, "e-7", &deploy(&[ALICE, BOB])).await;
    counted_becomes(
        &t,
        &mut counted,
        &expect(&[
            (
                "ApprovalCreated",
                "ActionType=deploy,Channel=api,Function=api",
                1,
            ),
            ("NotificationFailed", "Function=executor", 2),
        ]),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn scheduled_runs_count_what_they_did_and_what_failed() {
    let t = TestApp::start_with(&[("JOB_VISIBILITY_TIMEOUT_SECONDS", "2")]).await;
    // Not an approval this version can read: the sweep fails it and goes on.
    t.put_unreadable_approval("apr_00000000000000000000000001", "expiry", "pending")
        .await;
    let expiring = json!({"action": {"type": "deploy", "payload": {}}, "approvers": [ALICE],
                          "expires_in_seconds": 60})
    .to_string();
    t.create_ok(KEY_A, "s-1", &expiring).await;
    t.clock.advance(120);
    t.metrics.take();
    let report = countersign::jobs::Expirer::new(t.function(countersign::Function::Sweeper))
        .run()
        .await
        .expect("the run ends");
    assert_eq!((report.expired, report.failures), (1, 1));
    assert_eq!(
        taken(&t),
        expect(&[
            ("SweepFailures", "Function=sweeper", 1),
            ("SweepItems", "Function=sweeper", 1),
        ])
    );
    // A run with nothing to do writes nothing.
    countersign::jobs::Reconciler::new(t.function(countersign::Function::Reconciler))
        .run()
        .await
        .expect("the run ends");
    assert_eq!(taken(&t), Counts::new());
}
