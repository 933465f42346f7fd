//! `countersign claim` and `countersign report`: the approval-only flow from a shell script,
//! against a running stack — of eight claims at once with eight keys one wins, its key claims
//! again safely, and its report ends the execution.

use countersign_tests::{ALICE, ALICE_KEY, CI_KEY, CreateBody};
use futures::future::join_all;

use crate::harness::{assert_has, countersign, run, start, stderr, stdout, stdout_json, vote};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn of_eight_claims_one_wins_and_its_key_reports_the_outcome() {
    let t = start().await;
    let id = t
        .create_ok(
            CI_KEY,
            "cli-claim-1",
            &CreateBody::new("agent", &[ALICE]).to_string(),
        )
        .await;
    vote(&t, ALICE_KEY, &id, "approve").await;

    let keys: Vec<String> = (0..8).map(|i| format!("claim-key-{i}")).collect();
    let runs = join_all(keys.iter().map(|key| {
        run(countersign(
            &t,
            CI_KEY,
            &["--json", "claim", &id, "--key", key],
        ))
    }))
    .await;
    let winners: Vec<usize> = runs
        .iter()
        .enumerate()
        .filter(|(_, r)| r.get_output().status.code() == Some(0))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(winners.len(), 1, "one claim wins of eight");
    let winner = &keys[winners[0]];
    for (i, r) in runs.iter().enumerate().filter(|(i, _)| *i != winners[0]) {
        assert_eq!(r.get_output().status.code(), Some(4), "loser {i}");
        assert_has(&format!("{}{}", stdout(r), stderr(r)), "already_claimed");
    }
    let claimed = stdout_json(&runs[winners[0]]);
    assert_eq!(claimed["execution"]["status"], "running");

    // The same key again (a lost answer): the same claim, replayed.
    let again = run(countersign(&t, CI_KEY, &["claim", &id, "--key", winner])).await;
    assert_eq!(
        again.get_output().status.code(),
        Some(0),
        "{}",
        stderr(&again)
    );
    assert_has(&stderr(&again), "already claimed with this key");

    let reported = run(countersign(
        &t,
        CI_KEY,
        &[
            "--json",
            "report",
            &id,
            "--key",
            winner,
            "--outcome",
            "succeeded",
            "--detail",
            "deployed 1042",
        ],
    ))
    .await;
    let done = stdout_json(&reported);
    assert_eq!(done["execution"]["status"], "succeeded");
    assert_eq!(done["execution"]["note"], "deployed 1042");
    // Another claimer's key may not report.
    let other = keys.iter().find(|k| *k != winner).unwrap();
    let refused = run(countersign(
        &t,
        CI_KEY,
        &["report", &id, "--key", other, "--outcome", "failed"],
    ))
    .await;
    assert_eq!(refused.get_output().status.code(), Some(4));
}
