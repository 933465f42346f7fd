//! `resume`: an AWS workflow that waits for the approval (a Step Functions task token, a Lambda
//! durable function's callback) is told once how it ended — success with the decision document
//! when approved, failure with `Countersign.Rejected | Expired | Cancelled` otherwise.
//!
//! The token is a credential: whoever holds it can end the workflow's wait. It is kept on the
//! approval's item for the job that answers, and never shown: not in the approval's view, the
//! trail, a callback, a log line (its `Debug` names it by a hash) or a metric.

use serde::Serialize;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::create::FieldError;
use super::{Approval, Status};

/// AWS's limits: a task token is 1 to 2,048 characters (`SendTaskSuccess`), a callback id 1 to
/// 1,024 of `[A-Za-z0-9+/]+={0,2}` (`SendDurableExecutionCallbackSuccess`).
pub const MAX_TASK_TOKEN_CHARS: usize = 2048;
pub const MAX_CALLBACK_ID_CHARS: usize = 1024;

/// The largest decision document each answer carries whole: a success's output or result
/// (256 KiB in both APIs), a failure's cause (Step Functions keeps 32,768 characters; a
/// durable failure's data is held to the same, so one document reads the same either way).
pub const MAX_SUCCESS_BYTES: usize = 262_144;
pub const MAX_FAILURE_BYTES: usize = 32_768;

/// Which kind of workflow waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResumeKind {
    /// A Step Functions task state with `.waitForTaskToken`.
    #[serde(rename = "stepfunctions")]
    StepFunctions,
    /// A Lambda durable function's `waitForCallback`.
    LambdaDurable,
}

impl ResumeKind {
    pub const ALL: [Self; 2] = [Self::StepFunctions, Self::LambdaDurable];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::StepFunctions => "stepfunctions",
            Self::LambdaDurable => "lambda_durable",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == raw)
    }

    /// The field that holds its token in a create body.
    pub fn token_field(self) -> &'static str {
        match self {
            Self::StepFunctions => "task_token",
            Self::LambdaDurable => "callback_id",
        }
    }
}

/// A task token or callback id: shown to nobody; its `Debug` is a hash prefix.
#[derive(Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct ResumeToken(String);

impl ResumeToken {
    pub fn new(token: impl Into<String>) -> Self {
        Self(token.into())
    }

    /// The token itself, for the call that answers and the item that keeps it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// What names it where it may not be shown: `sha256:` and the first 12 hex digits.
    pub fn name(&self) -> String {
        format!("sha256:{}", &self.digest()[..12])
    }

    /// The hex SHA-256 of the token: what the item that binds it to one approval is keyed by
    /// (`resume_in_use`), across every tenant.
    pub fn digest(&self) -> String {
        hex::encode(Sha256::digest(self.0.as_bytes()))
    }
}

impl std::fmt::Debug for ResumeToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ResumeToken({})", self.name())
    }
}

/// How far telling the workflow went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ResumeStatus {
    Pending,
    Succeeded,
    Failed,
}

impl ResumeStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        [Self::Pending, Self::Succeeded, Self::Failed]
            .into_iter()
            .find(|s| s.as_str() == raw)
    }
}

/// An approval's waiting workflow, and how far telling it went.
#[derive(Debug, Clone, PartialEq)]
pub struct Resume {
    pub kind: ResumeKind,
    pub token: ResumeToken,
    pub status: ResumeStatus,
    /// Answers tried (each attempt's end counts one).
    pub attempts: u32,
    pub last_error: Option<String>,
    /// How many times an operator had a `failed` answer sent again (each a new generation of
    /// the resume job and its ledger item), and who asked last.
    pub generation: u32,
    pub retried_by: Option<super::Approver>,
    pub retried_at: Option<super::EpochSeconds>,
}

impl Resume {
    /// The most times a failed answer may be sent again by an operator.
    pub const MAX_RETRIES: u32 = 20;

    /// Whether the token is still held (it is removed once an answer succeeded).
    pub fn holds_token(&self) -> bool {
        !self.token.expose().is_empty()
    }
}

/// What the approval shows of it: never the token.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResumeView<'a> {
    #[serde(rename = "type")]
    pub kind: ResumeKind,
    pub status: ResumeStatus,
    pub attempts: u32,
    pub last_error: Option<&'a str>,
}

impl Resume {
    /// A create body's `resume`, checked (every problem added to `errors`, named by field).
    pub fn parse(value: &Value, errors: &mut Vec<FieldError>) -> Option<Self> {
        let Some(object) = value.as_object() else {
            errors.push(FieldError::new(
                "resume",
                "must be an object: {\"type\": \"stepfunctions\", \"task_token\": …} or {\"type\": \"lambda_durable\", \"callback_id\": …}",
            ));
            return None;
        };
        let kind = match object.get("type") {
            None => {
                errors.push(FieldError::new("resume.type", "required"));
                None
            }
            Some(Value::String(raw)) => {
                let kind = ResumeKind::parse(raw);
                if kind.is_none() {
                    errors.push(FieldError::new(
                        "resume.type",
                        "must be \"stepfunctions\" or \"lambda_durable\"",
                    ));
                }
                kind
            }
            Some(_) => {
                errors.push(FieldError::new("resume.type", "must be a string"));
                None
            }
        };
        for key in object.keys() {
            let known = key == "type" || kind.is_some_and(|k| k.token_field() == key);
            if !known && kind.is_some() {
                errors.push(FieldError::new(format!("resume.{key}"), "unknown field"));
            }
        }
        let kind = kind?;
        let field = format!("resume.{}", kind.token_field());
        let token = match object.get(kind.token_field()) {
            None => {
                errors.push(FieldError::new(field, "required"));
                return None;
            }
            Some(Value::String(token)) => token,
            Some(_) => {
                errors.push(FieldError::new(field, "must be a string"));
                return None;
            }
        };
        if let Err(problem) = check_token(kind, token) {
            errors.push(FieldError::new(field, problem));
            return None;
        }
        Some(Self {
            kind,
            token: ResumeToken::new(token.clone()),
            status: ResumeStatus::Pending,
            attempts: 0,
            last_error: None,
            generation: 0,
            retried_by: None,
            retried_at: None,
        })
    }

    pub fn view(&self) -> ResumeView<'_> {
        ResumeView {
            kind: self.kind,
            status: self.status,
            attempts: self.attempts,
            last_error: self.last_error.as_deref(),
        }
    }
}

/// AWS's rules for the token (its API refuses anything else, so the create does first).
fn check_token(kind: ResumeKind, token: &str) -> Result<(), String> {
    let chars = token.chars().count();
    match kind {
        ResumeKind::StepFunctions if token.is_empty() || chars > MAX_TASK_TOKEN_CHARS => Err(
            format!("must be 1 to {MAX_TASK_TOKEN_CHARS} characters (Step Functions' limit)"),
        ),
        ResumeKind::LambdaDurable if token.is_empty() || chars > MAX_CALLBACK_ID_CHARS => Err(
            format!("must be 1 to {MAX_CALLBACK_ID_CHARS} characters (Lambda's limit)"),
        ),
        ResumeKind::LambdaDurable if !is_callback_id(token) => {
            Err("must match [A-Za-z0-9+/]+={0,2}, as Lambda's callback ids do".to_owned())
        }
        _ => Ok(()),
    }
}

/// `[A-Za-z0-9+/]+={0,2}`.
fn is_callback_id(id: &str) -> bool {
    let body = id.trim_end_matches('=');
    let padding = id.len() - body.len();
    !body.is_empty()
        && padding <= 2
        && body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
}

/// The resume types a deployment enables (`RESUME_TYPES`; none by default).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResumeTypes(Vec<ResumeKind>);

impl ResumeTypes {
    /// `stepfunctions,lambda_durable` (either, both, or empty for none).
    pub fn parse(raw: &str) -> Result<Self, String> {
        let mut kinds = Vec::new();
        for part in raw.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            // The error names the variable and what it takes, never a value (as every
            // configuration error does).
            let kind = ResumeKind::parse(part).ok_or_else(|| {
                "an entry is not a resume type: comma-separated stepfunctions, lambda_durable"
                    .to_owned()
            })?;
            if !kinds.contains(&kind) {
                kinds.push(kind);
            }
        }
        Ok(Self(kinds))
    }

    pub fn enables(&self, kind: ResumeKind) -> bool {
        self.0.contains(&kind)
    }
}

/// How the workflow is told an approval's end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(tag = "answer", rename_all = "snake_case")]
pub enum ResumeAnswer {
    /// Approved: success, its output the decision document (JSON).
    Success { document: String },
    /// Rejected, expired or cancelled: failure with `error`, its cause the decision document.
    Failure { error: String, document: String },
}

impl ResumeAnswer {
    /// The answer for an approval that ended (`None` while it is pending).
    pub fn of(approval: &Approval) -> Option<Self> {
        let limit = match approval.status {
            Status::Approved => MAX_SUCCESS_BYTES,
            _ => MAX_FAILURE_BYTES,
        };
        let document = within(decision_document(approval)?, limit).to_string();
        Some(match approval.status {
            Status::Approved => Self::Success { document },
            Status::Rejected => Self::failure("Countersign.Rejected", document),
            Status::Expired => Self::failure("Countersign.Expired", document),
            Status::Cancelled => Self::failure("Countersign.Cancelled", document),
            Status::Pending => return None,
        })
    }

    fn failure(error: &str, document: String) -> Self {
        Self::Failure {
            error: error.to_owned(),
            document,
        }
    }

    pub fn document(&self) -> &str {
        match self {
            Self::Success { document } | Self::Failure { document, .. } => document,
        }
    }

    pub fn error(&self) -> Option<&str> {
        match self {
            Self::Success { .. } => None,
            Self::Failure { error, .. } => Some(error),
        }
    }
}

/// The document as it fits `limit` bytes, still whole JSON: the votes' comments left out, then
/// the votes themselves, marked `"truncated": true` (the approval has them all).
fn within(mut document: Value, limit: usize) -> Value {
    let fits = |d: &Value| d.to_string().len() <= limit;
    if fits(&document) {
        return document;
    }
    document["truncated"] = json!(true);
    if let Some(votes) = document["votes"].as_array_mut() {
        for vote in votes.iter_mut().filter_map(Value::as_object_mut) {
            vote.remove("comment");
        }
    }
    if !fits(&document) {
        document["votes"] = json!([]);
    }
    document
}

/// What the workflow receives: `{approval_id, tenant, idempotency_key, requested_by, status,
/// decided_at, votes}` — `decided_at` is when it ended (the deciding vote, the cancel, the
/// expiry). The tenant, the create's key and its requester let the workflow check that the
/// answer is to its own request. `None` while pending.
pub fn decision_document(approval: &Approval) -> Option<Value> {
    let decided_at = match approval.status {
        Status::Pending => return None,
        Status::Approved | Status::Rejected => approval.decision.as_ref()?.decided_at,
        Status::Cancelled => approval.cancellation.as_ref()?.at,
        Status::Expired => approval.expires_at,
    };
    let view = json!(approval.view(decided_at));
    let votes: Vec<Value> = view["votes"]
        .as_array()
        .map(|votes| {
            votes
                .iter()
                .map(|v| {
                    let mut vote = Map::new();
                    for key in ["approver", "vote", "at", "comment", "by"] {
                        if let Some(value) = v.get(key).filter(|v| !v.is_null()) {
                            vote.insert(key.to_owned(), value.clone());
                        }
                    }
                    Value::Object(vote)
                })
                .collect()
        })
        .unwrap_or_default();
    Some(json!({
        "approval_id": approval.id,
        "tenant": approval.tenant,
        "idempotency_key": approval.idempotency_key,
        "requested_by": approval.requested_by,
        "status": approval.status.as_str(),
        "decided_at": super::rfc3339(decided_at),
        "votes": votes,
    }))
}

#[cfg(test)]
#[path = "resume_tests.rs"]
mod tests;
