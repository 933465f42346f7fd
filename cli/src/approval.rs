//! The approval as the API shows it — the fields this CLI reads — and what a gate makes of it.
//! Unknown fields are ignored and missing ones default, so a newer server still reads.

use serde::Deserialize;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Approval {
    pub id: String,
    /// `pending | approved | rejected | expired | cancelled`.
    pub status: String,
    pub requested_by: Option<String>,
    pub action: Action,
    pub approvers: Vec<String>,
    pub policy: Option<Policy>,
    /// What the requester said of it (`summary`: what it gates, e.g. "Deploy acme/api@1a2b3c4 to
    /// production, run 123" for a GitHub deployment).
    pub context: serde_json::Value,
    pub created_at: String,
    pub expires_at: String,
    pub votes: Vec<Vote>,
    pub decision: Option<Decision>,
    pub cancellation: Option<Cancellation>,
    pub execution: Execution,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Action {
    #[serde(rename = "type")]
    pub kind: String,
    pub payload: serde_json::Value,
    /// `Some(false)`: an approval-only type, executed by whoever claims it, not by Countersign.
    pub executes: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Policy {
    pub rules: Vec<Rule>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Rule {
    pub name: String,
    pub min_approvals: u32,
    /// Approving votes counted so far.
    pub approvals: u32,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Vote {
    pub approver: String,
    /// `approve | reject`.
    pub vote: String,
    pub at: String,
    pub channel: String,
    pub comment: Option<String>,
    /// The delegate who cast it in `approver`'s place.
    pub by: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Decision {
    /// `approved | rejected`.
    pub outcome: String,
    pub approver: String,
    pub decided_at: String,
    pub channel: String,
    pub comment: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Cancellation {
    pub by: String,
    pub at: String,
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Execution {
    /// `not_started | queued | running | succeeded | failed | needs_reconciliation`.
    pub status: String,
    pub attempts: u32,
    pub last_error: Option<String>,
    pub note: Option<String>,
    /// Approval-only types: the key that claimed the execution.
    pub claimed_by: Option<String>,
}

/// `: why` after who said it, or nothing.
pub fn said(why: Option<&str>) -> String {
    why.map_or_else(String::new, |why| format!(": {why}"))
}

/// Reads an approval from the API's JSON.
pub fn parse(body: &serde_json::Value) -> Result<Approval, crate::CliError> {
    Approval::deserialize(body).map_err(|e| {
        crate::CliError::Transport(format!(
            "the API answered an approval this CLI cannot read: {e}"
        ))
    })
}

/// How a gate ends, and its exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Approved, and the action ran (or the gate was told not to wait for it).
    Passed,
    Rejected,
    /// Expired or cancelled: nobody decided, and nothing will run.
    Ended,
    /// Approved, but the execution failed or needs an operator.
    ExecutionFailed,
}

impl Verdict {
    pub fn exit_code(self) -> u8 {
        match self {
            Self::Passed => 0,
            Self::Rejected => 1,
            Self::Ended => 2,
            Self::ExecutionFailed => 3,
        }
    }
}

impl Approval {
    /// The gate's verdict, once there is one: `None` while the approval is pending, or approved
    /// with its execution still on the way (unless `wait_for_execution` is off).
    pub fn verdict(&self, wait_for_execution: bool) -> Option<Verdict> {
        match self.status.as_str() {
            "rejected" => Some(Verdict::Rejected),
            "expired" | "cancelled" => Some(Verdict::Ended),
            // An approval-only type's execution is its caller's: approved is the whole verdict.
            "approved" if !wait_for_execution || self.action.executes == Some(false) => {
                Some(Verdict::Passed)
            }
            "approved" => match self.execution.status.as_str() {
                "succeeded" => Some(Verdict::Passed),
                "failed" | "needs_reconciliation" => Some(Verdict::ExecutionFailed),
                _ => None,
            },
            // Pending, or a status this CLI does not know yet: keep waiting.
            _ => None,
        }
    }

    /// Nothing more will happen to it without an operator: decided against, withdrawn, expired,
    /// or approved with its execution ended.
    pub fn is_final(&self) -> bool {
        self.verdict(true).is_some()
    }

    /// Approving votes counted towards the quorum, as `counted/needed` per rule.
    pub fn quorum(&self) -> String {
        match &self.policy {
            Some(policy) if !policy.rules.is_empty() => policy
                .rules
                .iter()
                .map(|r| {
                    let counted = r.approvals.min(r.min_approvals);
                    if policy.rules.len() == 1 {
                        format!("{counted}/{} approvals", r.min_approvals)
                    } else {
                        format!("{} {counted}/{}", r.name, r.min_approvals)
                    }
                })
                .collect::<Vec<_>>()
                .join(", "),
            _ => {
                let approved = self.votes.iter().any(|v| v.vote == "approve");
                format!("{}/1 approvals", u32::from(approved))
            }
        }
    }

    /// One line saying where it stands, e.g. `pending · 1/2 approvals (alice@example.com)`.
    pub fn state_line(&self) -> String {
        match self.status.as_str() {
            "pending" => {
                let voters: Vec<&str> = self
                    .votes
                    .iter()
                    .filter(|v| v.vote == "approve")
                    .map(|v| v.approver.as_str())
                    .collect();
                let mut line = format!("pending · {}", self.quorum());
                if !voters.is_empty() {
                    line.push_str(&format!(" ({})", voters.join(", ")));
                }
                line
            }
            "approved" => {
                let mut line = "approved".to_owned();
                if let Some(decision) = &self.decision {
                    line.push_str(&format!(" by {}", decision.approver));
                }
                line.push_str(&format!(" · execution {}", self.execution_line()));
                line
            }
            "rejected" => match &self.decision {
                Some(d) => format!("rejected by {}{}", d.approver, said(d.comment.as_deref())),
                None => "rejected".to_owned(),
            },
            "cancelled" => match &self.cancellation {
                Some(c) => format!("cancelled by {}{}", c.by, said(c.reason.as_deref())),
                None => "cancelled".to_owned(),
            },
            "expired" => format!("expired at {} without a decision", self.expires_at),
            other => other.to_owned(),
        }
    }

    /// The execution's status with its attempts and last error, e.g. `failed (2 attempts: …)`.
    pub fn execution_line(&self) -> String {
        let execution = &self.execution;
        let mut details = Vec::new();
        if let Some(key) = &execution.claimed_by {
            details.push(format!("claimed by {key}"));
        } else if execution.attempts > 0 {
            let plural = if execution.attempts == 1 { "" } else { "s" };
            details.push(format!("{} attempt{plural}", execution.attempts));
        }
        if let Some(error) = &execution.last_error {
            details.push(format!("last error: {error}"));
        }
        match (&execution.note, &execution.claimed_by) {
            (Some(note), Some(_)) => details.push(format!("reported: {note}")),
            (Some(note), None) => details.push(format!("operator's note: {note}")),
            (None, _) => {}
        }
        let status = execution.status.replace('_', " ");
        if details.is_empty() {
            status
        } else {
            format!("{status} ({})", details.join("; "))
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn approval(value: serde_json::Value) -> Approval {
        serde_json::from_value(value).expect("approval")
    }

    #[test]
    fn the_gate_waits_for_the_execution_unless_told_not_to() {
        let running = approval(json!({"status": "approved", "execution": {"status": "running"}}));
        assert_eq!(running.verdict(true), None);
        assert_eq!(running.verdict(false), Some(Verdict::Passed));
        for (execution, verdict) in [
            ("succeeded", Verdict::Passed),
            ("failed", Verdict::ExecutionFailed),
            ("needs_reconciliation", Verdict::ExecutionFailed),
        ] {
            let a = approval(json!({"status": "approved", "execution": {"status": execution}}));
            assert_eq!(a.verdict(true), Some(verdict), "{execution}");
        }
    }

    #[test]
    fn every_status_has_its_exit_code() {
        for (status, code) in [
            ("pending", None),
            ("rejected", Some(1)),
            ("expired", Some(2)),
            ("cancelled", Some(2)),
            ("some_future_status", None),
        ] {
            let a = approval(json!({"status": status}));
            assert_eq!(a.verdict(true).map(Verdict::exit_code), code, "{status}");
        }
    }

    #[test]
    fn the_quorum_counts_per_rule() {
        let a = approval(json!({"status": "pending", "policy": {"rules": [
            {"name": "owners", "min_approvals": 2, "approvals": 1}]},
            "votes": [{"approver": "alice@example.com", "vote": "approve"}]}));
        assert_eq!(
            a.state_line(),
            "pending · 1/2 approvals (alice@example.com)"
        );
        let a = approval(json!({"status": "pending", "policy": {"rules": [
            {"name": "eng", "min_approvals": 2, "approvals": 0},
            {"name": "sec", "min_approvals": 1, "approvals": 1}]}}));
        assert_eq!(a.quorum(), "eng 0/2, sec 1/1");
        let a = approval(json!({"status": "pending", "policy": null}));
        assert_eq!(a.quorum(), "0/1 approvals");
    }
}
