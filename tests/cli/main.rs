//! The `countersign` CLI (`cli/`), run as the real binary against a test stack (the real router
//! on a loopback port, the dispatcher and executor polling the local AWS, the test downstream
//! as the action targets). The gate (`request --wait`) ends with each of its exit codes; a re-run
//! with the same idempotency key attaches to the same approval; lost connections and 5xx on the
//! way are ridden out; `--json` output parses; list, show, vote, events and cancel each run.
//!
//! The binary is `target/debug/countersign`: build it first (`cargo build --workspace --bins`;
//! `make test` does).
//!
//! Here the gate: its exit codes, its re-runs and what it rides out, and how it waits. The
//! harness that runs the binary is in `harness.rs`; the read commands in `reads.rs`, the
//! administrator's `keys` commands in `keys.rs`, `countersign mcp` in `mcp.rs` (its tasks in
//! `mcp_tasks.rs`, over `mcp_wire.rs`, checked by `task_schema.rs`), `delegate` in
//! `delegate.rs`.

mod claims;
mod delegate;
mod flaky_front;
mod harness;
mod keys;
mod mcp;
mod mcp_tasks;
mod mcp_wire;
mod policy;
mod reads;
mod task_schema;
mod verify;

use std::time::{Duration, Instant};

use countersign_tests::{ALICE, ALICE_KEY, CI_KEY, eventually, execute_key};
use serde_json::Value;

use crate::flaky_front::{Fault, FlakyFront};
use crate::harness::{
    approved_gate, assert_has, assert_starts, background, countersign, countersign_at, created_id,
    gate, gate_args, request_args, run, start, stderr, stdout, stdout_json, vote,
};

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
