//! The scheduled runs (docs/EVENTS.md): the sweeper stores an approval nobody reads as
//! expired and tells the subscriber; the reconciler re-queues an execution whose job was lost,
//! and hands one it cannot run to an operator; an item neither can read stops neither.

use std::time::Duration;

use countersign_tests::receiver::CallbackReceiver;
use countersign_tests::{
    ALICE, DECIDER_A, KEY_A, TestApp, decision_body, event_types, eventually, execute_key,
};
use serde_json::{Value, json};

use crate::helpers::{CALLBACK_SECRET, deploy, subscription};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_sweeper_expires_an_approval_nobody_reads_and_tells_the_subscriber() {
    let receiver = CallbackReceiver::start(CALLBACK_SECRET, 0);
    let subscriptions = subscription(&receiver.url, Some(&["approval.expired"]));
    let t = TestApp::start_jobs(&[
        ("EVENT_SUBSCRIPTIONS", &subscriptions),
        ("SWEEP_INTERVAL_SECONDS", "1"),
    ])
    .await;
    let body = json!({"action": {"type": "deploy", "payload": {}}, "approvers": [ALICE],
                      "expires_in_seconds": 60})
    .to_string();
    let id = t.create_ok(KEY_A, "exp-1", &body).await;
    let other = t.create_ok(KEY_A, "exp-2", &deploy(&[ALICE])).await;
    let pk = format!("tenant-a#{id}");
    let stored_status = || async {
        t.item(&t.app.config.tables.approvals, &pk)
            .await
            .map(|item| countersign_tests::attr_s(&item, "status").to_owned())
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        stored_status().await.as_deref(),
        Some("pending"),
        "not due yet"
    );

    t.clock.advance(61);
    eventually("the stored status becomes expired", || async {
        stored_status().await.as_deref() == Some("expired")
    })
    .await;
    eventually("approval.expired is delivered", || async {
        receiver
            .lines()
            .iter()
            .any(|l| l["type"] == "approval.expired" && l["answer"] == 204)
    })
    .await;
    assert_eq!(
        t.requests.count("GET", &format!("/approvals/{id}")),
        0,
        "nobody read it"
    );
    let deliveries: Vec<Value> = receiver
        .lines()
        .into_iter()
        .filter(|l| l.get("delivery").is_some())
        .collect();
    assert_eq!(deliveries.len(), 1, "{deliveries:#?}");
    assert_eq!(deliveries[0]["verified"], true);
    let item = t
        .item(&t.app.config.tables.approvals, &pk)
        .await
        .expect("item");
    assert!(
        !item.contains_key("due_kind"),
        "nothing is due on an expired approval"
    );

    let events = t.trail(KEY_A, &id, 50).await;
    assert_eq!(
        event_types(&events),
        [
            "approval.created",
            "notification.sent",
            "approval.expired",
            "callback.delivered"
        ]
    );
    let reply = t
        .decide(DECIDER_A, &id, decision_body("approve", ALICE))
        .await;
    reply.assert_problem(410, "approval_expired");
    let other = t.get(KEY_A, &other).await.json();
    assert_eq!(
        other["status"], "pending",
        "one not past its expiry stays pending"
    );
}

/// A runner whose dispatcher sends every job to a queue nobody reads: jobs lost.
async fn runner_that_loses_jobs(t: &TestApp) -> (countersign::runner::Pollers, String) {
    let sqs = aws_sdk_sqs::Client::new(&t.sdk);
    let lost = countersign::runner::ensure_queues(
        &sqs,
        &format!("lost-{}", ulid::Ulid::new().to_string().to_lowercase()),
        1,
        2,
    )
    .await
    .expect("a queue");
    let mut config = t.app.config.clone();
    config.jobs_queue_url = Some(lost.queue_url.clone());
    let losing = countersign::App::new(
        config,
        aws_sdk_dynamodb::Client::new(&t.sdk),
        sqs.clone(),
        t.clock.clone(),
    );
    // The fault is the dispatcher: it sends as the deployer, to a queue outside the stack
    // (the dispatch role could not); everything else runs as deployed.
    let pollers = countersign::runner::Pollers::start_with(
        &t.functions,
        t.app.store.clone(),
        countersign::jobs::Dispatcher::new(losing),
    )
    .expect("the runner's configuration");
    (pollers, lost.queue_url)
}

fn stuck_env() -> [(&'static str, &'static str); 3] {
    // The stuck bound is the job's whole retry budget: 1 s × (2 + 3) = 5 s.
    [
        ("JOB_VISIBILITY_TIMEOUT_SECONDS", "1"),
        ("JOB_MAX_ATTEMPTS", "2"),
        ("SWEEP_INTERVAL_SECONDS", "1"),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_execute_job_lost_from_the_queue_is_requeued_and_runs_once() {
    let t = TestApp::start_jobs(&stuck_env()).await;
    assert_eq!(t.app.config.stuck_execution_seconds, 5);
    t.stop_runner().await;
    let (losing, lost_queue) = runner_that_loses_jobs(&t).await;
    let id = t.create_ok(KEY_A, "stuck-1", &deploy(&[ALICE])).await;
    t.approve(&id, ALICE).await;
    eventually("the notify and execute jobs are sent", || async {
        t.queue_depth(&lost_queue).await == 2
    })
    .await;
    // Dropped: the test deletes them from the queue.
    aws_sdk_sqs::Client::new(&t.sdk)
        .purge_queue()
        .queue_url(&lost_queue)
        .send()
        .await
        .expect("purge");
    drop(losing);
    let approved_at = std::time::Instant::now();
    t.start_runner();
    let approval = t
        .wait_for_execution(KEY_A, &id, Duration::from_secs(60))
        .await;
    let took = approved_at.elapsed();
    println!("lost execute job re-queued and executed after {took:?} (bound 5 s + a 1 s period)");
    assert_eq!(approval["execution"]["status"], "succeeded");
    assert!(
        took < Duration::from_secs(15),
        "within the bound (5 s) and a period: {took:?}"
    );
    assert_eq!(
        t.downstream().calls(&execute_key("stuck-1", &id)),
        1,
        "executed once"
    );
    let events = t.trail(KEY_A, &id, 50).await;
    let requeued: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "execution.queued" && e["actor"]["channel"] == "reconciler")
        .collect();
    assert_eq!(requeued.len(), 1, "{events:#?}");
    tokio::time::sleep(Duration::from_secs(7)).await;
    assert_eq!(
        t.downstream().calls(&execute_key("stuck-1", &id)),
        1,
        "and never again"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_execution_whose_job_keeps_getting_lost_ends_failed_and_an_operator_resumes_it() {
    let t = TestApp::start_jobs(&stuck_env()).await;
    t.stop_runner().await;
    let (losing, _lost_queue) = runner_that_loses_jobs(&t).await;
    let id = t.create_ok(KEY_A, "stuck-2", &deploy(&[ALICE])).await;
    t.approve(&id, ALICE).await;
    let approval = t
        .wait_for_execution(KEY_A, &id, Duration::from_secs(60))
        .await;
    assert_eq!(approval["execution"]["status"], "failed");
    let error = approval["execution"]["last_error"]
        .as_str()
        .unwrap_or_default();
    assert!(error.starts_with("never attempted"), "{error}");
    eventually("the failure is in the trail", || async {
        event_types(&t.trail(KEY_A, &id, 50).await)
            .last()
            .map(String::as_str)
            == Some("execution.failed")
    })
    .await;
    let events = t.trail(KEY_A, &id, 50).await;
    let requeues = events
        .iter()
        .filter(|e| e["actor"]["channel"] == "reconciler")
        .count();
    assert_eq!(requeues as u32, countersign::jobs::REQUEUE_LIMIT);
    // Resumed while jobs are still lost: the new generation has a re-queue budget of its own
    // (the reconciler re-queues it, rather than ending it at once as out of re-queues).
    let reply = t.send(t.retry_request(&id, Some("resume-1"))).await;
    assert_eq!(reply.status, 202, "{}", reply.text());
    eventually("the resumed generation is re-queued", || async {
        t.trail(KEY_A, &id, 100)
            .await
            .iter()
            .any(|e| e["actor"]["channel"] == "reconciler" && e["data"]["generation"] == 1)
    })
    .await;
    drop(losing);
    t.start_runner();
    let approval = t
        .wait_for_approval(KEY_A, &id, Duration::from_secs(30), |a| {
            a["execution"]["status"] == "succeeded"
        })
        .await;
    assert_eq!(approval["status"], "approved");
    assert_eq!(
        t.downstream().calls(&execute_key("stuck-2", &id)),
        1,
        "executed once"
    );
}

/// An approval item this version cannot read (written by hand here, as a botched migration or a
/// later version could leave one) is a candidate of both scheduled runs, found first: each run
/// counts it as a failure, logs it, and handles every other candidate all the same — and the
/// run's answer is an error, which the template's alarm on the function's errors sees.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_unreadable_approval_never_stops_the_sweeper_or_the_reconciler() {
    use aws_sdk_dynamodb::types::AttributeValue;
    let t = TestApp::start_with(&[
        ("JOB_VISIBILITY_TIMEOUT_SECONDS", "2"),
        ("STUCK_EXECUTION_SECONDS", "60"),
    ])
    .await;
    for (id, due_kind, status) in [
        ("apr_00000000000000000000000001", "expiry", "pending"),
        ("apr_00000000000000000000000002", "execution", "approved"),
    ] {
        t.put_unreadable_approval(id, due_kind, status).await;
    }
    let expiring = json!({"action": {"type": "deploy", "payload": {}}, "approvers": [ALICE],
                          "expires_in_seconds": 60})
    .to_string();
    let pending = t.create_ok(KEY_A, "sweep-pending", &expiring).await;
    let approved = t.create_ok(KEY_A, "sweep-stuck", &deploy(&[ALICE])).await;
    t.approve(&approved, ALICE).await;
    t.clock.advance(120);

    let expired = countersign::jobs::Expirer::new(t.function(countersign::Function::Sweeper))
        .run()
        .await
        .expect("the expirer's run ends");
    let reconciled =
        countersign::jobs::Reconciler::new(t.function(countersign::Function::Reconciler))
            .run()
            .await
            .expect("the reconciler's run ends");
    println!(
        "one run of each over two unreadable candidates and two good ones: {expired:?} {reconciled:?}"
    );
    assert_eq!(
        (expired.expired, reconciled.requeued),
        (1, 1),
        "{expired:?} {reconciled:?}"
    );
    assert_eq!((expired.failures, reconciled.failures), (1, 1));
    assert!(
        expired.into_result().is_err() && reconciled.into_result().is_err(),
        "a run with failures ends in an error"
    );
    assert_eq!(t.get(KEY_A, &pending).await.json()["status"], "expired");
    let stored = t.approval_item(&approved).await;
    let requeues = &stored["execution"].as_m().expect("execution")["requeues"];
    assert_eq!(requeues, &AttributeValue::N("1".into()), "re-queued");
}
