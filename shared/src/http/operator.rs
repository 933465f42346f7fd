//! Operator endpoints: resume a failed or unreconciled execution, or record what really
//! happened to one whose outcome was unknown. Both are one conditional write, tenant-scoped.

use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::ApiError;
use super::approvals::approval_id;
use super::extract::{Tenant, is_json, parse_json, read_body};
use crate::App;
use crate::domain::{DecideRequest, ExecutionStatus, FieldError};
use crate::store::OperatorRefusal;

const RESOLVE_BODY_LIMIT: usize = 16 * 1024;

pub async fn retry(
    State(app): State<Arc<App>>,
    Tenant(tenant): Tenant,
    id: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let id = approval_id(id)?;
    let now = app.clock.now();
    match app.store.retry_execution(&tenant, &id, now).await? {
        Ok(approval) => Ok((StatusCode::ACCEPTED, Json(approval.view(now))).into_response()),
        Err(OperatorRefusal::NotFound) => Err(ApiError::NotFound),
        Err(OperatorRefusal::WrongState(approval)) => Err(ApiError::NotRetryable {
            approval: json!(approval.view(now)),
        }),
    }
}

pub async fn resolve(
    State(app): State<Arc<App>>,
    Tenant(tenant): Tenant,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    if !is_json(&headers) {
        return Err(ApiError::UnsupportedMediaType);
    }
    let bytes = read_body(body, &headers, RESOLVE_BODY_LIMIT).await?;
    let (outcome, note) = parse_resolution(&parse_json(&bytes)?).map_err(ApiError::invalid)?;
    let id = approval_id(id)?;
    let now = app.clock.now();
    match app
        .store
        .resolve_execution(&tenant, &id, outcome, &note, now)
        .await?
    {
        Ok(approval) => Ok(Json(approval.view(now)).into_response()),
        Err(OperatorRefusal::NotFound) => Err(ApiError::NotFound),
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
    let outcome = match body.get("outcome").and_then(Value::as_str) {
        Some("succeeded") => Some(ExecutionStatus::Succeeded),
        Some("failed") => Some(ExecutionStatus::Failed),
        _ => {
            errors.push(FieldError::new(
                "outcome",
                "must be \"succeeded\" or \"failed\"",
            ));
            None
        }
    };
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
