//! Review of v6, findings 7, 8 and 11: a workflow's answer through a brownout, given up after
//! its retry budget and answered again by an operator; the job that carries it holds neither
//! the token nor the decision document, so no queue or dead-letter queue ever holds the token
//! and no approval's answer outgrows a message. Through the real router, stream, queue and
//! executor, against a local AWS that answers as Step Functions and Lambda do.

use countersign_tests::workflows::{DurableCallback, WaitingStateMachine, fault};
use countersign_tests::{ALICE, CreateBody, DECIDER_A, KEY_A, TENANT_A, TestApp, eventually};
use serde_json::{Value, json};

const BOTH: (&str, &str) = ("RESUME_TYPES", "stepfunctions,lambda_durable");

fn asking(resume: Value) -> String {
    CreateBody::new("deploy", &[ALICE])
        .payload(json!({"build": 8}))
        .with("resume", resume)
        .to_string()
}

async fn resume_of(t: &TestApp, id: &str) -> Value {
    t.get(KEY_A, id).await.json()["resume"].clone()
}

/// A brownout longer than a job's attempts (here one): the answer is sent again with backoff
/// for `RESUME_RETRY_SECONDS`, not for the job's attempts, and the workflow resumes once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_brownout_longer_than_a_jobs_attempts_strands_no_workflow() {
    let t = TestApp::start_jobs(&[BOTH, ("JOB_MAX_ATTEMPTS", "1")]).await;
    let machine = WaitingStateMachine::create(None).await;
    let (execution, token) = machine.start().await;
    fault("SendTaskSuccess", "ThrottlingException", 3, &token).await;
    let id = t
        .create_approved(
            "brownout",
            &asking(json!({"type": "stepfunctions", "task_token": token})),
            ALICE,
        )
        .await;
    assert_eq!(machine.ended(&execution).await.status, "SUCCEEDED");
    eventually("the answer recorded", || async {
        resume_of(&t, &id).await["status"] == "succeeded"
    })
    .await;
    assert_eq!(
        resume_of(&t, &id).await["attempts"],
        4,
        "three throttled, then the answer"
    );
}

/// Throttled past `RESUME_RETRY_SECONDS` (the injected clock moves on): the answer ends
/// `failed` and its message goes on to the dead-letter queue — holding no token — while the
/// approval keeps the token; `POST /approvals/{id}/resume/retry` (an operator's) sends the
/// answer again, and the workflow resumes once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failed_answer_is_sent_again_by_an_operator_and_no_queue_holds_its_token() {
    let t = TestApp::start_jobs(&[BOTH, ("RESUME_RETRY_SECONDS", "60")]).await;
    let callback = DurableCallback::create(None).await;
    fault(
        "SendDurableExecutionCallbackSuccess",
        "TooManyRequestsException",
        3,
        &callback.id,
    )
    .await;
    let id = t
        .create_approved(
            "given-up",
            &asking(json!({"type": "lambda_durable", "callback_id": callback.id})),
            ALICE,
        )
        .await;
    eventually("the first answer throttled", || async {
        resume_of(&t, &id).await["attempts"].as_u64() >= Some(1)
    })
    .await;
    t.clock.advance(120);
    eventually("the answer given up", || async {
        resume_of(&t, &id).await["status"] == "failed"
    })
    .await;
    let resume = resume_of(&t, &id).await;
    assert!(
        resume["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("RESUME_RETRY_SECONDS")),
        "{resume}"
    );
    eventually("its message in the dead-letter queue", || async {
        t.queue_depth(&t.queues().dlq_url).await >= 1
    })
    .await;
    for body in t.peek(&t.queues().dlq_url).await {
        assert!(
            !body.contains(&callback.id),
            "the DLQ holds no token: {body}"
        );
    }
    let item = t
        .item(&t.app.config.tables.approvals, &format!("{TENANT_A}#{id}"))
        .await
        .expect("the approval's item");
    assert!(
        format!("{:?}", item.get("resume")).contains("token"),
        "a failed answer keeps its token, for the retry"
    );

    let retry = |key: &'static str| {
        let t = &t;
        let id = id.clone();
        async move {
            t.send(
                t.http
                    .post(t.url(&format!("/approvals/{id}/resume/retry")))
                    .bearer_auth(key),
            )
            .await
        }
    };
    retry(DECIDER_A).await.assert_problem(403, "forbidden");
    let accepted = retry(KEY_A).await;
    assert_eq!(accepted.status, 202, "{}", accepted.text());
    assert_eq!(accepted.json()["resume"]["status"], "pending");
    assert_eq!(accepted.json()["status"], "approved", "nothing else moves");
    eventually("answered again", || async {
        resume_of(&t, &id).await["status"] == "succeeded"
    })
    .await;
    let state = callback.state().await;
    assert_eq!(
        (state["status"].as_str(), state["answers_accepted"].as_u64()),
        (Some("succeeded"), Some(1)),
        "{state}"
    );
    // Succeeded: the token is gone, and there is nothing to send again.
    retry(KEY_A).await.assert_problem(409, "not_retryable");
    eventually("the retry in the trail", || async {
        let trail = t.trail(KEY_A, &id, 100).await;
        let kinds: Vec<&str> = trail.iter().filter_map(|e| e["type"].as_str()).collect();
        kinds.contains(&"resume.failed")
            && kinds.contains(&"resume.retried")
            && kinds.contains(&"resume.succeeded")
    })
    .await;
    let trail = t.trail(KEY_A, &id, 100).await;
    let retried = trail
        .iter()
        .find(|e| e["type"] == "resume.retried")
        .expect("resume.retried");
    assert_eq!(retried["actor"]["principal"], TENANT_A);
    assert_eq!(retried["data"]["generation"], 1);
}

/// The largest approval an answer can be about (every approver's vote with the longest
/// comment, the last a veto): its resume job is a few hundred bytes — the decision document is
/// made by the executor from the approval — and the document the workflow gets stays within its
/// answer's limit (a failure's cause: 32,768 bytes), whole JSON.
#[test]
fn a_resume_job_fits_a_message_whatever_its_approval_holds() {
    use countersign::domain::resume::{MAX_FAILURE_BYTES, ResumeAnswer, decision_document};
    use countersign::domain::{Approval, Approver, Channel, Decision, Outcome, Status};
    use countersign::jobs::ResumeJob;

    let create = json!({
        "action": {"type": "deploy", "payload": {"blob": "x".repeat(40_000)}},
        "approvers": (0..20).map(|i| format!("approver-{i}@example.com")).collect::<Vec<_>>(),
        "resume": {"type": "stepfunctions", "task_token": "t".repeat(2048)},
    });
    let request = countersign::domain::CreateRequest::parse(&create, |_| true).expect("a create");
    let mut approval: Approval = request.into_approval(
        countersign::domain::TenantId::parse(TENANT_A).unwrap(),
        Approver::parse("ci@acme").unwrap(),
        None,
        countersign::domain::IdempotencyKey::parse("largest").unwrap(),
        true,
        1_000,
    );
    let old = approval.clone();
    for (i, approver) in approval.approvers.clone().iter().enumerate() {
        approval.votes.push(Decision {
            outcome: Outcome::Approved,
            approver: approver.clone(),
            decided_at: 1_000 + i as i64,
            channel: Channel::Api,
            comment: Some("\u{10FFFF}".repeat(2_000)),
            webhook_event_id: None,
            key_id: None,
            signed_in: None,
            by: None,
            delegation_set_by: None,
            passkey: None,
        });
    }
    if let Some(last) = approval.votes.last_mut() {
        last.outcome = Outcome::Rejected;
    }
    approval.status = Status::Rejected;
    approval.decision = approval.votes.last().cloned();
    let job = ResumeJob::of_change(Some(&old), Some(&approval), &[]).expect("the answer's job");
    let body = job.to_body().expect("a body");
    assert!(body.len() < 1_024, "{} bytes: {body}", body.len());
    assert!(!body.contains(&"t".repeat(2048)), "no token in the job");
    let whole = decision_document(&approval)
        .expect("a document")
        .to_string();
    assert!(
        whole.len() > MAX_FAILURE_BYTES,
        "this approval's whole document is too large"
    );
    let Some(ResumeAnswer::Failure { document, .. }) = ResumeAnswer::of(&approval) else {
        panic!("a rejected answer");
    };
    assert!(document.len() <= MAX_FAILURE_BYTES);
    let parsed: Value = serde_json::from_str(&document).expect("whole JSON");
    assert_eq!(parsed["truncated"], true);
}
