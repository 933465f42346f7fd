//! Which events one committed change of an approval makes (see the module's notes).

use serde_json::{Value, json};

use super::{EventType, TrailEvent, event_id};
use crate::domain::{Approval, Decision, EpochSeconds, ExecutionStatus, Outcome, Status, rfc3339};

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
) -> Vec<TrailEvent> {
    let Some(new) = new else {
        return Vec::new();
    };
    let mut derived = Derived {
        approval: new,
        position,
        events: Vec::new(),
    };
    if old.is_none() {
        let mut data = json!({
            "action_type": new.action_type,
            "approvers": new.approvers,
            "expires_at": rfc3339(new.expires_at),
            "policy": new.policy.is_some(),
        });
        // The kind of workflow that waits on it (never its token).
        if let Some(resume) = &new.resume {
            data["resume"] = json!(resume.kind);
        }
        // The deployment's policy that chose its approvers (or approved it): which version,
        // which policies.
        if let Some(source) = &new.policy_source {
            data["policy_version"] = json!(source.version);
            data["policies"] = json!(source.policies);
        }
        derived.push(
            EventType::Created,
            "",
            new.created_at,
            requester_actor(new),
            data,
        );
        if let Some(evaluated) = &new.policy_evaluated {
            derived.push(
                EventType::PolicyEvaluated,
                "",
                new.created_at,
                json!({ "channel": "policy" }),
                evaluated.clone(),
            );
        }
    }
    // The GitHub deliveries that joined the round (the one that opened it is the creation's).
    if let Some(gate) = &new.github {
        let known = old
            .and_then(|o| o.github.as_ref())
            .map_or(1, |g| g.deliveries.len().max(1));
        for delivery in gate.deliveries.iter().skip(known) {
            derived.push(
                EventType::Joined,
                &delivery.id,
                delivery.at,
                json!({ "channel": "github", "webhook_event_id": delivery.id }),
                json!({ "environment": gate.environment, "run_id": gate.run_id }),
            );
        }
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
    derived.stall(old);
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
                    // An auto-approval's actor is the policy that approved it.
                    let actor = match new.approved_by_policy() {
                        Some((id, version)) => {
                            json!({ "type": "policy", "id": id, "version": version })
                        }
                        None => vote_actor(decision),
                    };
                    derived.push(
                        kind,
                        "",
                        decision.decided_at,
                        actor,
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
                        json!({
                            "principal": cancellation.by,
                            "channel": cancellation.channel.map_or("api", |c| c.as_str()),
                        }),
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
    derived.resume_retry(old);
    derived.events
}

struct Derived<'a> {
    approval: &'a Approval,
    position: &'a str,
    events: Vec<TrailEvent>,
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
        let tenant = &self.approval.tenant;
        let approval_id = &self.approval.id;
        self.events.push(TrailEvent {
            id: event_id(tenant, approval_id, kind, discriminator),
            kind,
            at,
            actor,
            data,
            order: format!("{}#{:02}", self.position, self.events.len()),
            tenant: tenant.clone(),
            approval_id: approval_id.clone(),
        });
    }

    /// An operator's retry of a failed answer to the waiting workflow (its generation grew).
    fn resume_retry(&mut self, old: Option<&Approval>) {
        let Some(resume) = &self.approval.resume else {
            return;
        };
        let before = old
            .and_then(|o| o.resume.as_ref())
            .map_or(0, |r| r.generation);
        if resume.generation > before {
            self.push(
                EventType::ResumeRetried,
                &resume.generation.to_string(),
                resume.retried_at.unwrap_or(self.approval.created_at),
                json!({ "principal": resume.retried_by, "channel": "api" }),
                json!({ "type": resume.kind, "generation": resume.generation }),
            );
        }
    }

    /// The escalation steps applied and the reminder sent since `old` (each by a sweep's
    /// write), steps first: a reminder written with them goes to their approvers too. Each at
    /// the time it fell due.
    fn stall(&mut self, old: Option<&Approval>) {
        let new = self.approval;
        let (reminded, escalated) = old.map_or((0, 0), |o| (o.stall.reminded, o.stall.escalated));
        let sweeper = json!({ "channel": "sweeper" });
        for (step, number) in new.stall.escalation.iter().zip(1u32..) {
            if number <= escalated || number > new.stall.escalated {
                continue;
            }
            self.push(
                EventType::Escalated,
                &number.to_string(),
                new.created_at.saturating_add(step.after_seconds),
                sweeper.clone(),
                json!({ "step": number, "approvers": step.approvers, "rule": step.rule }),
            );
        }
        let number = new.stall.reminded;
        if number > reminded
            && let Some(reminders) = &new.stall.reminders
        {
            self.push(
                EventType::Reminded,
                &number.to_string(),
                reminders
                    .due(new.created_at, number)
                    .unwrap_or(new.created_at),
                sweeper,
                json!({ "number": number, "whom": new.waiting_on() }),
            );
        }
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
        // An approval-only type's execution, claimed by its caller: by whom, under which key.
        let claimer = new
            .claimant
            .as_ref()
            .map(|principal| json!({ "principal": principal, "channel": "api" }));
        if let (Some(key), Some(actor)) = (&new.claimed_by, &claimer)
            && old.is_none_or(|o| o.execution.claimed_by.is_none())
        {
            self.push(
                EventType::Claimed,
                &generation.to_string(),
                at,
                actor.clone(),
                json!({ "claimed_by": key }),
            );
            return;
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
        // A claim is no attempt of the executor's: its end is the outcome's event alone.
        if was_running && new.status != ExecutionStatus::Running && claimer.is_none() {
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
            // The claimer's report (or its late one, after the reconciler gave up) is the
            // change that set `reported_at`.
            let reported = new.reported_at.is_some()
                && old.is_none_or(|o| o.execution.reported_at != new.reported_at);
            let actor = match (kind, claimer) {
                (_, Some(claimer)) if reported => claimer,
                (EventType::Resolved, _) => operator,
                (EventType::NeedsReconciliation, Some(_)) => json!({ "channel": "reconciler" }),
                _ => executor,
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
    let mut actor = json!({ "principal": approval.requested_by, "channel": "api" });
    if let Some(key_id) = &approval.requested_by_key_id {
        actor["key_id"] = json!(key_id.as_str());
    }
    // Opened by a GitHub delivery: which one, and who the sender is as an approver.
    if let Some(gate) = &approval.github {
        actor["channel"] = json!("github");
        if let Some(delivery) = gate.deliveries.first() {
            actor["webhook_event_id"] = json!(delivery.id);
        }
        if let Some(requester) = &gate.requester {
            actor["approver"] = json!(requester);
        }
    }
    actor
}

fn vote_actor(vote: &Decision) -> Value {
    let mut actor = json!({ "approver": vote.approver, "channel": vote.channel.as_str() });
    if let Some(event) = &vote.webhook_event_id {
        actor["webhook_event_id"] = json!(event);
    }
    if let Some(key_id) = &vote.key_id {
        actor["key_id"] = json!(key_id.as_str());
    }
    // A vote in someone's place names both: whose place (`approver`) and who cast it (`by`),
    // and who set the delegation it was cast under (`delegation_set_by`: the person, or an
    // operator).
    if let Some(by) = &vote.by {
        actor["by"] = json!(by);
        if let Some(set_by) = &vote.delegation_set_by {
            actor["delegation_set_by"] = json!(set_by);
        }
    }
    // Which person: the provider's issuer and their subject there, and when they signed in.
    if let Some(signed_in) = &vote.signed_in {
        actor["iss"] = json!(signed_in.issuer);
        actor["sub"] = json!(signed_in.sub);
        if let Some(at) = signed_in.auth_time {
            actor["auth_time"] = json!(crate::domain::rfc3339(at));
        }
    }
    actor
}
