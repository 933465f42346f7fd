//! `countersign mcp`: the CLI as a Model Context Protocol server on stdio (docs/AGENTS.md),
//! built on `rmcp`, the official Rust SDK. Every tool is one or a few calls
//! of the HTTP API with the configured key; each answers one text content holding JSON (also as
//! `structuredContent`), and a refusal is a tool result with `isError: true` carrying the
//! problem's `code` and `detail`. Nothing but the API's answers reaches the agent — the API
//! never shows review links or keys.
//!
//! It declares the MCP tasks extension (`tasks`): `request_approval` and `permission_prompt`
//! answer a request that declares it with a task the client polls, instead of waiting. Without
//! it, the blocking calls wait at most `COUNTERSIGN_AGENT_WAIT` seconds, with progress
//! notifications meanwhile (`progress`).
//!
//! Standard output is the protocol's channel: nothing else is ever printed there.

mod agent;
mod calls;
mod progress;
mod task_id;
mod tasks;

use std::sync::Arc;
use std::time::Duration;

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResponse, CallToolResult, CancelTaskParams, GetTaskParams, GetTaskResult,
    Implementation, ServerCapabilities, ServerConfig, UpdateTaskParams,
};
use rmcp::schemars::JsonSchema;
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt, tool, tool_handler, tool_router};
use serde::Deserialize;
use serde_json::{Map, Value, json};

pub use agent::{AgentConfig, Permission};

use crate::client::Api;
use crate::error::CliError;
use calls::{Calls, tool_error};
use progress::Heartbeat;
use task_id::{TaskKey, TaskRef};

/// The longest a `wait_for_decision` (or `permission_prompt`) holds: MCP clients commonly give
/// up on a tool call after 60 s.
pub const MAX_WAIT_SECONDS: u64 = 55;

/// Runs the server on stdin/stdout until the client goes away.
pub async fn serve(api: Api, agent: AgentConfig) -> Result<u8, CliError> {
    let server = Gate {
        key: Arc::new(TaskKey::from_api_key(api.key())),
        calls: Arc::new(Calls::new(api)),
        agent: Arc::new(agent),
    };
    let running = server
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| CliError::Transport(format!("MCP: cannot start on stdio: {e}")))?;
    running
        .waiting()
        .await
        .map_err(|e| CliError::Transport(format!("MCP: {e}")))?;
    Ok(0)
}

#[derive(Clone)]
struct Gate {
    calls: Arc<Calls>,
    agent: Arc<AgentConfig>,
    /// Signs and opens task ids (derived from the API key).
    key: Arc<TaskKey>,
}

impl Gate {
    /// Progress for `context`'s request, at the configured interval.
    fn heartbeat(&self, context: &RequestContext<RoleServer>) -> Heartbeat {
        Heartbeat {
            peer: context.peer.clone(),
            token: context.meta.get_progress_token(),
            every: self.agent.progress,
        }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct RequestApproval {
    /// The action type to ask for: one the Countersign service is configured with (an
    /// approval-only type when you will perform the action yourself).
    action_type: String,
    /// Exactly what you want to do, as a JSON object. The approvers see it, and an approval
    /// holds for this payload only.
    payload: Map<String, Value>,
    /// Optional: who may approve (their identities, e.g. email addresses). Where the
    /// deployment's approval policy decides who must approve, leave it out: the policy names
    /// the people, and anyone listed here only adds to them.
    #[serde(default)]
    approvers: Vec<String>,
    /// Optional quorum: {"rules": [{"name", "approvers", "min_approvals"}]}.
    policy: Option<Value>,
    /// Optional, so the request does not wait in silence: {"after_seconds" (≥ 60),
    /// "every_seconds" (≥ 300), "max" (1–20)} reminds the approvers who have not voted.
    reminders: Option<Value>,
    /// Optional: 1–3 steps [{"after_seconds" (≥ 60, increasing), "approvers": [...], "rule"?}]
    /// whose approvers join if it is still pending then (not yourself, nor anyone listed).
    escalation: Option<Value>,
    /// One line for the approvers: what you want to do and why.
    summary: Option<String>,
    /// Makes a repeat of this request return the same approval instead of a new one (use a
    /// stable id of the step). A random one when left out.
    idempotency_key: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct WaitForDecision {
    /// The approval's id (apr_…).
    id: String,
    /// How long to wait for a decision, 1 to 55 seconds (default, and at most, the server's
    /// configured wait: 50 unless set). Still pending then: the approval comes back with status
    /// "pending"; call again to keep waiting.
    timeout_seconds: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct ApprovalRef {
    /// The approval's id (apr_…).
    id: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct Claim {
    /// The approval's id (apr_…).
    id: String,
    /// Your key for this claim: the same key again returns the same claim; report with it.
    idempotency_key: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct Report {
    /// The approval's id (apr_…).
    id: String,
    /// The key you claimed it with.
    idempotency_key: String,
    /// What became of the action: "succeeded" or "failed".
    outcome: Outcome,
    /// Optional: what you did, or why it failed (at most 2000 characters).
    detail: Option<String>,
}

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
#[serde(rename_all = "snake_case")]
enum Outcome {
    Succeeded,
    Failed,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct PermissionPrompt {
    /// The tool the agent wants to call.
    tool_name: String,
    /// The tool call's input, exactly as the agent would run it.
    input: Value,
    /// The tool call's id: asking again with the same id attaches to the same approval.
    tool_use_id: String,
}

/// Whom a pending approval waits on, as its `approvers` list them (the policy's and any named).
fn listed(approval: &Value) -> String {
    let names: Vec<&str> = approval["approvers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    match names.is_empty() {
        true => "the approvers".to_owned(),
        false => names.join(", "),
    }
}

/// A successful answer: the JSON as text, and as `structuredContent`.
fn answer(value: Value) -> Result<CallToolResult, ErrorData> {
    Ok(CallToolResult::structured(value))
}

/// A tool call's answer that may be a task: this one is not.
fn complete(result: CallToolResult) -> Result<CallToolResponse, ErrorData> {
    Ok(CallToolResponse::Complete(result))
}

#[tool_router]
impl Gate {
    #[tool(
        description = "Ask people to approve an action before you perform it. The deployment's approval policy decides whether it may be asked, who must approve and how many (approvers you name only add to them; without a policy, name them). Returns the approval (its id and status \"pending\"); then call wait_for_decision. With the MCP tasks extension, returns a task instead, which completes with the decided approval. Approved approvals of an approval-only type are claimed once (claim) before you act, and reported on (report) after."
    )]
    async fn request_approval(
        &self,
        Parameters(args): Parameters<RequestApproval>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let mut body = json!({
            "action": {"type": args.action_type, "payload": args.payload},
        });
        if !args.approvers.is_empty() {
            body["approvers"] = json!(args.approvers);
        }
        if let Some(policy) = args.policy {
            body["policy"] = policy;
        }
        if let Some(reminders) = args.reminders {
            body["reminders"] = reminders;
        }
        if let Some(escalation) = args.escalation {
            body["escalation"] = escalation;
        }
        if let Some(summary) = args.summary {
            body["context"] = json!({ "summary": summary });
        }
        let key = args
            .idempotency_key
            .unwrap_or_else(|| format!("mcp-{}", ulid::Ulid::new()));
        let approval = match self.calls.create(&key, &body).await {
            Ok(approval) => approval,
            Err(e) => return complete(tool_error(&e)),
        };
        // The approval is stored: a task for it resolves at once.
        if tasks::requested(&context.meta) {
            let task = TaskRef::Request {
                id: approval["id"].as_str().unwrap_or_default().to_owned(),
            };
            if let Some(created) = tasks::created(&self.key, &task, &approval) {
                return Ok(created);
            }
        }
        complete(CallToolResult::structured(approval))
    }

    #[tool(
        description = "Wait up to timeout_seconds (at most 55, and at most the server's configured wait) for an approval to be decided, without polling. Returns the approval: status \"approved\", \"rejected\", \"expired\" or \"cancelled\" once decided, or still \"pending\" (call again to keep waiting). Do not act on anything but \"approved\"."
    )]
    async fn wait_for_decision(
        &self,
        Parameters(args): Parameters<WaitForDecision>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let most = self.agent.wait.as_secs();
        let seconds = args.timeout_seconds.unwrap_or(most);
        if !(1..=MAX_WAIT_SECONDS).contains(&seconds) {
            return Ok(tool_error(&CliError::Usage(format!(
                "timeout_seconds must be from 1 to {MAX_WAIT_SECONDS}"
            ))));
        }
        let seconds = seconds.min(most);
        let message = format!("waiting for a decision on Countersign approval {}", args.id);
        let waiting = self.calls.wait_for_decision(&args.id, seconds);
        let total = Duration::from_secs(seconds);
        match self
            .heartbeat(&context)
            .beat(total, &message, waiting)
            .await
        {
            Ok(approval) => answer(approval),
            Err(e) => Ok(tool_error(&e)),
        }
    }

    #[tool(
        description = "Read an approval: its status, the action and payload the approvers see, the votes, the decision, and its execution (claimed, succeeded, failed)."
    )]
    async fn get_approval(
        &self,
        Parameters(args): Parameters<ApprovalRef>,
    ) -> Result<CallToolResult, ErrorData> {
        match self.calls.get(&args.id).await {
            Ok(approval) => answer(approval),
            Err(e) => Ok(tool_error(&e)),
        }
    }

    #[tool(
        description = "Claim an approved approval of an approval-only type before you perform its action: it can be claimed once. The answer holds the exact payload that was approved: perform that, nothing else. The same idempotency_key again returns the same claim; another key is refused (already_claimed). Then call report."
    )]
    async fn claim(
        &self,
        Parameters(args): Parameters<Claim>,
    ) -> Result<CallToolResult, ErrorData> {
        match self.calls.claim(&args.id, &args.idempotency_key).await {
            Ok(approval) => answer(approval),
            Err(e) => Ok(tool_error(&e)),
        }
    }

    #[tool(
        description = "Report what became of an action you claimed: outcome \"succeeded\" or \"failed\", with the claim's idempotency_key. Reporting the same outcome again is harmless."
    )]
    async fn report(
        &self,
        Parameters(args): Parameters<Report>,
    ) -> Result<CallToolResult, ErrorData> {
        let outcome = match args.outcome {
            Outcome::Succeeded => "succeeded",
            Outcome::Failed => "failed",
        };
        let body = json!({"outcome": outcome, "detail": args.detail});
        match self
            .calls
            .report(&args.id, &args.idempotency_key, &body)
            .await
        {
            Ok(approval) => answer(approval),
            Err(e) => Ok(tool_error(&e)),
        }
    }

    #[tool(
        description = "Claude Code's permission prompt (--permission-prompt-tool): asks the approvers the deployment's approval policy requires (and any configured) to allow one tool call, waits for them, and answers {\"behavior\": \"allow\", \"updatedInput\": …} with exactly the input they approved, or {\"behavior\": \"deny\", \"message\": …}. Still pending at the end of the wait is a deny. With the MCP tasks extension, returns a task instead, which completes with the same answer once the approvers decide."
    )]
    async fn permission_prompt(
        &self,
        Parameters(args): Parameters<PermissionPrompt>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let (calls, agent, tool_use_id) = (&self.calls, &self.agent, &args.tool_use_id);
        let approval =
            match agent::ask(calls, agent, &args.tool_name, args.input, tool_use_id).await {
                Ok(approval) => approval,
                Err(deny) => return complete(CallToolResult::structured(deny.to_json())),
            };
        let id = approval["id"].as_str().unwrap_or_default().to_owned();
        // The approval is stored: a task for it resolves at once.
        if tasks::requested(&context.meta) {
            let task = TaskRef::Permission {
                id: id.clone(),
                tool_use_id: tool_use_id.clone(),
            };
            if let Some(created) = tasks::created(&self.key, &task, &approval) {
                return Ok(created);
            }
        }
        let approval = if approval["status"] == "pending" {
            let approvers = listed(&approval);
            let message = format!("waiting for {approvers} to approve (Countersign approval {id})");
            let waiting = calls.wait_for_decision(&id, agent.wait.as_secs());
            match self
                .heartbeat(&context)
                .beat(agent.wait, &message, waiting)
                .await
            {
                Ok(approval) => approval,
                Err(e) => {
                    let deny = agent::failed("wait for the decision", &e);
                    return complete(CallToolResult::structured(deny.to_json()));
                }
            }
        } else {
            approval
        };
        let decision = agent::settle(calls, &approval, tool_use_id, agent.wait).await;
        complete(CallToolResult::structured(decision.to_json()))
    }
}

#[tool_handler]
impl ServerHandler for Gate {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tasks()
                .build(),
        )
            .with_server_info(Implementation::new("countersign", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Countersign puts a person's approval in front of an action. Ask with request_approval, wait with wait_for_decision, then (approval-only types) claim before acting and report after. Never perform an action whose approval is not \"approved\", and perform exactly the approved payload. Clients with the MCP tasks extension get a task from request_approval and permission_prompt: poll it with tasks/get until it completes.",
            )
    }

    /// The task as its approval stands (see `tasks`).
    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        tasks::get(&self.calls, &self.key, &request.task_id).await
    }

    /// Cancels the task's approval while it is pending; an acknowledgement either way.
    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        tasks::cancel(&self.calls, &self.key, &request.task_id).await
    }

    /// No task needs input: acknowledged for a known task.
    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        tasks::update(&self.key, &request.task_id)
    }
}
