//! A waiting AWS workflow's answer: the job that tells a Step Functions task or a Lambda durable
//! function's callback how the approval ended, once (see `domain::resume`). It carries the
//! token to the executor in the job's message, and names it only by its hash anywhere else.

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::job::Job;
use crate::domain::resume::{ResumeAnswer, ResumeKind, ResumeToken};
use crate::domain::trail::{EventType, TrailEvent};
use crate::domain::{Approval, ApprovalId, Completion, EpochSeconds, Status, TenantId};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResumeJob {
    pub approval_id: ApprovalId,
    pub tenant: TenantId,
    #[serde(rename = "resume_type")]
    pub kind: ResumeKind,
    pub token: ResumeToken,
    #[serde(flatten)]
    pub answer: ResumeAnswer,
    /// The trail order of the event that ended the approval: the answer's event sorts after it.
    pub after: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
    /// The approval's expiry: it bounds the retention of what the job writes (`None` in a job
    /// queued before jobs carried it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<EpochSeconds>,
}

impl ResumeJob {
    /// The answer of the change that ended an approval a workflow waits on (`derived`: the
    /// change's events, one of which ended it); `None` for any other change.
    pub fn of_change(
        old: Option<&Approval>,
        new: Option<&Approval>,
        derived: &[TrailEvent],
    ) -> Option<Job> {
        let new = new?;
        let resume = new.resume.as_ref()?;
        let ended = new.status != Status::Pending && old.is_none_or(|o| o.status != new.status);
        if !ended {
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
                )
            })
            .map_or_else(String::new, |e| e.order.clone());
        Some(Job::Resume(Self {
            approval_id: new.id.clone(),
            tenant: new.tenant.clone(),
            kind: resume.kind,
            token: resume.token.clone(),
            answer: ResumeAnswer::of(new)?,
            after,
            trace: new.trace.clone(),
            expires_at: Some(new.expires_at),
        }))
    }

    /// The trail event of its end: `resume.succeeded` or `resume.failed` (with why), naming the
    /// token by its hash.
    pub fn ended_event(&self, completion: &Completion, now: EpochSeconds) -> Option<TrailEvent> {
        let answered = self.answer.error().unwrap_or("success");
        let (kind, data) = match completion {
            Completion::Succeeded => (
                EventType::ResumeSucceeded,
                json!({ "type": self.kind, "answer": answered, "token": self.token.name() }),
            ),
            Completion::Failed(error) | Completion::NeedsReconciliation(error) => (
                EventType::ResumeFailed,
                json!({ "type": self.kind, "answer": answered, "token": self.token.name(),
                        "error": error }),
            ),
            Completion::RetryWait(_) | Completion::Unknown(_) => return None,
        };
        Some(TrailEvent::recorded_after(
            &self.after,
            kind,
            (&self.tenant, &self.approval_id),
            "",
            now,
            json!({ "channel": "resume" }),
            data,
        ))
    }
}
