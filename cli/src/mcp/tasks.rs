//! The MCP tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663): a `tools/call` of
//! `request_approval` or `permission_prompt` whose own request declares the extension is
//! answered at once with a task, once its approval is stored; the client then polls `tasks/get`
//! and may `tasks/cancel`. Nothing is kept here: a task is its approval (see `task_id`), read
//! from the API on every poll, so tasks outlive this process.

use std::time::Duration;

use rmcp::ErrorData;
use rmcp::model::{
    CallToolResponse, CallToolResult, CreateTaskResult, DetailedTask, GetTaskResult, JsonObject,
    RequestMetaObject, Task, TaskPayload, TaskStatus,
};
use serde_json::Value;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::agent::settle;
use super::calls::Calls;
use super::task_id::{TaskKey, TaskRef};
use crate::error::CliError;

/// How often a client should poll: a person decides in minutes, and each poll is one read.
pub const POLL_INTERVAL_MS: u64 = 5_000;

/// Whether this request's own capabilities (its `_meta`, as the extension says) include the
/// tasks extension. A declaration at `initialize` does not count: the extension forbids a task
/// answer to a request that did not declare it, whatever came before.
pub fn requested(meta: &RequestMetaObject) -> bool {
    meta.client_capabilities()
        .is_some_and(|capabilities| capabilities.supports_tasks())
}

/// The task answer for `approval` (just stored), standing for `task`; `None` when the API's
/// answer has no id (then the caller answers the tool's own result).
pub fn created(key: &TaskKey, task: &TaskRef, approval: &Value) -> Option<CallToolResponse> {
    if approval["id"].as_str() != Some(task.approval_id()) {
        return None;
    }
    let seed = seed(key.mint(task), TaskStatus::Working, approval);
    Some(CallToolResponse::Task(CreateTaskResult::new(seed)))
}

/// `tasks/get`: the task as its approval stands. Pending → `working`, with the quorum's progress
/// as `statusMessage`; ended → `completed` with the tool's result: the approval for
/// `request_approval`, the allow or deny for `permission_prompt` (approved → claimed and
/// allowed; rejected, expired or cancelled → denied).
pub async fn get(calls: &Calls, key: &TaskKey, task_id: &str) -> Result<GetTaskResult, ErrorData> {
    let task = key.open(task_id).ok_or_else(not_found)?;
    let approval = calls.get(task.approval_id()).await.map_err(read_error)?;
    if approval["status"] == "pending" {
        let seed = seed(task_id.to_owned(), TaskStatus::Working, &approval)
            .with_status_message(waiting_line(&approval));
        return Ok(GetTaskResult::new(DetailedTask::new(
            seed,
            TaskPayload::Working,
        )));
    }
    let result = match &task {
        TaskRef::Request { .. } => CallToolResult::structured(approval.clone()),
        TaskRef::Permission { tool_use_id, .. } => {
            // `settle` only waits on nothing here: the approval has ended.
            let answer = settle(calls, &approval, tool_use_id, Duration::ZERO).await;
            CallToolResult::structured(answer.to_json())
        }
    };
    let seed = seed(task_id.to_owned(), TaskStatus::Completed, &approval)
        .with_status_message(ended_line(&approval));
    let result = match serde_json::to_value(result) {
        Ok(Value::Object(result)) => result,
        _ => JsonObject::new(),
    };
    Ok(GetTaskResult::new(DetailedTask::new(
        seed,
        TaskPayload::Completed { result },
    )))
}

/// `tasks/cancel`: cancels the approval if it is still pending. An acknowledgement only: one
/// already decided (409), expired (410) or cancelled (a replay) stays as it is.
pub async fn cancel(calls: &Calls, key: &TaskKey, task_id: &str) -> Result<(), ErrorData> {
    let task = key.open(task_id).ok_or_else(not_found)?;
    match calls.cancel(task.approval_id(), CANCEL_REASON).await {
        Ok(_) => Ok(()),
        Err(CliError::Api(p)) if p.status == 409 || p.status == 410 => Ok(()),
        Err(e) => Err(read_error(e)),
    }
}

/// `tasks/update`: no Countersign task ever needs input (none is `input_required`), so for a
/// known task the responses are ignored, as the extension says for keys not outstanding.
pub fn update(key: &TaskKey, task_id: &str) -> Result<(), ErrorData> {
    key.open(task_id).map(|_| ()).ok_or_else(not_found)
}

/// Why `tasks/cancel` cancelled it, as the trail and the approvers see it.
const CANCEL_REASON: &str = "cancelled by the agent's MCP client (tasks/cancel)";

/// The extension's error for an unknown task: Invalid params. A task id this key did not mint,
/// and an approval the key cannot read (another tenant's, or gone), are both unknown.
/// An id this server cannot read: forged, another tenant's, or minted under another API key —
/// task ids are bound to the key's secret, so `countersign keys roll` ends the task ids made
/// under the old key. The same tool call again (the same `idempotency_key` or `tool_use_id`)
/// attaches to the same approval, as a task of the new key.
fn not_found() -> ErrorData {
    ErrorData::invalid_params(
        "Failed to retrieve task: Task not found (a task id is bound to the API key it was made \
         under: after a key roll, call the tool again with the same idempotency_key or \
         tool_use_id to attach to the same approval)",
        None,
    )
}

fn read_error(error: CliError) -> ErrorData {
    match &error {
        CliError::Api(p) if p.status == 404 || p.status == 403 => not_found(),
        _ => ErrorData::internal_error(
            format!(
                "Countersign could not read the approval: {error} ({})",
                error.code()
            ),
            None,
        ),
    }
}

/// The task's fields from its approval: created with it, last updated by its last vote,
/// decision, cancellation, expiry or claim, and kept until the approval expires (`ttlMs`:
/// `expires_at` − `created_at`, so `createdAt` + `ttlMs` is the approval's expiry).
fn seed(task_id: String, status: TaskStatus, approval: &Value) -> Task {
    let created_at = approval["created_at"].as_str().unwrap_or_default();
    let mut task = Task::new(task_id, status, created_at, last_updated(approval))
        .with_poll_interval_ms(POLL_INTERVAL_MS);
    let expires_at = approval["expires_at"].as_str().and_then(parse);
    if let (Some(created), Some(expires)) = (parse(created_at), expires_at) {
        let ttl = (expires - created).whole_milliseconds().max(0);
        task = task.with_ttl_ms(u64::try_from(ttl).unwrap_or(u64::MAX));
    }
    task
}

fn parse(at: &str) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(at, &Rfc3339).ok()
}

/// The latest of the approval's own timestamps, as the API wrote it.
fn last_updated(approval: &Value) -> String {
    let mut times: Vec<&Value> = vec![
        &approval["created_at"],
        &approval["decision"]["decided_at"],
        &approval["cancellation"]["at"],
        &approval["execution"]["updated_at"],
    ];
    if approval["status"] == "expired" {
        times.push(&approval["expires_at"]);
    }
    if let Some(votes) = approval["votes"].as_array() {
        times.extend(votes.iter().map(|v| &v["at"]));
    }
    times
        .into_iter()
        .filter_map(Value::as_str)
        .filter_map(|at| Some((parse(at)?, at)))
        .max_by_key(|(parsed, _)| *parsed)
        .map(|(_, at)| at.to_owned())
        .unwrap_or_default()
}

/// A pending approval's progress, e.g. "1 of 2 approvals; waiting on bob@example.com": each
/// rule's approving votes against its quorum (by name when there are several), and who of the
/// rules still short has not voted.
pub fn waiting_line(approval: &Value) -> String {
    let voted: Vec<String> = approval["votes"]
        .as_array()
        .map(|votes| {
            votes
                .iter()
                .filter_map(|v| v["approver"].as_str())
                .map(str::to_lowercase)
                .collect()
        })
        .unwrap_or_default();
    let names = |list: &Value| -> Vec<String> {
        list.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    };
    let rules = approval["policy"]["rules"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let (counts, short): (Vec<String>, Vec<Vec<String>>) = if rules.is_empty() {
        // No policy: one approving vote of any approver decides.
        (
            vec![format!("{} of 1", voted.len().min(1))],
            vec![names(&approval["approvers"])],
        )
    } else {
        let named = rules.len() > 1;
        rules
            .iter()
            .map(|rule| {
                let (have, need) = (
                    rule["approvals"].as_u64().unwrap_or(0),
                    rule["min_approvals"].as_u64().unwrap_or(1),
                );
                let count = if named {
                    format!(
                        "{}: {have} of {need}",
                        rule["name"].as_str().unwrap_or("rule")
                    )
                } else {
                    format!("{have} of {need}")
                };
                let waiting = if have < need {
                    names(&rule["approvers"])
                } else {
                    Vec::new()
                };
                (count, waiting)
            })
            .unzip()
    };
    let mut waiting: Vec<String> = Vec::new();
    for name in short.into_iter().flatten() {
        let lower = name.to_lowercase();
        if !voted.contains(&lower) && !waiting.iter().any(|w| w.to_lowercase() == lower) {
            waiting.push(name);
        }
    }
    let id = approval["id"].as_str().unwrap_or("?");
    let expires = approval["expires_at"].as_str().unwrap_or("?");
    format!(
        "{} approvals; waiting on {} (Countersign approval {id}, expires {expires})",
        counts.join(", "),
        if waiting.is_empty() {
            "nobody listed".to_owned()
        } else {
            waiting.join(", ")
        }
    )
}

/// How an ended approval ended, in a few words.
fn ended_line(approval: &Value) -> String {
    let id = approval["id"].as_str().unwrap_or("?");
    let status = approval["status"].as_str().unwrap_or("ended");
    let by = match status {
        "approved" | "rejected" => approval["decision"]["approver"].as_str(),
        "cancelled" => approval["cancellation"]["by"].as_str(),
        _ => None,
    };
    match by {
        Some(by) => format!("Countersign approval {id} {status} by {by}"),
        None => format!("Countersign approval {id} {status}"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pending(policy: Value, votes: Value) -> Value {
        json!({"id": "apr_1", "status": "pending",
               "approvers": ["alice@example.com", "bob@example.com"],
               "policy": policy, "votes": votes,
               "created_at": "2026-12-05T10:00:00Z", "expires_at": "2026-12-12T10:00:00Z",
               "decision": null,
               "execution": {"status": "not_started", "updated_at": "2026-12-05T10:00:00Z"}})
    }

    #[test]
    fn the_status_message_says_the_quorum_and_who_it_waits_on() {
        let two = json!({"rules": [{"name": "two", "approvers": ["alice@example.com", "bob@example.com"],
                                    "min_approvals": 2, "approvals": 1}]});
        let alice = json!([{"approver": "alice@example.com", "vote": "approve", "at": "2026-12-05T10:05:00Z"}]);
        let line = waiting_line(&pending(two, alice.clone()));
        assert!(
            line.starts_with(
                "1 of 2 approvals; waiting on bob@example.com (Countersign approval apr_1"
            ),
            "{line}"
        );
        let none = waiting_line(&pending(Value::Null, json!([])));
        assert!(
            none.starts_with("0 of 1 approvals; waiting on alice@example.com, bob@example.com"),
            "{none}"
        );
        let rules = json!({"rules": [
            {"name": "security", "approvers": ["alice@example.com"], "min_approvals": 1, "approvals": 1},
            {"name": "release", "approvers": ["bob@example.com", "carol@example.com"], "min_approvals": 1, "approvals": 0}]});
        let line = waiting_line(&pending(rules, alice));
        assert!(
            line.starts_with("security: 1 of 1, release: 0 of 1 approvals; waiting on bob@example.com, carol@example.com"),
            "{line}"
        );
    }

    #[test]
    fn a_task_lives_as_long_as_its_approval_and_was_updated_by_its_last_event() {
        let mut approval = pending(
            Value::Null,
            json!([
            {"approver": "alice@example.com", "vote": "approve", "at": "2026-12-05T10:05:00Z"}]),
        );
        let task = seed("t".into(), TaskStatus::Working, &approval);
        assert_eq!(task.ttl_ms, Some(7 * 24 * 3600 * 1000));
        assert_eq!(task.created_at, "2026-12-05T10:00:00Z");
        assert_eq!(task.last_updated_at, "2026-12-05T10:05:00Z");
        assert_eq!(task.poll_interval_ms, Some(POLL_INTERVAL_MS));
        approval["status"] = json!("expired");
        assert_eq!(last_updated(&approval), "2026-12-12T10:00:00Z");
        approval["expires_at"] = json!("not a time");
        assert_eq!(
            seed("t".into(), TaskStatus::Working, &approval).ttl_ms,
            None
        );
    }

    #[test]
    fn only_the_requests_own_capabilities_ask_for_a_task() {
        let mut meta = RequestMetaObject::new();
        assert!(!requested(&meta));
        meta.set_client_capabilities(rmcp::model::ClientCapabilities::default());
        assert!(!requested(&meta));
        meta.set_client_capabilities(
            rmcp::model::ClientCapabilities::builder()
                .enable_tasks()
                .build(),
        );
        assert!(requested(&meta));
    }
}
