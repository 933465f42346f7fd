//! `countersign mcp` and the MCP tasks extension, over the real binary's stdio. With a client
//! that declares the extension on its requests: a `request_approval` task polled `working` (its
//! `statusMessage` the quorum's progress) until two votes complete it with the approval, through
//! a restart of the server; `permission_prompt` tasks completing allow (claimed, the approved
//! input) or deny (rejected, expired); `tasks/cancel` cancelling a pending approval and leaving a
//! decided one; a task id unknown to another tenant's key and when forged. Every answer is
//! checked against the extension's schema (`task_schema.rs`), as sent (`mcp_wire.rs`). Without
//! the extension: blocking calls send progress at least every configured interval and end
//! within the configured wait. And the SDK's own client (`rmcp`) runs a task end to end.

use std::time::Duration;

use countersign_tests::runtime_api::function_binary;
use countersign_tests::{ALICE, ALICE_KEY, BOB, BOB_KEY, CI_KEY, KEY_B, TestApp};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities, ClientConfig,
    GetTaskParams, Implementation, ProtocolVersion, TaskPayload, TaskStatus,
};
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::{ClientLifecycleMode, ClientServiceExt};
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tokio::time::Instant;

use crate::harness::{ROLLED_CI_KEY, start, vote};
use crate::mcp_wire::{Wire, content};
use crate::task_schema::{acknowledged, created_task, got_task};

/// An approval two people must both approve, asked under `key`.
fn quorum_request(key: &str) -> Value {
    json!({"action_type": "agent", "payload": {"refund": key, "amount": 4200},
           "approvers": [ALICE, BOB], "summary": "refund a double charge",
           "policy": {"rules": [{"name": "both", "approvers": [ALICE, BOB], "min_approvals": 2}]},
           "idempotency_key": key})
}

fn prompt(tool_use_id: &str, input: Value) -> Value {
    json!({"tool_name": "Bash", "input": input, "tool_use_id": tool_use_id})
}

/// The approval created under idempotency key `key`.
async fn approval_by_key(t: &TestApp, key: &str) -> Value {
    let page = t
        .send(t.http.get(t.url("/approvals")).bearer_auth(CI_KEY))
        .await
        .json();
    page["approvals"]
        .as_array()
        .and_then(|all| all.iter().find(|a| a["idempotency_key"] == key))
        .cloned()
        .unwrap_or_else(|| panic!("no approval under {key}: {page}"))
}

/// A `tools/call` answered with a task: its id, and the approval it stands for.
async fn task_of(
    t: &TestApp,
    wire: &mut Wire,
    tool: &str,
    args: Value,
    key: &str,
) -> (String, Value) {
    let created = wire.call(tool, args).await.expect("tools/call");
    created_task(&created);
    assert_eq!(created["status"], "working");
    let approval = approval_by_key(t, key).await;
    assert_eq!(created["createdAt"], approval["created_at"]);
    let at = |field: &str| {
        OffsetDateTime::parse(approval[field].as_str().expect("a time"), &Rfc3339)
            .expect("RFC 3339")
    };
    let ttl = (at("expires_at") - at("created_at")).whole_milliseconds();
    assert_eq!(
        created["ttlMs"].as_i64().map(i128::from),
        Some(ttl),
        "{created}"
    );
    assert_eq!(created["pollIntervalMs"], 5000);
    let task_id = created["taskId"].as_str().expect("a taskId").to_owned();
    let id = approval["id"].as_str().expect("id");
    assert!(
        !task_id.contains(id) && !task_id.contains(key),
        "opaque: {task_id}"
    );
    (task_id, approval)
}

async fn working(wire: &mut Wire, task_id: &str) -> String {
    let task = wire.get_task(task_id).await.expect("tasks/get");
    got_task(&task, "working");
    task["statusMessage"]
        .as_str()
        .expect("a statusMessage")
        .to_owned()
}

/// The completed task's result: the tool's answer.
async fn completed(wire: &mut Wire, task_id: &str) -> (Value, Value) {
    let task = wire.get_task(task_id).await.expect("tasks/get");
    got_task(&task, "completed");
    assert_eq!(task["result"]["isError"], false, "{task}");
    (content(&task["result"]), task)
}

#[track_caller]
fn assert_starts(text: &str, start: &str) {
    assert!(text.starts_with(start), "{start:?} does not start {text:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_request_approval_task_works_until_its_quorum_then_completes_with_the_approval() {
    let t = start().await;
    let mut wire = Wire::start(&t, CI_KEY, true, &[]).await;
    let (task_id, approval) = task_of(
        &t,
        &mut wire,
        "request_approval",
        quorum_request("refund-ch_9"),
        "refund-ch_9",
    )
    .await;
    let id = approval["id"].as_str().expect("id").to_owned();
    let line = working(&mut wire, &task_id).await;
    assert_starts(
        &line,
        "0 of 2 approvals; waiting on alice@example.com, bob@example.com",
    );
    vote(&t, ALICE_KEY, &id, "approve").await;
    let line = working(&mut wire, &task_id).await;
    assert_starts(&line, "1 of 2 approvals; waiting on bob@example.com");
    assert!(line.contains(&id), "{line}");

    // Asked again under the same key: the same approval, the same task.
    let again = wire
        .call("request_approval", quorum_request("refund-ch_9"))
        .await
        .expect("tools/call");
    created_task(&again);
    assert_eq!(again["taskId"], task_id.as_str());
    // Nothing ever needs input: an update is acknowledged.
    let update = json!({"taskId": task_id, "inputResponses": {}});
    let ack = wire
        .request("tasks/update", update)
        .await
        .expect("tasks/update");
    acknowledged("UpdateTaskResult", &ack);

    // The server goes away between polls; a new one answers the same task.
    wire.kill().await;
    let mut wire = Wire::start(&t, CI_KEY, true, &[]).await;
    let line = working(&mut wire, &task_id).await;
    assert_starts(&line, "1 of 2 approvals; waiting on bob@example.com");

    vote(&t, BOB_KEY, &id, "approve").await;
    let (decided, task) = completed(&mut wire, &task_id).await;
    assert_eq!(
        (decided["id"].as_str(), decided["status"].as_str()),
        (Some(id.as_str()), Some("approved"))
    );
    assert_eq!(decided["votes"].as_array().map(Vec::len), Some(2));
    assert_eq!(
        decided,
        t.get(CI_KEY, &id).await.json(),
        "the approval as the API shows it"
    );
    assert_eq!(task["lastUpdatedAt"], decided["decision"]["decided_at"]);
    assert!(
        task["statusMessage"]
            .as_str()
            .is_some_and(|m| m.contains("approved")),
        "{task}"
    );
    wire.kill().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_permission_prompt_task_completes_allow_once_approved_and_deny_once_rejected_or_expired()
{
    let t = start().await;
    let mut wire = Wire::start(&t, CI_KEY, true, &[]).await;
    let input = json!({"command": "rm -rf build/", "description": "clean the build", "n": 1.5});
    let args = prompt("toolu_task_allow", input.clone());
    let (allow, approval) =
        task_of(&t, &mut wire, "permission_prompt", args, "toolu_task_allow").await;
    let id = approval["id"].as_str().expect("id").to_owned();
    assert_starts(
        &working(&mut wire, &allow).await,
        "0 of 1 approvals; waiting on alice@example.com",
    );
    vote(&t, ALICE_KEY, &id, "approve").await;
    let (answer, _) = completed(&mut wire, &allow).await;
    assert_eq!(answer, json!({"behavior": "allow", "updatedInput": input}));
    assert_eq!(
        answer["updatedInput"].to_string(),
        input.to_string(),
        "byte for byte"
    );
    let execution = &t.get(CI_KEY, &id).await.json()["execution"];
    assert_eq!(execution["claimed_by"], "toolu_task_allow");
    assert_eq!(execution["status"], "succeeded", "the hand-over reported");
    // Polled again: the claim replays, the same allow.
    assert_eq!(completed(&mut wire, &allow).await.0, answer);

    let args = prompt("toolu_task_reject", json!({"command": "git push --force"}));
    let (reject, approval) = task_of(
        &t,
        &mut wire,
        "permission_prompt",
        args,
        "toolu_task_reject",
    )
    .await;
    let rejected = approval["id"].as_str().expect("id").to_owned();
    vote(&t, ALICE_KEY, &rejected, "reject").await;
    let (answer, _) = completed(&mut wire, &reject).await;
    assert_eq!(answer["behavior"], "deny");
    assert!(
        answer["message"]
            .as_str()
            .is_some_and(|m| m.contains("Rejected by alice@example.com")),
        "{answer}"
    );
    let execution = &t.get(CI_KEY, &rejected).await.json()["execution"];
    assert_eq!(execution["status"], "not_started", "nothing claimed");

    let args = prompt("toolu_task_expire", json!({"command": "ls"}));
    let (expire, _) = task_of(
        &t,
        &mut wire,
        "permission_prompt",
        args,
        "toolu_task_expire",
    )
    .await;
    working(&mut wire, &expire).await;
    t.clock.advance(604_800 + 60);
    let (answer, task) = completed(&mut wire, &expire).await;
    assert_eq!(answer["behavior"], "deny");
    assert!(
        answer["message"]
            .as_str()
            .is_some_and(|m| m.contains("expired")),
        "{answer}"
    );
    assert!(
        task["statusMessage"]
            .as_str()
            .is_some_and(|m| m.contains("expired")),
        "{task}"
    );
    wire.kill().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tasks_cancel_cancels_a_pending_approval_and_leaves_a_decided_one_as_it_is() {
    let t = start().await;
    let mut wire = Wire::start(&t, CI_KEY, true, &[]).await;
    let (pending, approval) = task_of(
        &t,
        &mut wire,
        "request_approval",
        quorum_request("cancel-me"),
        "cancel-me",
    )
    .await;
    let id = approval["id"].as_str().expect("id").to_owned();
    let ack = wire.cancel_task(&pending).await.expect("tasks/cancel");
    acknowledged("CancelTaskResult", &ack);
    let read = t.get(CI_KEY, &id).await.json();
    assert_eq!(read["status"], "cancelled", "{read}");
    assert!(
        read["cancellation"]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("tasks/cancel")),
        "{read}"
    );
    let (ended, _) = completed(&mut wire, &pending).await;
    assert_eq!(ended["status"], "cancelled");
    acknowledged(
        "CancelTaskResult",
        &wire.cancel_task(&pending).await.expect("again"),
    );

    let args = prompt("toolu_decided", json!({"command": "make"}));
    let (decided, approval) =
        task_of(&t, &mut wire, "permission_prompt", args, "toolu_decided").await;
    let id = approval["id"].as_str().expect("id").to_owned();
    vote(&t, ALICE_KEY, &id, "approve").await;
    let ack = wire.cancel_task(&decided).await.expect("tasks/cancel");
    acknowledged("CancelTaskResult", &ack);
    assert_eq!(
        t.get(CI_KEY, &id).await.json()["status"],
        "approved",
        "it stays decided"
    );
    assert_eq!(completed(&mut wire, &decided).await.0["behavior"], "allow");
    wire.kill().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_task_id_is_not_found_with_another_tenants_key_nor_when_forged() {
    let t = start().await;
    let mut wire = Wire::start(&t, CI_KEY, true, &[]).await;
    let (task_id, approval) = task_of(
        &t,
        &mut wire,
        "request_approval",
        quorum_request("tenant-a-1"),
        "tenant-a-1",
    )
    .await;
    let id = approval["id"].as_str().expect("id").to_owned();
    let not_found = |answer: Result<Value, Value>| {
        let error = answer.expect_err("an error");
        assert_eq!(error["code"], -32602, "Invalid params: {error}");
        assert!(
            error["message"]
                .as_str()
                .is_some_and(|m| m.contains("not found")),
            "{error}"
        );
    };

    let mut other = Wire::start(&t, KEY_B, true, &[]).await;
    not_found(other.get_task(&task_id).await);
    not_found(other.cancel_task(&task_id).await);
    let update = json!({"taskId": task_id, "inputResponses": {}});
    not_found(other.request("tasks/update", update).await);
    assert_eq!(
        t.get(CI_KEY, &id).await.json()["status"],
        "pending",
        "nothing cancelled"
    );
    other.kill().await;

    // Review of v6, finding 14 (the docs' choice): a task id is bound to its key's secret, so a
    // key roll ends the ids made under the old key — and the same call under the new key
    // attaches to the same approval, a task of its own.
    let mut rolled = Wire::start(&t, ROLLED_CI_KEY, true, &[]).await;
    let error = rolled.get_task(&task_id).await.expect_err("an error");
    not_found(Err(error.clone()));
    assert!(
        error["message"]
            .as_str()
            .is_some_and(|m| m.contains("key roll") && m.contains("call the tool again")),
        "the answer says why and how to reattach: {error}"
    );
    let again = rolled
        .call("request_approval", quorum_request("tenant-a-1"))
        .await
        .expect("tools/call");
    created_task(&again);
    let reattached = again["taskId"].as_str().expect("a taskId").to_owned();
    assert_ne!(reattached, task_id);
    assert!(working(&mut rolled, &reattached).await.contains(&id));
    rolled.kill().await;

    let (payload, tag) = task_id.split_once('.').expect("payload.tag");
    let flipped = if tag.ends_with('A') { "B" } else { "A" };
    for forged in [
        String::new(),
        "garbage".to_owned(),
        id.clone(),
        format!("{task_id}A"),
        format!("{payload}.{}{flipped}", &tag[..tag.len() - 1]),
        format!("{}.{tag}", &payload[1..]),
    ] {
        not_found(wire.get_task(&forged).await);
        not_found(wire.cancel_task(&forged).await);
    }
    assert_eq!(t.get(CI_KEY, &id).await.json()["status"], "pending");
    wire.kill().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_the_extension_a_blocking_call_sends_progress_and_ends_within_its_wait() {
    let t = start().await;
    let every = Duration::from_secs(1);
    let wait = Duration::from_secs(3);
    let env = [
        ("COUNTERSIGN_AGENT_WAIT", "3"),
        ("COUNTERSIGN_AGENT_PROGRESS_SECONDS", "1"),
    ];
    let mut wire = Wire::start(&t, CI_KEY, false, &env).await;
    // No extension, no task: the approval itself.
    let plain = wire
        .call("request_approval", quorum_request("plain-1"))
        .await
        .expect("tools/call");
    assert!(
        plain.get("taskId").is_none() && plain["resultType"] != "task",
        "{plain}"
    );
    let id = content(&plain)["id"].as_str().expect("id").to_owned();

    // Request 2: the prompt waits its 3 s, beating every second, and denies.
    let started = Instant::now();
    let denied = wire
        .call(
            "permission_prompt",
            prompt("toolu_progress", json!({"command": "ls"})),
        )
        .await
        .expect("tools/call");
    let ended = Instant::now();
    let answer = content(&denied);
    assert_eq!(answer["behavior"], "deny");
    assert!(
        answer["message"]
            .as_str()
            .is_some_and(|m| m.contains("Still waiting")),
        "{answer}"
    );
    assert_beats(&wire, "progress-2", started, ended, every, wait);

    // Request 3: asked for 10 s, it waits at most the configured 3.
    let started = Instant::now();
    let waited = wire
        .call(
            "wait_for_decision",
            json!({"id": id, "timeout_seconds": 10}),
        )
        .await
        .expect("tools/call");
    let ended = Instant::now();
    assert_eq!(content(&waited)["status"], "pending");
    assert_beats(&wire, "progress-3", started, ended, every, wait);
    wire.kill().await;
}

/// The call from `started` to `ended` waited about `wait` and no longer, and its progress
/// (token `token`) came at least every `every`, increasing, out of the wait.
#[track_caller]
fn assert_beats(
    wire: &Wire,
    token: &str,
    started: Instant,
    ended: Instant,
    every: Duration,
    wait: Duration,
) {
    let took = ended - started;
    let slack = Duration::from_millis(700);
    // The wait, and the create and the answer around it (a loaded machine's moto included).
    assert!(
        took >= wait && took <= wait + Duration::from_secs(2),
        "took {took:?}"
    );
    let beats: Vec<&(Instant, Value)> = wire
        .notifications
        .iter()
        .filter(|(_, n)| {
            n["method"] == "notifications/progress" && n["params"]["progressToken"] == token
        })
        .collect();
    assert!(beats.len() >= 2, "{} progress notifications", beats.len());
    let mut last = (started, 0.0);
    for (at, beat) in beats {
        let progress = beat["params"]["progress"].as_f64().expect("progress");
        assert!(
            *at - last.0 <= every + slack,
            "{:?} without progress",
            *at - last.0
        );
        assert!(progress > last.1, "progress increases: {beat}");
        assert_eq!(beat["params"]["total"].as_f64(), Some(wait.as_secs_f64()));
        assert!(
            beat["params"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("Countersign approval"))
        );
        last = (*at, progress);
    }
    assert!(
        ended - last.0 <= every + slack,
        "{:?} without progress at the end",
        ended - last.0
    );
}

/// The SDK's own client (`rmcp`, protocol 2026-07-28's per-request lifecycle, the extension in
/// its capabilities): a task made, polled and completed, and another cancelled.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_sdks_own_client_declares_the_extension_and_runs_tasks() {
    let t = start().await;
    let command =
        tokio::process::Command::new(function_binary("countersign", "debug")).configure(|c| {
            c.env_clear()
                .env("PATH", std::env::var("PATH").unwrap_or_default())
                .env("COUNTERSIGN_URL", &t.base)
                .env("COUNTERSIGN_API_KEY", CI_KEY)
                .arg("mcp");
        });
    let transport = TokioChildProcess::new(command).expect("spawn countersign mcp");
    // The capabilities' builder is the server feature's: the same declaration, as JSON.
    let capabilities: ClientCapabilities =
        serde_json::from_value(json!({"extensions": {crate::mcp_wire::TASKS: {}}}))
            .expect("client capabilities");
    assert!(capabilities.supports_tasks());
    let config = ClientConfig::new(capabilities, Implementation::new("countersign-tests", "0"));
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    let client = config
        .serve_with_lifecycle(transport, lifecycle)
        .await
        .expect("server/discover");
    let peer = client.peer();
    assert!(
        peer.peer_info()
            .is_some_and(|info| info.capabilities.supports_tasks()),
        "the server declares the extension"
    );
    let call = |key: &str| {
        let arguments = quorum_request(key).as_object().cloned().unwrap_or_default();
        peer.call_tool_once(
            CallToolRequestParams::new("request_approval").with_arguments(arguments),
        )
    };
    let CallToolResponse::Task(created) = call("sdk-1").await.expect("tools/call") else {
        panic!("not a task");
    };
    assert_eq!(created.task.status, TaskStatus::Working);
    let task_id = created.task.task_id.clone();
    let got = peer
        .get_task(GetTaskParams::new(&task_id))
        .await
        .expect("tasks/get");
    assert_eq!(got.task.status(), TaskStatus::Working);
    let id = approval_by_key(&t, "sdk-1").await["id"]
        .as_str()
        .expect("id")
        .to_owned();
    vote(&t, ALICE_KEY, &id, "approve").await;
    vote(&t, BOB_KEY, &id, "approve").await;
    let got = peer
        .get_task(GetTaskParams::new(&task_id))
        .await
        .expect("tasks/get");
    let TaskPayload::Completed { result } = got.task.payload else {
        panic!("not completed: {got:?}");
    };
    assert_eq!(result["structuredContent"]["status"], "approved");

    let CallToolResponse::Task(other) = call("sdk-2").await.expect("tools/call") else {
        panic!("not a task");
    };
    peer.cancel_task(CancelTaskParams::new(other.task.task_id.clone()))
        .await
        .expect("tasks/cancel");
    let cancelled = approval_by_key(&t, "sdk-2").await;
    assert_eq!(cancelled["status"], "cancelled");
    client.cancel().await.expect("close");
}
