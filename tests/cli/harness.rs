//! Running the real `countersign` binary against a test stack: the stack with the suite's keys,
//! the command configured as a pipeline would configure it, run off the test's runtime, its
//! output read, and the gate (`request --wait`) started in the background beside the approval
//! it made. Shared by every suite of this binary (`main.rs`, `reads.rs`, `keys.rs`, `mcp.rs`,
//! `delegate.rs`).

use std::time::{Duration, Instant};

use assert_cmd::Command;
use assert_cmd::assert::Assert;
use countersign_tests::runtime_api::function_binary;
use countersign_tests::{
    ALICE, ALICE_KEY, ApiKeys, BOB, BOB_KEY, CI, CI_KEY, KEY_B, TENANT_B, TestApp,
};
use serde_json::{Value, json};

/// CI's key after a roll: the same tenant, principal and roles, another secret.
pub(crate) const ROLLED_CI_KEY: &str = "ci-rolled-key-0123456789abcdef";

fn api_keys() -> String {
    ApiKeys::new()
        .key(CI, &["requester", "operator"], CI_KEY)
        .key(ALICE, &["approver"], ALICE_KEY)
        .key(BOB, &["approver"], BOB_KEY)
        // CI's key after `keys roll`, while the old one lasts (`mcp_tasks.rs`).
        .key(CI, &["requester", "operator"], ROLLED_CI_KEY)
        // Another tenant's requester (`mcp_tasks.rs`: its key cannot use tenant A's tasks).
        .key_in(TENANT_B, "agent@tenant-b", &["requester"], KEY_B)
        .to_string()
}

pub(crate) async fn start() -> TestApp {
    TestApp::start_jobs(&[("API_KEYS", &api_keys())]).await
}

/// `countersign ARGS` against `base` as `key`, configured by the environment as a pipeline
/// would be. No run may outlast a minute.
pub(crate) fn countersign_at(base: &str, key: &str, args: &[&str]) -> Command {
    let mut command = Command::new(function_binary("countersign", "debug"));
    command
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("COUNTERSIGN_URL", base)
        .env("COUNTERSIGN_API_KEY", key)
        .args(args)
        .timeout(Duration::from_secs(60));
    command
}

pub(crate) fn countersign(t: &TestApp, key: &str, args: &[&str]) -> Command {
    countersign_at(&t.base, key, args)
}

/// Runs to the end off the test's runtime, which keeps serving the app meanwhile.
pub(crate) async fn run(command: Command) -> Assert {
    background(command).await.expect("the countersign run")
}

pub(crate) fn background(mut command: Command) -> tokio::task::JoinHandle<Assert> {
    tokio::task::spawn_blocking(move || command.assert())
}

pub(crate) fn stdout(assert: &Assert) -> String {
    String::from_utf8_lossy(&assert.get_output().stdout).into_owned()
}

pub(crate) fn stderr(assert: &Assert) -> String {
    String::from_utf8_lossy(&assert.get_output().stderr).into_owned()
}

#[track_caller]
pub(crate) fn assert_has(text: &str, needle: &str) {
    assert!(text.contains(needle), "{needle:?} not in:\n{text}");
}

#[track_caller]
pub(crate) fn assert_starts(text: &str, start: &str) {
    assert!(text.starts_with(start), "{start:?} does not start:\n{text}");
}

pub(crate) fn stdout_json(assert: &Assert) -> Value {
    serde_json::from_str(&stdout(assert))
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", stdout(assert)))
}

/// A request for `action` (approver alice) under idempotency key `key`.
pub(crate) fn request_args<'a>(action: &'a str, key: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "request",
        "--type",
        action,
        "--payload",
        r#"{"service": "api", "build": 1042}"#,
        "--approver",
        ALICE,
        "--idempotency-key",
        key,
    ];
    args.extend_from_slice(extra);
    args
}

/// The same as a gate, polling fast.
pub(crate) fn gate_args<'a>(action: &'a str, key: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = request_args(
        action,
        key,
        &[
            "--wait",
            "--timeout",
            "50s",
            "--poll-interval",
            "100ms",
            "--max-poll-interval",
            "400ms",
        ],
    );
    args.extend_from_slice(extra);
    args
}

/// The id of the one approval the test's gate created, once it exists.
pub(crate) async fn created_id(t: &TestApp) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let request = t.http.get(t.url("/approvals")).bearer_auth(CI_KEY);
        let page = t.send(request).await.json();
        if let Some(id) = page["approvals"][0]["id"].as_str() {
            return id.to_owned();
        }
        assert!(Instant::now() < deadline, "the gate made no approval");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Starts a gate (see [`gate_args`]) in the background; returns the id of the approval it made.
pub(crate) async fn gate(
    t: &TestApp,
    action: &str,
    key: &str,
    extra: &[&str],
) -> (String, tokio::task::JoinHandle<Assert>) {
    let gate = background(countersign(t, CI_KEY, &gate_args(action, key, extra)));
    (created_id(t).await, gate)
}

/// A gate whose approval alice approves: how it ended.
pub(crate) async fn approved_gate(
    t: &TestApp,
    action: &str,
    key: &str,
    extra: &[&str],
) -> (String, Assert) {
    let (id, gate) = gate(t, action, key, extra).await;
    vote(t, ALICE_KEY, &id, "approve").await;
    (id, gate.await.expect("gate"))
}

pub(crate) async fn vote(t: &TestApp, key: &str, id: &str, decision: &str) {
    let reply = t.decide(key, id, json!({"decision": decision})).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
}
