//! Email jobs: one per email, each with its own ledger item, job identity and trail event. They
//! are made from the notifications the dispatcher makes (the first request, a reminder, an
//! escalation step, a delegate's copy), for the tenants of `EMAIL`, one per approver whose
//! identity is an email address, and carry what the email shows of the approval as the change
//! that made them left it.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::job::{Job, NotifyJob, NotifyReason};
use crate::domain::trail::{EventType, TrailEvent};
use crate::domain::{ApprovalId, Approver, Completion, EpochSeconds, TenantId};
use crate::email::{EmailSender, recipient};
use crate::slack::MessageState;
use crate::store::size;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmailJob {
    /// The approver emailed (their identity is the address).
    pub to: Approver,
    /// Why, when it is not the first request: a reminder or an escalation step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<NotifyReason>,
    /// A delegate's copy: the person whose place they may fill.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_place_of: Option<Approver>,
    /// What the email shows of the approval.
    pub message: MessageState,
    /// The trail order of the event the notification follows.
    pub after: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
}

impl EmailJob {
    pub fn approval_id(&self) -> &ApprovalId {
        &self.message.approval_id
    }

    pub fn tenant(&self) -> &TenantId {
        &self.message.tenant
    }

    /// What names this email among the approval's jobs, ledger items and events:
    /// `email-reminder:2:alice@example.com` (the first request's: `email-first:…`).
    pub fn tag(&self) -> String {
        let why = self
            .reason
            .map_or_else(|| "first".to_owned(), NotifyReason::tag);
        let copy = if self.in_place_of.is_some() {
            "-delegate"
        } else {
            ""
        };
        format!("email-{why}{copy}:{}", self.to.identity())
    }

    /// Its trail event once it ended: sent, or failed (refused, out of attempts, or its outcome
    /// unknown — recorded so, never sent again).
    pub fn ended_event(&self, completion: &Completion, now: EpochSeconds) -> Option<TrailEvent> {
        let mut data = json!({ "approver": self.to });
        if let Some(reason) = self.reason {
            data["reason"] = json!(reason.as_str());
            data["number"] = json!(reason.number());
        }
        if let Some(place) = &self.in_place_of {
            data["in_place_of"] = json!(place);
        }
        let kind = match completion {
            Completion::Succeeded => EventType::NotificationSent,
            Completion::Failed(error) => {
                data["outcome"] = json!("failed");
                data["error"] = json!(size::cut(error, size::MAX_ERROR_CHARS));
                EventType::NotificationFailed
            }
            Completion::NeedsReconciliation(error) => {
                data["outcome"] = json!("unknown");
                data["error"] = json!(size::cut(error, size::MAX_ERROR_CHARS));
                EventType::NotificationFailed
            }
            Completion::RetryWait(_) | Completion::Unknown(_) => return None,
        };
        Some(TrailEvent::recorded_after(
            &self.after,
            kind,
            (self.tenant(), self.approval_id()),
            &format!("email/{}", self.tag()),
            now,
            json!({ "channel": "email" }),
            data,
        ))
    }
}

/// The emails of `notifications` (the notify jobs one dispatch makes, delegates' copies
/// included): one per approver whose identity is an email address, for the tenants `senders`
/// names, each showing its approval as `states` has it.
pub fn email_jobs(
    notifications: &[Job],
    states: &HashMap<(TenantId, ApprovalId), MessageState>,
    senders: &BTreeMap<TenantId, EmailSender>,
) -> Vec<Job> {
    notifications
        .iter()
        .filter_map(|job| match job {
            Job::Notify(j) if !j.per_approver && senders.contains_key(&j.tenant) => Some(j),
            _ => None,
        })
        .filter_map(|job: &NotifyJob| {
            let state = states.get(&(job.tenant.clone(), job.approval_id.clone()))?;
            Some((job, state))
        })
        .flat_map(|(job, state)| {
            job.approvers
                .iter()
                .filter(|approver| recipient(approver).is_some())
                .map(move |approver| {
                    Job::Email(EmailJob {
                        to: approver.clone(),
                        reason: job.reason,
                        in_place_of: job.in_place_of.clone(),
                        message: state.clone(),
                        after: job.after.clone(),
                        trace: job.trace.clone(),
                    })
                })
        })
        .collect()
}
