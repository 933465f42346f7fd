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
//! changes in order) and the event's index in its record; an event the executor records sorts
//! right after the event that caused it (a notification after the creation, a callback's
//! delivery after the event it delivered).

use serde::Serialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::domain::{Approval, Decision, EpochSeconds, ExecutionStatus, Outcome, Status, rfc3339};

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
}

impl EventType {
    pub const ALL: [Self; 19] = [
        Self::Created,
        Self::VoteRecorded,
        Self::Approved,
        Self::Rejected,
        Self::Cancelled,
        Self::Expired,
        Self::Queued,
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
        )
    }
}

/// One entry of an approval's audit trail.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub id: String,
    pub kind: EventType,
    pub at: EpochSeconds,
    /// Who or what caused it: `principal` or `approver`, `channel`, and the request or webhook
    /// event that carried it where known.
    pub actor: Value,
    pub data: Value,
    /// Where it sorts in the approval's trail (see the module's comment).
    pub order: String,
    pub tenant: String,
    pub approval_id: String,
}

impl Event {
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
        (tenant, approval_id): (&str, &str),
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
            order: format!("{after}#{}", order_suffix(kind, discriminator)),
            tenant: tenant.to_owned(),
            approval_id: approval_id.to_owned(),
        }
    }
}

fn order_suffix(kind: EventType, discriminator: &str) -> String {
    match kind {
        EventType::NotificationSent | EventType::NotificationFailed => {
            format!("n#{discriminator}")
        }
        _ => "c".to_owned(),
    }
}

/// The event's id: `evt_` and 32 hex digits of a hash of what identifies the transition.
pub fn event_id(tenant: &str, approval_id: &str, kind: EventType, discriminator: &str) -> String {
    let digest = Sha256::new()
        .chain_update(tenant.as_bytes())
        .chain_update([0])
        .chain_update(approval_id.as_bytes())
        .chain_update([0])
        .chain_update(kind.as_str().as_bytes())
        .chain_update([0])
        .chain_update(discriminator.as_bytes())
        .finalize();
    format!("evt_{}", hex(&digest[..16]))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A stream record's position as an order key: sequence numbers are decimal strings of up to
/// 40 digits, so zero-padded to 40 they sort as numbers.
pub fn stream_position(sequence_number: &str) -> String {
    format!("{sequence_number:0>40}")
}

/// The events of one committed change of an approval (the stream record at `position`).
pub fn events_for_change(
    old: Option<&Approval>,
    new: Option<&Approval>,
    position: &str,
) -> Vec<Event> {
    let Some(new) = new else {
        return Vec::new();
    };
    let mut derived = Derived {
        approval: new,
        position,
        events: Vec::new(),
    };
    if old.is_none() {
        derived.push(
            EventType::Created,
            "",
            new.created_at,
            requester_actor(new),
            json!({
                "action_type": new.action_type,
                "approvers": new.approvers,
                "expires_at": rfc3339(new.expires_at),
                "policy": new.policy.is_some(),
            }),
        );
    }
    let earlier_votes = old.map(Approval::recorded_votes).unwrap_or_default();
    for vote in new.recorded_votes() {
        let identity = vote.approver.identity();
        if earlier_votes
            .iter()
            .any(|v| v.approver.identity() == identity)
        {
            continue;
        }
        derived.push(
            EventType::VoteRecorded,
            &identity,
            vote.decided_at,
            vote_actor(vote),
            json!({
                "vote": match vote.outcome {
                    Outcome::Approved => "approve",
                    Outcome::Rejected => "reject",
                },
                "comment": vote.comment,
            }),
        );
    }
    let old_status = old.map(|o| o.status);
    if old_status != Some(new.status) {
        match new.status {
            Status::Approved | Status::Rejected => {
                if let Some(decision) = &new.decision {
                    let kind = if new.status == Status::Approved {
                        EventType::Approved
                    } else {
                        EventType::Rejected
                    };
                    derived.push(
                        kind,
                        "",
                        decision.decided_at,
                        vote_actor(decision),
                        json!({ "deciding_vote": decision.approver }),
                    );
                }
            }
            Status::Cancelled => {
                if let Some(cancellation) = &new.cancellation {
                    derived.push(
                        EventType::Cancelled,
                        "",
                        cancellation.at,
                        json!({ "principal": cancellation.by, "channel": "api" }),
                        json!({ "reason": cancellation.reason }),
                    );
                }
            }
            Status::Expired => derived.push(
                EventType::Expired,
                "",
                new.expires_at,
                json!({ "channel": "sweeper" }),
                json!({ "expires_at": rfc3339(new.expires_at) }),
            ),
            Status::Pending => {}
        }
    }
    if new.status == Status::Approved {
        derived.execution(old.filter(|o| o.status == Status::Approved));
    }
    derived.events
}

struct Derived<'a> {
    approval: &'a Approval,
    position: &'a str,
    events: Vec<Event>,
}

impl Derived<'_> {
    fn push(
        &mut self,
        kind: EventType,
        discriminator: &str,
        at: EpochSeconds,
        actor: Value,
        data: Value,
    ) {
        let tenant = self.approval.tenant.as_str();
        let approval_id = self.approval.id.as_str();
        self.events.push(Event {
            id: event_id(tenant, approval_id, kind, discriminator),
            kind,
            at,
            actor,
            data,
            order: format!("{}#{:02}", self.position, self.events.len()),
            tenant: tenant.to_owned(),
            approval_id: approval_id.to_owned(),
        });
    }

    /// The execution's transitions between `old` (the approval as it was, if it was already
    /// approved) and the approval now.
    fn execution(&mut self, old: Option<&Approval>) {
        let new = &self.approval.execution;
        let at = new.updated_at;
        let generation = new.generation;
        let executor = json!({ "channel": "executor" });
        let operator = json!({ "channel": "api" });
        let (old_generation, old_status, old_attempts) = match old {
            Some(o) => (
                Some(o.execution.generation),
                o.execution.status,
                o.execution.attempts,
            ),
            None => (None, ExecutionStatus::NotStarted, 0),
        };
        let this_generation = |attempt: u32| format!("{generation}/{attempt}");
        if old_generation.is_none_or(|g| g < generation) {
            if old_generation.is_some() {
                self.push(
                    EventType::Retried,
                    &generation.to_string(),
                    at,
                    operator.clone(),
                    json!({ "generation": generation }),
                );
            }
            if new.status != ExecutionStatus::NotStarted {
                self.push(
                    EventType::Queued,
                    &generation.to_string(),
                    at,
                    executor.clone(),
                    json!({ "generation": generation }),
                );
            }
            return;
        }
        // Questions put to the target's status URL, with their answers, before what they led to.
        let old_checks = old.map_or(0, |o| o.execution.status_checks.len());
        for (n, check) in new.status_checks.iter().enumerate().skip(old_checks) {
            self.push(
                EventType::StatusChecked,
                &format!("{generation}/check/{n}"),
                check.at,
                executor.clone(),
                json!({ "attempt": new.attempts, "answer": check.answer, "detail": check.detail }),
            );
        }
        let old_requeues = old.map_or(0, |o| o.execution.requeues);
        if new.requeues > old_requeues {
            self.push(
                EventType::Queued,
                &format!("{generation}/requeue/{}", new.requeues),
                at,
                json!({ "channel": "reconciler" }),
                json!({ "generation": generation, "requeued": new.requeues,
                        "reason": "the execution sat queued or running past its bound with no live attempt" }),
            );
        }
        if old_status == new.status && old_attempts == new.attempts {
            return;
        }
        // An attempt began: the one before it, if still running, was abandoned (its worker
        // stopped and another took it over).
        if new.attempts > old_attempts {
            if old_status == ExecutionStatus::Running {
                self.push(
                    EventType::AttemptEnded,
                    &this_generation(old_attempts),
                    at,
                    executor.clone(),
                    json!({ "attempt": old_attempts, "outcome": "abandoned", "error": null }),
                );
            }
            if new.status == ExecutionStatus::Running {
                self.push(
                    EventType::AttemptStarted,
                    &this_generation(new.attempts),
                    at,
                    executor.clone(),
                    json!({ "attempt": new.attempts }),
                );
                return;
            }
        }
        let was_running = old_status == ExecutionStatus::Running || new.attempts > old_attempts;
        if was_running && new.status != ExecutionStatus::Running {
            let outcome = match new.status {
                ExecutionStatus::Queued => "retryable",
                ExecutionStatus::Succeeded => "succeeded",
                ExecutionStatus::Failed => "failed",
                ExecutionStatus::NeedsReconciliation => "unknown",
                ExecutionStatus::Running | ExecutionStatus::NotStarted => "ended",
            };
            self.push(
                EventType::AttemptEnded,
                &this_generation(new.attempts),
                at,
                executor.clone(),
                json!({ "attempt": new.attempts, "outcome": outcome, "error": new.last_error }),
            );
        }
        let resolved = old_status == ExecutionStatus::NeedsReconciliation;
        let kind = match new.status {
            _ if resolved => Some(EventType::Resolved),
            ExecutionStatus::Succeeded => Some(EventType::Succeeded),
            ExecutionStatus::Failed => Some(EventType::Failed),
            ExecutionStatus::NeedsReconciliation => Some(EventType::NeedsReconciliation),
            _ => None,
        };
        if let Some(kind) = kind {
            let actor = if kind == EventType::Resolved {
                operator
            } else {
                executor
            };
            self.push(
                kind,
                &generation.to_string(),
                at,
                actor,
                json!({
                    "status": new.status.as_str(),
                    "attempts": new.attempts,
                    "error": new.last_error,
                    "note": new.note,
                }),
            );
        }
    }
}

fn requester_actor(approval: &Approval) -> Value {
    json!({ "principal": approval.requested_by, "channel": "api" })
}

fn vote_actor(vote: &Decision) -> Value {
    let mut actor = json!({ "approver": vote.approver, "channel": vote.channel.as_str() });
    if let Some(event) = &vote.webhook_event_id {
        actor["webhook_event_id"] = json!(event);
    }
    actor
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::approval::tests::pending;
    use crate::domain::{Approver, Channel};

    fn vote(approver: &str, outcome: Outcome, at: EpochSeconds) -> Decision {
        Decision {
            outcome,
            approver: Approver::parse(approver).unwrap(),
            decided_at: at,
            channel: Channel::Api,
            comment: None,
            webhook_event_id: None,
        }
    }

    fn types(events: &[Event]) -> Vec<&'static str> {
        events.iter().map(|e| e.kind.as_str()).collect()
    }

    /// The approval's life, one committed change after another, and the events of each.
    #[test]
    fn a_quorum_approval_and_its_execution_make_each_event_once() {
        let created = pending(1_000);
        let mut one_vote = created.clone();
        one_vote.votes.push(vote("alice", Outcome::Approved, 10));
        let mut approved = one_vote.clone();
        let bob = vote("bob", Outcome::Approved, 11);
        approved.votes.push(bob.clone());
        approved.status = Status::Approved;
        approved.decision = Some(bob);
        approved.execution.status = ExecutionStatus::Queued;
        let mut running = approved.clone();
        running.execution.status = ExecutionStatus::Running;
        running.execution.attempts = 1;
        let mut waiting = running.clone();
        waiting.execution.status = ExecutionStatus::Queued;
        waiting.execution.last_error = Some("HTTP 503".into());
        let mut again = waiting.clone();
        again.execution.status = ExecutionStatus::Running;
        again.execution.attempts = 2;
        let mut done = again.clone();
        done.execution.status = ExecutionStatus::Succeeded;
        done.execution.last_error = None;

        let life = [
            None,
            Some(&created),
            Some(&one_vote),
            Some(&approved),
            Some(&running),
            Some(&waiting),
            Some(&again),
            Some(&done),
        ];
        let mut all = Vec::new();
        for (i, pair) in life.windows(2).enumerate() {
            all.extend(events_for_change(
                pair[0],
                pair[1],
                &stream_position(&i.to_string()),
            ));
        }
        assert_eq!(
            types(&all),
            [
                "approval.created",
                "approval.vote_recorded",
                "approval.vote_recorded",
                "approval.approved",
                "execution.queued",
                "execution.attempt_started",
                "execution.attempt_ended",
                "execution.attempt_started",
                "execution.attempt_ended",
                "execution.succeeded",
            ]
        );
        assert_eq!(all[6].data["outcome"], "retryable");
        assert_eq!(all[6].data["error"], "HTTP 503");
        assert_eq!(all[8].data["outcome"], "succeeded");
        let mut ids: Vec<_> = all.iter().map(|e| e.id.clone()).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), all.len(), "ids are distinct");
        let mut orders: Vec<_> = all.iter().map(|e| e.order.clone()).collect();
        orders.sort();
        assert_eq!(
            orders,
            all.iter().map(|e| e.order.clone()).collect::<Vec<_>>()
        );

        // The same change derived again (a redelivered record) makes the same events.
        assert_eq!(
            events_for_change(Some(&one_vote), Some(&approved), "p"),
            events_for_change(Some(&one_vote), Some(&approved), "p")
        );
        // A change that records nothing new (a late report, the same image) makes none.
        assert!(events_for_change(Some(&done), Some(&done), "p").is_empty());
    }

    #[test]
    fn a_policy_less_decision_is_its_one_vote_and_the_outcome() {
        let created = pending(1_000);
        let mut rejected = created.clone();
        rejected.status = Status::Rejected;
        rejected.decision = Some(vote("alice", Outcome::Rejected, 12));
        let events = events_for_change(Some(&created), Some(&rejected), "p");
        assert_eq!(
            types(&events),
            ["approval.vote_recorded", "approval.rejected"]
        );
        assert_eq!(events[0].actor["approver"], "alice");
        assert_eq!(events[0].data["vote"], "reject");
    }

    #[test]
    fn operator_retries_takeovers_and_resolutions_are_events() {
        let mut failed = pending(1_000);
        failed.status = Status::Approved;
        failed.decision = Some(vote("alice", Outcome::Approved, 12));
        failed.execution.status = ExecutionStatus::Failed;
        failed.execution.attempts = 5;
        let mut retried = failed.clone();
        retried.execution.status = ExecutionStatus::Queued;
        retried.execution.generation = 1;
        assert_eq!(
            types(&events_for_change(Some(&failed), Some(&retried), "p")),
            ["execution.retried", "execution.queued"]
        );
        let mut running = retried.clone();
        running.execution.status = ExecutionStatus::Running;
        running.execution.attempts = 6;
        let mut taken_over = running.clone();
        taken_over.execution.attempts = 7;
        let events = events_for_change(Some(&running), Some(&taken_over), "p");
        assert_eq!(
            types(&events),
            ["execution.attempt_ended", "execution.attempt_started"]
        );
        assert_eq!(events[0].data["outcome"], "abandoned");
        let mut unknown = taken_over.clone();
        unknown.execution.status = ExecutionStatus::NeedsReconciliation;
        assert_eq!(
            types(&events_for_change(Some(&taken_over), Some(&unknown), "p")),
            ["execution.attempt_ended", "execution.needs_reconciliation"]
        );
        let mut resolved = unknown.clone();
        resolved.execution.status = ExecutionStatus::Succeeded;
        resolved.execution.note = Some("done by hand".into());
        let events = events_for_change(Some(&unknown), Some(&resolved), "p");
        assert_eq!(types(&events), ["execution.resolved"]);
        assert_eq!(events[0].data["note"], "done by hand");
        // A job that never began and is recorded as failed.
        let mut never = retried.clone();
        never.execution.status = ExecutionStatus::Failed;
        assert_eq!(
            types(&events_for_change(Some(&retried), Some(&never), "p")),
            ["execution.failed"]
        );
    }

    #[test]
    fn each_status_query_is_an_event_before_what_it_led_to() {
        let mut running = pending(1_000);
        running.status = Status::Approved;
        running.decision = Some(vote("alice", Outcome::Approved, 12));
        running.execution.status = ExecutionStatus::Running;
        running.execution.attempts = 1;
        let check = |answer: &str| crate::domain::StatusCheck {
            at: 20,
            answer: answer.into(),
            detail: None,
        };
        let mut waiting = running.clone();
        waiting.execution.status_checks.push(check("pending"));
        let events = events_for_change(Some(&running), Some(&waiting), "p");
        assert_eq!(types(&events), ["execution.status_checked"]);
        assert_eq!(events[0].data["answer"], "pending");
        let mut done = waiting.clone();
        done.execution.status_checks.push(check("succeeded"));
        done.execution.status = ExecutionStatus::Succeeded;
        let events = events_for_change(Some(&waiting), Some(&done), "p");
        assert_eq!(
            types(&events),
            [
                "execution.status_checked",
                "execution.attempt_ended",
                "execution.succeeded"
            ]
        );
        assert_ne!(
            events[0].id,
            events_for_change(Some(&running), Some(&waiting), "p")[0].id,
            "each query is its own event"
        );
    }

    #[test]
    fn executor_events_sort_right_after_their_cause() {
        let created = format!("{}#00", stream_position("7"));
        let next = format!("{}#01", stream_position("7"));
        let sent = Event::recorded_after(
            &created,
            EventType::NotificationSent,
            ("acme", "apr_1"),
            "alice",
            5,
            json!({}),
            json!({}),
        );
        assert!(created < sent.order && sent.order < next);
        assert!(sent.order < format!("{}#00", stream_position("8")));
        assert_eq!(
            sent.id,
            event_id("acme", "apr_1", EventType::NotificationSent, "alice")
        );
        assert!(
            EventType::ALL
                .iter()
                .all(|t| EventType::parse(t.as_str()) == Some(*t))
        );
    }
}
