//! `GET /approvals/{id}?wait=N`: a read that holds until the approval is decided (or its
//! execution ended) or N seconds pass — waiting without polling, with its reads counted.

use std::time::{Duration, Instant};

use countersign_tests::{ALICE, BOB, DECIDER_A, KEY_A, KEY_B, TestApp, decision_body, deploy_body};

use crate::helpers::WAIT;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_held_read_answers_when_the_approval_is_decided() {
    let t = TestApp::start().await;
    let id = t
        .create_ok(KEY_A, "wait-1", &deploy_body(1, &[ALICE, BOB]))
        .await;
    let started = Instant::now();
    let path = format!("/approvals/{id}?wait=10");
    let held = t.get_path(KEY_A, &path);
    let decide = async {
        tokio::time::sleep(Duration::from_secs(2)).await;
        t.decide(DECIDER_A, &id, decision_body("approve", ALICE))
            .await
    };
    let (held, decided) = tokio::join!(held, decide);
    let answered = started.elapsed();
    assert_eq!(decided.status, 200);
    assert_eq!(held.status, 200);
    assert_eq!(held.json()["status"], "approved", "{}", held.text());
    println!(
        "decided 2 s into wait=10: answered after {} ms",
        answered.as_millis()
    );
    assert!(
        answered < Duration::from_secs(6),
        "held past the decision: {answered:?}"
    );
}

#[tokio::test]
async fn an_untouched_approval_is_answered_pending_after_the_wait_with_bounded_reads() {
    let t = TestApp::start().await;
    let id = t
        .create_ok(KEY_A, "wait-2", &deploy_body(2, &[ALICE]))
        .await;
    t.calls.take();
    let started = Instant::now();
    let held = t.get_path(KEY_A, &format!("/approvals/{id}?wait=3")).await;
    let answered = started.elapsed();
    assert_eq!(held.status, 200);
    assert_eq!(held.json()["status"], "pending");
    assert!(answered >= Duration::from_secs(3), "{answered:?}");
    let reads = t.calls.take();
    println!(
        "wait=3 on an untouched approval: answered after {} ms, {} reads",
        answered.as_millis(),
        reads.len()
    );
    assert!(reads.iter().all(|c| c == "GetItem"), "{reads:?}");
    assert!(
        (4..=7).contains(&reads.len()),
        "N + 4 reads at most: {reads:?}"
    );

    // Without wait, or decided already: one read, at once.
    assert_eq!(t.get(KEY_A, &id).await.status, 200);
    assert_eq!(t.calls.take(), ["GetItem"]);
    t.decide(DECIDER_A, &id, decision_body("reject", ALICE))
        .await;
    t.calls.take();
    let started = Instant::now();
    let decided = t.get_path(KEY_A, &format!("/approvals/{id}?wait=20")).await;
    assert_eq!(decided.json()["status"], "rejected");
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(t.calls.take(), ["GetItem"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn until_executed_holds_through_the_execution() {
    let t = TestApp::start_jobs(&[]).await;
    let id = t
        .create_ok(KEY_A, "wait-3", &deploy_body(3, &[ALICE]))
        .await;
    assert_eq!(t.approve(&id, ALICE).await["status"], "approved");
    let deadline = Instant::now() + WAIT;
    loop {
        let held = t
            .get_path(KEY_A, &format!("/approvals/{id}?wait=20&until=executed"))
            .await;
        assert_eq!(held.status, 200);
        if held.json()["execution"]["status"] == "succeeded" {
            break;
        }
        assert!(Instant::now() < deadline, "{}", held.text());
    }
}

#[tokio::test]
async fn bad_waits_are_refused_and_other_tenants_approvals_are_not_found() {
    let t = TestApp::start().await;
    let id = t
        .create_ok(KEY_A, "wait-4", &deploy_body(4, &[ALICE]))
        .await;
    for query in [
        "wait=0",
        "wait=21",
        "wait=soon",
        "until=executed",
        "wait=2&until=ran",
        "wait=1&wait=2",
        "colour=red",
    ] {
        let reply = t.get_path(KEY_A, &format!("/approvals/{id}?{query}")).await;
        reply.assert_problem(400, "invalid_request");
    }
    let started = Instant::now();
    t.get_path(KEY_B, &format!("/approvals/{id}?wait=5"))
        .await
        .assert_problem(404, "not_found");
    assert!(started.elapsed() < Duration::from_secs(2), "not held");
}
