//! Crashes at the worst moments, injected with failpoints (the `fail` crate): the approved
//! action still has exactly one effect, and an outcome nobody can know is handed to an operator
//! instead of being reported as success. The failpoint registry is global to the process, so
//! each test holds a `FailScenario` (a global lock): they run one at a time.

use std::time::Duration;

mod github;
mod votes;

use countersign::jobs::{Dispatcher, StreamChange};
use countersign_tests::{ALICE, BOB, CreateBody, KEY_A, TestApp, eventually, execute_key};
use fail::FailScenario;
use serde_json::{Value, json};

pub(crate) const WAIT: Duration = Duration::from_secs(30);

fn body(action: &str) -> String {
    CreateBody::new(action, &[ALICE])
        .payload(json!({"n": 1}))
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn crash_after_downstream_call_yields_one_effect() {
    let scenario = FailScenario::setup();
    let t = TestApp::start_jobs(&[]).await;
    fail::cfg("execute::after_downstream", "1*panic").unwrap();
    let id = t.create_approved("crash-1", &body("deploy"), ALICE).await;

    let done = t.wait_for_execution(KEY_A, &id, WAIT).await;
    assert_eq!(done["execution"]["status"], "succeeded");
    assert_eq!(done["execution"]["attempts"], 2);
    let key = &execute_key("crash-1", &id);
    assert_eq!(
        (t.downstream().calls(key), t.downstream().effects(key)),
        (2, 1)
    );
    let calls = t.downstream().calls_to("/ok");
    assert!(
        calls.iter().all(|(k, _)| k == key),
        "the same business key on every attempt"
    );
    scenario.teardown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn crash_with_a_non_idempotent_target_needs_reconciliation() {
    let scenario = FailScenario::setup();
    let t = TestApp::start_jobs(&[]).await;
    fail::cfg("execute::after_downstream", "1*panic").unwrap();
    let id = t.create_approved("unsafe-1", &body("unsafe"), ALICE).await;

    let stuck = t.wait_for_execution(KEY_A, &id, WAIT).await;
    assert_eq!(stuck["execution"]["status"], "needs_reconciliation");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        t.downstream().calls(&execute_key("unsafe-1", &id)),
        1,
        "never called twice blindly"
    );

    let resolve = |outcome: &str| {
        t.http
            .post(t.url(&format!("/approvals/{id}/execution/resolve")))
            .bearer_auth(KEY_A)
            .json(&json!({"outcome": outcome, "note": "checked the payments ledger: charged once"}))
    };
    let resolved = t.send(resolve("succeeded")).await;
    assert_eq!(resolved.status, 200, "{}", resolved.text());
    assert_eq!(resolved.json()["execution"]["status"], "succeeded");
    assert_eq!(
        resolved.json()["execution"]["note"],
        "checked the payments ledger: charged once"
    );
    let again = t.send(resolve("failed")).await;
    again.assert_problem(409, "not_resolvable");
    let bad = t
        .post_path(
            KEY_A,
            &format!("/approvals/{id}/execution/resolve"),
            json!({"outcome": "maybe"}),
        )
        .await;
    bad.assert_problem(400, "invalid_request");
    assert_eq!(
        t.get(KEY_A, &id).await.json()["execution"]["status"],
        "succeeded"
    );
    scenario.teardown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_crash_after_dispatch_sends_duplicates_jobs_not_effects() {
    let scenario = FailScenario::setup();
    let t = TestApp::start_jobs(&[]).await;
    let id = t.create_ok(KEY_A, "dispatch-1", &body("deploy")).await;
    // Armed after the notification, so the crash hits the dispatch of the execute job.
    eventually("no notification", || async {
        t.downstream().calls(&format!("{id}:notify:{ALICE}")) > 0
    })
    .await;
    fail::cfg("dispatch::after_send", "1*panic").unwrap();
    t.approve(&id, ALICE).await;

    let done = t.wait_for_execution(KEY_A, &id, WAIT).await;
    assert_eq!(done["execution"]["status"], "succeeded");
    tokio::time::sleep(Duration::from_secs(4)).await;
    let key = &execute_key("dispatch-1", &id);
    assert_eq!(t.downstream().effects(key), 1);
    assert_eq!(
        t.downstream().calls(key),
        1,
        "the ledger stops the duplicate before any call"
    );
    assert_eq!(t.downstream().calls(&format!("{id}:notify:{ALICE}")), 1);
    scenario.teardown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_dispatch_that_crashes_after_sending_is_retried_whole() {
    // The mechanism behind the test above, observed directly: a dispatcher that dies after
    // sending leaves its jobs queued, and its retry queues them again.
    let scenario = FailScenario::setup();
    let t = TestApp::start_jobs(&[]).await;
    t.stop_runner().await;
    let id = t.create_ok(KEY_A, "dispatch-2", &body("deploy")).await;
    let item = t.approval_item(&id).await;
    let change = StreamChange {
        old: None,
        new: Some(item),
        sequence_number: "1".to_owned(),
    };
    let dispatcher = Dispatcher::new(t.function(countersign::Function::Dispatch));

    fail::cfg("dispatch::after_send", "1*panic").unwrap();
    let first = {
        let (dispatcher, change) = (dispatcher.clone(), change.clone());
        tokio::spawn(async move { dispatcher.dispatch(&[change]).await }).await
    };
    assert!(
        first.unwrap_err().is_panic(),
        "the first dispatch crashed after sending"
    );
    assert_eq!(
        dispatcher.dispatch(&[change]).await.unwrap(),
        1,
        "the retry sends the job again"
    );
    assert_eq!(
        t.queue_depth(&t.queues().queue_url).await,
        2,
        "two copies of one notify job"
    );

    t.start_runner();
    let key = format!("{id}:notify:{ALICE}");
    eventually("the queue did not drain", || async {
        t.queue_depth(&t.queues().queue_url).await == 0
    })
    .await;
    assert_eq!(
        (t.downstream().calls(&key), t.downstream().effects(&key)),
        (1, 1)
    );
    scenario.teardown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_crash_after_a_notification_repeats_it_with_the_same_key() {
    let scenario = FailScenario::setup();
    let t = TestApp::start_jobs(&[]).await;
    fail::cfg("notify::after_downstream", "1*panic").unwrap();
    let id = t.create_ok(KEY_A, "notify-crash", &body("deploy")).await;
    let key = format!("{id}:notify:{ALICE}");
    eventually("the notification was not repeated", || async {
        t.downstream().calls(&key) >= 2
    })
    .await;
    let bodies: Vec<Value> = t
        .downstream()
        .calls_to("/notify")
        .into_iter()
        .map(|(_, b)| b)
        .collect();
    assert_eq!(bodies[0]["approver"], bodies[1]["approver"]);
    assert_eq!(t.downstream().effects(&key), 1);
    scenario.teardown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_crash_during_the_last_allowed_attempt_does_not_leave_the_execution_running() {
    let scenario = FailScenario::setup();
    let t = TestApp::start_jobs(&[("JOB_MAX_ATTEMPTS", "1")]).await;
    fail::cfg("execute::after_downstream", "1*panic").unwrap();
    let id = t.create_approved("last-1", &body("deploy"), ALICE).await;

    let done = t.wait_for_execution(KEY_A, &id, WAIT).await;
    assert_eq!(done["execution"]["status"], "failed");
    assert!(
        done["execution"]["last_error"]
            .as_str()
            .unwrap()
            .contains("outcome is unknown")
    );
    assert_eq!(
        t.downstream().calls(&execute_key("last-1", &id)),
        1,
        "no attempt beyond the last allowed"
    );
    // At least one: the stream may have dispatched the job twice (at-least-once), and each copy
    // ends in the DLQ.
    eventually("the message did not reach the DLQ", || async {
        t.queue_depth(&t.queues().dlq_url).await >= 1
    })
    .await;
    // The operator resumes it with the same key (the target dedupes): one effect.
    let retry = t.send(t.retry_request(&id, None)).await;
    assert_eq!(retry.status, 202);
    fail::remove("execute::after_downstream");
    t.wait_for_approval(KEY_A, &id, WAIT, |a| {
        a["execution"]["status"] == "succeeded"
    })
    .await;
    assert_eq!(t.downstream().effects(&execute_key("last-1", &id)), 1);
    scenario.teardown();
}

/// The executor cannot start for a while (a bad deploy, throttling: here it crashes before
/// every begin): the job is received past its attempts without an attempt ever beginning.
/// Nothing was sent, so the execution is recorded `failed` ("never attempted"), not left
/// `queued`, and an operator's retry runs it — once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_that_never_began_is_failed_and_an_operator_retry_runs_it() {
    let scenario = FailScenario::setup();
    let t = TestApp::start_jobs(&[("JOB_MAX_ATTEMPTS", "1")]).await;
    fail::cfg("execute::before_begin", "panic").unwrap();
    let id = t
        .create_approved("never-began", &body("deploy"), ALICE)
        .await;

    let failed = t.wait_for_execution(KEY_A, &id, WAIT).await;
    assert_eq!(failed["execution"]["status"], "failed", "{failed}");
    assert!(
        failed["execution"]["last_error"]
            .as_str()
            .unwrap_or_default()
            .starts_with("never attempted"),
        "{failed}"
    );
    let key = &execute_key("never-began", &id);
    assert_eq!(t.downstream().calls(key), 0, "nothing was sent");

    fail::remove("execute::before_begin");
    let retry = t.send(t.retry_request(&id, None)).await;
    assert_eq!(retry.status, 202, "{}", retry.text());
    let done = t
        .wait_for_approval(KEY_A, &id, WAIT, |a| {
            a["execution"]["status"] == "succeeded"
        })
        .await;
    assert_eq!(done["execution"]["attempts"], 1);
    assert_eq!(
        (t.downstream().calls(key), t.downstream().effects(key)),
        (1, 1)
    );
    scenario.teardown();
}

/// A worker stalls after the target answered (here: 4 s at `execute::after_downstream`, past its
/// 1.5 s lease, without blocking its thread); a second runner takes the job over and completes
/// it. The stalled worker can no
/// longer record its attempt, but what it learnt is kept on the execution for an operator.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_worker_that_lost_its_attempt_keeps_what_it_learnt() {
    let scenario = FailScenario::setup();
    let t = TestApp::start_jobs(&[]).await;
    let _second = t.start_another_runner();
    fail::cfg("execute::after_downstream", "1*return(4000)").unwrap();
    let id = t
        .create_approved("lost-lease", &body("deploy"), ALICE)
        .await;

    let done = t
        .wait_for_approval(KEY_A, &id, WAIT, |a| {
            a["execution"]["status"] == "succeeded"
                && a["execution"]["late_reports"]
                    .as_array()
                    .is_some_and(|r| !r.is_empty())
        })
        .await;
    assert_eq!(done["execution"]["attempts"], 2, "{done}");
    let report = done["execution"]["late_reports"][0].as_str().unwrap();
    assert!(
        report.contains("lease was taken over") && report.ends_with(": succeeded"),
        "{report}"
    );
    let key = &execute_key("lost-lease", &id);
    assert_eq!(
        (t.downstream().calls(key), t.downstream().effects(key)),
        (2, 1)
    );
    scenario.teardown();
}

/// Ask before you retry: a worker that dies after calling a target that does not dedupe, but
/// can say what became of a key, leaves nothing for an operator — the next receive asks.
/// (An idempotent target with a status URL is asked too, instead of being called again.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_crash_at_a_target_with_a_status_url_is_settled_by_asking_it() {
    let scenario = FailScenario::setup();
    let t = TestApp::start_jobs(&[]).await;
    for (n, kind) in ["unsafe_checked", "checked"].iter().enumerate() {
        fail::cfg("execute::after_downstream", "1*panic").unwrap();
        let id = t
            .create_approved(&format!("asked-{n}"), &body(kind), ALICE)
            .await;

        let done = t.wait_for_execution(KEY_A, &id, WAIT).await;
        assert_eq!(done["execution"]["status"], "succeeded", "{kind}: {done}");
        let key = execute_key(&format!("asked-{n}"), &id);
        assert_eq!(
            (t.downstream().calls(&key), t.downstream().effects(&key)),
            (1, 1),
            "{kind}: called once, acted once"
        );
        assert_eq!(t.downstream().status_queries(&key), 1, "{kind}");
        let checks = &done["execution"]["status_checks"];
        assert_eq!(checks[0]["answer"], "succeeded", "{kind}: {done}");
    }
    scenario.teardown();
}

/// A worker stalls after a target that does not dedupe answered 502 (outcome unknown), past its
/// lease; another runner finds the attempt abandoned and hands it to an operator
/// (`needs_reconciliation`) — the very end the stalled worker then tries to write. The ledger
/// records who ended the attempt (`ended_by`), so the stalled worker does not take that end for
/// its own: what it learnt (the target's 502) is kept for the operator, who would otherwise only
/// read "the worker stopped".
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stalled_worker_never_takes_another_workers_end_for_its_own() {
    let scenario = FailScenario::setup();
    let t = TestApp::start_jobs(&[]).await;
    let _second = t.start_another_runner();
    fail::cfg("execute::after_downstream", "1*return(4000)").unwrap();
    let id = t
        .create_approved("ended-by", &body("unsafe_502"), ALICE)
        .await;

    let done = t
        .wait_for_approval(KEY_A, &id, WAIT, |a| {
            a["execution"]["status"] == "needs_reconciliation"
                && a["execution"]["late_reports"]
                    .as_array()
                    .is_some_and(|r| !r.is_empty())
        })
        .await;
    let error = done["execution"]["last_error"].as_str().unwrap_or_default();
    assert!(error.contains("the worker stopped"), "{done}");
    let report = done["execution"]["late_reports"][0].as_str().unwrap();
    assert!(
        report.contains("lease was taken over") && report.contains("HTTP 502"),
        "{report}"
    );
    assert_eq!(
        t.downstream().calls(&execute_key("ended-by", &id)),
        1,
        "never called twice blindly"
    );
    scenario.teardown();
}

/// A sweep that dies right after the write that sends a reminder, and a dispatcher that dies
/// after queueing its notifications: each approver still gets that reminder once, and the
/// sweeps after it send nothing again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reminder_survives_a_crash_between_its_write_and_its_send_and_goes_out_once() {
    let scenario = FailScenario::setup();
    let t = TestApp::start_jobs(&[("SWEEP_INTERVAL_SECONDS", "3600")]).await;
    let body = countersign_tests::CreateBody::new("deploy", &[ALICE, BOB])
        .with(
            "reminders",
            json!({"after_seconds": 60, "every_seconds": 300, "max": 1}),
        )
        .to_string();
    let id = t.create_ok(KEY_A, "remind-crash", &body).await;
    eventually("the first notifications", || async {
        t.downstream().calls(&format!("{id}:notify:{BOB}")) == 1
    })
    .await;
    fail::cfg("stall::after_write", "1*panic").unwrap();
    fail::cfg("dispatch::after_send", "1*panic").unwrap();
    t.clock.advance(61);
    let sweep = || {
        let expirer = countersign::jobs::Expirer::new(t.function(countersign::Function::Sweeper));
        async move { expirer.run().await }
    };
    let crashed = tokio::spawn(sweep()).await;
    assert!(
        crashed.unwrap_err().is_panic(),
        "the sweep died after its write"
    );
    let again = futures::future::join_all((0..5).map(|_| sweep())).await;
    let reminded: usize = again.iter().map(|r| r.as_ref().unwrap().reminded).sum();
    assert_eq!(reminded, 0, "written once: no sweep sends it again");
    let keys = [ALICE, BOB].map(|a| format!("{id}:reminder:1:{a}"));
    eventually("both are reminded", || async {
        keys.iter().all(|k| t.downstream().calls(k) >= 1)
    })
    .await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    for key in &keys {
        assert_eq!(
            (t.downstream().calls(key), t.downstream().effects(key)),
            (1, 1),
            "{key}: the crashed dispatch's retry is stopped by the ledger"
        );
    }
    scenario.teardown();
}

/// A crash after the workflow's answer, before the ledger's end: the job comes back to a token
/// that answers no more (AWS refuses a second answer), and takes that for its first answer —
/// one answer changed anything, and the approval says succeeded. One kind after the other, so
/// each job takes its crash.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_crash_after_a_workflow_s_answer_answers_nothing_twice() {
    use countersign_tests::workflows::{DurableCallback, WaitingStateMachine};
    let scenario = FailScenario::setup();
    let t = TestApp::start_jobs(&[("RESUME_TYPES", "stepfunctions,lambda_durable")]).await;
    let callback = DurableCallback::create(None).await;
    let machine = WaitingStateMachine::create(None).await;
    let (execution, token) = machine.start().await;
    let resumes = [
        json!({"type": "lambda_durable", "callback_id": callback.id}),
        json!({"type": "stepfunctions", "task_token": token}),
    ];
    let mut ids = Vec::new();
    for (n, resume) in resumes.into_iter().enumerate() {
        fail::cfg("resume::after_answer", "1*panic").unwrap();
        let body = CreateBody::new("deploy", &[ALICE])
            .with("resume", resume)
            .to_string();
        let id = t
            .create_approved(&format!("crash-resume-{n}"), &body, ALICE)
            .await;
        eventually("the answer's end is written", || async {
            t.get(KEY_A, &id).await.json()["resume"]["status"] == "succeeded"
        })
        .await;
        let trail = t.trail(KEY_A, &id, 100).await;
        let ends: Vec<&Value> = trail
            .iter()
            .filter(|e| e["type"].as_str().is_some_and(|k| k.starts_with("resume.")))
            .collect();
        assert_eq!(ends.len(), 1, "one end: {ends:?}");
        assert_eq!(ends[0]["type"], "resume.succeeded");
        // Taken from AWS's refusal of the answer after the crash, never a plain success: the
        // trail says it was not confirmed (review of v6, finding 11).
        assert_eq!(ends[0]["data"]["confirmed"], false, "{:?}", ends[0]);
        assert!(ends[0]["data"]["note"].is_string());
        ids.push(id);
    }
    let state = callback.state().await;
    assert_eq!(
        (
            state["status"].as_str(),
            state["answers_received"].as_u64(),
            state["answers_accepted"].as_u64()
        ),
        (Some("succeeded"), Some(2), Some(1)),
        "the answer again after the crash was refused and changed nothing: {state}"
    );
    let end = machine.ended(&execution).await;
    assert_eq!(end.status, "SUCCEEDED");
    assert_eq!(
        end.output.map(|o| o["approval_id"].clone()),
        Some(json!(ids[1]))
    );
    scenario.teardown();
}

/// A worker dies after SES took an email and before the ledger heard of it: the email is not
/// sent again (SES takes no key); its outcome is recorded unknown.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_crash_after_ses_took_an_email_sends_nothing_more() {
    let scenario = FailScenario::setup();
    let overrides = countersign_tests::email::email_overrides();
    let overrides: Vec<(&str, &str)> = overrides.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let t = TestApp::start_jobs(&overrides).await;
    fail::cfg("email::after_send", "1*panic").unwrap();
    let to = "crash-email@example.com";
    let id = t
        .create_ok(
            KEY_A,
            "email-crash-1",
            &CreateBody::new("deploy", &[to]).to_string(),
        )
        .await;
    let unknown = || async {
        t.trail(KEY_A, &id, 100).await.into_iter().find(|e| {
            e["type"] == "notification.failed"
                && e["actor"]["channel"] == "email"
                && e["data"]["outcome"] == "unknown"
        })
    };
    eventually("the email's outcome recorded unknown", || async {
        unknown().await.is_some()
    })
    .await;
    eventually("the queue did not drain", || async {
        t.queue_depth(&t.queues().queue_url).await == 0
    })
    .await;
    assert_eq!(
        countersign_tests::email::emails_about(&id, to).await.len(),
        1,
        "sent once, never again"
    );
    scenario.teardown();
}
