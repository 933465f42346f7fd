//! The long-lived runner's last round (`long_lived.rs`): approvals that don't stall, on the
//! same process and tables, its clock moved forward through the runner's own route
//! (`LOCAL_CLOCK=advanceable`), never waited for. Some approvals are reminded twice, some
//! escalated to a lead whose vote (sent twice at once) completes the quorum, some decided by a
//! delegate (bob, standing in for carol) who is told what carol is told and votes in her place
//! twice at once; every reminder reaches only whoever has not voted (and their delegate), once,
//! and every approval is executed once.

use std::time::{Duration, Instant};

use countersign_tests::jobs::Downstream;
use countersign_tests::local_runner::LocalRunner;
use countersign_tests::{ALICE, BOB, BOB_KEY, CAROL, DECIDER_A, KEY_A, execute_key};
use futures::StreamExt;
use serde_json::json;

use crate::client::{create, decide, send, wait_until_executed};

/// `API_KEYS` (a JSON list) with bob's own approver key added.
pub(crate) fn with_bobs_key(keys: &str) -> String {
    let mut keys: Vec<serde_json::Value> = serde_json::from_str(keys).expect("API_KEYS");
    keys.push(
        json!({"tenant": countersign_tests::TENANT_A, "principal": BOB,
                     "roles": ["approver"], "key": BOB_KEY}),
    );
    serde_json::Value::Array(keys).to_string()
}

/// Moves the runner's clock forward by `seconds`.
async fn advance(runner: &LocalRunner, seconds: i64) {
    let moved = send(
        runner
            .http
            .post(runner.url("/_local/clock"))
            .json(&json!({"advance_seconds": seconds})),
    )
    .await;
    assert_eq!(moved.status, 200, "the runner's clock moves");
}

/// Waits until `done` holds (the runner's sweeper runs every 2 s), or fails after a minute.
async fn until(runner: &LocalRunner, what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "{what}:\n{}", runner.log_tail());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Returns (approvals reminded, escalated, decided by a delegate), each executed once.
pub(crate) async fn stall_round(
    runner: &LocalRunner,
    downstream: &Downstream,
) -> (usize, usize, usize) {
    const REMINDED: usize = 10;
    const ESCALATED: usize = 6;
    let delegated = delegated_round(runner, downstream).await;
    let pair = json!({"rules": [{"name": "pair", "approvers": [ALICE, BOB], "min_approvals": 2}]});
    let made: Vec<(String, String, bool)> = futures::stream::iter(0..REMINDED + ESCALATED)
        .map(|i| {
            let pair = pair.clone();
            async move {
                let escalates = i >= REMINDED;
                let mut body = json!({
                    "action": {"type": "deploy", "payload": {"stall": i}},
                    "approvers": [ALICE, BOB],
                    "policy": pair,
                });
                if escalates {
                    body["escalation"] = json!([{"after_seconds": 600, "approvers": [CAROL]}]);
                } else {
                    body["reminders"] =
                        json!({"after_seconds": 60, "every_seconds": 300, "max": 2});
                }
                let key = format!("stall-{i}");
                let created = send(create(runner, KEY_A, &key, &body.to_string())).await;
                assert_eq!(
                    created.status,
                    201,
                    "{}",
                    String::from_utf8_lossy(&created.body)
                );
                let id = created.json()["id"].as_str().expect("id").to_owned();
                // Alice votes at once: only bob is waited on.
                assert_eq!(
                    send(decide(runner, DECIDER_A, &id, ALICE)).await.status,
                    200
                );
                (key, id, escalates)
            }
        })
        .buffer_unordered(4)
        .collect()
        .await;
    let reminder = |id: &str, n: u32, who: &str| format!("{id}:reminder:{n}:{who}");
    let reminded: Vec<&String> = made.iter().filter(|m| !m.2).map(|m| &m.1).collect();
    let escalated: Vec<&String> = made.iter().filter(|m| m.2).map(|m| &m.1).collect();

    advance(runner, 61).await;
    until(runner, "the first reminders", || {
        reminded
            .iter()
            .all(|id| downstream.calls(&reminder(id, 1, BOB)) >= 1)
    })
    .await;
    advance(runner, 600).await;
    until(runner, "the second reminders and the steps", || {
        reminded
            .iter()
            .all(|id| downstream.calls(&reminder(id, 2, BOB)) >= 1)
            && escalated
                .iter()
                .all(|id| downstream.calls(&format!("{id}:escalation:1:{CAROL}")) >= 1)
    })
    .await;
    // The lead's vote, sent twice at once, completes each escalated quorum; bob's the others.
    let votes = made.iter().map(|(_, id, escalates)| async move {
        let voter = if *escalates { CAROL } else { BOB };
        let (a, b) = futures::join!(
            send(decide(runner, DECIDER_A, id, voter)),
            send(decide(runner, DECIDER_A, id, voter))
        );
        assert_eq!((a.status, b.status), (200, 200), "{id}");
        assert!(
            a.replayed != b.replayed,
            "{id}: exactly one of the two decided"
        );
    });
    futures::future::join_all(votes).await;
    let ids: Vec<String> = made.iter().map(|(_, id, _)| id.clone()).collect();
    let done = wait_until_executed(runner, KEY_A, &ids, Duration::from_secs(60)).await;
    for approval in &done {
        assert_eq!(approval["execution"]["status"], "succeeded", "{approval}");
    }
    advance(runner, 600).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    for (key, id, escalates) in &made {
        let execute = execute_key(key, id);
        assert_eq!(
            (downstream.calls(&execute), downstream.effects(&execute)),
            (1, 1),
            "{execute}"
        );
        let (reminders, steps) = match escalates {
            false => (2, 0),
            true => (0, 1),
        };
        for n in 1..=3 {
            let expected = usize::from(n <= reminders);
            assert_eq!(
                downstream.calls(&reminder(id, n, BOB)),
                expected,
                "{id} {n}"
            );
            assert_eq!(downstream.calls(&reminder(id, n, ALICE)), 0, "alice voted");
        }
        assert_eq!(
            downstream.calls(&format!("{id}:escalation:1:{CAROL}")),
            steps,
            "{id}: the step's notification, once"
        );
    }
    (reminded.len(), escalated.len(), delegated)
}

/// Carol is away: an operator lets bob stand in for her for a week. Approvals of alice AND
/// carol: bob is told what carol is told (the notification and the reminder, a copy each, once)
/// and votes in her place, twice at once — one vote, recorded as carol's cast by bob.
async fn delegated_round(runner: &LocalRunner, downstream: &Downstream) -> usize {
    const DELEGATED: usize = 6;
    let now = send(
        runner
            .http
            .post(runner.url("/_local/clock"))
            .json(&json!({"advance_seconds": 1})),
    )
    .await
    .json()["now"]
        .as_i64()
        .expect("the runner's time");
    let week = countersign::domain::rfc3339(now + 7 * 86_400);
    let set = send(
        runner
            .http
            .put(runner.url(&format!("/delegations/{CAROL}")))
            .bearer_auth(KEY_A)
            .json(&json!({"delegate": BOB, "until": week, "reason": "carol is away"})),
    )
    .await;
    assert_eq!(set.status, 200, "{}", String::from_utf8_lossy(&set.body));
    let pair =
        json!({"rules": [{"name": "pair", "approvers": [ALICE, CAROL], "min_approvals": 2}]});
    let mut ids = Vec::new();
    for i in 0..DELEGATED {
        let body = json!({
            "action": {"type": "deploy", "payload": {"delegated": i}},
            "approvers": [ALICE, CAROL],
            "policy": pair,
            "reminders": {"after_seconds": 60, "every_seconds": 300, "max": 1},
        });
        let key = format!("delegated-{i}");
        let created = send(create(runner, KEY_A, &key, &body.to_string())).await;
        assert_eq!(created.status, 201);
        let id = created.json()["id"].as_str().expect("id").to_owned();
        assert_eq!(
            send(decide(runner, DECIDER_A, &id, ALICE)).await.status,
            200
        );
        ids.push((key, id));
    }
    // A delegate's copy is keyed by the delegate (one per delegate, whatever places it opens).
    let copy = |id: &str, what: &str| format!("{id}:{what}:{BOB}:delegate");
    until(runner, "bob's copies of carol's notifications", || {
        ids.iter()
            .all(|(_, id)| downstream.calls(&copy(id, "notify")) >= 1)
    })
    .await;
    advance(runner, 61).await;
    until(runner, "bob's copies of carol's reminders", || {
        ids.iter()
            .all(|(_, id)| downstream.calls(&copy(id, "reminder:1")) >= 1)
    })
    .await;
    for (_, id) in &ids {
        let vote = || {
            runner
                .http
                .post(runner.url(&format!("/approvals/{id}/decision")))
                .bearer_auth(BOB_KEY)
                .json(&json!({"decision": "approve", "approver": CAROL}))
        };
        let (a, b) = futures::join!(send(vote()), send(vote()));
        assert_eq!((a.status, b.status), (200, 200), "{id}");
        assert!(
            a.replayed != b.replayed,
            "{id}: exactly one of the two counted"
        );
        let votes = a.json()["votes"].clone();
        assert!(
            votes
                .as_array()
                .is_some_and(|v| v.iter().any(|v| v["approver"] == CAROL && v["by"] == BOB)),
            "{votes}"
        );
    }
    let just_ids: Vec<String> = ids.iter().map(|(_, id)| id.clone()).collect();
    let done = wait_until_executed(runner, KEY_A, &just_ids, Duration::from_secs(60)).await;
    for approval in &done {
        assert_eq!(approval["execution"]["status"], "succeeded", "{approval}");
    }
    for (key, id) in &ids {
        let execute = execute_key(key, id);
        assert_eq!(
            (downstream.calls(&execute), downstream.effects(&execute)),
            (1, 1)
        );
        assert_eq!(downstream.calls(&copy(id, "notify")), 1, "{id}");
        assert_eq!(downstream.calls(&copy(id, "reminder:1")), 1, "{id}");
    }
    DELEGATED
}
