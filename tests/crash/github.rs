//! GitHub's answers and redeliveries, crashed at their worst moments.

use countersign_tests::github::{
    FakeGithub, GH_DAVE, GITHUB_WEBHOOK_SECRET, HookDelivery, SOLO, deployment_event,
    github_headers,
};
use std::time::Duration;

use countersign_tests::{BOB, DECIDER_A, KEY_A, TestApp, decision_body};
use fail::FailScenario;

use super::WAIT;

/// A GitHub deployment approved; its answer reaches GitHub (204) and the worker dies before
/// the ledger's end. The retry sends it again and meets GitHub's 422 (nothing waits any more):
/// the execution succeeded, GitHub took one decision.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_crash_after_github_took_the_answer_ends_succeeded_with_one_decision() {
    let scenario = FailScenario::setup();
    let github = FakeGithub::start().await;
    let [(config, github_config), (keys, github_keys)] = github.split_env();
    let t = TestApp::start_jobs(&[(config, &github_config), (keys, &github_keys)]).await;
    let run = 701;
    github.wait(run, SOLO);
    let id = open_round(&t, &github, run, "d-crash").await;
    fail::cfg("execute::after_downstream", "1*panic").unwrap();
    assert_eq!(
        t.decide(DECIDER_A, &id, decision_body("approve", BOB))
            .await
            .status,
        200
    );
    let done = t.wait_for_execution(KEY_A, &id, WAIT).await;
    let reviews = github.reviews(run);
    println!(
        "crash after GitHub's 204: {} after {} attempts; reviews {reviews:?}",
        done["execution"]["status"], done["execution"]["attempts"]
    );
    assert_eq!(done["execution"]["status"], "succeeded", "{done}");
    assert_eq!(
        reviews.iter().map(|r| r.status).collect::<Vec<_>>(),
        [204, 422],
        "at most GitHub's 422 on the retry"
    );
    assert_eq!(github.decisions(run).len(), 1);
    scenario.teardown();
}

/// The same crash, but before the retry a later job of the run waits again and opens a new
/// round: the retry of the older answer is never sent (GitHub's API names no round — it would
/// approve the newer one). Its execution fails with the reason, whether the first attempt
/// landed being unknown to it; the new round still waits for its own approval.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_older_rounds_answer_is_never_sent_again_once_a_newer_round_opened() {
    let scenario = FailScenario::setup();
    let github = FakeGithub::start().await;
    // The retry comes back after the visibility timeout: long enough for the new round to open
    // first (the order this test is about; the other order is a limit GitHub's API leaves).
    let t = TestApp::start_jobs(&[
        ("GITHUB", &github.config()),
        ("JOB_VISIBILITY_TIMEOUT_SECONDS", "5"),
    ])
    .await;
    let run = 702;
    github.wait(run, SOLO);
    let first = open_round(&t, &github, run, "d-first").await;
    fail::cfg("execute::after_downstream", "1*panic").unwrap();
    assert_eq!(
        t.decide(DECIDER_A, &first, decision_body("approve", BOB))
            .await
            .status,
        200
    );
    // GitHub took it (the worker died right after); a later job of the run waits.
    github.wait_for_reviews(run, 1, WAIT).await;
    github.wait(run, SOLO);
    let second = open_round(&t, &github, run, "d-second").await;
    assert_ne!(first, second);
    let done = t
        .wait_for_approval(KEY_A, &first, WAIT, |a| {
            matches!(
                a["execution"]["status"].as_str(),
                Some("succeeded" | "failed")
            )
        })
        .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let reviews = github.reviews(run);
    println!(
        "older answer after a newer round: {}; reviews {reviews:?}",
        done["execution"]
    );
    assert_eq!(done["execution"]["status"], "failed", "{done}");
    assert!(
        done["execution"]["last_error"]
            .as_str()
            .unwrap_or_default()
            .contains("newer round"),
        "{done}"
    );
    assert_eq!(
        reviews
            .iter()
            .map(|r| (r.state.as_str(), r.status))
            .collect::<Vec<_>>(),
        [("approved", 204)],
        "the older answer was sent once, never again"
    );
    assert!(
        github.is_waiting(run, SOLO),
        "the newer round waits for its own approval"
    );
    assert_eq!(t.get(KEY_A, &second).await.json()["status"], "pending");
    scenario.teardown();
}

async fn open_round(t: &TestApp, github: &FakeGithub, run: u64, delivery: &str) -> String {
    let body = deployment_event(&github.base, run, SOLO, GH_DAVE).to_string();
    let mut request = t
        .http
        .post(t.url("/github/events/tenant-a"))
        .body(body.clone());
    for (name, value) in github_headers(
        GITHUB_WEBHOOK_SECRET,
        "deployment_protection_rule",
        delivery,
        &body,
    ) {
        request = request.header(name, value);
    }
    let reply = t.send(request).await;
    assert_eq!(reply.json()["outcome"], "opened", "{}", reply.text());
    reply.json()["approval_id"]
        .as_str()
        .expect("an approval")
        .to_owned()
}

/// Review of v5, finding 2 ("the redelivery sweep can lose a GitHub delivery for good"): a
/// sweeper cut off after it claimed a failed attempt and before it asked GitHub for it left the
/// claim for 4 days, never asked. The claim is a lease of one period: the next period's sweep
/// asks, once, and records it, so the period after asks nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_sweeper_killed_after_its_claim_and_before_its_ask_is_followed_next_period() {
    let scenario = FailScenario::setup();
    let github = FakeGithub::start().await;
    let t = TestApp::start_with(&[
        ("GITHUB", &github.config()),
        ("GITHUB_REDELIVERY_SECONDS", "60"),
    ])
    .await;
    github.set_deliveries(vec![HookDelivery {
        id: 41,
        guid: "d-lost-in-a-crash".to_owned(),
        age_seconds: 100,
        status_code: 502,
        event: "deployment_protection_rule".to_owned(),
    }]);
    let sweep = || async {
        countersign::jobs::Expirer::new(t.function(countersign::Function::Sweeper))
            .run()
            .await
    };
    fail::cfg("redelivery::after_claim", "1*return").unwrap();
    let cut_off = sweep().await;
    println!("a sweep cut off after its claim: {cut_off:?}");
    assert!(github.redeliveries().is_empty(), "not asked");

    // The same period: the claim holds (no second sweep runs, nor asks).
    t.clock.advance(30);
    sweep().await.expect("the sweep");
    assert!(github.redeliveries().is_empty());

    // The next period: the claim's lease has ended, and this sweep asks.
    t.clock.advance(31);
    let next = sweep().await.expect("the sweep");
    assert_eq!(next.redelivered, 1, "{next:?}");
    assert_eq!(github.redeliveries(), [41]);

    // The ask is recorded: never asked again, however many periods pass.
    for _ in 0..2 {
        t.clock.advance(61);
        sweep().await.expect("the sweep");
    }
    assert_eq!(github.redeliveries(), [41]);
    scenario.teardown();
}
