//! Decision to effect: from the answer to the vote that completes an approval's quorum to the
//! target's call, through the whole chain (the approvals stream, dispatch, the jobs queue, the
//! executor), on one long-lived local runner (`countersign-local`, as `make run` starts it).
//! 200 approvals of a 2-of-2 quorum; the completing votes are sent 8 at a time.

use std::time::{Duration, Instant};

use countersign_tests::jobs::Downstream;
use countersign_tests::local_runner::{LocalRunner, isolated_env};
use countersign_tests::{
    ACME_SECRET, ALICE, BOB, DECIDER_A, KEY_A, TENANT_A, TOKEN_SECRET, execute_key, test_api_keys,
};
use futures::StreamExt;
use serde_json::json;

use crate::Stats;

pub async fn run(approvals: usize, concurrency: usize) {
    let downstream = Downstream::default();
    let target = downstream.serve().await;
    let mut env = isolated_env(&format!(
        "bench-effect-{}",
        ulid::Ulid::new().to_string().to_lowercase()
    ))
    .await;
    env.extend(
        [
            ("API_KEYS", test_api_keys()),
            (
                "ACTION_TARGETS",
                json!({"deploy": {"url": format!("{target}/ok"), "idempotent": true}}).to_string(),
            ),
            ("NOTIFIER_URL", format!("{target}/notify")),
            (
                "WEBHOOK_SOURCES",
                json!({"acme": {"tenant": TENANT_A, "secrets": [ACME_SECRET]}}).to_string(),
            ),
            ("DECISION_TOKEN_SECRET", TOKEN_SECRET.to_owned()),
            (
                "PUBLIC_BASE_URL",
                "https://approvals.example.com".to_owned(),
            ),
        ]
        .map(|(k, v)| (k.to_owned(), v)),
    );
    let runner = LocalRunner::start(&env).await;
    let vote = |id: &str, approver: &str| {
        runner
            .http
            .post(runner.url(&format!("/approvals/{id}/decision")))
            .bearer_auth(DECIDER_A)
            .json(&json!({"decision": "approve", "approver": approver}))
    };

    // Created and given their first vote beforehand: only the completing votes are timed.
    let mut ids = Vec::with_capacity(approvals);
    for i in 0..approvals {
        let body = json!({
            "action": {"type": "deploy", "payload": {"build": i}},
            "approvers": [ALICE, BOB],
            "policy": {"rules": [{"name": "both", "approvers": [ALICE, BOB], "min_approvals": 2}]}
        });
        let created = runner
            .http
            .post(runner.url("/approvals"))
            .bearer_auth(KEY_A)
            .header("idempotency-key", format!("effect-{i}"))
            .json(&body)
            .send()
            .await
            .expect("create");
        assert_eq!(created.status(), 201);
        let approval: serde_json::Value = created.json().await.expect("json");
        let id = approval["id"].as_str().expect("id").to_owned();
        let counted = vote(&id, ALICE).send().await.expect("vote");
        assert_eq!(counted.status(), 200);
        ids.push(id);
    }
    // Let the first votes' jobs (notifications) drain before the timed part.
    tokio::time::sleep(Duration::from_secs(5)).await;

    let started = Instant::now();
    let answered: Vec<(usize, Instant)> = futures::stream::iter(0..approvals)
        .map(|i| {
            let request = vote(&ids[i], BOB);
            async move {
                let reply = request.send().await.expect("completing vote");
                assert_eq!(reply.status(), 200);
                (i, Instant::now())
            }
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut latencies = Vec::with_capacity(approvals);
    for (i, at) in answered {
        let key = execute_key(&format!("effect-{i}"), &ids[i]);
        let effect = loop {
            if let Some(effect) = downstream.first_arrival(&key) {
                break effect;
            }
            assert!(Instant::now() < deadline, "{key} was never called");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        latencies.push(effect.saturating_duration_since(at));
    }
    let wall = started.elapsed();
    let stats = Stats::from(latencies, wall);
    println!(
        "\nDecision to effect (the completing vote's answer → the target's call; stream → dispatch → queue → executor on one local runner): {approvals} approvals at concurrency {concurrency}: p50 {:.0} ms, p99 {:.0} ms; all {approvals} effects in {:.1} s",
        stats.p50.as_secs_f64() * 1000.0,
        stats.p99.as_secs_f64() * 1000.0,
        wall.as_secs_f64()
    );
}
