//! The rounds of work the long-lived runner takes after its load (`long_lived.rs`), on the same
//! process and tables: approval-only approvals raced by two claimers, then GitHub deployments
//! each gated by a storm of deliveries. Apart because each is a scenario of its own, run for
//! the state the load left behind.

use std::time::{Duration, Instant};

use countersign::webhook::WebhookSecret;
use countersign_tests::github::{
    FakeGithub, GH_ALICE, GITHUB_WEBHOOK_SECRET, PRODUCTION, deployment_event, github_headers,
};
use countersign_tests::jobs::Downstream;
use countersign_tests::local_runner::LocalRunner;
use countersign_tests::{
    ACME_SECRET, ALICE, BOB, CAROL, DECIDER_A, KEY_A, TENANT_A, decided_event, decision_body,
    signed_delivery,
};
use futures::StreamExt;
use serde_json::json;

use crate::client::{create, decide, get, send};

/// GitHub deployments on the long-lived runner: each run's job waits on production and GitHub
/// sends three deliveries (one of them twice) at once — one approval. Two of three approve
/// most (GitHub hears `approved`), bob rejects every fifth (`rejected`), and every seventh
/// run ends first (cancelled, GitHub hears nothing). Returns the deployments and the decisions
/// GitHub took.
pub(crate) async fn github_round(runner: &LocalRunner, github: &FakeGithub) -> (usize, usize) {
    const RUNS: u64 = 20;
    let deliver = |delivery: String, body: String, event: &'static str| {
        let mut request = runner
            .http
            .post(runner.url(&format!("/github/events/{TENANT_A}")))
            .body(body.clone());
        for (name, value) in github_headers(GITHUB_WEBHOOK_SECRET, event, &delivery, &body) {
            request = request.header(name, value);
        }
        send(request)
    };
    let rounds: Vec<(u64, String)> = futures::stream::iter(1..=RUNS)
        .map(|n| {
            let run = 9_000 + n;
            async move {
                github.wait(run, PRODUCTION);
                let body = deployment_event(&github.base, run, PRODUCTION, GH_ALICE).to_string();
                let (a, b, c, d) = futures::join!(
                    deliver(
                        format!("ll-gh-{run}-a"),
                        body.clone(),
                        "deployment_protection_rule"
                    ),
                    deliver(
                        format!("ll-gh-{run}-a"),
                        body.clone(),
                        "deployment_protection_rule"
                    ),
                    deliver(
                        format!("ll-gh-{run}-b"),
                        body.clone(),
                        "deployment_protection_rule"
                    ),
                    deliver(
                        format!("ll-gh-{run}-c"),
                        body.clone(),
                        "deployment_protection_rule"
                    ),
                );
                let ids: std::collections::BTreeSet<String> = [&a, &b, &c, &d]
                    .iter()
                    .map(|r| {
                        r.json()["approval_id"]
                            .as_str()
                            .unwrap_or_default()
                            .to_owned()
                    })
                    .filter(|id| !id.is_empty())
                    .collect();
                assert_eq!(ids.len(), 1, "run {run}: one round, one approval");
                let id = ids.into_iter().next().expect("the approval");
                if n % 7 == 0 {
                    github.end_run(run);
                    let end = json!({"action": "completed",
                        "workflow_run": {"id": run, "conclusion": "cancelled"},
                        "repository": {"id": countersign_tests::github::REPOSITORY_ID}});
                    let ended =
                        deliver(format!("ll-gh-{run}-end"), end.to_string(), "workflow_run").await;
                    assert_eq!(ended.json()["outcome"], "cancelled");
                } else if n % 5 == 0 {
                    let rejected = runner
                        .http
                        .post(runner.url(&format!("/approvals/{id}/decision")))
                        .bearer_auth(DECIDER_A)
                        .json(&decision_body("reject", BOB));
                    assert_eq!(send(rejected).await.status, 200);
                } else {
                    // Alice asked: her vote is refused; bob and carol approve.
                    assert_eq!(
                        send(decide(runner, DECIDER_A, &id, ALICE)).await.status,
                        403
                    );
                    assert_eq!(send(decide(runner, DECIDER_A, &id, BOB)).await.status, 200);
                    assert_eq!(
                        send(decide(runner, DECIDER_A, &id, CAROL)).await.status,
                        200
                    );
                }
                (run, id)
            }
        })
        .buffer_unordered(4)
        .collect()
        .await;
    let deadline = Instant::now() + Duration::from_secs(120);
    for (run, id) in &rounds {
        let n = run - 9_000;
        let expected = if n % 7 == 0 { 0 } else { 1 };
        loop {
            let decisions = github.decisions(*run);
            if decisions.len() == expected && !github.is_waiting(*run, PRODUCTION) {
                if expected == 1 {
                    let state = if n % 5 == 0 { "rejected" } else { "approved" };
                    assert_eq!(decisions[0].state, state, "run {run} ({id})");
                    assert!(decisions[0].comment.contains(id.as_str()));
                }
                break;
            }
            assert!(decisions.len() <= expected, "run {run}: {decisions:?}");
            assert!(
                Instant::now() < deadline,
                "run {run} ({id}): {decisions:?}\n{}",
                runner.log_tail()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    // And nothing more after a while: every round told once (or not at all).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let told: usize = rounds
        .iter()
        .map(|(run, _)| github.decisions(*run).len())
        .sum();
    assert_eq!(
        told,
        rounds
            .iter()
            .filter(|(run, _)| (run - 9_000) % 7 != 0)
            .count()
    );
    (rounds.len(), told)
}

pub(crate) fn secret_for_agents() -> WebhookSecret {
    WebhookSecret::parse(ACME_SECRET).expect("secret")
}

/// More work on the long-lived runner after the rest: approval-only approvals, half approved
/// through a webhook delivered twice, half through the API; two claimers race for each (one
/// wins, the other is refused), the winner reports, and every one ends `succeeded` with exactly
/// one claim, without any execute job or downstream call.
pub(crate) async fn approval_only_round(
    runner: &LocalRunner,
    secret: WebhookSecret,
    downstream: &Downstream,
) -> usize {
    const AGENTS: usize = 40;
    let calls_before = downstream.calls_to("/ok").len();
    let claim = |id: &str, key: &str| {
        runner
            .http
            .post(runner.url(&format!("/approvals/{id}/execution/claim")))
            .bearer_auth(KEY_A)
            .header("idempotency-key", key)
    };
    let ids: Vec<String> = futures::stream::iter(0..AGENTS)
        .map(|i| {
            let secret = &secret;
            async move {
                let body = json!({"action": {"type": "agent", "payload": {"tool_name": "Bash", "input": {"n": i}}},
                                  "approvers": [ALICE]})
                .to_string();
                let created = send(create(runner, KEY_A, &format!("ll-agent-{i}"), &body)).await;
                assert_eq!(created.status, 201);
                let id = created.json()["id"].as_str().expect("id").to_owned();
                if i % 2 == 0 {
                    let event = decided_event(&id, "approve", ALICE);
                    let url = runner.url("/webhooks/acme");
                    let event_id = format!("msg_ll_agent_{i}");
                    let deliver = || signed_delivery(&runner.http, &url, secret, &event_id, &event);
                    let (a, b) = futures::join!(send(deliver()), send(deliver()));
                    assert_eq!((a.json()["outcome"].clone(), b.json()["outcome"].clone()), (json!("applied"), json!("applied")));
                } else {
                    assert_eq!(send(decide(runner, DECIDER_A, &id, ALICE)).await.status, 200);
                }
                let approved = send(get(runner, KEY_A, &id)).await.json();
                assert_eq!(
                    (approved["status"].as_str(), approved["execution"]["status"].as_str()),
                    (Some("approved"), Some("not_started")),
                    "{approved}"
                );
                let (a, b) = futures::join!(send(claim(&id, "claim-a")), send(claim(&id, "claim-b")));
                let mut statuses = [a.status, b.status];
                statuses.sort_unstable();
                assert_eq!(statuses, [200, 409], "one claimer of two");
                let winner = if a.status == 200 { "claim-a" } else { "claim-b" };
                let report = runner
                    .http
                    .post(runner.url(&format!("/approvals/{id}/execution/report")))
                    .bearer_auth(KEY_A)
                    .header("idempotency-key", winner)
                    .json(&json!({"outcome": "succeeded"}));
                assert_eq!(send(report).await.status, 200);
                id
            }
        })
        .buffer_unordered(8)
        .collect()
        .await;
    for id in &ids {
        let approval = send(get(runner, KEY_A, id)).await.json();
        assert_eq!(approval["execution"]["status"], "succeeded", "{approval}");
        assert!(
            approval["execution"]["claimed_by"]
                .as_str()
                .is_some_and(|k| k.starts_with("claim-"))
        );
    }
    assert_eq!(
        downstream.calls_to("/ok").len(),
        calls_before,
        "no approval-only type is ever called"
    );
    ids.len()
}
