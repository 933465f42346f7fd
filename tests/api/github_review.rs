//! Gating a GitHub deployment, hardened after the review of v5 (finding 9): a signed body
//! replayed under a fresh delivery id changes nothing; a run's end the two clocks cannot place
//! is placed by GitHub (docs/GITHUB.md); GitHub's 422 is an earlier attempt's success only when an
//! earlier attempt may have sent the answer; a run with more rounds than one transaction holds
//! closes whole.

use std::time::Duration;

use countersign::domain::rfc3339;
use countersign_tests::github::{
    FakeGithub, GH_DAVE, PRODUCTION, SOLO, deliver, deployment_event, opened_id,
    run_completed_event,
};
use countersign_tests::{BOB, DECIDER_A, KEY_A, TestApp, decision_body, eventually};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);

/// `workflow_run` / `completed` of `run`'s `attempt`, ended at `ended_at` (GitHub's clock).
fn run_ended(run: u64, attempt: u64, ended_at: i64) -> Value {
    let mut event = run_completed_event(run, "cancelled");
    event["workflow_run"]["run_attempt"] = json!(attempt);
    event["workflow_run"]["updated_at"] = json!(rfc3339(ended_at));
    event
}

/// A replay under a fresh delivery id: answered as a duplicate, nothing written.
fn assert_replay_refused(replay: &countersign_tests::Reply) {
    let answer = replay.json();
    assert_eq!(
        (&answer["status"], &answer["outcome"]),
        (&json!("duplicate"), &json!("ignored")),
        "{}",
        replay.text()
    );
}

/// Opens a round of `run` on the solo environment (sender dave): its approval.
async fn open_solo_round(t: &TestApp, github: &FakeGithub, run: u64, delivery: &str) -> String {
    opened_id(
        &deliver(
            t,
            "deployment_protection_rule",
            delivery,
            &deployment_event(&github.base, run, SOLO, GH_DAVE),
        )
        .await,
    )
}

async fn started() -> (FakeGithub, TestApp) {
    let github = FakeGithub::start().await;
    let t = TestApp::start_with(&[("GITHUB", &github.config())]).await;
    (github, t)
}

/// Opens a round of `run` and delivers the end of its attempt 1, ended `offset` seconds from
/// the round's opening by GitHub's clock: the round's approval.
async fn round_then_end(t: &TestApp, github: &FakeGithub, run: u64, offset: i64) -> String {
    let id = opened_id(
        &deliver(
            t,
            "deployment_protection_rule",
            &format!("d-{run}-waits"),
            &deployment_event(&github.base, run, PRODUCTION, GH_DAVE),
        )
        .await,
    );
    let ended = deliver(
        t,
        "workflow_run",
        &format!("d-{run}-ends"),
        &run_ended(run, 1, t.clock.now() + offset),
    )
    .await;
    assert_eq!(ended.status, 200, "{}", ended.text());
    id
}

async fn sweep(t: &TestApp) -> countersign::jobs::SweepReport {
    countersign::jobs::Expirer::new(t.function(countersign::Function::Sweeper))
        .run()
        .await
        .expect("the sweep")
}

/// The delivery id is not signed: a captured body sent again under a fresh one passed the inbox.
/// Now the event is known by what it names — the waiting job's deployment, the run's attempt —
/// in the delivery's own transaction: a replayed `requested` after its round was answered opens
/// no new round, and a replayed `completed` does not close a re-run's round.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replayed_signed_github_body_under_a_fresh_delivery_id_changes_nothing() {
    let github = FakeGithub::start().await;
    let t = TestApp::start_jobs(&[("GITHUB", &github.config())]).await;
    let run = 7_001;
    github.wait(run, SOLO);
    let body = deployment_event(&github.base, run, SOLO, GH_DAVE);
    let id = opened_id(&deliver(&t, "deployment_protection_rule", "d-first", &body).await);
    let vote = t
        .decide(DECIDER_A, &id, decision_body("approve", BOB))
        .await;
    assert_eq!(vote.status, 200, "{}", vote.text());
    assert_eq!(github.wait_for_reviews(run, 1, WAIT).await.len(), 1);
    let replay = deliver(&t, "deployment_protection_rule", "d-replayed", &body).await;
    assert_replay_refused(&replay);
    assert_eq!(t.approval_count().await, 1, "no second round");

    // A run whose round its end closed; a re-run's job waits; the end replayed.
    let rerun = 7_002;
    github.wait(rerun, SOLO);
    let first = open_solo_round(&t, &github, rerun, "d-attempt-1").await;
    let ended = run_ended(rerun, 1, t.clock.now() + 60);
    let closed = deliver(&t, "workflow_run", "d-end-1", &ended).await;
    assert_eq!(closed.json()["outcome"], "cancelled", "{}", closed.text());
    assert_eq!(t.get(KEY_A, &first).await.json()["status"], "cancelled");
    // The re-run's job waits at once: by the clocks, its round too is before the end replayed.
    let second = open_solo_round(&t, &github, rerun, "d-attempt-2").await;
    let replay = deliver(&t, "workflow_run", "d-end-1-replayed", &ended).await;
    assert_replay_refused(&replay);
    assert_eq!(
        t.get(KEY_A, &second).await.json()["status"],
        "pending",
        "the re-run's round survives"
    );
}

/// A run cancelled a second after its job began waiting. Its round opened within the
/// two clocks' margin of the run's end, so whose it is, the clocks cannot say: before, it was
/// left pending for a day. GitHub is asked (by the sweep): the run is still completed at the
/// attempt that ended, so the round closes and its approval is cancelled.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_run_cancelled_a_second_after_its_job_waits_cancels_its_approval() {
    let (github, t) = started().await;
    let run = 7_101;
    // The run ends a second after its round opened, by GitHub's clock.
    let id = round_then_end(&t, &github, run, 1).await;
    assert_eq!(
        t.get(KEY_A, &id).await.json()["status"],
        "pending",
        "unclear yet"
    );
    github.set_run(run, true, 1);
    let report = sweep(&t).await;
    println!(
        "the sweep: {report:?}; GitHub asked for runs {:?}",
        github.run_reads()
    );
    assert_eq!(report.run_ends_closed, 1, "{report:?}");
    let approval = t.get(KEY_A, &id).await.json();
    assert_eq!(approval["status"], "cancelled", "{approval}");
    assert_eq!(approval["cancellation"]["by"], "github");
    assert_eq!(github.run_reads(), [run]);
    sweep(&t).await;
    assert_eq!(github.run_reads(), [run], "settled: never asked again");
}

/// A re-run keeps the run's id, and GitHub's deliveries may come out of order: the end of
/// attempt 1 arrives two seconds after attempt 2's job began waiting. GitHub says the run is at
/// attempt 2: the round is the re-run's, kept pending.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_re_runs_round_survives_its_predecessors_late_end() {
    let (github, t) = started().await;
    let run = 7_201;
    // Attempt 1's end, two seconds before the re-run's round opened, arrives after it.
    let id = round_then_end(&t, &github, run, -2).await;
    github.set_run(run, false, 2);
    let report = sweep(&t).await;
    assert_eq!(report.run_ends_closed, 0, "{report:?}");
    assert_eq!(github.run_reads(), [run]);
    assert_eq!(t.get(KEY_A, &id).await.json()["status"], "pending");
    sweep(&t).await;
    assert_eq!(
        github.run_reads(),
        [run],
        "settled: kept, never asked again"
    );
}

/// An answer whose first attempt could not mint a token (nothing sent) and whose second finds
/// nothing waiting (GitHub's 422: the run ended meanwhile) did not land: before, the ledger's
/// two attempts made the 422 count as the first attempt's success. It ends failed — counted
/// apart, as nothing waits any more.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_422_after_attempts_that_never_sent_is_not_a_success() {
    let github = FakeGithub::start().await;
    let t = TestApp::start_jobs(&[("GITHUB", &github.config())]).await;
    let run = 7_301;
    github.wait(run, SOLO);
    github.fail_tokens(1);
    let id = opened_id(
        &deliver(
            &t,
            "deployment_protection_rule",
            "d-token-down",
            &deployment_event(&github.base, run, SOLO, GH_DAVE),
        )
        .await,
    );
    // The run stops waiting (cancelled in GitHub) before the answer's second attempt.
    github.end_run(run);
    let vote = t
        .decide(DECIDER_A, &id, decision_body("approve", BOB))
        .await;
    assert_eq!(vote.status, 200, "{}", vote.text());
    let done = t.wait_for_execution(KEY_A, &id, WAIT).await;
    println!("{}", done["execution"]);
    assert_eq!(done["execution"]["status"], "failed", "{done}");
    assert!(
        done["execution"]["last_error"]
            .as_str()
            .unwrap_or_default()
            .contains("422"),
        "{done}"
    );
    eventually("counted as nothing waits, not as a failure", || async {
        t.metrics
            .take()
            .iter()
            .any(|doc| doc.contains("\"nothing_waits\""))
    })
    .await;
}

/// A run with 50 rounds open (one per environment) ends: 50 pointers closed and 50 approvals
/// cancelled — more than one transaction's 100 items, so in several, the delivery recorded with
/// the last.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_run_with_fifty_open_environments_closes_whole() {
    let github = FakeGithub::start().await;
    let mut config: Value = serde_json::from_str(&github.config()).expect("GITHUB");
    let environments = config["tenant-a"]["environments"]
        .as_object_mut()
        .expect("environments");
    for i in 0..50 {
        environments.insert(format!("region-{i:02}"), json!({"approvers": [BOB]}));
    }
    let t = TestApp::start_with(&[("GITHUB", &config.to_string())]).await;
    let run = 7_401;
    let mut ids = Vec::new();
    for i in 0..50 {
        let environment = format!("region-{i:02}");
        ids.push(opened_id(
            &deliver(
                &t,
                "deployment_protection_rule",
                &format!("d-region-{i}"),
                &deployment_event(&github.base, run, &environment, GH_DAVE),
            )
            .await,
        ));
    }
    let ended = deliver(
        &t,
        "workflow_run",
        "d-all-regions-end",
        &run_ended(run, 1, t.clock.now() + 60),
    )
    .await;
    assert_eq!(ended.status, 200, "{}", ended.text());
    assert_eq!(ended.json()["outcome"], "cancelled", "{}", ended.text());
    for id in &ids {
        assert_eq!(t.get(KEY_A, id).await.json()["status"], "cancelled", "{id}");
    }
    let again = deliver(
        &t,
        "workflow_run",
        "d-all-regions-end",
        &run_ended(run, 1, t.clock.now() + 60),
    )
    .await;
    assert_eq!(again.json()["outcome"], "ignored", "{}", again.text());
}
