//! `permission_prompt`: Claude Code's `--permission-prompt-tool` contract on top of an
//! approval-only action type. One tool call is one approval (its Idempotency-Key is the call's
//! `tool_use_id`, so asking again attaches to it), its payload `{tool_name, input}`; approved,
//! it is claimed with the same key and the answer allows exactly the approved input. Anything
//! else — rejected, expired, cancelled, still pending at the end of the wait, an error — denies:
//! the gate fails closed. The blocking tool ([`ask`], a wait, [`settle`]) and a
//! `permission_prompt` task (`tasks`: [`ask`], then [`settle`] once the approval has ended)
//! answer alike.

use std::time::Duration;

use serde_json::{Value, json};

use super::MAX_WAIT_SECONDS;
use super::calls::Calls;
use crate::error::CliError;

/// How long `permission_prompt` and `wait_for_decision` wait when not told.
pub const DEFAULT_WAIT_SECONDS: u64 = 50;
/// The longest a blocking call goes without a progress notification (when its client asked
/// for them with a `progressToken`), and the default interval.
pub const MAX_PROGRESS_SECONDS: u64 = 15;

/// The agent gate's configuration (`COUNTERSIGN_AGENT_*`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AgentConfig {
    /// The approval-only action type tool calls are asked under (`None`: the gate is off, and
    /// `permission_prompt` denies every call).
    pub action: Option<String>,
    /// `COUNTERSIGN_AGENT_APPROVERS`: optional where the deployment's approval policy chooses
    /// the approvers (they only add to the policy's).
    pub approvers: Vec<String>,
    /// How long a blocking call waits for a decision (`COUNTERSIGN_AGENT_WAIT`).
    pub wait: Duration,
    /// How often a blocking call sends a progress notification
    /// (`COUNTERSIGN_AGENT_PROGRESS_SECONDS`, 1–15; shorter only for tests).
    pub progress: Duration,
}

impl AgentConfig {
    /// From the environment (`lookup`); a bad value is a usage error naming its variable.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, CliError> {
        let get = |name: &str| {
            lookup(name)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let wait = match get("COUNTERSIGN_AGENT_WAIT") {
            None => DEFAULT_WAIT_SECONDS,
            Some(raw) => raw
                .parse::<u64>()
                .ok()
                .filter(|s| (1..=MAX_WAIT_SECONDS).contains(s))
                .ok_or_else(|| {
                    CliError::Usage(format!(
                        "COUNTERSIGN_AGENT_WAIT must be a number of seconds from 1 to {MAX_WAIT_SECONDS}"
                    ))
                })?,
        };
        let progress = match get("COUNTERSIGN_AGENT_PROGRESS_SECONDS") {
            None => MAX_PROGRESS_SECONDS,
            Some(raw) => raw
                .parse::<u64>()
                .ok()
                .filter(|s| (1..=MAX_PROGRESS_SECONDS).contains(s))
                .ok_or_else(|| {
                    CliError::Usage(format!(
                        "COUNTERSIGN_AGENT_PROGRESS_SECONDS must be a number of seconds from 1 to {MAX_PROGRESS_SECONDS}"
                    ))
                })?,
        };
        let approvers: Vec<String> = get("COUNTERSIGN_AGENT_APPROVERS")
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(str::to_owned)
            .collect();
        let action = get("COUNTERSIGN_AGENT_ACTION");
        // Without approvers the deployment's approval policy must choose them: a tenant with
        // none refuses the create (400, approvers required), and the call is denied.
        match (&action, approvers.is_empty()) {
            (None, false) => Err(CliError::Usage(
                "COUNTERSIGN_AGENT_APPROVERS is set but COUNTERSIGN_AGENT_ACTION is not: name the approval-only action type the agent's tool calls are asked under".to_owned(),
            )),
            _ => Ok(Self {
                action,
                approvers,
                wait: Duration::from_secs(wait),
                progress: Duration::from_secs(progress),
            }),
        }
    }
}

/// What `permission_prompt` answers.
#[derive(Debug, Clone, PartialEq)]
pub enum Permission {
    /// Run the tool with this input: exactly the one the approvers saw.
    Allow(Value),
    /// Do not run it, and why.
    Deny(String),
}

impl Permission {
    /// Claude Code's shape: `{"behavior": "allow", "updatedInput": …}` or
    /// `{"behavior": "deny", "message": …}`.
    pub fn to_json(&self) -> Value {
        match self {
            Self::Allow(input) => json!({"behavior": "allow", "updatedInput": input}),
            Self::Deny(message) => json!({"behavior": "deny", "message": message}),
        }
    }
}

/// Asks for the approval of one tool call: the approval as stored (created, or the one this
/// `tool_use_id` already asked for), or the deny that ends the call (the gate is off, the API
/// refused or could not be reached).
pub async fn ask(
    calls: &Calls,
    agent: &AgentConfig,
    tool_name: &str,
    input: Value,
    tool_use_id: &str,
) -> Result<Value, Permission> {
    let Some(action) = &agent.action else {
        return Err(Permission::Deny(
            "Countersign's agent gate is not configured (COUNTERSIGN_AGENT_ACTION): nothing may run.".to_owned(),
        ));
    };
    let mut body = json!({
        "action": {"type": action, "payload": {"tool_name": tool_name, "input": input}},
        "context": {"summary": format!("An AI agent asks to run {tool_name}")},
    });
    if !agent.approvers.is_empty() {
        body["approvers"] = json!(agent.approvers);
    }
    calls
        .create(tool_use_id, &body)
        .await
        .map_err(|e| failed("ask for approval", &e))
}

/// The answer for `approval` as it stands: approved → claimed under `tool_use_id` (a repeat
/// replays the claim), reported, and allowed with exactly the approved input; anything else a
/// deny saying why (`waited`: how long a still pending one was waited for). The blocking tool
/// and a `permission_prompt` task both answer through it.
pub async fn settle(
    calls: &Calls,
    approval: &Value,
    tool_use_id: &str,
    waited: Duration,
) -> Permission {
    let id = approval["id"].as_str().unwrap_or_default();
    match verdict(approval, waited) {
        Err(message) => Permission::Deny(message),
        Ok(()) => match calls.claim(id, tool_use_id).await {
            Ok(claimed) => {
                // The claimer's action is to hand the approved input over; the agent runs it.
                let handed = json!({"outcome": "succeeded",
                    "detail": format!("allowed: the approved input was handed to the agent as tool call {tool_use_id}")});
                let _ = calls.report(id, tool_use_id, &handed).await;
                Permission::Allow(claimed["action"]["payload"]["input"].clone())
            }
            Err(e) => failed("claim the approval", &e),
        },
    }
}

/// The deny for a call that failed: Countersign could not `what`.
pub fn failed(what: &str, e: &CliError) -> Permission {
    Permission::Deny(format!(
        "Countersign could not {what}, so the call is not allowed: {} ({})",
        match e {
            CliError::Api(p) => p.detail.clone(),
            other => other.to_string(),
        },
        e.code()
    ))
}

/// `Ok` for an approved approval; otherwise the deny message: why, and where to approve.
fn verdict(approval: &Value, waited: Duration) -> Result<(), String> {
    let id = approval["id"].as_str().unwrap_or("the approval");
    let decision = &approval["decision"];
    let by = decision["approver"].as_str().unwrap_or("an approver");
    let comment = decision["comment"]
        .as_str()
        .map(|c| format!(": \"{c}\""))
        .unwrap_or_default();
    match approval["status"].as_str() {
        Some("approved") => Ok(()),
        Some("rejected") => Err(format!(
            "Rejected by {by}{comment} (Countersign approval {id}). Do not run this call; ask the user what to do instead."
        )),
        Some("expired") => Err(format!(
            "Countersign approval {id} expired before anyone decided it; nothing was run."
        )),
        Some("cancelled") => Err(format!(
            "Countersign approval {id} was cancelled; nothing was run."
        )),
        _ => {
            let approvers: Vec<&str> = approval["approvers"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            Err(format!(
                "Still waiting for {} to approve (Countersign approval {id}) after {} s; nothing was run. An approver decides it in Slack, from the review link they were sent, or with `countersign vote {id} approve`. Asking again with the same tool call keeps waiting on the same approval.",
                approvers.join(", "),
                waited.as_secs()
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn config(vars: &[(&str, &str)]) -> Result<AgentConfig, CliError> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        AgentConfig::from_lookup(|name| vars.get(name).cloned())
    }

    #[test]
    fn the_agent_gate_is_configured_whole_or_not_at_all() {
        let off = config(&[]).unwrap();
        assert_eq!(
            (off.action, off.wait, off.progress),
            (None, Duration::from_secs(50), Duration::from_secs(15))
        );
        let on = config(&[
            ("COUNTERSIGN_AGENT_ACTION", "agent"),
            (
                "COUNTERSIGN_AGENT_APPROVERS",
                "alice@example.com, bob@example.com",
            ),
            ("COUNTERSIGN_AGENT_WAIT", "5"),
            ("COUNTERSIGN_AGENT_PROGRESS_SECONDS", "1"),
        ])
        .unwrap();
        assert_eq!(on.progress, Duration::from_secs(1));
        assert_eq!(on.approvers, ["alice@example.com", "bob@example.com"]);
        assert_eq!(on.wait, Duration::from_secs(5));
        // The action alone: the deployment's approval policy chooses the approvers.
        let policed = config(&[("COUNTERSIGN_AGENT_ACTION", "agent")]).unwrap();
        assert_eq!(
            (policed.action.as_deref(), policed.approvers.len()),
            (Some("agent"), 0)
        );
        for bad in [
            vec![("COUNTERSIGN_AGENT_APPROVERS", "alice@example.com")],
            vec![("COUNTERSIGN_AGENT_WAIT", "56")],
            vec![("COUNTERSIGN_AGENT_WAIT", "0")],
            vec![("COUNTERSIGN_AGENT_WAIT", "soon")],
            vec![("COUNTERSIGN_AGENT_PROGRESS_SECONDS", "0")],
            vec![("COUNTERSIGN_AGENT_PROGRESS_SECONDS", "16")],
            vec![("COUNTERSIGN_AGENT_PROGRESS_SECONDS", "1.5")],
        ] {
            let error = config(&bad).unwrap_err().to_string();
            assert!(error.contains("COUNTERSIGN_AGENT_"), "{error}");
        }
    }

    #[test]
    fn only_approved_allows_and_every_deny_says_why() {
        let approval = |status: &str| {
            json!({"id": "apr_1", "status": status, "approvers": ["alice@example.com"],
                   "decision": {"approver": "alice@example.com", "comment": "not on prod"}})
        };
        assert_eq!(
            verdict(&approval("approved"), Duration::from_secs(5)),
            Ok(())
        );
        let rejected = verdict(&approval("rejected"), Duration::from_secs(5)).unwrap_err();
        assert!(
            rejected.contains("Rejected by alice@example.com: \"not on prod\""),
            "{rejected}"
        );
        let pending = verdict(&approval("pending"), Duration::from_secs(5)).unwrap_err();
        assert!(
            pending.contains("Still waiting for alice@example.com")
                && pending.contains("after 5 s")
        );
        // Review of v5, finding 11: the command it names is one the CLI accepts.
        let command = pending.split('`').nth(1).expect("a command in backticks");
        assert!(command.starts_with("countersign vote apr_1 "), "{command}");
        let parsed = <crate::Cli as clap::Parser>::try_parse_from(command.split_whitespace());
        assert!(parsed.is_ok(), "{command}: {parsed:?}");
        for status in ["expired", "cancelled"] {
            assert!(
                verdict(&approval(status), Duration::from_secs(5))
                    .unwrap_err()
                    .contains(status)
            );
        }
        assert_eq!(
            Permission::Allow(json!({"command": "ls"})).to_json(),
            json!({"behavior": "allow", "updatedInput": {"command": "ls"}})
        );
        assert_eq!(Permission::Deny("no".into()).to_json()["behavior"], "deny");
    }
}
