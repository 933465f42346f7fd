//! The audit trail: one event per committed transition (pure).
//!
//! Events are derived from committed state — a change of the approval item as the approvals
//! stream delivers it (its old and new image), or a ledger transition the executor commits
//! together with the event — never recorded by a request handler, so recording them costs the
//! hot paths nothing and a transition that did not commit has no event.
//!
//! Each event's id is a hash of what identifies the transition (the approval, the type and, for
//! a transition that can happen more than once, the vote's voter or the execution's generation
//! and attempt), never of when or how often it was seen: a stream record or job delivered twice
//! derives the same ids, and the events table is keyed by id, so it holds each event once.
//! Events are listed in `order`: the stream record's sequence number (DynamoDB keeps one item's
//! changes in order) and the event's index in its record (`{position}#{index}`); an event the
//! executor records sorts after the event that caused it (a notification after the creation, a
//! callback's delivery after the event it delivered), after every event of the cause's change:
//! `{cause's key}~{cause's place}{what}#00` (see [`order_place`]). Stored, the events of one key
//! share one item (see `store/trail.rs`).

mod derive;
#[cfg(test)]
mod tests;

use serde::Serialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{ApprovalId, EpochSeconds, TenantId, rfc3339};

pub use derive::{events_for_change, stream_position};

/// Every event type, as the API names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum EventType {
    #[serde(rename = "approval.created")]
    Created,
    #[serde(rename = "approval.vote_recorded")]
    VoteRecorded,
    #[serde(rename = "approval.approved")]
    Approved,
    #[serde(rename = "approval.rejected")]
    Rejected,
    #[serde(rename = "approval.cancelled")]
    Cancelled,
    #[serde(rename = "approval.expired")]
    Expired,
    #[serde(rename = "execution.queued")]
    Queued,
    /// An approval-only type's approved execution, claimed by its caller.
    #[serde(rename = "execution.claimed")]
    Claimed,
    #[serde(rename = "execution.attempt_started")]
    AttemptStarted,
    #[serde(rename = "execution.attempt_ended")]
    AttemptEnded,
    #[serde(rename = "execution.succeeded")]
    Succeeded,
    #[serde(rename = "execution.failed")]
    Failed,
    #[serde(rename = "execution.needs_reconciliation")]
    NeedsReconciliation,
    #[serde(rename = "execution.retried")]
    Retried,
    #[serde(rename = "execution.resolved")]
    Resolved,
    #[serde(rename = "execution.status_checked")]
    StatusChecked,
    #[serde(rename = "notification.sent")]
    NotificationSent,
    #[serde(rename = "notification.failed")]
    NotificationFailed,
    #[serde(rename = "callback.delivered")]
    CallbackDelivered,
    #[serde(rename = "callback.failed")]
    CallbackFailed,
    /// A GitHub deployment's round was joined by another waiting job's delivery.
    #[serde(rename = "approval.joined")]
    Joined,
    /// GitHub was told a deployment's rejection.
    #[serde(rename = "github.answered")]
    GithubAnswered,
    /// ... or could not be (GitHub refused it, or the attempts ran out).
    #[serde(rename = "github.answer_failed")]
    GithubAnswerFailed,
    /// A reminder went to the approvers who had not voted.
    #[serde(rename = "approval.reminded")]
    Reminded,
    /// An escalation step's approvers joined.
    #[serde(rename = "approval.escalated")]
    Escalated,
    /// The AWS workflow waiting on the approval was told how it ended.
    #[serde(rename = "resume.succeeded")]
    ResumeSucceeded,
    /// ... or could not be (the workflow gave up waiting, or the attempts ran out).
    #[serde(rename = "resume.failed")]
    ResumeFailed,
    /// An operator had a failed answer sent again (`POST /approvals/{id}/resume/retry`).
    #[serde(rename = "resume.retried")]
    ResumeRetried,
    /// A tenant's approval policy in `log_only` was evaluated on the create: what enforcement
    /// would have done.
    #[serde(rename = "policy.evaluated")]
    PolicyEvaluated,
}

impl EventType {
    pub const ALL: [Self; 29] = [
        Self::Created,
        Self::VoteRecorded,
        Self::Approved,
        Self::Rejected,
        Self::Cancelled,
        Self::Expired,
        Self::Queued,
        Self::Claimed,
        Self::AttemptStarted,
        Self::AttemptEnded,
        Self::Succeeded,
        Self::Failed,
        Self::NeedsReconciliation,
        Self::Retried,
        Self::Resolved,
        Self::StatusChecked,
        Self::NotificationSent,
        Self::NotificationFailed,
        Self::CallbackDelivered,
        Self::CallbackFailed,
        Self::Joined,
        Self::GithubAnswered,
        Self::GithubAnswerFailed,
        Self::Reminded,
        Self::Escalated,
        Self::ResumeSucceeded,
        Self::ResumeFailed,
        Self::ResumeRetried,
        Self::PolicyEvaluated,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Created => "approval.created",
            Self::VoteRecorded => "approval.vote_recorded",
            Self::Approved => "approval.approved",
            Self::Rejected => "approval.rejected",
            Self::Cancelled => "approval.cancelled",
            Self::Expired => "approval.expired",
            Self::Queued => "execution.queued",
            Self::Claimed => "execution.claimed",
            Self::AttemptStarted => "execution.attempt_started",
            Self::AttemptEnded => "execution.attempt_ended",
            Self::Succeeded => "execution.succeeded",
            Self::Failed => "execution.failed",
            Self::NeedsReconciliation => "execution.needs_reconciliation",
            Self::Retried => "execution.retried",
            Self::Resolved => "execution.resolved",
            Self::StatusChecked => "execution.status_checked",
            Self::NotificationSent => "notification.sent",
            Self::NotificationFailed => "notification.failed",
            Self::CallbackDelivered => "callback.delivered",
            Self::CallbackFailed => "callback.failed",
            Self::Joined => "approval.joined",
            Self::GithubAnswered => "github.answered",
            Self::GithubAnswerFailed => "github.answer_failed",
            Self::Reminded => "approval.reminded",
            Self::Escalated => "approval.escalated",
            Self::ResumeSucceeded => "resume.succeeded",
            Self::ResumeFailed => "resume.failed",
            Self::ResumeRetried => "resume.retried",
            Self::PolicyEvaluated => "policy.evaluated",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == raw)
    }

    /// Whether a subscription may receive it: only the events the stream derives (the
    /// dispatcher makes callbacks). A callback's own outcome is never delivered as a callback
    /// (each delivery would make another event to deliver), and `notification.sent` /
    /// `notification.failed` are recorded by the executor, with no stream change to make a
    /// callback from.
    pub fn is_deliverable(self) -> bool {
        !matches!(
            self,
            Self::CallbackDelivered
                | Self::CallbackFailed
                | Self::NotificationSent
                | Self::NotificationFailed
                | Self::GithubAnswered
                | Self::GithubAnswerFailed
                | Self::ResumeSucceeded
                | Self::ResumeFailed
        )
    }
}

/// One entry of an approval's audit trail.
#[derive(Debug, Clone, PartialEq)]
pub struct TrailEvent {
    pub id: String,
    pub kind: EventType,
    pub at: EpochSeconds,
    /// Who or what caused it: `principal` or `approver`, `channel`, and the request or webhook
    /// event that carried it where known.
    pub actor: Value,
    pub data: Value,
    /// Where it sorts in the approval's trail (see the module's comment).
    pub order: String,
    pub tenant: TenantId,
    pub approval_id: ApprovalId,
}

impl TrailEvent {
    /// The public JSON shape.
    pub fn view(&self) -> Value {
        json!({
            "id": self.id,
            "type": self.kind.as_str(),
            "at": rfc3339(self.at),
            "actor": self.actor,
            "data": self.data,
        })
    }

    /// An event the executor records with a ledger transition, right after the event `after`
    /// (the order of the event that caused it), of the approval `(tenant, approval_id)`.
    pub fn recorded_after(
        after: &str,
        kind: EventType,
        (tenant, approval_id): (&TenantId, &ApprovalId),
        discriminator: &str,
        at: EpochSeconds,
        actor: Value,
        data: Value,
    ) -> Self {
        Self {
            id: event_id(tenant, approval_id, kind, discriminator),
            kind,
            at,
            actor,
            data,
            order: {
                let (key, index) = order_place(after);
                format!(
                    "{}~{index:02}{}#00",
                    listed_key(key),
                    order_suffix(kind, discriminator)
                )
            },
            tenant: tenant.clone(),
            approval_id: approval_id.clone(),
        }
    }
}

/// An order's key as the trail lists it: the trail reads item keys from `0` to `:` (stream
/// positions are digits), so a cause of any other shape — none at all, say — is put after them
/// all (`0~`…) rather than stored where no listing reads it.
pub fn listed_key(key: &str) -> std::borrow::Cow<'_, str> {
    if key.starts_with(|c: char| c.is_ascii_digit()) {
        std::borrow::Cow::Borrowed(key)
    } else {
        std::borrow::Cow::Owned(format!("0{key}"))
    }
}

/// What tells apart the events recorded after one event: each approver's notification (by a
/// hash of the identity, which may hold any character), the event's callback, the GitHub
/// answer. A notification's sent and failed share it, as a callback's delivered and failed do
/// (they are one record, written once).
fn order_suffix(kind: EventType, discriminator: &str) -> String {
    match kind {
        EventType::NotificationSent | EventType::NotificationFailed => {
            let digest = Sha256::digest(discriminator.as_bytes());
            format!("n{}", hex::encode(&digest[..8]))
        }
        EventType::GithubAnswered | EventType::GithubAnswerFailed => "g".to_owned(),
        EventType::ResumeSucceeded | EventType::ResumeFailed => "r".to_owned(),
        _ => "c".to_owned(),
    }
}

/// An order's key and place: `{key}#{NN}` — the events of one change share a key, each at its
/// place. Keys hold no `#`, so orders sort as their keys, then places, do (and as the events
/// table's items, keyed by key, are read). An order of another shape (stored before v5) is its
/// own key, at place 0.
pub fn order_place(order: &str) -> (&str, usize) {
    match order.rsplit_once('#') {
        Some((key, place)) if place.len() == 2 && place.bytes().all(|b| b.is_ascii_digit()) => {
            (key, place.parse().unwrap_or(0))
        }
        _ => (order, 0),
    }
}

/// The event's id: `evt_` and 32 hex digits of a hash of what identifies the transition.
pub fn event_id(
    tenant: &TenantId,
    approval_id: &ApprovalId,
    kind: EventType,
    discriminator: &str,
) -> String {
    let digest = Sha256::new()
        .chain_update(tenant.as_str().as_bytes())
        .chain_update([0])
        .chain_update(approval_id.as_str().as_bytes())
        .chain_update([0])
        .chain_update(kind.as_str().as_bytes())
        .chain_update([0])
        .chain_update(discriminator.as_bytes())
        .finalize();
    format!("evt_{}", hex::encode(&digest[..16]))
}
