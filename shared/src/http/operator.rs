//! Operator endpoints: resume a failed or unreconciled execution, or record what really
//! happened to one whose outcome was unknown. Both are one conditional write, tenant-scoped, and
//! safe to repeat: a refused condition returns the item as it was, and a request that finds its
//! own change there (an SDK retry after a lost response, an operator's double submit) answers
//! as the first did, with `Idempotent-Replayed: true`.

use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::ApiError;
use super::REPLAYED;
use super::approvals::approval_id;
use super::extract::{Caller, idempotency_key, is_json, parse_json, read_body};
use crate::App;
use crate::auth::Role;
use crate::domain::{DecideRequest, ExecutionStatus, FieldError};
use crate::store::OperatorRefusal;

pub(super) const RESOLVE_BODY_LIMIT: usize = 16 * 1024;

pub async fn retry(
    State(app): State<Arc<App>>,
    caller: Caller,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    caller.require(&[Role::Operator])?;
    let tenant = caller.tenant();
    // The client's Idempotency-Key makes its own repeats safe; without one, a token of this
    // request's still makes the SDK's retries of it safe.
    let retry_key = if headers.contains_key("idempotency-key") {
        format!("key:{}", idempotency_key(&headers)?.as_str())
    } else {
        format!("request:{}", ulid::Ulid::new())
    };
    let id = approval_id(id)?;
    let now = app.clock.now();
    match app
        .store
        .retry_execution(tenant, &id, &retry_key, now)
        .await?
    {
        Ok(approval) => Ok((StatusCode::ACCEPTED, Json(approval.view(now))).into_response()),
        Err(OperatorRefusal::NotFound) => Err(ApiError::NotFound),
        // This request resumed it before (the latest retry, or a late duplicate of an older
        // one): answered as it was, never a resume of a newer generation.
        Err(OperatorRefusal::WrongState(approval))
            if approval.execution.retry_key.as_deref() == Some(retry_key.as_str())
                || approval.execution.retry_keys.contains(&retry_key) =>
        {
            Ok(replayed(StatusCode::ACCEPTED, json!(approval.view(now))))
        }
        Err(OperatorRefusal::WrongState(approval)) => Err(ApiError::NotRetryable {
            approval: json!(approval.view(now)),
        }),
    }
}

/// `POST /approvals/{id}/resume/retry`: a `failed` answer to the waiting workflow sent again
/// (operator only; nothing changes but the resume's status). 202 with the approval; anything
/// but a failed answer that still holds its token is 409 `not_retryable`.
pub async fn retry_resume(
    State(app): State<Arc<App>>,
    caller: Caller,
    id: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    caller.require(&[Role::Operator])?;
    let id = approval_id(id)?;
    let now = app.clock.now();
    let Caller(caller) = caller;
    match app
        .store
        .retry_resume(&caller.tenant, &id, &caller.principal, now)
        .await?
    {
        Ok(approval) => Ok((StatusCode::ACCEPTED, Json(approval.view(now))).into_response()),
        Err(OperatorRefusal::NotFound) => Err(ApiError::NotFound),
        Err(OperatorRefusal::WrongState(approval)) => Err(ApiError::ResumeNotRetryable {
            approval: json!(approval.view(now)),
        }),
    }
}

fn replayed(status: StatusCode, body: Value) -> Response {
    let mut response = (status, Json(body)).into_response();
    response
        .headers_mut()
        .insert(REPLAYED, axum::http::HeaderValue::from_static("true"));
    response
}

pub async fn resolve(
    State(app): State<Arc<App>>,
    caller: Caller,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    caller.require(&[Role::Operator])?;
    let tenant = caller.tenant();
    if !is_json(&headers) {
        return Err(ApiError::UnsupportedMediaType);
    }
    let bytes = read_body(body, &headers, RESOLVE_BODY_LIMIT).await?;
    let (outcome, note) = parse_resolution(&parse_json(&bytes)?).map_err(ApiError::invalid)?;
    let id = approval_id(id)?;
    let now = app.clock.now();
    match app
        .store
        .resolve_execution(tenant, &id, outcome, &note, now)
        .await?
    {
        Ok(approval) => Ok(Json(approval.view(now)).into_response()),
        Err(OperatorRefusal::NotFound) => Err(ApiError::NotFound),
        // This very resolution, already recorded (the note is the operator's own words).
        Err(OperatorRefusal::WrongState(approval))
            if approval.execution.status == outcome
                && approval.execution.note.as_deref() == Some(note.as_str()) =>
        {
            Ok(replayed(StatusCode::OK, json!(approval.view(now))))
        }
        Err(OperatorRefusal::WrongState(approval)) => Err(ApiError::NotResolvable {
            approval: json!(approval.view(now)),
        }),
    }
}

/// `{"outcome": "succeeded" | "failed", "note": "…"}`: the note says how the operator knows.
fn parse_resolution(body: &Value) -> Result<(ExecutionStatus, String), Vec<FieldError>> {
    let mut errors = Vec::new();
    let Some(body) = body.as_object() else {
        return Err(vec![FieldError::new("", "the body must be a JSON object")]);
    };
    for key in body.keys() {
        if !matches!(key.as_str(), "outcome" | "note") {
            errors.push(FieldError::new(key.clone(), "unknown field"));
        }
    }
    let outcome = outcome_of(body, &mut errors);
    let note = match body.get("note") {
        Some(Value::String(note))
            if !note.trim().is_empty()
                && note.chars().count() <= DecideRequest::MAX_COMMENT_CHARS =>
        {
            Some(note.clone())
        }
        _ => {
            errors.push(FieldError::new(
                "note",
                "required: 1-2000 characters on what happened and how you know",
            ));
            None
        }
    };
    match (outcome, note) {
        (Some(outcome), Some(note)) if errors.is_empty() => Ok((outcome, note)),
        _ => Err(errors),
    }
}

/// The `outcome` an operator resolves or a claimer reports: `succeeded` or `failed`.
pub(super) fn outcome_of(
    body: &serde_json::Map<String, Value>,
    errors: &mut Vec<FieldError>,
) -> Option<ExecutionStatus> {
    match body.get("outcome").and_then(Value::as_str) {
        Some("succeeded") => Some(ExecutionStatus::Succeeded),
        Some("failed") => Some(ExecutionStatus::Failed),
        _ => {
            errors.push(FieldError::new(
                "outcome",
                "must be \"succeeded\" or \"failed\"",
            ));
            None
        }
    }
}
