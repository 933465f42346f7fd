//! The long-lived runner's HTTP client: requests to its API as a pipeline or an approver sends
//! them, each answer read whole and checked for a 5xx, and the wait until every approval's
//! execution has ended. Apart from the tests (`long_lived.rs`), which only say what they send.

use std::time::{Duration, Instant};

use countersign_tests::decision_body;
use countersign_tests::local_runner::LocalRunner;
use serde_json::Value;

/// A response, read whole.
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) replayed: bool,
    pub(crate) body: Vec<u8>,
}

impl Answer {
    pub(crate) fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

pub(crate) async fn send(request: reqwest::RequestBuilder) -> Answer {
    let response = request.send().await.expect("HTTP request");
    let status = response.status().as_u16();
    let replayed = response
        .headers()
        .get("idempotent-replayed")
        .is_some_and(|v| v == "true");
    let body = response.bytes().await.expect("body").to_vec();
    assert!(
        status < 500,
        "server error {status}: {}",
        String::from_utf8_lossy(&body)
    );
    Answer {
        status,
        replayed,
        body,
    }
}

pub(crate) fn create(
    runner: &LocalRunner,
    api_key: &str,
    key: &str,
    body: &str,
) -> reqwest::RequestBuilder {
    runner
        .http
        .post(runner.url("/approvals"))
        .bearer_auth(api_key)
        .header("content-type", "application/json")
        .header("idempotency-key", key)
        .body(body.to_owned())
}

pub(crate) fn decide(
    runner: &LocalRunner,
    api_key: &str,
    id: &str,
    approver: &str,
) -> reqwest::RequestBuilder {
    runner
        .http
        .post(runner.url(&format!("/approvals/{id}/decision")))
        .bearer_auth(api_key)
        .json(&decision_body("approve", approver))
}

pub(crate) fn get(runner: &LocalRunner, api_key: &str, id: &str) -> reqwest::RequestBuilder {
    runner
        .http
        .get(runner.url(&format!("/approvals/{id}")))
        .bearer_auth(api_key)
}

/// Polls until every approval's execution has ended; returns them, or fails after `timeout`.
pub(crate) async fn wait_until_executed(
    runner: &LocalRunner,
    api_key: &str,
    ids: &[String],
    timeout: Duration,
) -> Vec<Value> {
    let deadline = Instant::now() + timeout;
    let mut done: Vec<Option<Value>> = vec![None; ids.len()];
    loop {
        for (i, id) in ids.iter().enumerate() {
            if done[i].is_some() {
                continue;
            }
            let approval = send(get(runner, api_key, id)).await.json();
            if matches!(
                approval["execution"]["status"].as_str(),
                Some("succeeded" | "failed" | "needs_reconciliation")
            ) {
                done[i] = Some(approval);
            }
        }
        let left: Vec<&String> = ids
            .iter()
            .zip(&done)
            .filter(|(_, d)| d.is_none())
            .map(|(id, _)| id)
            .collect();
        if left.is_empty() {
            return done.into_iter().flatten().collect();
        }
        assert!(
            Instant::now() < deadline,
            "{} of {} approvals not executed after {timeout:?}, e.g. {}:\n{}",
            left.len(),
            ids.len(),
            send(get(runner, api_key, left[0])).await.json(),
            runner.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
