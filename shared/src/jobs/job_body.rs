//! A job as an SQS message body: written as JSON SQS accepts whatever the job holds, and read
//! back from the bodies jobs queued before a change of their fields still have (an execute
//! job's here; a notify job's in `notify_body.rs`), which a deploy may find in the queue.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::github_call::GithubCall;
use super::job::{ExecuteJob, Job};
use crate::domain::{ApprovalId, IdempotencyKey, TenantId};

/// An execute job as a message body holds it: as [`ExecuteJob`] writes it, or as jobs queued
/// before action types and payloads were fields of their own (`action: {"type", "payload"}`),
/// which a deploy may find still in the queue.
#[derive(Deserialize)]
pub(super) struct ExecuteJobBody {
    approval_id: ApprovalId,
    tenant: TenantId,
    generation: u32,
    idempotency_key: IdempotencyKey,
    #[serde(default)]
    key_names_approval: bool,
    action_type: Option<String>,
    payload: Option<Map<String, Value>>,
    action: Option<ActionBody>,
    context: Value,
    decision: Value,
    #[serde(default)]
    trace: Option<String>,
    #[serde(default)]
    github: Option<GithubCall>,
    #[serde(default)]
    expires_at: Option<crate::domain::EpochSeconds>,
    #[serde(default)]
    certificate: Option<Box<Value>>,
}

#[derive(Deserialize)]
struct ActionBody {
    #[serde(rename = "type")]
    action_type: String,
    payload: Map<String, Value>,
}

impl TryFrom<ExecuteJobBody> for ExecuteJob {
    type Error = &'static str;

    fn try_from(body: ExecuteJobBody) -> Result<Self, Self::Error> {
        let (action_type, payload) = match (body.action_type, body.payload, body.action) {
            (Some(action_type), Some(payload), _) => (action_type, payload),
            (None, None, Some(action)) => (action.action_type, action.payload),
            _ => return Err("an execute job names its action_type and payload"),
        };
        Ok(Self {
            approval_id: body.approval_id,
            tenant: body.tenant,
            generation: body.generation,
            idempotency_key: body.idempotency_key,
            key_names_approval: body.key_names_approval,
            action_type,
            payload,
            context: body.context,
            decision: body.decision,
            trace: body.trace,
            github: body.github,
            expires_at: body.expires_at,
            certificate: body.certificate,
        })
    }
}

/// Whether SQS accepts `c` in a message body: `#x9 | #xA | #xD | #x20–#xD7FF | #xE000–#xFFFD |
/// #x10000–#x10FFFF` (SendMessage, "MessageBody"); anything else refuses the whole request with
/// `InvalidMessageContents`.
pub fn sqs_allows(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
}

impl Job {
    /// The job as an SQS message body: its JSON with every character SQS refuses written as a
    /// `\uXXXX` escape. serde_json writes U+FFFE and U+FFFF (legal JSON, from any string the
    /// API accepts) raw; SQS refuses such an entry (InvalidMessageContents), the dispatcher
    /// fails the stream batch so that it comes again, and it never succeeds: the shard stalls
    /// behind it and the approval never executes. Outside strings JSON is ASCII, so escaping a
    /// character wherever it occurs changes no value: the body parses back to the same job.
    pub fn to_body(&self) -> Result<String, serde_json::Error> {
        let json = match self.queue_kind() {
            kind if kind == self.kind() => serde_json::to_string(self)?,
            kind => {
                let mut value = serde_json::to_value(self)?;
                value["kind"] = serde_json::Value::from(kind);
                serde_json::to_string(&value)?
            }
        };
        if json.chars().all(sqs_allows) {
            return Ok(json);
        }
        let mut body = String::with_capacity(json.len() + 16);
        for c in json.chars() {
            if sqs_allows(c) {
                body.push(c);
            } else {
                // Only BMP characters are refused (every supplementary one is allowed).
                body.push_str(&format!("\\u{:04x}", c as u32));
            }
        }
        Ok(body)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use crate::domain::approval::tests::pending;
    use crate::jobs::ResumeJob;
    use crate::jobs::dispatch_policy::jobs_for_change;
    use crate::jobs::job::{Job, NotifyReason, SlackReplyJob};

    /// The job kinds an executor from v5 reads (`shared/src/jobs/job.rs` at the last v5
    /// commit): a body of any other kind is no job to it, and waits in the queue (then the
    /// DLQ) until a later version reads it.
    #[derive(serde::Deserialize)]
    #[serde(tag = "kind", rename_all = "snake_case")]
    #[allow(dead_code)]
    enum V5Job {
        Notify(Value),
        Execute(Value),
        Callback(Value),
        Slack(Value),
        Github(Value),
    }

    /// Review of v6, finding 6: a v5 executor read a reminder, an escalation step's
    /// notification and a delegate's copy as a first notification (a delegate's copy handled
    /// first used up the notification record, and the listed approvers were never told). Every
    /// shape v6 and v7 added is a kind older code refuses, while the shapes it knows travel as
    /// before — and today's code reads both back.
    #[test]
    fn every_later_job_shape_has_a_kind_older_executors_refuse() {
        let approval = pending(1_000);
        let Some(Job::Notify(first)) = jobs_for_change(None, Some(&approval), "p")
            .into_iter()
            .next()
        else {
            panic!("a first notification");
        };
        let reminder = Job::Notify(super::super::job::NotifyJob {
            reason: Some(NotifyReason::Reminder { number: 2 }),
            ..first.clone()
        });
        let escalation = Job::Notify(super::super::job::NotifyJob {
            reason: Some(NotifyReason::Escalation { number: 1 }),
            ..first.clone()
        });
        let copy = Job::Notify(super::super::job::NotifyJob {
            approvers: vec![crate::domain::Approver::parse("erin").unwrap()],
            in_place_of: Some(first.approvers[0].clone()),
            ..first.clone()
        });
        let mut ended = approval.clone();
        ended.status = crate::domain::Status::Cancelled;
        ended.cancellation = Some(crate::domain::Cancellation {
            by: crate::domain::Approver::parse("ci").unwrap(),
            at: 5,
            reason: None,
            channel: None,
        });
        ended.resume = Some(crate::domain::resume::Resume {
            kind: crate::domain::resume::ResumeKind::StepFunctions,
            token: crate::domain::resume::ResumeToken::new("t0ken"),
            status: crate::domain::resume::ResumeStatus::Pending,
            attempts: 0,
            last_error: None,
            generation: 0,
            retried_by: None,
            retried_at: None,
        });
        let resume = ResumeJob::of_change(Some(&approval), Some(&ended), &[]).expect("a resume");
        let reply = Job::SlackReply(SlackReplyJob {
            approval_id: approval.id.clone(),
            tenant: approval.tenant.clone(),
            thread: crate::domain::SlackMessage {
                channel: "C1".into(),
                ts: "1.2".into(),
            },
            reason: NotifyReason::Reminder { number: 1 },
            approvers: first.approvers.clone(),
            after: String::new(),
            trace: None,
            expires_at: Some(1_000),
        });
        for job in [&reminder, &escalation, &copy, &resume, &reply] {
            let body = job.to_body().unwrap();
            assert!(
                serde_json::from_str::<V5Job>(&body).is_err(),
                "a v5 executor must refuse {}: {body}",
                job.id()
            );
            assert_eq!(&serde_json::from_str::<Job>(&body).unwrap(), job);
        }
        let first = Job::Notify(first);
        let body = first.to_body().unwrap();
        assert!(matches!(
            serde_json::from_str::<V5Job>(&body),
            Ok(V5Job::Notify(_))
        ));
        assert_eq!(serde_json::from_str::<Job>(&body).unwrap(), first);
    }
}
