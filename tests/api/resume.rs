//! Waiting without a held connection (docs/WORKFLOWS.md): an AWS workflow paused on an approval
//! is told once how it ended — a Step Functions state machine that really waits on its task
//! token, and a Lambda durable function's callback, on the local AWS that answers as AWS does —
//! through the real router, stream, queue and executor. The token is never shown.

use std::time::Duration;

use countersign::Function;
use countersign::jobs::Expirer;
use countersign_tests::local_runner::{LocalRunner, isolated_env};
use countersign_tests::workflows::{DurableCallback, WaitingStateMachine, fault};
use countersign_tests::{
    ALICE, BOB, CreateBody, DECIDER_A, KEY_A, KEY_B, TENANT_A, TENANT_B, TOKEN_SECRET, TestApp,
    decision_body, eventually, test_api_keys,
};
use serde_json::{Value, json};

use crate::helpers::subscription;

const BOTH: (&str, &str) = ("RESUME_TYPES", "stepfunctions,lambda_durable");

fn asking(resume: Value) -> String {
    CreateBody::new("deploy", &[ALICE, BOB])
        .payload(json!({"build": 7}))
        .with("resume", resume)
        .to_string()
}

fn sfn(token: &str) -> Value {
    json!({"type": "stepfunctions", "task_token": token})
}

fn durable(callback_id: &str) -> Value {
    json!({"type": "lambda_durable", "callback_id": callback_id})
}

/// The approval once its workflow's answer ended (succeeded or failed).
async fn answered(t: &TestApp, id: &str) -> Value {
    let mut last = Value::Null;
    for _ in 0..300 {
        last = t.get(KEY_A, id).await.json();
        if last["resume"]["status"] != "pending" {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the workflow was never answered: {last}");
}

/// The callback's state once it was answered (or timed out).
async fn callback_ended(callback: &DurableCallback) -> Value {
    let mut last = Value::Null;
    for _ in 0..300 {
        last = callback.state().await;
        if last["status"] != "pending" {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the callback was never answered: {last}");
}

/// The trail's events of `kind`.
async fn events(t: &TestApp, id: &str, kind: &str) -> Vec<Value> {
    t.trail(KEY_A, id, 100)
        .await
        .into_iter()
        .filter(|e| e["type"] == kind)
        .collect()
}

/// The token shows nowhere a reader of the approval can look.
async fn nowhere(t: &TestApp, id: &str, token: &str) {
    let answer = t.get(KEY_A, id).await.text();
    let listing = t.get_path(KEY_A, "/approvals?limit=100").await.text();
    let trail = serde_json::to_string(&t.trail(KEY_A, id, 100).await).unwrap_or_default();
    for (place, text) in [("answer", answer), ("listing", listing), ("trail", trail)] {
        assert!(!text.contains(token), "the token is in the {place}");
    }
    if t.jobs.is_some() {
        for (_, body) in t.downstream().calls_to("/callback") {
            assert!(
                !body.to_string().contains(token),
                "the token is in a callback"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_resume_is_checked_at_create_and_its_token_never_shown() {
    let t = TestApp::start_jobs(&[("RESUME_TYPES", "stepfunctions")]).await;
    let refused = t
        .create(KEY_A, "resume-off", &asking(durable("Y2FsbGJhY2s=")))
        .await;
    assert_eq!(refused.status, 400, "{}", refused.text());
    assert_eq!(refused.json()["code"], "resume_not_enabled");
    for (resume, field) in [
        (sfn(""), "resume.task_token"),
        (sfn(&"t".repeat(2049)), "resume.task_token"),
        (json!({"type": "sqs", "task_token": "x"}), "resume.type"),
        (
            json!({"type": "stepfunctions", "task_token": "x", "extra": 1}),
            "resume.extra",
        ),
        (json!("token"), "resume"),
    ] {
        let reply = t.create(KEY_A, "resume-bad", &asking(resume)).await;
        assert_eq!(reply.status, 400, "{}", reply.text());
        assert_eq!(reply.json()["code"], "invalid_request");
        assert_eq!(
            reply.json()["errors"][0]["field"],
            field,
            "{}",
            reply.text()
        );
    }
    let token = "AQCEAAAAKgAAAAMAAAAAAAAAAdistinct-token-1";
    let created = t.create(KEY_A, "resume-1", &asking(sfn(token))).await;
    assert_eq!(created.status, 201, "{}", created.text());
    assert!(!created.text().contains(token));
    let id = created.json()["id"].as_str().unwrap_or_default().to_owned();
    assert_eq!(
        created.json()["resume"],
        json!({"type": "stepfunctions", "status": "pending", "attempts": 0, "last_error": null})
    );
    // The same key again: the same approval; with another token, a reused key.
    let replay = t.create(KEY_A, "resume-1", &asking(sfn(token))).await;
    assert_eq!(replay.json()["id"], id.as_str());
    let other = t.create(KEY_A, "resume-1", &asking(sfn("another"))).await;
    assert_eq!(other.status, 409);
    assert_eq!(other.json()["code"], "idempotency_key_reused");
    eventually("the trail says which kind of workflow waits", || async {
        events(&t, &id, "approval.created")
            .await
            .first()
            .is_some_and(|e| e["data"]["resume"] == "stepfunctions")
    })
    .await;
    nowhere(&t, &id, token).await;
}

/// Review of v6, finding 1: the executor may answer any token (`states:SendTask*` has no
/// resource scope), so a second approval carrying a waiting workflow's token — any requester's,
/// any tenant's — would resume someone else's workflow when it ended. A token names one
/// approval: of creates racing with one token, from two tenants and several keys, one is
/// created and the rest are 409 `resume_in_use`; the first create's replay is still its answer,
/// and the workflow is answered once, by its own approval.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_token_answers_one_approval_of_any_tenant() {
    let t = TestApp::start_jobs(&[BOTH]).await;
    let machine = WaitingStateMachine::create(None).await;
    let (execution, token) = machine.start().await;
    let callback = DurableCallback::create(None).await;
    let mut winners = Vec::new();
    for (round, resume) in [sfn(&token), durable(&callback.id)].into_iter().enumerate() {
        let body = asking(resume.clone());
        let creates = (0..8).map(|i| {
            let (api_key, tenant) = match i % 2 {
                0 => (KEY_A, TENANT_A),
                _ => (KEY_B, TENANT_B),
            };
            let (t, body, key) = (&t, body.clone(), format!("{tenant}-{round}-{i}"));
            async move {
                (
                    api_key,
                    tenant,
                    key.clone(),
                    t.create(api_key, &key, &body).await,
                )
            }
        });
        let replies = futures::future::join_all(creates).await;
        let mut created = replies.iter().filter(|(.., r)| r.status == 201);
        let (api_key, tenant, key, first) = created.next().expect("one create wins");
        assert_eq!(created.count(), 0, "one approval names the token: {resume}");
        for (.., reply) in replies.iter().filter(|(.., r)| r.status != 201) {
            reply.assert_problem(409, "resume_in_use");
            assert!(!reply.text().contains(token.as_str()), "never quoted");
        }
        // The winner's replay is its answer; a later create with the token is still refused.
        let replay = t.create(api_key, key, &body).await;
        assert_eq!(replay.status, 201, "{}", replay.text());
        assert_eq!(replay.json()["id"], first.json()["id"]);
        for other in [KEY_A, KEY_B] {
            t.create(other, &format!("later-{round}"), &body)
                .await
                .assert_problem(409, "resume_in_use");
        }
        let id = first.json()["id"].as_str().unwrap_or_default().to_owned();
        winners.push((*api_key, *tenant, key.clone(), id));
    }
    // The state machine's own approval answers it, once, and the answer names that approval.
    let (api_key, tenant, key, id) = &winners[0];
    let cancelled = t
        .send(
            t.http
                .post(t.url(&format!("/approvals/{id}/cancel")))
                .bearer_auth(api_key),
        )
        .await;
    assert_eq!(cancelled.status, 200, "{}", cancelled.text());
    let end = machine.ended(&execution).await;
    assert_eq!(
        end.error.as_deref(),
        Some("Countersign.Cancelled"),
        "{end:?}"
    );
    let cause: Value =
        serde_json::from_str(end.cause.as_deref().unwrap_or("{}")).unwrap_or_default();
    assert_eq!(cause["approval_id"], id.as_str());
    assert_eq!(cause["tenant"], *tenant);
    assert_eq!(cause["idempotency_key"], key.as_str());
    assert_eq!(cause["requested_by"], *tenant);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_approved_state_machine_resumes_once_with_the_decision_document() {
    let t = TestApp::start_jobs(&[
        BOTH,
        (
            "EVENT_SUBSCRIPTIONS",
            &subscription("{downstream}/callback", None),
        ),
    ])
    .await;
    let machine = WaitingStateMachine::create(None).await;
    let (execution, token) = machine.start().await;
    let body = CreateBody::new("deploy", &[ALICE, BOB])
        .policy(json!({"rules": [{"name": "two", "approvers": [ALICE, BOB], "min_approvals": 2}]}))
        .with("resume", sfn(&token))
        .to_string();
    let id = t.create_ok(KEY_A, "sfn-approved", &body).await;
    t.approve(&id, ALICE).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        machine.describe(&execution).await.status,
        "RUNNING",
        "one vote of two: the workflow still waits"
    );
    t.approve(&id, BOB).await;

    let end = machine.ended(&execution).await;
    assert_eq!(end.status, "SUCCEEDED", "{end:?}");
    let approval = answered(&t, &id).await;
    let output = end.output.expect("the decision document");
    assert_eq!(output["approval_id"], id.as_str());
    // What lets the workflow check that the answer is to its own request.
    assert_eq!(output["tenant"], TENANT_A);
    assert_eq!(output["idempotency_key"], "sfn-approved");
    assert_eq!(output["requested_by"], TENANT_A);
    assert_eq!(output["status"], "approved");
    assert_eq!(output["decided_at"], approval["decision"]["decided_at"]);
    let voters: Vec<&str> = output["votes"]
        .as_array()
        .map(|v| v.iter().filter_map(|v| v["approver"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(voters, [ALICE, BOB]);
    assert!(
        output["votes"]
            .as_array()
            .is_some_and(|v| v.iter().all(|v| v["vote"] == "approve"))
    );
    assert_eq!(
        approval["resume"],
        json!({"type": "stepfunctions", "status": "succeeded", "attempts": 1, "last_error": null})
    );
    let succeeded = events(&t, &id, "resume.succeeded").await;
    assert_eq!(succeeded.len(), 1, "one answer");
    assert_eq!(succeeded[0]["data"]["answer"], "success");
    assert!(
        succeeded[0]["data"]["token"]
            .as_str()
            .is_some_and(|name| name.starts_with("sha256:"))
    );
    assert!(events(&t, &id, "resume.failed").await.is_empty());
    // The callbacks went out (approved), and none carries the token.
    eventually("the approval's callbacks", || async {
        !t.downstream().calls_to("/callback").is_empty()
    })
    .await;
    nowhere(&t, &id, &token).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rejected_expired_and_cancelled_each_fail_the_workflow_once_with_their_error() {
    let t = TestApp::start_jobs(&[BOTH, ("SWEEP_INTERVAL_SECONDS", "3600")]).await;
    // Step Functions: rejected.
    let machine = WaitingStateMachine::create(None).await;
    let (execution, token) = machine.start().await;
    let rejected = t
        .create_ok(KEY_A, "sfn-rejected", &asking(sfn(&token)))
        .await;
    let reply = t
        .decide(DECIDER_A, &rejected, decision_body("reject", ALICE))
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let end = machine.ended(&execution).await;
    assert_eq!(
        (end.status.as_str(), end.error.as_deref()),
        ("FAILED", Some("Countersign.Rejected"))
    );
    let cause: Value = serde_json::from_str(end.cause.as_deref().unwrap_or("{}")).expect("JSON");
    assert_eq!(
        (cause["approval_id"].as_str(), cause["status"].as_str()),
        (Some(rejected.as_str()), Some("rejected"))
    );

    // Durable callbacks: rejected, cancelled, expired — and approved.
    let mut cases = Vec::new();
    for (key, expires) in [
        ("d-rejected", 3_600),
        ("d-cancelled", 3_600),
        ("d-expired", 60),
        ("d-approved", 3_600),
    ] {
        let callback = DurableCallback::create(None).await;
        let body = CreateBody::new("deploy", &[ALICE, BOB])
            .expires_in(expires)
            .with("resume", durable(&callback.id))
            .to_string();
        let id = t.create_ok(KEY_A, key, &body).await;
        cases.push((key, id, callback));
    }
    let reply = t
        .decide(DECIDER_A, &cases[0].1, decision_body("reject", BOB))
        .await;
    assert_eq!(reply.status, 200);
    assert_eq!(t.cancel(KEY_A, &cases[1].1, "not needed").await.status, 200);
    t.clock.advance(61);
    Expirer::new(t.function(Function::Sweeper))
        .run()
        .await
        .expect("the sweep");
    t.approve(&cases[3].1, ALICE).await;
    for ((key, id, callback), error) in cases.iter().zip([
        Some("Countersign.Rejected"),
        Some("Countersign.Cancelled"),
        Some("Countersign.Expired"),
        None,
    ]) {
        let state = callback_ended(callback).await;
        let approval = answered(&t, id).await;
        assert_eq!(
            approval["resume"]["status"], "succeeded",
            "{key}: {approval}"
        );
        assert_eq!(
            (
                state["answers_received"].as_u64(),
                state["answers_accepted"].as_u64()
            ),
            (Some(1), Some(1)),
            "{key}: {state}"
        );
        let document: Value = match error {
            Some(error) => {
                assert_eq!(state["status"], "failed", "{key}");
                assert_eq!(state["error"]["ErrorType"], error, "{key}");
                serde_json::from_str(state["error"]["ErrorData"].as_str().unwrap_or("{}"))
                    .expect("the decision document")
            }
            None => {
                assert_eq!(state["status"], "succeeded", "{key}");
                serde_json::from_str(state["result"].as_str().unwrap_or("{}"))
                    .expect("the decision document")
            }
        };
        assert_eq!(document["approval_id"], id.as_str(), "{key}");
        assert_eq!(document["status"], approval["status"], "{key}");
        assert_eq!(events(&t, id, "resume.succeeded").await.len(), 1, "{key}");
        nowhere(&t, id, &callback.id).await;
    }
    nowhere(&t, &rejected, &token).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_workflow_that_gave_up_ends_the_answer_failed_without_a_retry() {
    let t = TestApp::start_jobs(&[BOTH]).await;
    // A durable callback past its timeout, and a state machine's task past its TimeoutSeconds.
    let callback = DurableCallback::create(Some(0.2)).await;
    let machine = WaitingStateMachine::create(Some(1)).await;
    let (execution, token) = machine.start().await;
    let late = t
        .create_ok(KEY_A, "late-durable", &asking(durable(&callback.id)))
        .await;
    let late_sfn = t.create_ok(KEY_A, "late-sfn", &asking(sfn(&token))).await;
    // The workflow's own clock is AWS's: its time-outs pass in real time.
    let timed_out = machine.ended(&execution).await;
    assert_eq!(timed_out.error.as_deref(), Some("States.Timeout"));
    t.approve(&late, ALICE).await;
    t.approve(&late_sfn, ALICE).await;
    for (id, error) in [
        (&late, "CallbackTimeoutException"),
        (&late_sfn, "TaskTimedOut"),
    ] {
        let approval = answered(&t, id).await;
        assert_eq!(approval["resume"]["status"], "failed", "{approval}");
        assert_eq!(approval["resume"]["attempts"], 1);
        let why = approval["resume"]["last_error"]
            .as_str()
            .unwrap_or_default();
        assert!(
            why.contains(error) && why.contains("no longer waits"),
            "{why}"
        );
        let failed = events(&t, id, "resume.failed").await;
        assert_eq!(failed.len(), 1);
        assert!(
            failed[0]["data"]["error"]
                .as_str()
                .is_some_and(|e| e.contains(error))
        );
    }
    // Not tried again: the callback saw one answer, and still does after a visibility timeout.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let state = callback.state().await;
    assert_eq!(
        (state["status"].as_str(), state["answers_received"].as_u64()),
        (Some("timed_out"), Some(1)),
        "{state}"
    );
    nowhere(&t, &late, &callback.id).await;
    nowhere(&t, &late_sfn, &token).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn throttling_and_5xx_are_answered_again_within_the_job_s_attempts() {
    let t = TestApp::start_jobs(&[BOTH]).await;
    let callback = DurableCallback::create(None).await;
    let machine = WaitingStateMachine::create(None).await;
    let (execution, token) = machine.start().await;
    fault(
        "SendDurableExecutionCallbackSuccess",
        "TooManyRequestsException",
        1,
        &callback.id,
    )
    .await;
    fault(
        "SendDurableExecutionCallbackSuccess",
        "ServiceException",
        1,
        &callback.id,
    )
    .await;
    fault("SendTaskSuccess", "ThrottlingException", 2, &token).await;
    let by_callback = t
        .create_approved("throttled-durable", &asking(durable(&callback.id)), ALICE)
        .await;
    let by_token = t
        .create_approved("throttled-sfn", &asking(sfn(&token)), ALICE)
        .await;
    let state = callback_ended(&callback).await;
    // The refusals changed nothing; one answer was taken.
    assert_eq!(
        (state["status"].as_str(), state["answers_accepted"].as_u64()),
        (Some("succeeded"), Some(1)),
        "{state}"
    );
    assert_eq!(machine.ended(&execution).await.status, "SUCCEEDED");
    for id in [&by_callback, &by_token] {
        let approval = answered(&t, id).await;
        assert_eq!(approval["resume"]["status"], "succeeded", "{approval}");
        assert_eq!(
            approval["resume"]["attempts"], 3,
            "two refusals, then the answer"
        );
        assert_eq!(events(&t, id, "resume.succeeded").await.len(), 1);
    }
}

/// A throttled answer never reached the workflow: when the next one finds the workflow gone
/// (its callback timed out meanwhile), the answer ends `failed` — not taken for an earlier
/// answer's, since none may have landed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_throttled_answer_then_a_workflow_that_gave_up_is_failed_not_succeeded() {
    let t = TestApp::start_jobs(&[BOTH]).await;
    let callback = DurableCallback::create(Some(0.5)).await;
    fault(
        "SendDurableExecutionCallbackSuccess",
        "TooManyRequestsException",
        1,
        &callback.id,
    )
    .await;
    let id = t
        .create_approved("throttled-then-gone", &asking(durable(&callback.id)), ALICE)
        .await;
    let approval = answered(&t, &id).await;
    assert_eq!(approval["resume"]["status"], "failed", "{approval}");
    assert_eq!(approval["resume"]["attempts"], 2, "throttled, then refused");
    let why = approval["resume"]["last_error"]
        .as_str()
        .unwrap_or_default();
    assert!(why.contains("CallbackTimeoutException"), "{why}");
    assert_eq!(events(&t, &id, "resume.failed").await.len(), 1);
    assert!(events(&t, &id, "resume.succeeded").await.is_empty());
    assert_eq!(callback.state().await["status"], "timed_out");
}

/// The runner's real binary logs at debug: no line holds a token or a callback id.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_log_line_holds_a_token() {
    let prefix = format!("rs-{}", ulid::Ulid::new().to_string().to_lowercase());
    let mut env = isolated_env(&prefix).await;
    env.extend(
        [
            ("API_KEYS", test_api_keys()),
            (
                "ACTION_TARGETS",
                json!({"agent": {"executes": false}}).to_string(),
            ),
            ("RESUME_TYPES", BOTH.1.to_owned()),
            ("DECISION_TOKEN_SECRET", TOKEN_SECRET.to_owned()),
            (
                "PUBLIC_BASE_URL",
                "https://approvals.example.com".to_owned(),
            ),
            ("RUST_LOG", "debug".to_owned()),
        ]
        .map(|(k, v)| (k.to_owned(), v)),
    );
    let runner = LocalRunner::start(&env).await;
    let machine = WaitingStateMachine::create(None).await;
    let (execution, token) = machine.start().await;
    let callback = DurableCallback::create(None).await;
    let http = reqwest::Client::new();
    for (key, resume, vote) in [
        ("log-sfn", sfn(&token), "approve"),
        ("log-durable", durable(&callback.id), "reject"),
    ] {
        let body = CreateBody::new("agent", &[ALICE])
            .with("resume", resume)
            .to_string();
        let created: Value = http
            .post(runner.url("/approvals"))
            .bearer_auth(KEY_A)
            .header("content-type", "application/json")
            .header("idempotency-key", key)
            .body(body)
            .send()
            .await
            .expect("create")
            .json()
            .await
            .expect("json");
        let id = created["id"].as_str().expect("id");
        let reply = http
            .post(runner.url(&format!("/approvals/{id}/decision")))
            .bearer_auth(DECIDER_A)
            .json(&decision_body(vote, ALICE))
            .send()
            .await
            .expect("decide");
        assert_eq!(reply.status(), 200);
    }
    assert_eq!(machine.ended(&execution).await.status, "SUCCEEDED");
    assert_eq!(callback_ended(&callback).await["status"], "failed");
    for secret in [&token, &callback.id] {
        let lines = [
            runner.stdout_lines_with(secret),
            runner.stderr_lines_with(secret),
        ]
        .concat();
        assert!(lines.is_empty(), "a log line holds a token: {lines:?}");
    }
    assert!(
        !runner.stdout_lines_with("resume").is_empty()
            || !runner.stderr_lines_with("resume").is_empty(),
        "the runner logged the resume jobs at all"
    );
}
