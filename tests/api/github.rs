//! Gating a GitHub deployment (docs/GITHUB.md), against a fake GitHub over
//! real HTTP (`support/github.rs`): deliveries verified and recorded once, one approval per
//! waiting round however many deliveries come, GitHub told the outcome once — approved by a
//! quorum, rejected, expired, refused for want of configuration — never for a run that ended,
//! whatever GitHub's API answers on the way; and the deliveries GitHub never redelivers asked
//! for again, once.

use std::time::Duration;

use countersign_tests::github::{
    FakeGithub, Fault, GH_ALICE, GH_BOB, GH_DAVE, GH_NOBODY, GITHUB_WEBHOOK_SECRET, HookDelivery,
    PRODUCTION, SOLO, deliver, deliver_signed, deployment_event, github_headers, opened_id,
    run_completed_event,
};
use countersign_tests::{ALICE, BOB, CAROL, DECIDER_A, KEY_A, TestApp, decision_body, eventually};

const WAIT: Duration = Duration::from_secs(30);

#[tokio::test]
async fn a_forged_stale_or_unsigned_delivery_is_refused_and_nothing_recorded() {
    let github = FakeGithub::start().await;
    let t = TestApp::start_with(&[("GITHUB", &github.config())]).await;
    let event = deployment_event(&github.base, 101, PRODUCTION, GH_DAVE);
    for secret in ["a-forger-s-secret", "github-webhook-secret-before-rotation"] {
        deliver_signed(&t, secret, "deployment_protection_rule", "d-forged", &event)
            .await
            .assert_problem(401, "invalid_signature");
    }
    let unsigned = t
        .send(
            t.http
                .post(t.url("/github/events/tenant-a"))
                .header("x-github-event", "deployment_protection_rule")
                .header("x-github-delivery", "d-unsigned")
                .header("content-type", "application/json")
                .body(event.to_string()),
        )
        .await;
    unsigned.assert_problem(401, "invalid_signature");
    // Signed over other bytes than those sent.
    let body = event.to_string();
    let mut tampered = t
        .http
        .post(t.url("/github/events/tenant-a"))
        .body(body.replace("production", "productioN"));
    for (name, value) in github_headers(
        GITHUB_WEBHOOK_SECRET,
        "deployment_protection_rule",
        "d-t",
        &body,
    ) {
        tampered = tampered.header(name, value);
    }
    t.send(tampered)
        .await
        .assert_problem(401, "invalid_signature");
    // A tenant without a GitHub App.
    let other = t
        .send(t.http.post(t.url("/github/events/tenant-b")).body("{}"))
        .await;
    other.assert_problem(404, "not_found");
    assert_eq!(t.approval_count().await, 0);
    assert_eq!(t.count_items(&t.app.store.tables().webhook_inbox).await, 0);

    // `ping` and events Countersign does not use: acknowledged, nothing recorded.
    let ping = deliver(
        &t,
        "ping",
        "d-ping",
        &serde_json::json!({"zen": "Keep it logically awesome."}),
    )
    .await;
    assert_eq!(
        (ping.status, ping.json()["outcome"].clone()),
        (200, "ignored".into())
    );
    assert_eq!(t.count_items(&t.app.store.tables().webhook_inbox).await, 0);

    // Correctly signed: opened.
    let opened = deliver(&t, "deployment_protection_rule", "d-good", &event).await;
    assert_eq!(opened.json()["outcome"], "opened", "{}", opened.text());
    assert_eq!(t.approval_count().await, 1);
}

/// One delivery sent 10 times and 5 other deliveries of the same run and environment, all at
/// once: one approval, the 5 others joined (each named in the trail). Every event is one
/// transaction when it opens, two when it joins. The requester (the sender's mapped approver)
/// may not approve; two others meet the 2-of-3 quorum and GitHub hears exactly one `approved`.
/// A later job of the run waits again after that: a new round, rejected, and exactly one
/// `rejected`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_storm_of_deliveries_is_one_round_and_github_hears_each_decision_once() {
    let github = FakeGithub::start().await;
    // As a deployment gives it: the App's key apart, where the webhook function cannot read it.
    let [(config, github_config), (keys, github_keys)] = github.split_env();
    let t = TestApp::start_jobs(&[(config, &github_config), (keys, &github_keys)]).await;
    let run = 201;
    // Installation tokens live two seconds here: each answer mints its own, none is kept.
    github.set_token_ttl(2);
    github.wait(run, PRODUCTION);
    // The 10 copies of one delivery are one body; each other delivery is another job of the
    // matrix (its own deployment), as GitHub sends them.
    let event = deployment_event(&github.base, run, PRODUCTION, GH_ALICE);
    let mut sends = Vec::new();
    for i in 0..15 {
        let (delivery, event) = if i < 10 {
            ("d-storm".to_owned(), event.clone())
        } else {
            (
                format!("d-storm-{i}"),
                deployment_event(&github.base, run, PRODUCTION, GH_ALICE),
            )
        };
        let t = &t;
        sends.push(async move {
            let reply = deliver(t, "deployment_protection_rule", &delivery, &event).await;
            (delivery, reply)
        });
    }
    let replies = futures::future::join_all(sends).await;
    let mut ids = std::collections::BTreeSet::new();
    let mut outcomes = std::collections::BTreeMap::<String, usize>::new();
    for (_, reply) in &replies {
        assert_eq!(reply.status, 200, "{}", reply.text());
        let json = reply.json();
        *outcomes
            .entry(format!("{}/{}", json["status"], json["outcome"]))
            .or_default() += 1;
        if let Some(id) = json["approval_id"].as_str() {
            ids.insert(id.to_owned());
        }
    }
    println!("15 deliveries (one sent 10 times): {outcomes:?}");
    assert_eq!(ids.len(), 1, "one round, one approval: {outcomes:?}");
    assert_eq!(t.approval_count().await, 1);
    let processed = outcomes
        .iter()
        .filter(|(k, _)| k.starts_with("\"processed\""))
        .map(|(_, n)| n)
        .sum::<usize>();
    assert_eq!(processed, 6, "each distinct delivery once: {outcomes:?}");
    assert_eq!(
        outcomes.get("\"processed\"/\"opened\""),
        Some(&1),
        "{outcomes:?}"
    );
    let id = ids.into_iter().next().expect("the approval");

    let approval = t.get(KEY_A, &id).await.json();
    assert_eq!(approval["action"]["type"], "github_deployment");
    assert_eq!(
        approval["context"]["summary"],
        "Deploy acme/api@1a2b3c4 to production, run 201"
    );
    assert_eq!(approval["requested_by"], format!("github:user{GH_ALICE}"));
    // The trail names the delivery that opened the round and the 5 that joined it.
    eventually("the joins in the trail", || async {
        t.trail(KEY_A, &id, 100)
            .await
            .iter()
            .filter(|e| e["type"] == "approval.joined")
            .count()
            == 5
    })
    .await;
    let trail = t.trail(KEY_A, &id, 100).await;
    let created = &trail[0];
    assert_eq!(created["type"], "approval.created");
    assert_eq!(created["actor"]["channel"], "github");
    assert_eq!(created["actor"]["approver"], ALICE);

    // Separation of duties: alice asked (GitHub's sender is mapped to her).
    t.decide(DECIDER_A, &id, decision_body("approve", ALICE))
        .await
        .assert_problem(403, "self_approval_forbidden");
    assert_eq!(
        t.decide(DECIDER_A, &id, decision_body("approve", BOB))
            .await
            .status,
        200
    );
    assert!(
        github.decisions(run).is_empty(),
        "one vote of two decides nothing"
    );
    let approved = t
        .decide(DECIDER_A, &id, decision_body("approve", CAROL))
        .await;
    assert_eq!(approved.json()["status"], "approved");
    let done = t.wait_for_execution(KEY_A, &id, WAIT).await;
    assert_eq!(done["execution"]["status"], "succeeded", "{done}");
    let decisions = github.decisions(run);
    assert_eq!(decisions.len(), 1, "{decisions:?}");
    assert_eq!(decisions[0].state, "approved");
    assert!(
        decisions[0].comment.contains(&id) && decisions[0].comment.contains(BOB),
        "{}",
        decisions[0].comment
    );

    // A later job of the run waits again: a new round, never waved through by the first.
    github.wait(run, PRODUCTION);
    let again = deliver(
        &t,
        "deployment_protection_rule",
        "d-later",
        &deployment_event(&github.base, run, PRODUCTION, GH_DAVE),
    )
    .await;
    assert_eq!(again.json()["outcome"], "opened", "{}", again.text());
    let second = opened_id(&again);
    assert_ne!(second, id);
    let rejected = t.decide(DECIDER_A, &second, serde_json::json!({"decision": "reject", "approver": BOB, "comment": "not on a Friday"})).await;
    assert_eq!(rejected.json()["status"], "rejected");
    let reviews = github.wait_for_reviews(run, 2, WAIT).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let decisions = github.decisions(run);
    assert_eq!(
        decisions
            .iter()
            .map(|d| d.state.as_str())
            .collect::<Vec<_>>(),
        ["approved", "rejected"],
        "{reviews:?}"
    );
    assert!(
        decisions[1].comment.contains("not on a Friday"),
        "{}",
        decisions[1].comment
    );
    assert!(!github.is_waiting(run, PRODUCTION));
    eventually("the answer in the trail", || async {
        t.trail(KEY_A, &second, 100)
            .await
            .iter()
            .any(|e| e["type"] == "github.answered")
    })
    .await;
    assert!(
        github.refused().is_empty(),
        "every JWT valid, every token fresh: {:?}",
        github.refused()
    );
}

#[tokio::test]
async fn opening_a_round_is_one_transaction_and_joining_it_two() {
    let github = FakeGithub::start().await;
    let t = TestApp::start_with(&[("GITHUB", &github.config())]).await;
    let event = deployment_event(&github.base, 301, PRODUCTION, GH_DAVE);
    t.calls.take();
    opened_id(&deliver(&t, "deployment_protection_rule", "d-open", &event).await);
    let open = t.calls.take();
    let event = deployment_event(&github.base, 301, PRODUCTION, GH_DAVE);
    let joined = deliver(&t, "deployment_protection_rule", "d-join", &event).await;
    assert_eq!(joined.json()["outcome"], "joined");
    let join = t.calls.take();
    println!("round trips: open {open:?}, join {join:?}");
    // The first delivery of the tenant on the function reads its approval policy and groups
    // (one BatchGetItem, cached for KEY_CACHE_SECONDS); the join finds them cached.
    assert_eq!(open, ["BatchGetItem", "TransactWriteItems"]);
    assert_eq!(join, ["TransactWriteItems", "TransactWriteItems"]);
    let duplicate = deliver(&t, "deployment_protection_rule", "d-join", &event).await;
    assert_eq!(duplicate.json()["status"], "duplicate");
    assert_eq!(
        t.calls.take(),
        ["TransactWriteItems"],
        "a redelivery: one write, refused"
    );
    // What GitHub opened is counted apart from what the API created.
    let documents = t.metrics.take();
    let opened: Vec<&String> = documents
        .iter()
        .filter(|d| d.contains("\"ApprovalCreated\"") && d.contains("\"Channel\":\"github\""))
        .collect();
    assert_eq!(opened.len(), 1, "{documents:?}");
    assert!(opened[0].contains("\"ActionType\":\"github_deployment\""));
}

/// GitHub's API on a bad day: a 500, a 429 with Retry-After, a call that never answers, and an
/// answer lost after GitHub took it (the retry meets GitHub's 422: the execution succeeded).
/// GitHub takes exactly one decision.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn github_errors_timeouts_and_a_lost_answer_still_end_in_one_decision() {
    let github = FakeGithub::start().await;
    // Attempts enough for the four faults and the answer, with room for a slow call.
    let t = TestApp::start_jobs(&[
        ("GITHUB", &github.config()),
        ("JOB_MAX_ATTEMPTS", "8"),
        ("JOB_VISIBILITY_TIMEOUT_SECONDS", "3"),
    ])
    .await;
    let run = 401;
    github.wait(run, SOLO);
    github.fault_next(Fault::Fail);
    github.fault_next(Fault::RateLimited(1));
    github.fault_next(Fault::Hang(Duration::from_secs(3)));
    github.fault_next(Fault::LoseAnswer(Duration::from_secs(3)));
    let id = opened_id(
        &deliver(
            &t,
            "deployment_protection_rule",
            "d-faults",
            &deployment_event(&github.base, run, SOLO, GH_DAVE),
        )
        .await,
    );
    assert_eq!(
        t.decide(DECIDER_A, &id, decision_body("approve", BOB))
            .await
            .status,
        200
    );
    let done = t
        .wait_for_execution(KEY_A, &id, Duration::from_secs(60))
        .await;
    let reviews = github.reviews(run);
    println!(
        "faults 500, 429, hang, lost answer: execution {} after {} attempts; reviews {:?}",
        done["execution"]["status"], done["execution"]["attempts"], reviews
    );
    assert_eq!(done["execution"]["status"], "succeeded", "{done}");
    assert_eq!(github.decisions(run).len(), 1, "{reviews:?}");
    assert_eq!(
        reviews.iter().map(|r| r.status).collect::<Vec<_>>(),
        [204, 422],
        "the lost answer landed; its retry met GitHub's 422"
    );
    assert!(
        github.refused().is_empty(),
        "every JWT and token valid: {:?}",
        github.refused()
    );
}

/// An expired round is answered `rejected`, saying so; a run that ended cancels its pending
/// round (actor github, the run's conclusion) and GitHub is told nothing; an environment
/// without an entry is refused at once (fail closed), the comment naming the configuration.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn expiry_is_rejected_a_run_s_end_cancels_silently_and_an_unconfigured_environment_is_refused()
 {
    let github = FakeGithub::start().await;
    let t = TestApp::start_jobs(&[("GITHUB", &github.config())]).await;

    let (expiring, cancelled, unconfigured) = (501, 502, 503);
    github.wait(expiring, SOLO);
    let id = opened_id(
        &deliver(
            &t,
            "deployment_protection_rule",
            "d-exp",
            &deployment_event(&github.base, expiring, SOLO, GH_DAVE),
        )
        .await,
    );
    t.clock.advance(61);
    countersign::jobs::Expirer::new(t.function(countersign::Function::Sweeper))
        .run()
        .await
        .expect("the sweep");
    let reviews = github.wait_for_reviews(expiring, 1, WAIT).await;
    assert_eq!(reviews.len(), 1, "{reviews:?}");
    assert_eq!(
        (reviews[0].state.as_str(), reviews[0].status),
        ("rejected", 204)
    );
    assert!(
        reviews[0].comment.contains("expired") && reviews[0].comment.contains(&id),
        "{}",
        reviews[0].comment
    );

    github.wait(cancelled, PRODUCTION);
    let pending = opened_id(
        &deliver(
            &t,
            "deployment_protection_rule",
            "d-c",
            &deployment_event(&github.base, cancelled, PRODUCTION, GH_DAVE),
        )
        .await,
    );
    github.end_run(cancelled);
    let ended = deliver(
        &t,
        "workflow_run",
        "d-run-end",
        &run_completed_event(cancelled, "cancelled"),
    )
    .await;
    assert_eq!(ended.json()["outcome"], "cancelled", "{}", ended.text());
    let approval = t.get(KEY_A, &pending).await.json();
    assert_eq!(approval["status"], "cancelled");
    assert_eq!(approval["cancellation"]["by"], "github");
    assert!(
        approval["cancellation"]["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("cancelled")
    );
    // Its redelivery changes nothing (its round is closed); the end of a run with nothing
    // open records nothing.
    let again = deliver(
        &t,
        "workflow_run",
        "d-run-end",
        &run_completed_event(cancelled, "cancelled"),
    )
    .await;
    assert_eq!(again.json()["outcome"], "ignored", "{}", again.text());
    assert_eq!(t.get(KEY_A, &pending).await.json(), approval);
    let other = deliver(
        &t,
        "workflow_run",
        "d-other-run",
        &run_completed_event(999, "success"),
    )
    .await;
    assert_eq!(other.json()["outcome"], "ignored");

    github.wait(unconfigured, "staging");
    let refused = deliver(
        &t,
        "deployment_protection_rule",
        "d-staging",
        &deployment_event(&github.base, unconfigured, "staging", GH_NOBODY),
    )
    .await;
    assert_eq!(refused.json()["outcome"], "refused", "{}", refused.text());
    let reviews = github.wait_for_reviews(unconfigured, 1, WAIT).await;
    assert_eq!(reviews.len(), 1, "{reviews:?}");
    assert_eq!(reviews[0].state, "rejected");
    assert!(
        reviews[0].comment.contains("staging") && reviews[0].comment.contains("GITHUB"),
        "{}",
        reviews[0].comment
    );

    // Nothing was told about the cancelled run, even after the jobs had time.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        github.reviews(cancelled).is_empty(),
        "{:?}",
        github.reviews(cancelled)
    );
}

/// GitHub never redelivers by itself: the sweep asks once for each failed delivery the inbox
/// does not hold and no later attempt delivered — never for one the inbox holds, never twice,
/// however many sweeps run at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_redelivery_sweep_asks_once_for_what_never_arrived() {
    let github = FakeGithub::start().await;
    let t = TestApp::start_with(&[
        ("GITHUB", &github.config()),
        ("GITHUB_REDELIVERY_SECONDS", "1"),
    ])
    .await;
    // One GitHub says failed, but that reached us (its answer was lost): the inbox holds it.
    opened_id(
        &deliver(
            &t,
            "deployment_protection_rule",
            "d-held",
            &deployment_event(&github.base, 601, PRODUCTION, GH_DAVE),
        )
        .await,
    );
    let delivery = |id: u64, guid: &str, age: i64, status_code: u16| HookDelivery {
        id,
        guid: guid.to_owned(),
        age_seconds: age,
        status_code,
        event: "deployment_protection_rule".to_owned(),
    };
    github.set_deliveries(vec![
        delivery(9, "d-lost", 100, 502),
        delivery(8, "d-held", 200, 0),
        delivery(7, "d-retried", 300, 200),
        delivery(6, "d-retried", 400, 500),
        delivery(5, "d-lost", 500, 504),
        delivery(4, "d-ancient", 4 * 86_400, 500),
        delivery(3, "d-ok", 4 * 86_400 + 10, 200),
    ]);
    let sweeps = (0..3).map(|_| {
        let app = t.function(countersign::Function::Sweeper);
        async move {
            countersign::jobs::Expirer::new(app)
                .run()
                .await
                .expect("the sweep")
        }
    });
    let reports = futures::future::join_all(sweeps).await;
    println!(
        "three sweeps at once: {reports:?}; asked for {:?}",
        github.redeliveries()
    );
    assert_eq!(
        github.redeliveries(),
        [9],
        "the lost one, once, its newest attempt"
    );
    // The next period: asked already, so not again.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    countersign::jobs::Expirer::new(t.function(countersign::Function::Sweeper))
        .run()
        .await
        .expect("the sweep");
    assert_eq!(github.redeliveries(), [9]);
    // Its redelivery failed too (another attempt): asked for again; the ask itself fails once
    // (GitHub down): released, and asked again the period after.
    github.set_deliveries(vec![
        delivery(10, "d-lost", 10, 502),
        delivery(9, "d-lost", 100, 502),
        delivery(5, "d-lost", 500, 504),
    ]);
    github.fail_redeliveries(1);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let failed = countersign::jobs::Expirer::new(t.function(countersign::Function::Sweeper))
        .run()
        .await;
    println!("a sweep whose ask fails: {failed:?}");
    assert_eq!(github.redeliveries(), [9]);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let again = countersign::jobs::Expirer::new(t.function(countersign::Function::Sweeper))
        .run()
        .await
        .expect("the sweep");
    assert_eq!(again.redelivered, 1, "{again:?}");
    assert_eq!(github.redeliveries(), [9, 10]);
    assert!(github.refused().is_empty(), "{:?}", github.refused());
}

/// A delivery of another GitHub user that joins an open round (a re-run whose run's end was
/// late): its sender asked too, so their vote is refused like the requester's.
#[tokio::test]
async fn whoever_joined_a_round_may_not_approve_it() {
    let github = FakeGithub::start().await;
    let t = TestApp::start_with(&[("GITHUB", &github.config())]).await;
    let run = 801;
    let opening = deployment_event(&github.base, run, PRODUCTION, GH_ALICE);
    let id = opened_id(&deliver(&t, "deployment_protection_rule", "d-alice", &opening).await);
    let joining = deployment_event(&github.base, run, PRODUCTION, GH_BOB);
    let joined = deliver(&t, "deployment_protection_rule", "d-bob", &joining).await;
    assert_eq!(joined.json()["outcome"], "joined");
    for asker in [BOB, ALICE] {
        t.decide(DECIDER_A, &id, decision_body("approve", asker))
            .await
            .assert_problem(403, "self_approval_forbidden");
    }
    let carol = t
        .decide(DECIDER_A, &id, decision_body("approve", CAROL))
        .await;
    assert_eq!(carol.status, 200, "someone who did not ask still votes");
}
