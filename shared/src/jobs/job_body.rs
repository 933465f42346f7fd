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
        let json = serde_json::to_string(self)?;
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
