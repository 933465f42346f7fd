//! Which committed change of an approval makes which job (pure): the dispatcher's policy, kept
//! apart from the jobs themselves (`job.rs`) so that what a change makes reads in one place.

use serde_json::{Value, json};

use super::job::{
    CallbackJob, ExecuteJob, GithubCall, GithubJob, Job, NotifyJob, NotifyReason, SlackJob,
    SlackReplyJob,
};
use crate::config::Subscription;
use crate::domain::trail::{EventType, TrailEvent};
use crate::domain::{Approval, Approver, Status, rfc3339};
use crate::slack::MessageState;

/// The jobs one committed change of an approval makes: a new approval → one notify job for its
/// approvers; pending → approved, or an operator retry (a new execution generation) → one
/// execute job. Anything else → none.
/// `created`: the order of the change's `approval.created` event, if it has one.
pub fn jobs_for_change(old: Option<&Approval>, new: Option<&Approval>, created: &str) -> Vec<Job> {
    let Some(new) = new else {
        return Vec::new();
    };
    let view = json!(new.view(new.created_at));
    let mut jobs = Vec::new();
    if old.is_none() && new.status == Status::Pending && !new.approvers.is_empty() {
        jobs.push(Job::Notify(NotifyJob {
            approval_id: new.id.clone(),
            tenant: new.tenant.clone(),
            approvers: new.approvers.clone(),
            per_approver: false,
            action: view["action"].clone(),
            context: view["context"].clone(),
            expires_at: new.expires_at,
            after: created.to_owned(),
            trace: new.trace.clone(),
            reason: None,
            in_place_of: None,
        }));
    }
    let newly_approved =
        new.status == Status::Approved && old.is_none_or(|o| o.status != Status::Approved);
    let retried = new.status == Status::Approved
        && old.is_some_and(|o| {
            o.status == Status::Approved && o.execution.generation < new.execution.generation
        });
    // The reconciler found the execution stuck (its job lost): the same job again.
    let requeued = new.status == Status::Approved
        && old.is_some_and(|o| {
            o.status == Status::Approved
                && o.execution.generation == new.execution.generation
                && o.execution.requeues < new.execution.requeues
        });
    // An approval-only type's execution is claimed by its caller, never dispatched.
    if new.executes && (newly_approved || retried || requeued) {
        jobs.push(execute_job(new));
    }
    jobs
}

/// What a sweep's write asks to be told (from the change's `derived` events): an escalation
/// step's approvers, or a reminder's — every listed approver who has not voted.
fn stall_notices<'a>(
    new: &'a Approval,
    derived: &'a [TrailEvent],
) -> impl Iterator<Item = (&'a TrailEvent, NotifyReason, Vec<Approver>)> {
    derived.iter().filter_map(move |event| {
        let field = match event.kind {
            EventType::Reminded => "number",
            EventType::Escalated => "step",
            _ => return None,
        };
        let number = u32::try_from(event.data.get(field)?.as_u64()?).ok()?;
        let (reason, approvers) = match event.kind {
            EventType::Reminded => (
                NotifyReason::Reminder { number },
                new.waiting_on().into_iter().cloned().collect::<Vec<_>>(),
            ),
            _ => (
                NotifyReason::Escalation { number },
                new.stall
                    .escalation
                    .get(usize::try_from(number).ok()?.checked_sub(1)?)?
                    .approvers
                    .clone(),
            ),
        };
        (!approvers.is_empty()).then_some((event, reason, approvers))
    })
}

/// The notifier's notifications a sweep's write makes: each once, its own job identity
/// (`{id}#reminder:2`) and keys, sorted after its event.
pub fn stall_jobs(new: Option<&Approval>, derived: &[TrailEvent]) -> Vec<Job> {
    let Some(new) = new else {
        return Vec::new();
    };
    let view = json!(new.view(new.created_at));
    stall_notices(new, derived)
        .map(|(event, reason, approvers)| {
            Job::Notify(NotifyJob {
                approval_id: new.id.clone(),
                tenant: new.tenant.clone(),
                approvers,
                per_approver: false,
                action: view["action"].clone(),
                context: view["context"].clone(),
                expires_at: new.expires_at,
                after: event.order.clone(),
                trace: new.trace.clone(),
                reason: Some(reason),
                in_place_of: None,
            })
        })
        .collect()
}

/// ... and their replies in the approval's Slack thread (a tenant with Slack, its message
/// posted): the channel that first told them.
pub fn slack_replies(new: &Approval, derived: &[TrailEvent]) -> Vec<Job> {
    let Some(thread) = &new.slack else {
        return Vec::new();
    };
    stall_notices(new, derived)
        .map(|(event, reason, approvers)| {
            Job::SlackReply(SlackReplyJob {
                approval_id: new.id.clone(),
                tenant: new.tenant.clone(),
                thread: thread.clone(),
                reason,
                approvers,
                after: event.order.clone(),
                trace: new.trace.clone(),
                expires_at: Some(new.expires_at),
            })
        })
        .collect()
}

/// The Slack message's job for one change (`position`, its stream position) of an approval of
/// a tenant with Slack: when the approval is new, or the change alters what the message shows
/// (a vote, the outcome, a cancel, expiry, the execution's progress). Keeping where the message
/// is, say, alters nothing it shows.
pub fn slack_job(old: Option<&Approval>, new: Option<&Approval>, position: &str) -> Option<Job> {
    let new = new?;
    let message = MessageState::of(new);
    if old.is_some_and(|old| MessageState::of(old) == message) {
        return None;
    }
    Some(Job::Slack(SlackJob {
        version: position.to_owned(),
        created_at: new.created_at,
        message,
        trace: new.trace.clone(),
    }))
}

/// The execute job of the approval's current execution generation.
pub fn execute_job(approval: &Approval) -> Job {
    let view = json!(approval.view(approval.created_at));
    Job::Execute(ExecuteJob {
        approval_id: approval.id.clone(),
        tenant: approval.tenant.clone(),
        generation: approval.execution.generation,
        idempotency_key: approval.idempotency_key.clone(),
        key_names_approval: approval.execute_key_names_approval,
        action_type: approval.action_type.clone(),
        payload: approval.payload.clone(),
        context: view["context"].clone(),
        decision: view["decision"].clone(),
        trace: approval.trace.clone(),
        github: GithubCall::of(approval),
        expires_at: Some(approval.expires_at),
        certificate: crate::domain::passkey::sealed_certificate(approval).map(Box::new),
    })
}

/// The answer to GitHub of a GitHub deployment that ended otherwise than approved (rejected,
/// expired, cancelled by a person): one job, from the change that ended it. (The approved one is
/// its execution, [`execute_job`]; a run's own end tells GitHub nothing.)
pub fn github_job(
    old: Option<&Approval>,
    new: Option<&Approval>,
    derived: &[TrailEvent],
) -> Option<Job> {
    let new = new?;
    let ended = matches!(
        new.status,
        Status::Rejected | Status::Expired | Status::Cancelled
    ) && old.is_none_or(|o| o.status != new.status);
    if !ended || !new.is_github() {
        return None;
    }
    let call = GithubCall::of(new)?;
    let after = derived
        .iter()
        .find(|e| {
            matches!(
                e.kind,
                EventType::Rejected | EventType::Expired | EventType::Cancelled
            )
        })
        .map_or_else(String::new, |e| e.order.clone());
    Some(Job::Github(GithubJob {
        approval_id: new.id.clone(),
        tenant: new.tenant.clone(),
        call,
        after,
        trace: new.trace.clone(),
        expires_at: Some(new.expires_at),
    }))
}

/// One callback job per event the tenant's subscription wants, carrying the approval as the
/// change left it.
pub fn callback_jobs(
    approval: &Approval,
    events: &[TrailEvent],
    subscription: Option<&Subscription>,
) -> Vec<Job> {
    let Some(subscription) = subscription else {
        return Vec::new();
    };
    events
        .iter()
        .filter(|e| subscription.wants(e.kind))
        .map(|event| {
            let mut body = json!({
                "type": event.kind.as_str(),
                "timestamp": rfc3339(event.at),
                "data": {
                    "approval": approval.view(event.at),
                    "event": event.view(),
                },
            });
            // A job must fit one SQS message, or the stream batch could never be dispatched:
            // an approval that carries more than that is called back without its payload and
            // context (the receiver reads them with GET /approvals/{id}).
            if body.to_string().len() > CALLBACK_BODY_LIMIT {
                body["data"]["approval"]["action"]["payload"] = Value::Null;
                body["data"]["approval"]["context"] = Value::Null;
                body["data"]["approval_truncated"] = json!(true);
            }
            Job::Callback(CallbackJob {
                approval_id: event.approval_id.clone(),
                tenant: event.tenant.clone(),
                event_id: event.id.clone(),
                event_type: event.kind.as_str().to_owned(),
                event_order: event.order.clone(),
                body,
                trace: approval.trace.clone(),
                expires_at: Some(approval.expires_at),
            })
        })
        .collect()
}

/// The largest callback body a job carries whole: well inside SQS's 256 KiB message with the
/// job's own fields.
const CALLBACK_BODY_LIMIT: usize = 192 * 1024;
