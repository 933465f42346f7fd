//! `GET /approvals/{id}?wait=N`: a read that holds until the approval is decided (or its
//! execution ended) or N seconds pass — waiting without polling, with its reads counted.

use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::AttributeValue;
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
    let calls = t.calls.take();
    let (reads, writes): (Vec<_>, Vec<_>) = calls.iter().partition(|c| *c == "GetItem");
    println!(
        "wait=3 on an untouched approval: answered after {} ms, {} reads, {} writes",
        answered.as_millis(),
        reads.len(),
        writes.len()
    );
    assert!(
        (4..=7).contains(&reads.len()),
        "N + 4 reads at most: {calls:?}"
    );
    assert_eq!(
        writes,
        ["UpdateItem", "UpdateItem"],
        "a seat taken and given back: {calls:?}"
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

/// docs/API.md "Held reads": held reads beyond the cap are answered 429 `too_many_waits`
/// with `Retry-After`, never queued, while every other route answers as usual. 200 held reads
/// race for 20 seats: exactly 20 hold (the seats' condition is one write), the other 180 are
/// refused at once; a vote and a create sent meanwhile are answered before any held read ends;
/// and every seat is given back.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_hundred_held_reads_at_once_hold_twenty_and_the_rest_are_told_when_to_retry() {
    const HOLD_SECONDS: u64 = 8;
    let t = TestApp::start_with(&[
        ("HELD_READ_CONCURRENCY", "20"),
        ("HELD_READS_PER_TENANT", "20"),
    ])
    .await;
    let waited = t
        .create_ok(KEY_A, "held-1", &deploy_body(11, &[ALICE]))
        .await;
    let voted = t
        .create_ok(KEY_A, "held-2", &deploy_body(12, &[ALICE, BOB]))
        .await;
    let started = Instant::now();
    let path = format!("/approvals/{waited}?wait={HOLD_SECONDS}");
    let reads: Vec<_> = (0..200)
        .map(|_| {
            let request = t
                .http
                .get(t.url(&path))
                .bearer_auth(KEY_A)
                .timeout(Duration::from_secs(60));
            tokio::spawn(async move {
                let response = request.send().await.expect("an answer");
                let status = response.status().as_u16();
                let retry_after = response
                    .headers()
                    .get("retry-after")
                    .map(|v| v.to_str().unwrap_or_default().to_owned());
                let body: serde_json::Value = response.json().await.expect("JSON");
                (status, retry_after, body, started.elapsed())
            })
        })
        .collect();

    // Meanwhile: the seats fill, and a vote and a create are answered as usual.
    let seats = async {
        let mut most = 0;
        while started.elapsed() < Duration::from_secs(HOLD_SECONDS / 2) {
            let held = t.app.store.held_read_leases().await.expect("the seats");
            most = most.max(held.len());
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        most
    };
    let others = async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let vote = t
            .decide(DECIDER_A, &voted, decision_body("approve", ALICE))
            .await;
        let create = t.create(KEY_A, "held-3", &deploy_body(13, &[ALICE])).await;
        (vote.status, create.status, started.elapsed())
    };
    let (most_seats, (vote, create, others_done)) = tokio::join!(seats, others);

    let mut held = Vec::new();
    let mut refused = Vec::new();
    for read in reads {
        let (status, retry_after, body, at) = read.await.expect("the read's task");
        match status {
            200 => {
                assert_eq!(body["status"], "pending", "{body}");
                held.push(at);
            }
            429 => {
                assert_eq!(body["code"], "too_many_waits", "{body}");
                let seconds: u64 = retry_after
                    .as_deref()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or_else(|| panic!("Retry-After in seconds: {retry_after:?}"));
                // The soonest held read ends HOLD_SECONDS after it began, and every refusal came
                // within a few seconds of the first seat taken.
                assert!(
                    (HOLD_SECONDS - 4..=HOLD_SECONDS).contains(&seconds),
                    "Retry-After {seconds}"
                );
                refused.push((at, seconds));
            }
            other => panic!("HTTP {other}: {body}"),
        }
    }
    let first_held_answer = held.iter().min().copied().expect("some held");
    let last_refusal = refused
        .iter()
        .map(|(at, _)| *at)
        .max()
        .expect("some refused");
    println!(
        "200 held reads for 20 seats: {} held, {} refused (the last refusal after {} ms, \
         Retry-After {}–{} s); the vote and the create answered after {} ms, the first held \
         read after {} ms; at most {most_seats} seats taken at once",
        held.len(),
        refused.len(),
        last_refusal.as_millis(),
        refused.iter().map(|(_, s)| *s).min().unwrap_or(0),
        refused.iter().map(|(_, s)| *s).max().unwrap_or(0),
        others_done.as_millis(),
        first_held_answer.as_millis(),
    );
    assert_eq!((held.len(), refused.len()), (20, 180));
    assert_eq!(most_seats, 20, "never more than the cap");
    assert!(
        last_refusal < first_held_answer,
        "refusals are answered at once, not queued behind the held reads"
    );
    assert_eq!((vote, create), (200, 201));
    assert!(
        others_done < first_held_answer,
        "the vote and the create did not wait for the held reads"
    );
    assert!(
        held.iter()
            .all(|at| *at >= Duration::from_secs(HOLD_SECONDS)),
        "the held reads held"
    );
    assert_eq!(
        t.app.store.held_read_leases().await.expect("the seats"),
        Vec::<String>::new(),
        "every seat given back"
    );
    let refusals = t
        .metrics
        .take()
        .iter()
        .filter(|doc| doc.contains("\"too_many_waits\""))
        .count();
    assert!(refusals > 0, "RequestRefused too_many_waits is counted");

    // The seats came back: a held read holds again.
    let again = t
        .get_path(KEY_A, &format!("/approvals/{waited}?wait=1"))
        .await;
    assert_eq!(again.status, 200, "{}", again.text());
}

/// A held read whose process died leaves its lease in the seats' set: once the read it held
/// for has ended and the function's whole timeout has passed, the next read that finds the
/// seats full removes it and holds; a lease still live is not touched, and `Retry-After` is
/// the time until it ends.
#[tokio::test]
async fn a_dead_held_reads_seat_is_taken_back_and_a_live_one_is_not() {
    let t =
        TestApp::start_with(&[("HELD_READ_CONCURRENCY", "3"), ("HELD_READ_HEADROOM", "2")]).await;
    let id = t
        .create_ok(KEY_A, "held-dead", &deploy_body(21, &[ALICE]))
        .await;
    let now = t.clock.now();
    let plant = |lease: String| {
        t.dynamodb
            .update_item()
            .table_name(&t.app.store.tables().execution_ledger)
            .key("pk", AttributeValue::S("held-reads".into()))
            .update_expression("ADD #leases :lease")
            .expression_attribute_names("#leases", "leases")
            .expression_attribute_values(":lease", AttributeValue::Ss(vec![lease]))
            .send()
    };
    // One seat (3 less a headroom of 2), taken by a read that ended 40 s ago and never left.
    let dead = format!("{}#dead", now - 40);
    plant(dead.clone()).await.expect("plant a dead lease");
    t.calls.take();
    let reply = t.get_path(KEY_A, &format!("/approvals/{id}?wait=1")).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let calls = t.calls.take();
    assert_eq!(
        calls.iter().filter(|c| *c == "UpdateItem").count(),
        4,
        "refused, the dead lease removed, taken, given back: {calls:?}"
    );
    assert!(
        !t.app
            .store
            .held_read_leases()
            .await
            .expect("seats")
            .contains(&dead),
        "the dead lease is gone"
    );

    // A read that ended 20 s ago may still be in its process's timeout (the lease is kept 30 s
    // past its end): its seat is kept.
    let live = format!("{}#slow", now - 20);
    plant(live.clone()).await.expect("plant a recent lease");
    t.get_path(KEY_A, &format!("/approvals/{id}?wait=1"))
        .await
        .assert_problem(429, "too_many_waits");
    // A read holding for 15 s more: Retry-After says so.
    t.dynamodb
        .update_item()
        .table_name(&t.app.store.tables().execution_ledger)
        .key("pk", AttributeValue::S("held-reads".into()))
        .update_expression("DELETE #leases :lease")
        .expression_attribute_names("#leases", "leases")
        .expression_attribute_values(":lease", AttributeValue::Ss(vec![live]))
        .send()
        .await
        .expect("remove it");
    let now = t.clock.now();
    plant(format!("{}#holding", now + 15))
        .await
        .expect("plant a live lease");
    let reply = t
        .send(
            t.http
                .get(t.url(&format!("/approvals/{id}?wait=1")))
                .bearer_auth(KEY_A),
        )
        .await;
    reply.assert_problem(429, "too_many_waits");
    let retry_after: u64 = reply.headers["retry-after"]
        .to_str()
        .ok()
        .and_then(|s| s.parse().ok())
        .expect("Retry-After");
    assert!((13..=16).contains(&retry_after), "{retry_after}");

    // A read that need not hold is never refused, seats or not.
    assert_eq!(t.get(KEY_A, &id).await.status, 200);
    let vote = t
        .decide(DECIDER_A, &id, decision_body("approve", ALICE))
        .await;
    assert_eq!(vote.status, 200, "{}", vote.text());
    let decided = t.get_path(KEY_A, &format!("/approvals/{id}?wait=5")).await;
    assert_eq!(decided.json()["status"], "approved", "{}", decided.text());
}

/// Sends `n` held reads of `path` at once as `key`; how many held (200) and how many were
/// refused (429 `too_many_waits`).
async fn held_reads_at_once(t: &TestApp, key: &str, path: &str, n: usize) -> (usize, usize) {
    let reads: Vec<_> = (0..n)
        .map(|_| {
            let request = t
                .http
                .get(t.url(path))
                .bearer_auth(key)
                .timeout(Duration::from_secs(60));
            tokio::spawn(async move {
                let response = request.send().await.expect("an answer");
                let status = response.status().as_u16();
                let body: serde_json::Value = response.json().await.expect("JSON");
                (status, body)
            })
        })
        .collect();
    let (mut held, mut refused) = (0, 0);
    for read in reads {
        match read.await.expect("the read's task") {
            (200, _) => held += 1,
            (429, body) if body["code"] == "too_many_waits" => refused += 1,
            (status, body) => panic!("HTTP {status}: {body}"),
        }
    }
    (held, refused)
}

/// Review of v5, finding 1 ("one tenant can starve every tenant's waits"): the seats were one
/// pool, so one tenant's 40 held reads took all 40 and every other tenant's waits got 429. With
/// `HELD_READS_PER_TENANT` (default half the seats) tenant A holds 20 and tenant B's 40 reads,
/// sent while A's hold, still find their 20.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn held_reads_one_tenant_cannot_take_every_seat_two_tenants_times_forty() {
    const HOLD_SECONDS: u64 = 6;
    let t =
        TestApp::start_with(&[("HELD_READ_CONCURRENCY", "40"), ("HELD_READ_HEADROOM", "0")]).await;
    let a = t
        .create_ok(KEY_A, "held-tenant-a", &deploy_body(31, &[ALICE]))
        .await;
    let b = t
        .create_ok(KEY_B, "held-tenant-b", &deploy_body(32, &[ALICE]))
        .await;
    let started = Instant::now();
    let path_a = format!("/approvals/{a}?wait={HOLD_SECONDS}");
    let path_b = format!("/approvals/{b}?wait={HOLD_SECONDS}");
    let tenant_a = held_reads_at_once(&t, KEY_A, &path_a, 40);
    let tenant_b = async {
        // Once A's reads hold (their refusals come at once, their holds end after 6 s).
        let deadline = Instant::now() + Duration::from_secs(3);
        while t.app.store.held_read_leases().await.expect("seats").len() < 20
            && Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let seats_a = t.app.store.held_read_leases().await.expect("seats").len();
        (seats_a, held_reads_at_once(&t, KEY_B, &path_b, 40).await)
    };
    let ((held_a, refused_a), (seats_a, (held_b, refused_b))) = tokio::join!(tenant_a, tenant_b);
    println!(
        "40 seats, 20 a tenant: tenant A {held_a} held, {refused_a} refused (A holding {seats_a} \
         seats when B asked); tenant B {held_b} held, {refused_b} refused; {} ms",
        started.elapsed().as_millis()
    );
    assert_eq!(seats_a, 20, "A's reads held and took only their share");
    assert_eq!((held_a, refused_a), (20, 20));
    assert_eq!((held_b, refused_b), (20, 20), "B's waits hold beside A's");
    assert_eq!(
        t.app.store.held_read_leases().await.expect("seats"),
        Vec::<String>::new(),
        "every seat given back"
    );
}

/// Review of v5, finding 1: nothing unauthenticated reaches a seat. Held reads with a key
/// nobody issued are answered 401 at once, and no seat is written.
#[tokio::test]
async fn held_reads_without_a_valid_key_are_401_before_any_seat() {
    let t =
        TestApp::start_with(&[("HELD_READ_CONCURRENCY", "3"), ("HELD_READ_HEADROOM", "2")]).await;
    let id = t
        .create_ok(KEY_A, "held-unauthenticated", &deploy_body(33, &[ALICE]))
        .await;
    t.calls.take();
    let started = Instant::now();
    for key in ["cs_live_not-a-key-0123456789abcdef", "junk"] {
        t.get_path(key, &format!("/approvals/{id}?wait=5"))
            .await
            .assert_problem(401, "unauthorized");
    }
    assert!(started.elapsed() < Duration::from_secs(2), "not held");
    let calls = t.calls.take();
    assert!(
        !calls.iter().any(|c| c == "UpdateItem"),
        "no seat taken or given back: {calls:?}"
    );
    // The one seat is still free for a reader.
    let reply = t.get_path(KEY_A, &format!("/approvals/{id}?wait=1")).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
}
