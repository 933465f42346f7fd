//! The commands that read what the gate did: `list` (by status, by approver `me`), `show`, and
//! `events` (once, and `--follow` while the quorum completes and the action runs), in text and
//! `--json`.

use countersign_tests::{ALICE, ALICE_KEY, BOB, BOB_KEY, CI_KEY, eventually};
use serde_json::{Value, json};

use crate::harness::{
    assert_starts, background, countersign, run, start, stdout, stdout_json, vote,
};

#[tokio::test]
async fn list_show_and_events_read_what_the_gate_did() {
    let t = start().await;
    let created = run(countersign(
        &t,
        CI_KEY,
        &[
            "request",
            "--type",
            "deploy",
            "--approver",
            &format!("{ALICE},{BOB}"),
            "--min-approvals",
            "2",
            "--context",
            r#"{"summary": "Deploy api build 1042"}"#,
            "--idempotency-key",
            "pipeline-12",
            "--json",
        ],
    ))
    .await
    .code(0);
    let approval = stdout_json(&created);
    let id = approval["id"].as_str().expect("id").to_owned();
    assert_eq!(approval["policy"]["rules"][0]["min_approvals"], 2);
    assert_eq!(approval["context"]["summary"], "Deploy api build 1042");

    // Listing by approver reads an index that dispatch keeps from the stream.
    eventually("alice's inbox lists it", || async {
        let page = t
            .get_path(ALICE_KEY, &format!("/approvals?approver={ALICE}"))
            .await
            .json();
        page["approvals"].as_array().is_some_and(|a| !a.is_empty())
    })
    .await;
    let listed = run(countersign(
        &t,
        ALICE_KEY,
        &["list", "--status", "pending", "--approver", "me", "--json"],
    ))
    .await
    .code(0);
    let page = stdout_json(&listed);
    assert_eq!(page["approvals"][0]["id"], id.as_str(), "alice's inbox");
    assert_eq!(page["next_cursor"], Value::Null);
    let listed = run(countersign(
        &t,
        CI_KEY,
        &["list", "--approver", "me", "--json"],
    ))
    .await
    .code(0);
    assert_eq!(
        stdout_json(&listed)["approvals"],
        json!([]),
        "ci approves nothing"
    );
    let listed = run(countersign(&t, ALICE_KEY, &["list", "--status", "pending"]))
        .await
        .code(0);
    assert_starts(&stdout(&listed), &format!("{id}  pending    deploy"));

    let shown = run(countersign(&t, BOB_KEY, &["show", &id])).await.code(0);
    let text = stdout(&shown);
    assert!(
        text.starts_with(&format!("{id}  pending · 0/2 approvals")),
        "{text}"
    );
    assert!(text.contains("requested: by ci@acme"), "{text}");

    // Follow the trail while the quorum completes and the action runs.
    let follow = background(countersign(
        &t,
        CI_KEY,
        &[
            "events",
            &id,
            "--follow",
            "--json",
            "--poll-interval",
            "100ms",
            "--max-poll-interval",
            "400ms",
        ],
    ));
    vote(&t, ALICE_KEY, &id, "approve").await;
    let shown = run(countersign(&t, BOB_KEY, &["show", &id, "--json"]))
        .await
        .code(0);
    assert_eq!(stdout_json(&shown)["policy"]["rules"][0]["approvals"], 1);
    vote(&t, BOB_KEY, &id, "approve").await;
    let followed = follow.await.expect("events --follow").code(0);
    let followed: Vec<Value> = stdout(&followed)
        .lines()
        .map(|line| serde_json::from_str(line).expect("one JSON event a line"))
        .collect();
    let types: Vec<&str> = followed.iter().filter_map(|e| e["type"].as_str()).collect();
    for expected in [
        "approval.created",
        "approval.vote_recorded",
        "approval.approved",
        "execution.succeeded",
    ] {
        assert!(types.contains(&expected), "{expected} in {types:?}");
    }
    let mut ids: Vec<&str> = followed.iter().filter_map(|e| e["id"].as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), followed.len(), "each event once: {types:?}");

    let events = run(countersign(&t, CI_KEY, &["events", &id])).await.code(0);
    let text = stdout(&events);
    assert!(
        text.lines()
            .next()
            .is_some_and(|l| l.contains("approval.created") && l.contains("ci@acme (api)")),
        "{text}"
    );
    assert!(text.lines().count() >= followed.len(), "{text}");
}
