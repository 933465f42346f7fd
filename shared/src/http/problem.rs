//! Every error the API answers, mapped to RFC 9457 problem+json in this one place.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::domain::FieldError;
use crate::domain::approval_policy::GroupName;
use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("a valid API key is required: Authorization: Bearer <key>")]
    Unauthorized,
    #[error("no such approval")]
    NotFound,
    #[error("this person has no delegation set, or it has ended")]
    NoDelegation,
    #[error("no such route")]
    NoRoute,
    #[error("no such webhook source")]
    UnknownSource,
    #[error("the webhook signature is missing, invalid or outside the 5-minute window")]
    InvalidSignature,
    #[error("method not allowed on this route")]
    MethodNotAllowed,
    #[error("the body must be JSON (Content-Type: application/json)")]
    UnsupportedMediaType,
    #[error("the body exceeds the limit of {limit} bytes")]
    PayloadTooLarge { limit: usize },
    #[error("the Idempotency-Key header is required")]
    IdempotencyKeyMissing,
    #[error("{0}")]
    IdempotencyKeyInvalid(&'static str),
    #[error("{detail}")]
    InvalidRequest {
        detail: String,
        errors: Vec<FieldError>,
    },
    #[error("action type {0:?} is not configured")]
    UnknownActionType(String),
    #[error(
        "resume type {0:?} is not enabled in this deployment (RESUME_TYPES; the template's ResumeStateMachineArns or ResumeFunctionArns)"
    )]
    ResumeNotEnabled(&'static str),
    #[error("this Idempotency-Key was used with a different request body")]
    IdempotencyKeyReused,
    #[error(
        "another approval already names this task token or callback id: a workflow's token answers one approval"
    )]
    ResumeInUse,
    #[error("the approval was already decided")]
    AlreadyDecided { approval: Value },
    #[error("only a failed or needs_reconciliation execution can be retried, at most 20 times")]
    NotRetryable { approval: Value },
    #[error(
        "only a failed answer to a waiting workflow, whose token is still held, can be sent again, at most 20 times"
    )]
    ResumeNotRetryable { approval: Value },
    #[error("only a needs_reconciliation execution can be resolved")]
    NotResolvable { approval: Value },
    #[error(
        "only an approval-only action type's execution is claimed: Countersign executes this one itself"
    )]
    NotClaimable { approval: Value },
    #[error("the approval is not approved, so its execution cannot be claimed")]
    NotApproved { approval: Value },
    #[error("the execution was claimed by another request (another Idempotency-Key)")]
    AlreadyClaimed { approval: Value },
    #[error("the execution has not been claimed: claim it first, with the same Idempotency-Key")]
    NotClaimed { approval: Value },
    #[error("this claim already reported another outcome")]
    AlreadyReported { approval: Value },
    #[error("the approval expired before it was decided")]
    ApprovalExpired,
    #[error("this approver is not listed on the approval")]
    NotAnApprover,
    #[error("this API key's roles do not allow this")]
    Forbidden,
    #[error(
        "the approver named has no delegation to this key's principal in force now: an approver key votes as itself, or in the place of a person who delegated to it"
    )]
    NotDelegated,
    #[error("the approval's requester may not decide it")]
    SelfApprovalForbidden,
    #[error(
        "this approver was removed from group {0} since the approval was created: its vote no longer counts there"
    )]
    NotInGroup(GroupName),
    #[error(
        "this approval is passkey-only: every vote is a passkey signature on its review page; nothing was recorded"
    )]
    PasskeyRequired,
    #[error("this approval has no certificate: it is not passkey-only, or not approved")]
    NoCertificate,
    #[error("the approval's certificate is being issued: claim it again in a moment")]
    CertificatePending,
    #[error("the comment is longer than this approval keeps ({0} bytes)")]
    CommentTooLong(u32),
    #[error("{detail}")]
    PolicyForbidden {
        detail: String,
        policies: Vec<String>,
    },
    #[error(
        "an approval policy could not be evaluated on this request, so it is refused (fail closed)"
    )]
    PolicyError { errors: Vec<(String, String)> },
    #[error("the approval could only be approved with its requester's own vote")]
    PolicyUnsatisfiable { errors: Vec<FieldError> },
    #[error("this approver already voted otherwise on the approval")]
    AlreadyVoted { approval: Value },
    #[error("the cursor is not one this query gave out")]
    InvalidCursor,
    #[error(
        "too many reads are held at once: ask again after Retry-After seconds, or read without wait"
    )]
    TooManyWaits { retry_after: u64 },
    #[error("a dependency is not reachable")]
    Unavailable,
    #[error("internal error")]
    Internal(StoreError),
}

impl From<StoreError> for ApiError {
    /// A store that is only unavailable for now (throttled, 5xx, timeouts — after the SDK's own
    /// retries) is a 503 to retry after a moment; anything else is a bug of ours.
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::Unavailable { .. } | StoreError::Contention(_) => {
                tracing::warn!(error = %err, "store unavailable; answering 503");
                Self::Unavailable
            }
            other => Self::Internal(other),
        }
    }
}

impl ApiError {
    /// A query parameter that is not valid.
    pub fn invalid_query(field: &str, message: &str) -> Self {
        Self::InvalidRequest {
            detail: "the query parameters are not valid".to_owned(),
            errors: vec![FieldError::new(field, message)],
        }
    }

    pub fn invalid(errors: Vec<FieldError>) -> Self {
        Self::InvalidRequest {
            detail: "the request body does not match the schema".to_owned(),
            errors,
        }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            Self::Unauthorized | Self::InvalidSignature => StatusCode::UNAUTHORIZED,
            Self::NotFound
            | Self::NoDelegation
            | Self::NoRoute
            | Self::UnknownSource
            | Self::NoCertificate => StatusCode::NOT_FOUND,
            Self::CertificatePending => StatusCode::CONFLICT,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::IdempotencyKeyMissing
            | Self::IdempotencyKeyInvalid(_)
            | Self::InvalidRequest { .. }
            | Self::UnknownActionType(_)
            | Self::ResumeNotEnabled(_)
            | Self::InvalidCursor => StatusCode::BAD_REQUEST,
            Self::IdempotencyKeyReused
            | Self::ResumeInUse
            | Self::AlreadyDecided { .. }
            | Self::NotRetryable { .. }
            | Self::ResumeNotRetryable { .. }
            | Self::NotResolvable { .. }
            | Self::NotClaimable { .. }
            | Self::NotApproved { .. }
            | Self::AlreadyClaimed { .. }
            | Self::NotClaimed { .. }
            | Self::AlreadyReported { .. } => StatusCode::CONFLICT,
            Self::ApprovalExpired => StatusCode::GONE,
            Self::NotAnApprover
            | Self::Forbidden
            | Self::NotDelegated
            | Self::NotInGroup(_)
            | Self::PasskeyRequired
            | Self::SelfApprovalForbidden
            | Self::PolicyForbidden { .. }
            | Self::PolicyError { .. } => StatusCode::FORBIDDEN,
            Self::CommentTooLong(_) => StatusCode::BAD_REQUEST,
            Self::PolicyUnsatisfiable { .. } => StatusCode::BAD_REQUEST,
            Self::AlreadyVoted { .. } => StatusCode::CONFLICT,
            Self::TooManyWaits { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// Every code with its HTTP status, for the API document (`openapi.rs`); a test holds it to
    /// `code()` and `status()` of every variant.
    pub const CODES: &'static [(&'static str, u16)] = &[
        ("unauthorized", 401),
        ("invalid_signature", 401),
        ("not_found", 404),
        ("method_not_allowed", 405),
        ("unsupported_media_type", 415),
        ("payload_too_large", 413),
        ("idempotency_key_missing", 400),
        ("idempotency_key_invalid", 400),
        ("invalid_request", 400),
        ("unknown_action_type", 400),
        ("resume_not_enabled", 400),
        ("idempotency_key_reused", 409),
        ("resume_in_use", 409),
        ("already_decided", 409),
        ("not_retryable", 409),
        ("not_resolvable", 409),
        ("not_claimable", 409),
        ("not_approved", 409),
        ("already_claimed", 409),
        ("not_claimed", 409),
        ("already_reported", 409),
        ("approval_expired", 410),
        ("not_an_approver", 403),
        ("forbidden", 403),
        ("self_approval_forbidden", 403),
        ("passkey_required", 403),
        ("no_certificate", 404),
        ("certificate_pending", 409),
        ("policy_unsatisfiable", 400),
        ("policy_forbidden", 403),
        ("policy_error", 403),
        ("already_voted", 409),
        ("invalid_cursor", 400),
        ("too_many_waits", 429),
        ("unavailable", 503),
        ("internal_error", 500),
    ];

    /// The status a code is answered with (500 for a code that is not one).
    pub fn status_of(code: &str) -> u16 {
        Self::CODES
            .iter()
            .find(|(c, _)| *c == code)
            .map_or(500, |(_, status)| *status)
    }

    /// The stable, machine-readable code clients branch on.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Unauthorized => "unauthorized",
            Self::InvalidSignature => "invalid_signature",
            Self::NotFound | Self::NoDelegation | Self::NoRoute | Self::UnknownSource => {
                "not_found"
            }
            Self::MethodNotAllowed => "method_not_allowed",
            Self::UnsupportedMediaType => "unsupported_media_type",
            Self::PayloadTooLarge { .. } => "payload_too_large",
            Self::IdempotencyKeyMissing => "idempotency_key_missing",
            Self::IdempotencyKeyInvalid(_) => "idempotency_key_invalid",
            Self::InvalidRequest { .. } | Self::CommentTooLong(_) => "invalid_request",
            Self::UnknownActionType(_) => "unknown_action_type",
            Self::ResumeNotEnabled(_) => "resume_not_enabled",
            Self::IdempotencyKeyReused => "idempotency_key_reused",
            Self::ResumeInUse => "resume_in_use",
            Self::AlreadyDecided { .. } => "already_decided",
            Self::NotRetryable { .. } | Self::ResumeNotRetryable { .. } => "not_retryable",
            Self::NotResolvable { .. } => "not_resolvable",
            Self::NotClaimable { .. } => "not_claimable",
            Self::NotApproved { .. } => "not_approved",
            Self::AlreadyClaimed { .. } => "already_claimed",
            Self::NotClaimed { .. } => "not_claimed",
            Self::AlreadyReported { .. } => "already_reported",
            Self::ApprovalExpired => "approval_expired",
            Self::NotAnApprover => "not_an_approver",
            Self::Forbidden | Self::NotDelegated | Self::NotInGroup(_) => "forbidden",
            Self::PasskeyRequired => "passkey_required",
            Self::NoCertificate => "no_certificate",
            Self::CertificatePending => "certificate_pending",
            Self::SelfApprovalForbidden => "self_approval_forbidden",
            Self::PolicyUnsatisfiable { .. } => "policy_unsatisfiable",
            Self::PolicyForbidden { .. } => "policy_forbidden",
            Self::PolicyError { .. } => "policy_error",
            Self::AlreadyVoted { .. } => "already_voted",
            Self::InvalidCursor => "invalid_cursor",
            Self::TooManyWaits { .. } => "too_many_waits",
            Self::Unavailable => "unavailable",
            Self::Internal(_) => "internal_error",
        }
    }

    fn title(&self) -> &'static str {
        match self {
            Self::Unauthorized => "Unauthorized",
            Self::InvalidSignature => "Invalid signature",
            Self::NotFound | Self::NoDelegation | Self::NoRoute | Self::UnknownSource => {
                "Not found"
            }
            Self::MethodNotAllowed => "Method not allowed",
            Self::UnsupportedMediaType => "Unsupported media type",
            Self::PayloadTooLarge { .. } => "Payload too large",
            Self::IdempotencyKeyMissing => "Idempotency-Key missing",
            Self::IdempotencyKeyInvalid(_) => "Idempotency-Key invalid",
            Self::InvalidRequest { .. } | Self::CommentTooLong(_) => "Invalid request",
            Self::UnknownActionType(_) => "Unknown action type",
            Self::ResumeNotEnabled(_) => "Resume not enabled",
            Self::IdempotencyKeyReused => "Idempotency-Key reused",
            Self::ResumeInUse => "Resume token in use",
            Self::AlreadyDecided { .. } => "Already decided",
            Self::NotRetryable { .. } | Self::ResumeNotRetryable { .. } => "Not retryable",
            Self::NotResolvable { .. } => "Not resolvable",
            Self::NotClaimable { .. } => "Not claimable",
            Self::NotApproved { .. } => "Not approved",
            Self::AlreadyClaimed { .. } => "Already claimed",
            Self::NotClaimed { .. } => "Not claimed",
            Self::AlreadyReported { .. } => "Already reported",
            Self::ApprovalExpired => "Approval expired",
            Self::NotAnApprover => "Not an approver",
            Self::Forbidden | Self::NotDelegated | Self::NotInGroup(_) => "Forbidden",
            Self::PasskeyRequired => "Passkey required",
            Self::NoCertificate => "No certificate",
            Self::CertificatePending => "Certificate pending",
            Self::SelfApprovalForbidden => "Self-approval forbidden",
            Self::PolicyUnsatisfiable { .. } => "Policy unsatisfiable",
            Self::PolicyForbidden { .. } => "Forbidden by policy",
            Self::PolicyError { .. } => "Policy error",
            Self::AlreadyVoted { .. } => "Already voted",
            Self::InvalidCursor => "Invalid cursor",
            Self::TooManyWaits { .. } => "Too many held reads",
            Self::Unavailable => "Service unavailable",
            Self::Internal(_) => "Internal error",
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let code = self.code();
        let retry_after = match &self {
            Self::TooManyWaits { retry_after } => Some(*retry_after),
            Self::Unavailable => Some(1),
            _ => None,
        };
        if let Self::Internal(err) = &self {
            // The cause goes to the log, not to the caller.
            tracing::error!(error = %err, "request failed");
        }
        let mut body = json!({
            "type": format!("urn:countersign:problem:{}", self.code()),
            "title": self.title(),
            "status": status.as_u16(),
            "detail": self.to_string(),
            "code": self.code(),
        });
        match self {
            Self::InvalidRequest { errors, .. } | Self::PolicyUnsatisfiable { errors } => {
                body["errors"] = json!(errors)
            }
            Self::CommentTooLong(cap) => {
                body["errors"] = json!([FieldError::new(
                    "comment",
                    format!("at most {cap} bytes on this approval")
                )])
            }
            Self::NotInGroup(group) => body["group"] = json!(group.as_str()),
            Self::PolicyForbidden { policies, .. } => body["policies"] = json!(policies),
            Self::PolicyError { errors } => {
                body["policies"] = errors.iter().map(|(id, _)| json!(id)).collect();
                body["policy_errors"] = errors
                    .iter()
                    .map(|(policy, message)| json!({"policy": policy, "message": message}))
                    .collect();
            }
            Self::AlreadyDecided { approval }
            | Self::AlreadyVoted { approval }
            | Self::NotRetryable { approval }
            | Self::ResumeNotRetryable { approval }
            | Self::NotResolvable { approval }
            | Self::NotClaimable { approval }
            | Self::NotApproved { approval }
            | Self::AlreadyClaimed { approval }
            | Self::NotClaimed { approval }
            | Self::AlreadyReported { approval } => body["approval"] = approval,
            _ => {}
        }
        let mut response = (status, body.to_string()).into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        if code == "unauthorized" {
            headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if let Some(seconds) = retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response.extensions_mut().insert(ProblemCode(code));
        response
    }
}

/// The `code` of a problem response, for the request's metrics.
#[derive(Debug, Clone, Copy)]
pub struct ProblemCode(pub &'static str);

#[cfg(test)]
mod tests {
    use super::*;

    /// One of every variant (keep it beside the exhaustive match in the test below).
    fn every_kind() -> Vec<ApiError> {
        let approval = json!({});
        vec![
            ApiError::Unauthorized,
            ApiError::NotFound,
            ApiError::NoDelegation,
            ApiError::NoRoute,
            ApiError::UnknownSource,
            ApiError::PasskeyRequired,
            ApiError::NoCertificate,
            ApiError::CertificatePending,
            ApiError::InvalidSignature,
            ApiError::MethodNotAllowed,
            ApiError::UnsupportedMediaType,
            ApiError::PayloadTooLarge { limit: 1 },
            ApiError::IdempotencyKeyMissing,
            ApiError::IdempotencyKeyInvalid("x"),
            ApiError::invalid(Vec::new()),
            ApiError::UnknownActionType("x".into()),
            ApiError::ResumeNotEnabled("stepfunctions"),
            ApiError::IdempotencyKeyReused,
            ApiError::ResumeInUse,
            ApiError::AlreadyDecided {
                approval: approval.clone(),
            },
            ApiError::NotRetryable {
                approval: approval.clone(),
            },
            ApiError::ResumeNotRetryable {
                approval: approval.clone(),
            },
            ApiError::NotResolvable {
                approval: approval.clone(),
            },
            ApiError::NotClaimable {
                approval: approval.clone(),
            },
            ApiError::NotApproved {
                approval: approval.clone(),
            },
            ApiError::AlreadyClaimed {
                approval: approval.clone(),
            },
            ApiError::NotClaimed {
                approval: approval.clone(),
            },
            ApiError::AlreadyReported {
                approval: approval.clone(),
            },
            ApiError::ApprovalExpired,
            ApiError::NotAnApprover,
            ApiError::Forbidden,
            ApiError::NotDelegated,
            ApiError::SelfApprovalForbidden,
            ApiError::NotInGroup(GroupName::parse("sre").unwrap()),
            ApiError::CommentTooLong(140),
            ApiError::PolicyForbidden {
                detail: "x".into(),
                policies: Vec::new(),
            },
            ApiError::PolicyError { errors: Vec::new() },
            ApiError::PolicyUnsatisfiable { errors: Vec::new() },
            ApiError::AlreadyVoted { approval },
            ApiError::InvalidCursor,
            ApiError::TooManyWaits { retry_after: 1 },
            ApiError::Unavailable,
            ApiError::Internal(StoreError::Corrupt("x")),
        ]
    }

    #[test]
    fn the_code_table_is_every_variant_s_code_and_status() {
        let kinds = every_kind();
        let mut seen: Vec<(&str, u16)> = kinds
            .iter()
            .map(|e| (e.code(), e.status().as_u16()))
            .collect();
        seen.sort_unstable();
        seen.dedup();
        let mut table = ApiError::CODES.to_vec();
        table.sort_unstable();
        assert_eq!(seen, table);
        for e in &kinds {
            // The exhaustive match: a new variant fails to compile until it is listed above.
            match e {
                ApiError::Unauthorized
                | ApiError::NotFound
                | ApiError::NoDelegation
                | ApiError::NoRoute
                | ApiError::UnknownSource
                | ApiError::InvalidSignature
                | ApiError::MethodNotAllowed
                | ApiError::UnsupportedMediaType
                | ApiError::PayloadTooLarge { .. }
                | ApiError::IdempotencyKeyMissing
                | ApiError::IdempotencyKeyInvalid(_)
                | ApiError::InvalidRequest { .. }
                | ApiError::UnknownActionType(_)
                | ApiError::ResumeNotEnabled(_)
                | ApiError::IdempotencyKeyReused
                | ApiError::ResumeInUse
                | ApiError::AlreadyDecided { .. }
                | ApiError::NotRetryable { .. }
                | ApiError::ResumeNotRetryable { .. }
                | ApiError::NotResolvable { .. }
                | ApiError::NotClaimable { .. }
                | ApiError::NotApproved { .. }
                | ApiError::AlreadyClaimed { .. }
                | ApiError::NotClaimed { .. }
                | ApiError::AlreadyReported { .. }
                | ApiError::ApprovalExpired
                | ApiError::NotAnApprover
                | ApiError::Forbidden
                | ApiError::NotDelegated
                | ApiError::SelfApprovalForbidden
                | ApiError::NotInGroup(_)
                | ApiError::PasskeyRequired
                | ApiError::NoCertificate
                | ApiError::CertificatePending
                | ApiError::CommentTooLong(_)
                | ApiError::PolicyForbidden { .. }
                | ApiError::PolicyError { .. }
                | ApiError::PolicyUnsatisfiable { .. }
                | ApiError::AlreadyVoted { .. }
                | ApiError::InvalidCursor
                | ApiError::TooManyWaits { .. }
                | ApiError::Unavailable
                | ApiError::Internal(_) => {}
            }
            assert_eq!(ApiError::status_of(e.code()), e.status().as_u16());
        }
    }
}
