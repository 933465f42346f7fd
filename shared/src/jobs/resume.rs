//! A waiting AWS workflow's answer: the job that tells a Step Functions task or a Lambda durable
//! function's callback how the approval ended, once (see `domain::resume`).
//!
//! The job names the approval and nothing of the answer: the executor reads the token and the
//! decision document from the approval itself when it begins (review of v6, finding 11: a job
//! message that held the token left it in the dead-letter queue; finding 8: one that held the
//! document could outgrow SQS's 256 KiB). The job is a few hundred bytes whatever the approval.

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::job::Job;
use crate::domain::resume::ResumeKind;
use crate::domain::trail::{EventType, TrailEvent};
use crate::domain::{Approval, ApprovalId, Completion, EpochSeconds, Status, TenantId};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResumeJob {
    pub approval_id: ApprovalId,
    pub tenant: TenantId,
    #[serde(rename = "resume_type")]
    pub kind: ResumeKind,
    /// 0 for the approval's answer, n for an operator's nth retry of a failed one.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub generation: u32,
    /// The trail order of the event that ended the approval: the answer's event sorts after it.
    pub after: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
    /// The approval's expiry: it bounds the retention of what the job writes (`None` in a job
    /// queued before jobs carried it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<EpochSeconds>,
    /// When the answer was first tried (epoch seconds): a retry is sent again, with backoff,
    /// only while `RESUME_RETRY_SECONDS` has not passed since (set on the first resend).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<EpochSeconds>,
    /// How many times it was sent again: the backoff doubles with each.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub resends: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl ResumeJob {
    /// The answer a change of an approval a workflow waits on asks for: the change that ended
    /// it (`derived`: its events, one of which ended it), or an operator's retry of a failed
    /// answer (its resume generation grew); `None` for any other change.
    pub fn of_change(
        old: Option<&Approval>,
        new: Option<&Approval>,
        derived: &[TrailEvent],
    ) -> Option<Job> {
        let new = new?;
        let resume = new.resume.as_ref()?;
        let ended = new.status != Status::Pending && old.is_none_or(|o| o.status != new.status);
        let retried = new.status != Status::Pending
            && old
                .and_then(|o| o.resume.as_ref())
                .is_some_and(|r| r.generation < resume.generation);
        if !ended && !retried {
            return None;
        }
        let after = derived
            .iter()
            .find(|e| {
                matches!(
                    e.kind,
                    EventType::Approved
                        | EventType::Rejected
                        | EventType::Expired
                        | EventType::Cancelled
                        | EventType::ResumeRetried
                )
            })
            .map_or_else(String::new, |e| e.order.clone());
        Some(Job::Resume(Self {
            approval_id: new.id.clone(),
            tenant: new.tenant.clone(),
            kind: resume.kind,
            generation: resume.generation,
            after,
            trace: new.trace.clone(),
            expires_at: Some(new.expires_at),
            since: None,
            resends: 0,
        }))
    }

    /// The trail event of its end: `resume.succeeded` or `resume.failed` (with why), naming,
    /// when known (`sent`), the answer sent (`answer`: `success` or the error) and the token
    /// by its hash (`token`) — a job that never began read neither.
    /// `confirmed` is false for a success taken from AWS's refusal of a later answer after an
    /// attempt whose outcome was unknown (review of v6, finding 11): the workflow was answered,
    /// but no answer of ours was seen to land.
    pub fn ended_event(
        &self,
        completion: &Completion,
        sent: Option<(&str, &str)>,
        confirmed: bool,
        now: EpochSeconds,
    ) -> Option<TrailEvent> {
        let (kind, mut data) = match completion {
            Completion::Succeeded => (EventType::ResumeSucceeded, json!({ "type": self.kind })),
            Completion::Failed(error) | Completion::NeedsReconciliation(error) => (
                EventType::ResumeFailed,
                json!({ "type": self.kind, "error": error }),
            ),
            Completion::RetryWait(_) | Completion::Unknown(_) => return None,
        };
        if let Some((answer, token)) = sent {
            data["answer"] = json!(answer);
            data["token"] = json!(token);
        }
        if !confirmed {
            data["confirmed"] = json!(false);
            data["note"] = json!(
                "an earlier answer's outcome was unknown, and AWS refused a later one as the \
                 workflow no longer waits: taken to have landed, not confirmed"
            );
        }
        if self.generation > 0 {
            data["generation"] = json!(self.generation);
        }
        Some(TrailEvent::recorded_after(
            &self.after,
            kind,
            (&self.tenant, &self.approval_id),
            &match self.generation {
                0 => String::new(),
                n => format!("retry:{n}"),
            },
            now,
            json!({ "channel": "resume" }),
            data,
        ))
    }
}
