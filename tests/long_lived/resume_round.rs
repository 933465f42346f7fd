//! The long-lived runner's resume round (`long_lived.rs`): workflows that wait on approvals
//! without holding a connection, on the same process and tables after everything else. A state
//! machine's executions each wait on their task token; their approvals are created (some twice:
//! a replay), decided (some approved by two votes at once, some rejected, some cancelled), and
//! each workflow is resumed once: approved ones succeed with their decision document, the others
//! fail with their error. A durable callback is resumed alongside.

use std::time::{Duration, Instant};

use countersign_tests::local_runner::LocalRunner;
use countersign_tests::workflows::{DurableCallback, WaitingStateMachine};
use countersign_tests::{ALICE, BOB, DECIDER_A, KEY_A, decision_body};
use serde_json::{Value, json};

use crate::client::{create, decide, get, send};

/// How many of the state machine's executions wait on approvals.
const WAITING: usize = 12;

/// What becomes of the `i`th approval.
fn fate(i: usize) -> &'static str {
    match i % 4 {
        0 | 1 => "approved",
        2 => "rejected",
        _ => "cancelled",
    }
}

/// Runs the round; returns (workflows resumed, of them approved).
pub(crate) async fn resume_round(runner: &LocalRunner) -> (usize, usize) {
    let machine = WaitingStateMachine::create(None).await;
    let mut waiting = Vec::new();
    for _ in 0..WAITING {
        waiting.push(machine.start().await);
    }
    let callback = DurableCallback::create(None).await;
    let mut ids = Vec::new();
    for (i, (_, token)) in waiting.iter().enumerate() {
        let body = json!({
            "action": {"type": "agent", "payload": {"step": i}},
            "approvers": [ALICE, BOB],
            "resume": {"type": "stepfunctions", "task_token": token},
        })
        .to_string();
        let key = format!("resume-round-{i}");
        let first = send(create(runner, KEY_A, &key, &body)).await;
        assert_eq!(
            first.status,
            201,
            "{}",
            String::from_utf8_lossy(&first.body)
        );
        if i % 3 == 0 {
            let again = send(create(runner, KEY_A, &key, &body)).await;
            assert_eq!((again.status, again.replayed), (201, true));
            assert_eq!(again.body, first.body, "a replay is byte-identical");
        }
        ids.push(first.json()["id"].as_str().expect("id").to_owned());
    }
    // The durable callback's approval, approved; the same key with another callback is refused.
    let body = |callback_id: &str| {
        json!({
            "action": {"type": "agent", "payload": {"durable": true}},
            "approvers": [ALICE],
            "resume": {"type": "lambda_durable", "callback_id": callback_id},
        })
        .to_string()
    };
    let durable = send(create(
        runner,
        KEY_A,
        "resume-round-durable",
        &body(&callback.id),
    ))
    .await;
    assert_eq!(durable.status, 201);
    let reused = send(create(
        runner,
        KEY_A,
        "resume-round-durable",
        &body("b3RoZXI="),
    ))
    .await;
    assert_eq!(reused.status, 409, "another callback under the same key");
    let durable_id = durable.json()["id"].as_str().expect("id").to_owned();
    let approved = send(decide(runner, DECIDER_A, &durable_id, ALICE)).await;
    assert_eq!(approved.status, 200);

    for (i, id) in ids.iter().enumerate() {
        match fate(i) {
            // Two votes at once, for the same approver: one is recorded.
            "approved" => {
                let (a, b) = tokio::join!(
                    send(decide(runner, DECIDER_A, id, ALICE)),
                    send(decide(runner, DECIDER_A, id, ALICE)),
                );
                assert!(
                    [a.status, b.status].contains(&200),
                    "{} {}",
                    a.status,
                    b.status
                );
            }
            "rejected" => {
                let reply = send(
                    runner
                        .http
                        .post(runner.url(&format!("/approvals/{id}/decision")))
                        .bearer_auth(DECIDER_A)
                        .json(&decision_body("reject", BOB)),
                )
                .await;
                assert_eq!(reply.status, 200);
            }
            _ => {
                let reply = send(
                    runner
                        .http
                        .post(runner.url(&format!("/approvals/{id}/cancel")))
                        .bearer_auth(KEY_A)
                        .json(&json!({"reason": "not needed"})),
                )
                .await;
                assert_eq!(reply.status, 200);
            }
        }
    }

    // Every workflow ends once, as its approval did.
    for (i, ((execution, _), id)) in waiting.iter().zip(&ids).enumerate() {
        let end = machine.ended(execution).await;
        match fate(i) {
            "approved" => {
                assert_eq!(end.status, "SUCCEEDED", "{id}: {end:?}");
                let output = end.output.clone().unwrap_or(Value::Null);
                assert_eq!(output["approval_id"], id.as_str());
                assert_eq!(output["status"], "approved");
            }
            fate => {
                let error = if fate == "rejected" {
                    "Countersign.Rejected"
                } else {
                    "Countersign.Cancelled"
                };
                assert_eq!(
                    (end.status.as_str(), end.error.as_deref()),
                    ("FAILED", Some(error)),
                    "{id}"
                );
            }
        }
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    for id in ids.iter().chain([&durable_id]) {
        loop {
            let approval = send(get(runner, KEY_A, id)).await.json();
            if approval["resume"]["status"] == "succeeded" {
                assert_eq!(approval["resume"]["attempts"], 1, "{id}: answered once");
                break;
            }
            assert_ne!(approval["resume"]["status"], "failed", "{id}: {approval}");
            assert!(Instant::now() < deadline, "{id}: {approval}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    let state = callback.state().await;
    assert_eq!(
        (state["status"].as_str(), state["answers_received"].as_u64()),
        (Some("succeeded"), Some(1)),
        "{state}"
    );
    let approved = (0..WAITING).filter(|i| fate(*i) == "approved").count() + 1;
    (WAITING + 1, approved)
}
