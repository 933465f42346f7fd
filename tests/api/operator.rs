//! What an operator does with an execution that did not end well, and what is kept for them:
//! a refused execution resumed by a retry, an unknown outcome resolved, either request safe to
//! repeat — and the status queries and late reports recorded on an approval, bounded.

use std::time::Duration;

use countersign_tests::{ALICE, KEY_A, TestApp, execute_key};
use serde_json::json;

use crate::helpers::{WAIT, action_body, approved};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refusal_fails_for_good_and_an_operator_retry_resumes_it() {
    let t = TestApp::start_jobs(&[]).await;
    let id = t
        .create_ok(KEY_A, "reject-1", &action_body("reject_once", &[ALICE]))
        .await;
    let approved = t.approve(&id, ALICE).await;
    let failed = t.wait_for_execution(KEY_A, &id, WAIT).await;
    assert_eq!(failed["execution"]["status"], "failed");
    assert_eq!(failed["execution"]["last_error"], "HTTP 400");
    let key = &execute_key("reject-1", &id);
    assert_eq!(
        (t.downstream().calls(key), t.downstream().effects(key)),
        (1, 0)
    );

    let retry = t.send(t.retry_request(&id, None)).await;
    assert_eq!(retry.status, 202, "{}", retry.text());
    assert_eq!(retry.json()["execution"]["status"], "queued");
    let done = t
        .wait_for_approval(KEY_A, &id, WAIT, |a| {
            a["execution"]["status"] == "succeeded"
        })
        .await;
    assert_eq!(done["decision"], approved["decision"], "no second decision");
    assert_eq!(
        (t.downstream().calls(key), t.downstream().effects(key)),
        (2, 1)
    );

    let again = t.send(t.retry_request(&id, None)).await;
    again.assert_problem(409, "not_retryable");
    let other = t
        .send(
            t.http
                .post(t.url(&format!("/approvals/{id}/execution/retry")))
                .bearer_auth(countersign_tests::KEY_B),
        )
        .await;
    assert_eq!(other.status, 404, "another tenant cannot retry it");
}

/// An operator's retry or resolve repeated — the SDK retrying after a lost response, a double
/// submit — finds its own change and answers as the first did (`Idempotent-Replayed`), and
/// resumes the execution once; another request still meets the state's 409.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn operator_retry_and_resolve_are_safe_to_repeat() {
    let t = TestApp::start_jobs(&[]).await;
    let retry = |id: &str, key: &str| t.retry_request(id, Some(key));
    let id = approved(&t, "op-retry", "reject_once").await;
    let failed = t.wait_for_execution(KEY_A, &id, WAIT).await;
    assert_eq!(failed["execution"]["status"], "failed");

    let first = t.send(retry(&id, "retry-1")).await;
    assert_eq!((first.status, first.replayed()), (202, false));
    let repeat = t.send(retry(&id, "retry-1")).await;
    assert_eq!(
        (repeat.status, repeat.replayed()),
        (202, true),
        "{}",
        repeat.text()
    );
    t.wait_for_approval(KEY_A, &id, WAIT, |a| {
        a["execution"]["status"] == "succeeded"
    })
    .await;
    let late = t.send(retry(&id, "retry-1")).await;
    assert_eq!((late.status, late.replayed()), (202, true), "a late repeat");
    let other = t.send(retry(&id, "retry-2")).await;
    other.assert_problem(409, "not_retryable");
    let key = &execute_key("op-retry", &id);
    assert_eq!(
        (t.downstream().calls(key), t.downstream().effects(key)),
        (2, 1),
        "resumed once"
    );

    let unknown = approved(&t, "op-resolve", "unsafe_hang").await;
    let stuck = t.wait_for_execution(KEY_A, &unknown, WAIT).await;
    assert_eq!(stuck["execution"]["status"], "needs_reconciliation");
    let resolve = |note: &str| {
        t.http
            .post(t.url(&format!("/approvals/{unknown}/execution/resolve")))
            .bearer_auth(KEY_A)
            .json(&json!({"outcome": "succeeded", "note": note}))
    };
    let resolved = t.send(resolve("the ledger of the target shows it")).await;
    assert_eq!((resolved.status, resolved.replayed()), (200, false));
    let again = t.send(resolve("the ledger of the target shows it")).await;
    assert_eq!(
        (again.status, again.replayed()),
        (200, true),
        "{}",
        again.text()
    );
    assert_eq!(again.json()["execution"], resolved.json()["execution"]);
    let different = t.send(resolve("another story")).await;
    different.assert_problem(409, "not_resolvable");
}

/// A retry that resumed an execution which then failed again: the same request repeated (its
/// response was lost) is answered as a replay and resumes nothing — only a new request does.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_repeated_retry_never_resumes_twice() {
    let t = TestApp::start_jobs(&[("JOB_MAX_ATTEMPTS", "1")]).await;
    let retry = |id: &str, key: &str| t.retry_request(id, Some(key));
    let id = approved(&t, "retry-twice", "always_503").await;
    let key = &execute_key("retry-twice", &id);
    let failed = t.wait_for_execution(KEY_A, &id, WAIT).await;
    assert_eq!(failed["execution"]["status"], "failed", "{failed}");

    let first = t.send(retry(&id, "resume-1")).await;
    assert_eq!((first.status, first.replayed()), (202, false));
    t.wait_for_approval(KEY_A, &id, WAIT, |a| {
        a["execution"]["status"] == "failed" && t.downstream().calls(key) == 2
    })
    .await;
    let repeat = t.send(retry(&id, "resume-1")).await;
    assert_eq!(
        (repeat.status, repeat.replayed()),
        (202, true),
        "{}",
        repeat.text()
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(t.downstream().calls(key), 2, "the repeat resumed nothing");
    let approval = t.get(KEY_A, &id).await.json();
    assert_eq!(approval["execution"]["status"], "failed");

    let fresh = t.send(retry(&id, "resume-2")).await;
    assert_eq!(
        (fresh.status, fresh.replayed()),
        (202, false),
        "a new request resumes"
    );
    t.wait_for_approval(KEY_A, &id, WAIT, |a| {
        a["execution"]["status"] == "failed" && t.downstream().calls(key) == 3
    })
    .await;
    // A late duplicate of the older request (its answer was lost long ago): answered as it was,
    // and the newer generation, failed again, is not resumed by it.
    let late = t.send(retry(&id, "resume-1")).await;
    assert_eq!(
        (late.status, late.replayed()),
        (202, true),
        "{}",
        late.text()
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        t.downstream().calls(key),
        3,
        "the late duplicate resumed nothing"
    );
    let stored = t.stored_approval(&id).await;
    assert_eq!(
        (
            stored.execution.status.as_str(),
            stored.execution.generation
        ),
        ("failed", 2),
        "{stored:?}"
    );
}

/// What grows on an approval item is bounded by the writes' own conditions, so that it never
/// passes DynamoDB's 400 KB (past which every later write of it would be refused): an attempt
/// asked about 25 times keeps the first 20 status queries — every end still recorded — and 12
/// late reports keep 10.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn status_queries_and_late_reports_on_an_approval_are_bounded() {
    use countersign::domain::{Completion, StatusCheck};
    use countersign::store::{AttemptEnd, Begin, MAX_LATE_REPORTS, MAX_STATUS_CHECKS};
    let t = TestApp::start_jobs(&[]).await;
    t.stop_runner().await;
    let id = approved(&t, "bounded-1", "unsafe").await;
    let job = countersign::jobs::execute_job(&t.stored_approval(&id).await).ledger();
    let store = &t.app.store;
    let (now, now_ms) = (t.clock.now(), t.clock.now_millis());
    let began = store
        .begin_job(&job, "attempt-1", now, now_ms, now_ms + 60_000, false, None)
        .await
        .expect("begin");
    assert!(matches!(began, Begin::Started(_)), "{began:?}");
    for n in 0..25 {
        let completion = Completion::Unknown(format!("pending, asked {n} times"));
        let check = StatusCheck {
            at: now + n,
            answer: "pending".into(),
            detail: Some("d".repeat(2_000)),
        };
        let end = AttemptEnd {
            check: Some(&check),
            ..AttemptEnd::by_owner(&completion, "attempt-1")
        };
        assert!(
            store
                .end_attempt(&job, "attempt-1", &end, now + n)
                .await
                .expect("end"),
            "end {n} recorded"
        );
    }
    let execution = t.stored_approval(&id).await.execution;
    assert_eq!(execution.status_checks.len(), MAX_STATUS_CHECKS);
    assert_eq!(
        execution.last_error.as_deref(),
        Some("pending, asked 24 times")
    );
    assert!(
        execution
            .status_checks
            .iter()
            .all(|c| c.detail.as_deref().map_or(0, str::len) <= 500),
        "details are cut"
    );
    let mut kept = 0;
    for n in 0..12 {
        if store
            .record_late_report(&job, &format!("report {n}: {}", "r".repeat(5_000)))
            .await
            .expect("report")
        {
            kept += 1;
        }
    }
    let execution = t.stored_approval(&id).await.execution;
    assert_eq!(
        (kept, execution.late_reports.len()),
        (MAX_LATE_REPORTS, MAX_LATE_REPORTS)
    );
    assert!(
        execution
            .late_reports
            .iter()
            .all(|r| r.chars().count() <= 1_000)
    );
}
