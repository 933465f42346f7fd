//! The `countersign` CLI (`cli/`), run as the real binary against a test stack (the real router
//! on a loopback port, the dispatcher and executor polling the local AWS, the test downstream
//! as the action targets). The gate (`request --wait`) ends with each of its exit codes; a re-run
//! with the same idempotency key attaches to the same approval; lost connections and 5xx on the
//! way are ridden out; `--json` output parses; list, show, vote, events and cancel each run.
//!
//! The binary is `target/debug/countersign`: build it first (`cargo build --workspace --bins`;
//! `make test` does).

mod flaky_front;
mod mcp;

use std::time::{Duration, Instant};

use assert_cmd::Command;
use assert_cmd::assert::Assert;
use countersign_tests::runtime_api::function_binary;
use countersign_tests::{
    ALICE, ALICE_KEY, ApiKeys, BOB, BOB_KEY, CI, CI_KEY, TestApp, eventually, execute_key,
};
use serde_json::{Value, json};

use crate::flaky_front::{Fault, FlakyFront};

fn api_keys() -> String {
    ApiKeys::new()
        .key(CI, &["requester", "operator"], CI_KEY)
        .key(ALICE, &["approver"], ALICE_KEY)
        .key(BOB, &["approver"], BOB_KEY)
        .to_string()
}

async fn start() -> TestApp {
    TestApp::start_jobs(&[("API_KEYS", &api_keys())]).await
}

/// `countersign ARGS` against `base` as `key`, configured by the environment as a pipeline
/// would be. No run may outlast a minute.
fn countersign_at(base: &str, key: &str, args: &[&str]) -> Command {
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

fn countersign(t: &TestApp, key: &str, args: &[&str]) -> Command {
    countersign_at(&t.base, key, args)
}

/// Runs to the end off the test's runtime, which keeps serving the app meanwhile.
async fn run(command: Command) -> Assert {
    background(command).await.expect("the countersign run")
}

fn background(mut command: Command) -> tokio::task::JoinHandle<Assert> {
    tokio::task::spawn_blocking(move || command.assert())
}

fn stdout(assert: &Assert) -> String {
    String::from_utf8_lossy(&assert.get_output().stdout).into_owned()
}

fn stderr(assert: &Assert) -> String {
    String::from_utf8_lossy(&assert.get_output().stderr).into_owned()
}

#[track_caller]
fn assert_has(text: &str, needle: &str) {
    assert!(text.contains(needle), "{needle:?} not in:\n{text}");
}

#[track_caller]
fn assert_starts(text: &str, start: &str) {
    assert!(text.starts_with(start), "{start:?} does not start:\n{text}");
}

fn stdout_json(assert: &Assert) -> Value {
    serde_json::from_str(&stdout(assert))
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", stdout(assert)))
}

/// A request for `action` (approver alice) under idempotency key `key`.
fn request_args<'a>(action: &'a str, key: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
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
fn gate_args<'a>(action: &'a str, key: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
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
async fn created_id(t: &TestApp) -> String {
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
async fn gate(
    t: &TestApp,
    action: &str,
    key: &str,
    extra: &[&str],
) -> (String, tokio::task::JoinHandle<Assert>) {
    let gate = background(countersign(t, CI_KEY, &gate_args(action, key, extra)));
    (created_id(t).await, gate)
}

/// A gate whose approval alice approves: how it ended.
async fn approved_gate(t: &TestApp, action: &str, key: &str, extra: &[&str]) -> (String, Assert) {
    let (id, gate) = gate(t, action, key, extra).await;
    vote(t, ALICE_KEY, &id, "approve").await;
    (id, gate.await.expect("gate"))
}

async fn vote(t: &TestApp, key: &str, id: &str, decision: &str) {
    let reply = t.decide(key, id, json!({"decision": decision})).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
}

#[tokio::test]
async fn the_gate_exits_0_once_approved_and_executed() {
    let t = start().await;
    let (id, gate) = gate(&t, "deploy", "pipeline-1", &[]).await;

    let voted = run(countersign(
        &t,
        ALICE_KEY,
        &["vote", &id, "approve", "--comment", "lgtm"],
    ))
    .await
    .code(0);
    assert_has(&stderr(&voted), "approve recorded");
    assert_has(&stdout(&voted), "vote:      alice@example.com approve");

    let gate = gate.await.expect("gate").code(0);
    let (out, err) = (stdout(&gate), stderr(&gate));
    assert_starts(&out, &format!("{id}  approved by {ALICE}"));
    assert_has(&out, "execution: succeeded (1 attempt)");
    assert_has(&err, &format!("created {id}"));
    // Not a terminal: one plain line per change, no carriage returns.
    assert_has(&err, &format!("{id} pending · 0/1 approvals"));
    assert!(!err.contains('\r'), "{err:?}");
    assert_eq!(t.downstream().effects(&execute_key("pipeline-1", &id)), 1);
}

#[tokio::test]
async fn with_no_execution_the_gate_exits_0_once_approved() {
    let t = start().await;
    // A target that keeps failing: the execution does not succeed while the gate runs.
    let (id, gate) = approved_gate(
        &t,
        "always_503",
        "pipeline-2",
        &["--no-execution", "--json"],
    )
    .await;
    let gate = gate.code(0);
    let approval = stdout_json(&gate);
    assert_eq!(approval["id"], id.as_str());
    assert_eq!(approval["status"], "approved");
    assert_ne!(approval["execution"]["status"], "succeeded");
}

/// An approval-only type's execution is its caller's (it claims it): the gate's verdict is the
/// decision, at once, not a wait for an execution nobody else will start.
#[tokio::test]
async fn the_gate_of_an_approval_only_type_exits_0_once_approved() {
    let t = start().await;
    let started = Instant::now();
    let (_, gate) = approved_gate(&t, "agent", "pipeline-agent", &["--json"]).await;
    let approval = stdout_json(&gate.code(0));
    assert_eq!(
        (
            approval["status"].as_str(),
            approval["execution"]["status"].as_str()
        ),
        (Some("approved"), Some("not_started"))
    );
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn the_gate_exits_1_when_rejected() {
    let t = start().await;
    let (id, gate) = gate(&t, "deploy", "pipeline-3", &[]).await;
    let voted = run(countersign(
        &t,
        ALICE_KEY,
        &["vote", &id, "reject", "--comment", "not today", "--json"],
    ))
    .await
    .code(0);
    assert_eq!(stdout_json(&voted)["status"], "rejected");

    let gate = gate.await.expect("gate").code(1);
    assert_starts(
        &stdout(&gate),
        &format!("{id}  rejected by {ALICE}: not today"),
    );
    assert_eq!(t.downstream().effects(&execute_key("pipeline-3", &id)), 0);
}

#[tokio::test]
async fn the_gate_exits_2_when_the_approval_expires() {
    let t = start().await;
    let (_, gate) = gate(&t, "deploy", "pipeline-4", &["--expires-in", "60s"]).await;
    t.clock.advance(61);

    let gate = gate.await.expect("gate").code(2);
    assert_has(&stdout(&gate), "expired at");
}

#[tokio::test]
async fn the_gate_exits_2_when_the_approval_is_cancelled() {
    let t = start().await;
    let (id, gate) = gate(&t, "deploy", "pipeline-5", &[]).await;
    let cancelled = run(countersign(
        &t,
        CI_KEY,
        &["cancel", &id, "--reason", "superseded"],
    ))
    .await
    .code(0);
    assert_starts(
        &stdout(&cancelled),
        &format!("{id}  cancelled by ci@acme: superseded"),
    );

    let gate = gate.await.expect("gate").code(2);
    assert_has(&stdout(&gate), "cancelled: by ci@acme");
}

#[tokio::test]
async fn the_gate_exits_3_when_the_execution_fails() {
    let t = start().await;
    // The target refuses the first call (400): the execution fails for good.
    let (_, gate) = approved_gate(&t, "reject_once", "pipeline-6", &[]).await;
    let gate = gate.code(3);
    assert_has(&stdout(&gate), "execution: failed (1 attempt; last error:");
}

#[tokio::test]
async fn the_gate_exits_3_when_the_execution_needs_reconciliation() {
    let t = start().await;
    // A target that is not idempotent answers 303 after acting: the outcome is an operator's.
    let (_, gate) = approved_gate(&t, "unsafe_see_other", "pipeline-7", &["--json"]).await;
    let gate = gate.code(3);
    assert_eq!(
        stdout_json(&gate)["execution"]["status"],
        "needs_reconciliation"
    );
}

#[tokio::test]
async fn usage_and_api_errors_exit_4_with_the_problem() {
    let t = start().await;
    for args in [
        &["request", "--approver", ALICE][..],
        &[
            "request",
            "--type",
            "deploy",
            "--approver",
            ALICE,
            "--timeout",
            "5x",
        ],
        &[
            "request",
            "--type",
            "deploy",
            "--approver",
            ALICE,
            "--no-execution",
        ],
        &[
            "request",
            "--type",
            "deploy",
            "--approver",
            ALICE,
            "--payload",
            "[1]",
        ],
        &["vote", "apr_x", "maybe"],
        &["--bogus"],
        &[],
    ] {
        let refused = run(countersign(&t, CI_KEY, args)).await.code(4);
        assert!(!stderr(&refused).is_empty(), "{args:?} says why");
    }
    let mut unconfigured = countersign(&t, CI_KEY, &["show", "apr_x"]);
    unconfigured.env_remove("COUNTERSIGN_URL");
    let unconfigured = run(unconfigured).await.code(4);
    assert_has(&stderr(&unconfigured), "COUNTERSIGN_URL");
    run(countersign(&t, CI_KEY, &["--help"])).await.code(0);

    // The API's refusal: its detail and code, and each offending field.
    let refused = run(countersign(
        &t,
        CI_KEY,
        &[
            "request",
            "--type",
            "launch_rockets",
            "--approver",
            ALICE,
            "--wait",
        ],
    ))
    .await
    .code(4);
    assert_has(&stderr(&refused), "(unknown_action_type, HTTP 400)");
    let refused = run(countersign(
        &t,
        CI_KEY,
        &[
            "request",
            "--type",
            "deploy",
            "--approver",
            ALICE,
            "--expires-in",
            "5s",
            "--json",
        ],
    ))
    .await
    .code(4);
    let problem: Value = serde_json::from_str(stderr(&refused).trim()).expect("a JSON error");
    assert_eq!(problem["code"], "invalid_request");
    assert_eq!(problem["errors"][0]["field"], "expires_in_seconds");
    let unknown = run(countersign(
        &t,
        ALICE_KEY,
        &["show", "apr_01JD3ZZZZZZZZZZZZZZZZZZZZ0"],
    ))
    .await
    .code(4);
    assert_has(&stderr(&unknown), "(not_found, HTTP 404)");
    assert_eq!(t.approval_count().await, 0);
}

#[tokio::test]
async fn an_unreachable_api_exits_4_when_the_timeout_runs_out() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let started = Instant::now();
    let failed = run(countersign_at(
        &format!("http://127.0.0.1:{port}"),
        CI_KEY,
        &gate_args("deploy", "pipeline-8", &["--timeout", "2s"]),
    ))
    .await
    .code(4);
    let err = stderr(&failed);
    assert_has(&err, "cannot connect");
    assert_has(&err, "retrying in");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_gate_whose_timeout_runs_out_while_pending_exits_4() {
    let t = start().await;
    let waited = run(countersign(
        &t,
        CI_KEY,
        &gate_args("deploy", "pipeline-9", &["--timeout", "1500ms"]),
    ))
    .await
    .code(4);
    let err = stderr(&waited);
    assert_has(&err, "error: timed out after ");
    assert_has(&err, "waiting for apr_");
    assert!(
        err.trim_end().ends_with(": pending · 0/1 approvals"),
        "{err}"
    );
    assert!(
        stdout(&waited).is_empty(),
        "no verdict, no approval printed"
    );
}

#[tokio::test]
async fn rerunning_the_gate_attaches_to_the_same_approval() {
    let t = start().await;
    // The pipeline's first run dies while waiting (here: asks without --wait).
    let first = run(countersign(
        &t,
        CI_KEY,
        &request_args("deploy", "pipeline-10", &["--json"]),
    ))
    .await
    .code(0);
    let id = stdout_json(&first)["id"].as_str().expect("id").to_owned();
    assert_eq!(stdout_json(&first)["status"], "pending");

    // The re-run of the same step attaches to it and waits for its outcome.
    let gate = background(countersign(
        &t,
        CI_KEY,
        &gate_args("deploy", "pipeline-10", &["--json"]),
    ));
    vote(&t, ALICE_KEY, &id, "approve").await;
    let gate = gate.await.expect("gate").code(0);
    assert_eq!(stdout_json(&gate)["id"], id.as_str());
    assert_has(&stderr(&gate), &format!("attached to {id}"));

    // And a re-run after the outcome passes at once, on the same approval.
    let again = run(countersign(
        &t,
        CI_KEY,
        &gate_args("deploy", "pipeline-10", &["--json"]),
    ))
    .await
    .code(0);
    assert_eq!(stdout_json(&again)["id"], id.as_str());
    assert_eq!(t.approval_count().await, 1);
    assert_eq!(t.downstream().effects(&execute_key("pipeline-10", &id)), 1);
}

#[tokio::test]
async fn the_gate_rides_out_lost_connections_and_5xx() {
    let t = start().await;
    let front = FlakyFront::start(&t.base).await;
    // The create: a connection lost unanswered, a 503, then one whose answer is lost after the
    // approval was made — the retry is a replay of it.
    front.inject(&[Fault::Drop, Fault::Unavailable, Fault::LoseAnswer]);
    let gate = background(countersign_at(
        &front.base,
        CI_KEY,
        &gate_args("deploy", "pipeline-11", &[]),
    ));
    let id = created_id(&t).await;
    // While it waits: its connection is cut, the next is lost, and the one after answers 503.
    front.inject(&[Fault::Drop, Fault::Unavailable]);
    eventually("the gate meets every fault", || async {
        front.pending() == 0
    })
    .await;
    vote(&t, ALICE_KEY, &id, "approve").await;

    let gate = gate.await.expect("gate").code(0);
    let err = stderr(&gate);
    assert!(
        err.matches("retrying in").count() >= 5,
        "one retry per fault: {err}"
    );
    assert_has(&err, "injected by the test (unavailable, HTTP 503)");
    assert_has(&err, &format!("attached to {id}"));
    assert_eq!(t.approval_count().await, 1);
    assert_eq!(t.downstream().effects(&execute_key("pipeline-11", &id)), 1);
}

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

/// The gate waits with held reads (`GET /approvals/{id}?wait=…&until=executed`): an approval
/// decided 3 s after the gate began costs it a request or two, not one per poll interval.
#[tokio::test]
async fn the_gate_waits_with_held_reads_not_polls() {
    let t = start().await;
    let (id, gate) = gate(&t, "deploy", "pipeline-held", &[]).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    vote(&t, ALICE_KEY, &id, "approve").await;
    gate.await.expect("gate").code(0);
    let reads = t.requests.count("GET", &format!("/approvals/{id}"));
    println!("a gate that waited about 3 s made {reads} reads (polling every 100-400 ms: ~10)");
    assert!((1..=4).contains(&reads), "{reads} reads");
}

/// `countersign keys …` against the test app's keys table over the local AWS, as an
/// administrator runs it: a created key works at once through the API; `list` shows no secret
/// or hash; `roll` overlaps; `revoke` ends a key; refusals exit 1 and change nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn keys_are_created_listed_rolled_and_revoked_over_aws_credentials() {
    let t = start().await;
    let table = t.app.store.tables().api_keys.clone();
    let keys = |args: &[&str]| {
        let mut command = Command::new(function_binary("countersign", "debug"));
        command
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .env("KEYS_TABLE", &table)
            .args(["keys"])
            .args(args)
            .timeout(Duration::from_secs(60));
        if let Some(endpoint) = countersign_tests::aws_endpoint() {
            command.env("AWS_ENDPOINT_URL", endpoint);
        }
        command
    };
    let created = run(keys(&[
        "create",
        "--tenant",
        "tenant-a",
        "--principal",
        "ci@tenant-a",
        "--role",
        "requester",
        "--role",
        "reader",
        "--expires-in",
        "90d",
        "--description",
        "pipeline",
    ]))
    .await
    .success();
    let key = stdout(&created).trim().to_owned();
    assert_starts(&key, "csk_");
    assert_has(&stderr(&created), "shown this once");
    let key_id = key[4..20].to_owned();
    let status = |key: String| {
        let t = &t;
        async move {
            t.send(t.http.get(t.url("/approvals/nope")).bearer_auth(key))
                .await
                .status
        }
    };
    assert_eq!(status(key.clone()).await, 404, "works on its first request");

    let listed = run(keys(&["list", "--json"])).await.success();
    let listed: Value = serde_json::from_str(&stdout(&listed)).expect("list --json");
    assert_eq!(listed[0]["key_id"], key_id.as_str());
    assert_eq!(listed[0]["roles"], json!(["requester", "reader"]));
    assert_eq!(listed[0]["description"], "pipeline");
    // Review of v5, finding 8: who created it is the caller's AWS identity (STS), not $USER.
    assert_starts(
        listed[0]["created_by"].as_str().unwrap_or_default(),
        "arn:aws:",
    );
    let text = stdout(&run(keys(&["list", "--tenant", "tenant-a"])).await.success());
    assert_has(&text, &key_id);
    assert!(!text.contains(&key[21..53]), "no secret in list");
    assert!(!listed.to_string().contains("hash"), "no hash in list");

    // An overlap shorter than a warm function keeps a key (KEY_CACHE_SECONDS, 60 by default)
    // would let the old key work past it: refused, nothing written.
    let short = run(keys(&["roll", &key_id, "--overlap", "30s"]))
        .await
        .code(4);
    assert_has(&stderr(&short), "KEY_CACHE_SECONDS");
    let rolled = run(keys(&["roll", &key_id, "--overlap", "1h", "--json"]))
        .await
        .success();
    let rolled: Value = serde_json::from_str(&stdout(&rolled)).expect("roll --json");
    let new_key = rolled["key"].as_str().expect("the new key").to_owned();
    assert_eq!(status(new_key.clone()).await, 404, "the successor works");
    assert_eq!(
        status(key.clone()).await,
        404,
        "the old key during the overlap"
    );

    run(keys(&["revoke", &key_id])).await.success();
    let again = run(keys(&["revoke", &key_id])).await.code(1);
    assert_has(&stderr(&again), "revoked");
    run(keys(&["roll", &key_id])).await.code(1);
    run(keys(&["revoke", "aaaaaaaaaaaaaaaa"])).await.code(1);
    run(keys(&[
        "create",
        "--tenant",
        "tenant-a",
        "--principal",
        "x@tenant-a",
        "--role",
        "requester",
        "--role",
        "decider",
    ]))
    .await
    .code(4);
    t.clock.advance(61);
    assert_eq!(
        status(key).await,
        401,
        "revoked, once the cache time is over"
    );
    assert_eq!(status(new_key).await, 404);
    let listed = run(keys(&["list", "--json"])).await.success();
    let listed: Value = serde_json::from_str(&stdout(&listed)).expect("list --json");
    assert_eq!(
        listed.as_array().map(Vec::len),
        Some(2),
        "one key and its successor"
    );
}
