//! The approval as the API shows it: one JSON shape, the same in every answer, listing,
//! callback and replay.

use serde::Serialize;
use serde_json::{Map, Value};

use super::{
    Approval, ApprovalId, Approver, Channel, ExecutionStatus, IdempotencyKey, KeyId, Outcome,
    SlackMessage, Status, StatusCheck,
};
use crate::domain::{EpochSeconds, rfc3339};

impl Approval {
    /// The public JSON shape of the approval at `now`.
    pub fn view(&self, now: EpochSeconds) -> ApprovalView<'_> {
        ApprovalView {
            id: &self.id,
            status: self.status_at(now),
            requested_by: self.requested_by.as_ref(),
            requested_by_key_id: self.requested_by_key_id.as_ref(),
            action: ActionView {
                kind: &self.action_type,
                payload: &self.payload,
                executes: self.executes,
            },
            approvers: &self.approvers,
            // Shown when it has rules or a deployment's policy decided it (`null` for v6's one
            // approving vote, no policy pushed).
            policy: (self.policy.is_some() || self.policy_source.is_some()).then(|| PolicyView {
                rules: self
                    .policy
                    .iter()
                    .flat_map(|p| &p.rules)
                    .zip(self.approvals_per_rule())
                    .map(|(r, approvals)| RuleView {
                        name: &r.name,
                        group: r.group.as_ref().map(|g| g.as_str()),
                        approvers: &r.approvers,
                        min_approvals: r.min_approvals,
                        approvals,
                    })
                    .collect(),
                source: self.policy_source.as_ref().map(|s| SourceView {
                    version: s.version,
                    sha256: &s.sha256,
                    policies: &s.policies,
                }),
            }),
            assurance: self.assurance.map(|a| a.as_str()),
            context: &self.context,
            idempotency_key: &self.idempotency_key,
            created_at: rfc3339(self.created_at),
            expires_at: rfc3339(self.expires_at),
            votes: self
                .recorded_votes()
                .iter()
                .map(|v| VoteView {
                    approver: &v.approver,
                    vote: match v.outcome {
                        Outcome::Approved => "approve",
                        Outcome::Rejected => "reject",
                    },
                    at: rfc3339(v.decided_at),
                    channel: v.channel,
                    comment: v.comment.as_deref(),
                    webhook_event_id: v.webhook_event_id.as_deref(),
                    by: v.by.as_ref(),
                    passkey: v.passkey.as_ref().map(|p| p.credential_id.as_str()),
                })
                .collect(),
            decision: self.decision.as_ref().map(|d| DecisionView {
                outcome: d.outcome,
                approver: &d.approver,
                decided_at: rfc3339(d.decided_at),
                channel: d.channel,
                comment: d.comment.as_deref(),
                webhook_event_id: d.webhook_event_id.as_deref(),
                by: d.by.as_ref(),
                actor: self.approved_by_policy().map(|(id, version)| PolicyActor {
                    kind: "policy",
                    id,
                    version,
                }),
            }),
            cancellation: self.cancellation.as_ref().map(|c| CancellationView {
                by: &c.by,
                at: rfc3339(c.at),
                reason: c.reason.as_deref(),
            }),
            execution: ExecutionView {
                status: self.execution.status,
                attempts: self.execution.attempts,
                last_error: self.execution.last_error.as_deref(),
                updated_at: rfc3339(self.execution.updated_at),
                note: self.execution.note.as_deref(),
                claimed_by: self.execution.claimed_by.as_deref(),
                late_reports: &self.execution.late_reports,
                status_checks: &self.execution.status_checks,
            },
            slack: self.slack.as_ref(),
            stall: self.stall.view(self.created_at),
            resume: self
                .resume
                .as_ref()
                .map(crate::domain::resume::Resume::view),
        }
    }
}

/// The approval as the API shows it (field order is the spec's).
#[derive(Debug, Serialize)]
pub struct ApprovalView<'a> {
    id: &'a ApprovalId,
    status: Status,
    requested_by: Option<&'a Approver>,
    #[serde(skip_serializing_if = "Option::is_none")]
    requested_by_key_id: Option<&'a KeyId>,
    action: ActionView<'a>,
    approvers: &'a [Approver],
    /// `null`: one approving vote decides, and no deployment's policy decided it.
    policy: Option<PolicyView<'a>>,
    /// Only on a passkey-only approval: `passkey`.
    #[serde(skip_serializing_if = "Option::is_none")]
    assurance: Option<&'static str>,
    context: &'a Map<String, Value>,
    idempotency_key: &'a IdempotencyKey,
    created_at: String,
    expires_at: String,
    votes: Vec<VoteView<'a>>,
    decision: Option<DecisionView<'a>>,
    /// Only on a cancelled approval.
    #[serde(skip_serializing_if = "Option::is_none")]
    cancellation: Option<CancellationView<'a>>,
    execution: ExecutionView<'a>,
    /// Only once its Slack message is posted.
    #[serde(skip_serializing_if = "Option::is_none")]
    slack: Option<&'a SlackMessage>,
    /// `reminders` and `escalation`, when it has them.
    #[serde(flatten)]
    stall: crate::domain::stall::StallView<'a>,
    /// Only when a workflow waits on it: how far telling it went (never its token).
    #[serde(skip_serializing_if = "Option::is_none")]
    resume: Option<crate::domain::resume::ResumeView<'a>>,
}

#[derive(Debug, Serialize)]
struct ActionView<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    payload: &'a Map<String, Value>,
    /// Only on an approval-only type (`false`): its caller claims the approved execution.
    #[serde(skip_serializing_if = "is_true")]
    executes: bool,
}

fn is_true(value: &bool) -> bool {
    *value
}

#[derive(Debug, Serialize)]
struct PolicyView<'a> {
    rules: Vec<RuleView<'a>>,
    /// The deployment's approval policy that decided it, by version (`null`: none did).
    source: Option<SourceView<'a>>,
}

#[derive(Debug, Serialize)]
struct SourceView<'a> {
    version: u32,
    sha256: &'a str,
    /// The `@id`s of the permits that decided.
    policies: &'a [String],
}

/// The policy as a decision's actor (an auto-approval).
#[derive(Debug, Serialize)]
pub struct PolicyActor<'a> {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub id: &'a str,
    pub version: u32,
}

#[derive(Debug, Serialize)]
struct RuleView<'a> {
    name: &'a str,
    /// A deployment's group rule names its group (its approvers: the members at create, less
    /// the requester).
    #[serde(skip_serializing_if = "Option::is_none")]
    group: Option<&'a str>,
    approvers: &'a [Approver],
    min_approvals: u32,
    /// Approving votes counted so far.
    approvals: u32,
}

#[derive(Debug, Serialize)]
struct VoteView<'a> {
    approver: &'a Approver,
    vote: &'static str,
    at: String,
    channel: Channel,
    comment: Option<&'a str>,
    webhook_event_id: Option<&'a str>,
    /// Only on a vote cast in the approver's place: the delegate who cast it.
    #[serde(skip_serializing_if = "Option::is_none")]
    by: Option<&'a Approver>,
    /// Only on a passkey vote: the credential that signed it (the certificate carries the
    /// signature).
    #[serde(skip_serializing_if = "Option::is_none")]
    passkey: Option<&'a str>,
}

#[derive(Debug, Serialize)]
struct CancellationView<'a> {
    by: &'a Approver,
    at: String,
    reason: Option<&'a str>,
}

#[derive(Debug, Serialize)]
struct DecisionView<'a> {
    outcome: Outcome,
    approver: &'a Approver,
    decided_at: String,
    channel: Channel,
    comment: Option<&'a str>,
    webhook_event_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    by: Option<&'a Approver>,
    /// Only on an auto-approval: the policy that approved it, `{"type": "policy", "id",
    /// "version"}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    actor: Option<PolicyActor<'a>>,
}

#[derive(Debug, Serialize)]
struct ExecutionView<'a> {
    status: ExecutionStatus,
    attempts: u32,
    last_error: Option<&'a str>,
    updated_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<&'a str>,
    /// Only once an approval-only execution is claimed: the claim's `Idempotency-Key`.
    #[serde(skip_serializing_if = "Option::is_none")]
    claimed_by: Option<&'a str>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    late_reports: &'a [String],
    #[serde(skip_serializing_if = "<[StatusCheck]>::is_empty")]
    status_checks: &'a [StatusCheck],
}
