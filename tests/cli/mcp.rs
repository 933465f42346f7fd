//! `countersign mcp` driven by a real MCP client (`rmcp`'s, over the child's stdio): the
//! handshake and the tool list with their input schemas; Claude Code's permission prompt
//! allowed with the identical input once an approver approves through the API, denied when
//! rejected or still pending at the end of its wait; the server killed during a wait and
//! started again with the same `tool_use_id` attaches to the same approval (one approval, one
//! claim); the agent's own request → wait → claim → report path; a refusal as a tool error.

use std::time::Duration;

use countersign_tests::runtime_api::function_binary;
use countersign_tests::{ALICE, ALICE_KEY, CI_KEY, TestApp, event_types};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

use crate::{created_id, start, vote};

type Client = RunningService<RoleClient, ()>;

/// `countersign mcp` as a child process of the test, as `CI_KEY` (a requester), its permission
/// prompt asking alice under the `agent` type and waiting `wait` seconds.
async fn connect(t: &TestApp, wait: &str) -> Client {
    connect_with_pid(t, wait).await.0
}

/// [`connect`], and the server's process id.
async fn connect_with_pid(t: &TestApp, wait: &str) -> (Client, u32) {
    let command =
        tokio::process::Command::new(function_binary("countersign", "debug")).configure(|c| {
            c.env_clear()
                .env("PATH", std::env::var("PATH").unwrap_or_default())
                .env("COUNTERSIGN_URL", &t.base)
                .env("COUNTERSIGN_API_KEY", CI_KEY)
                .env("COUNTERSIGN_AGENT_ACTION", "agent")
                .env("COUNTERSIGN_AGENT_APPROVERS", ALICE)
                .env("COUNTERSIGN_AGENT_WAIT", wait)
                .arg("mcp");
        });
    let transport = TokioChildProcess::new(command).expect("spawn countersign mcp");
    let pid = transport.id().expect("the server's pid");
    (().serve(transport).await.expect("the MCP handshake"), pid)
}

async fn call(client: &Client, tool: &'static str, arguments: Value) -> CallToolResult {
    let arguments = arguments.as_object().expect("arguments").clone();
    client
        .call_tool(CallToolRequestParams::new(tool).with_arguments(arguments))
        .await
        .expect("the tool call")
}

/// The one text content, as JSON (and the same as `structuredContent`).
fn answer(result: &CallToolResult) -> Value {
    assert_eq!(result.content.len(), 1, "{result:?}");
    let text = &result.content[0].as_text().expect("a text content").text;
    let value: Value = serde_json::from_str(text).expect("the text holds JSON");
    assert_eq!(result.structured_content.as_ref(), Some(&value));
    value
}

fn prompt(tool_use_id: &str, input: Value) -> Value {
    json!({"tool_name": "Bash", "input": input, "tool_use_id": tool_use_id})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_server_lists_every_tool_with_its_input_schema() {
    let t = start().await;
    let client = connect(&t, "5").await;
    let info = client.peer_info().expect("initialized");
    assert_eq!(
        info.server_info.as_ref().map(|i| i.name.as_str()),
        Some("countersign")
    );
    let tools = client.list_all_tools().await.expect("tools/list");
    let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "claim",
            "get_approval",
            "permission_prompt",
            "report",
            "request_approval",
            "wait_for_decision"
        ]
    );
    for tool in &tools {
        let schema = Value::Object((*tool.input_schema).clone());
        assert_eq!(schema["type"], "object", "{}: {schema}", tool.name);
        assert!(
            tool.description.as_ref().is_some_and(|d| d.len() > 40),
            "{} is described for a model",
            tool.name
        );
    }
    let prompt = tools
        .iter()
        .find(|t| t.name == "permission_prompt")
        .expect("prompt");
    let schema = Value::Object((*prompt.input_schema).clone());
    let mut required: Vec<&str> = schema["required"]
        .as_array()
        .expect("required")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    required.sort_unstable();
    assert_eq!(required, ["input", "tool_name", "tool_use_id"]);
    client.cancel().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_permission_prompt_allows_exactly_the_approved_input_and_denies_the_rest() {
    let t = start().await;
    let client = connect(&t, "20").await;
    let input = json!({"command": "rm -rf build/", "description": "clean the build", "n": 1.5});

    // Approved through the API while the prompt waits: allow, with the identical input.
    let asking = tokio::spawn({
        let args = prompt("toolu_allow", input.clone());
        async move { (call(&client, "permission_prompt", args).await, client) }
    });
    let id = created_id(&t).await;
    vote(&t, ALICE_KEY, &id, "approve").await;
    let (result, client) = asking.await.expect("the prompt");
    assert_eq!(result.is_error, Some(false));
    let allowed = answer(&result);
    assert_eq!(allowed, json!({"behavior": "allow", "updatedInput": input}));
    assert_eq!(
        allowed["updatedInput"].to_string(),
        input.to_string(),
        "the same input, byte for byte"
    );
    let approval = t.get(CI_KEY, &id).await.json();
    assert_eq!(
        approval["action"]["payload"],
        json!({"tool_name": "Bash", "input": input})
    );
    assert_eq!(approval["execution"]["claimed_by"], "toolu_allow");
    // Asked again (an agent resuming): the same approval, the claim replayed, allow again.
    let again = answer(
        &call(
            &client,
            "permission_prompt",
            prompt("toolu_allow", input.clone()),
        )
        .await,
    );
    assert_eq!(again["behavior"], "allow");

    // Rejected: deny, saying by whom.
    let asking = tokio::spawn({
        let args = prompt("toolu_reject", json!({"command": "git push --force"}));
        async move { (call(&client, "permission_prompt", args).await, client) }
    });
    let rejected = loop {
        let id = created_id(&t).await;
        if id != approval["id"] {
            break id;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    vote(&t, ALICE_KEY, &rejected, "reject").await;
    let (result, client) = asking.await.expect("the prompt");
    let denied = answer(&result);
    assert_eq!(denied["behavior"], "deny", "{denied}");
    assert!(
        denied["message"]
            .as_str()
            .unwrap_or_default()
            .contains(&format!("Rejected by {ALICE}")),
        "{denied}"
    );
    assert_eq!(
        t.get(CI_KEY, &rejected).await.json()["execution"]["status"],
        "not_started",
        "nothing claimed"
    );
    client.cancel().await.expect("close");

    // Nobody decides within the wait: deny (fail closed), still pending.
    // 21 s: a hold of 20 s, then one of 1 s (each within its own timeout).
    let client = connect(&t, "21").await;
    let started = std::time::Instant::now();
    let pending = answer(
        &call(
            &client,
            "permission_prompt",
            prompt("toolu_pending", json!({"command": "ls"})),
        )
        .await,
    );
    assert_eq!(pending["behavior"], "deny");
    let message = pending["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("Still waiting for alice@example.com"),
        "{message}"
    );
    assert!(
        !message.contains("token="),
        "no review link reaches the agent: {message}"
    );
    assert!(message.contains("after 21 s"), "{message}");
    assert!(started.elapsed() >= Duration::from_secs(21), "it waited");
    client.cancel().await.expect("close");
}

/// The MCP server dies while a prompt waits (a restarted agent, a crashed IDE); a new server
/// asked with the same `tool_use_id` attaches to the same approval, and its allow is the one
/// claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_server_killed_during_a_wait_and_asked_again_attaches_to_the_same_approval() {
    let t = start().await;
    let input = json!({"file_path": "/srv/app/.env", "content": "DEBUG=0\n"});
    let (first, pid) = connect_with_pid(&t, "30").await;
    let waiting = tokio::spawn({
        let args = prompt("toolu_restart", input.clone());
        async move { call(&first, "permission_prompt", args).await }
    });
    let id = created_id(&t).await;
    // The server is killed mid-wait: its client task goes, and with it the child process.
    waiting.abort();
    let _ = waiting.await;
    let proc = format!("/proc/{pid}");
    countersign_tests::eventually("the first server is gone", || async {
        !std::path::Path::new(&proc).exists()
    })
    .await;

    let second = connect(&t, "30").await;
    let asking = tokio::spawn({
        let args = prompt("toolu_restart", input.clone());
        async move { (call(&second, "permission_prompt", args).await, second) }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    vote(&t, ALICE_KEY, &id, "approve").await;
    let (result, second) = asking.await.expect("the prompt");
    assert_eq!(
        answer(&result),
        json!({"behavior": "allow", "updatedInput": input})
    );
    let page = t
        .send(t.http.get(t.url("/approvals")).bearer_auth(CI_KEY))
        .await
        .json();
    assert_eq!(
        page["approvals"].as_array().map(Vec::len),
        Some(1),
        "one approval"
    );
    countersign_tests::eventually("the claim and its end are in the trail", || async {
        let types = event_types(&t.trail(CI_KEY, &id, 50).await);
        types.contains(&"execution.claimed".to_owned())
            && types.contains(&"execution.succeeded".to_owned())
    })
    .await;
    let events = t.trail(CI_KEY, &id, 50).await;
    let claims = event_types(&events)
        .iter()
        .filter(|e| *e == "execution.claimed")
        .count();
    assert_eq!(claims, 1, "one claim: {:?}", event_types(&events));
    let approval = t.get(CI_KEY, &id).await.json();
    assert_eq!(approval["execution"]["claimed_by"], "toolu_restart");
    second.cancel().await.expect("close");
}

/// An agent that performs the action itself: request, wait, claim, report; a second claim
/// with another key, and a wait on an unknown id, are tool errors naming the problem.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_agent_requests_waits_claims_and_reports_through_the_tools() {
    let t = start().await;
    let client = connect(&t, "5").await;
    let requested = answer(
        &call(
            &client,
            "request_approval",
            json!({"action_type": "agent", "payload": {"refund": "ch_1", "amount": 4200},
                   "approvers": [ALICE], "summary": "refund a double charge",
                   "idempotency_key": "refund-ch_1"}),
        )
        .await,
    );
    let id = requested["id"].as_str().expect("id").to_owned();
    assert_eq!(requested["status"], "pending");
    let waited = answer(
        &call(
            &client,
            "wait_for_decision",
            json!({"id": id, "timeout_seconds": 1}),
        )
        .await,
    );
    assert_eq!(waited["status"], "pending");
    vote(&t, ALICE_KEY, &id, "approve").await;
    let decided = answer(
        &call(
            &client,
            "wait_for_decision",
            json!({"id": id, "timeout_seconds": 10}),
        )
        .await,
    );
    assert_eq!(decided["status"], "approved");
    let claimed = answer(
        &call(
            &client,
            "claim",
            json!({"id": id, "idempotency_key": "run-1"}),
        )
        .await,
    );
    assert_eq!(claimed["action"]["payload"]["amount"], 4200);
    let refused = call(
        &client,
        "claim",
        json!({"id": id, "idempotency_key": "run-2"}),
    )
    .await;
    assert_eq!(refused.is_error, Some(true));
    let problem = answer(&refused);
    assert_eq!(problem["code"], "already_claimed", "{problem}");
    assert!(problem["detail"].as_str().is_some_and(|d| !d.is_empty()));
    let reported = answer(
        &call(
            &client,
            "report",
            json!({"id": id, "idempotency_key": "run-1", "outcome": "succeeded", "detail": "refunded"}),
        )
        .await,
    );
    assert_eq!(reported["execution"]["status"], "succeeded");
    let read = answer(&call(&client, "get_approval", json!({"id": id})).await);
    assert_eq!(read["execution"]["note"], "refunded");
    let unknown = call(
        &client,
        "get_approval",
        json!({"id": "apr_01JD3ZZZZZZZZZZZZZZZZZZZZZ"}),
    )
    .await;
    assert_eq!(
        (unknown.is_error, answer(&unknown)["code"].as_str()),
        (Some(true), Some("not_found"))
    );
    client.cancel().await.expect("close");
}

/// An agent asks that its request not wait in silence: the approval it gets carries the
/// reminders and the escalation step it asked for; one the API refuses is a tool error naming
/// the field.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_agent_asks_for_reminders_and_escalation_through_request_approval() {
    let t = start().await;
    let client = connect(&t, "5").await;
    let requested = answer(
        &call(
            &client,
            "request_approval",
            json!({"action_type": "agent", "payload": {"refund": "ch_2"}, "approvers": [ALICE],
                   "reminders": {"after_seconds": 600, "every_seconds": 3600, "max": 3},
                   "escalation": [{"after_seconds": 7200, "approvers": ["lead@example.com"]}],
                   "idempotency_key": "refund-ch_2"}),
        )
        .await,
    );
    assert_eq!(requested["reminders"]["max"], 3, "{requested}");
    assert_eq!(requested["reminders"]["sent"], 0);
    assert_eq!(
        requested["escalation"][0]["approvers"],
        json!(["lead@example.com"])
    );
    assert_eq!(requested["escalation"][0]["applied"], false);
    let refused = call(
        &client,
        "request_approval",
        json!({"action_type": "agent", "payload": {"refund": "ch_3"}, "approvers": [ALICE],
               "reminders": {"after_seconds": 10, "every_seconds": 3600, "max": 3}}),
    )
    .await;
    assert_eq!(refused.is_error, Some(true));
    let problem = answer(&refused);
    assert_eq!(problem["code"], "invalid_request", "{problem}");
    assert!(
        problem.to_string().contains("reminders.after_seconds"),
        "{problem}"
    );
    client.cancel().await.expect("close");
}
