//! Approval-only action types: claim the approved execution, then report its outcome
//! (docs/AGENTS.md). Each is one conditional write ([`crate::store`]'s claims); a
//! refusal is explained from the item as it was, so a repeat with the claim's own
//! `Idempotency-Key` answers as the first request did (`Idempotent-Replayed: true`) and nothing
//! else gets through.

use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::approvals::approval_id;
use super::extract::{Caller, idempotency_key, is_json, parse_json, read_body};
use super::operator::outcome_of;
use super::{ApiError, REPLAYED};
use crate::App;
use crate::auth::Role;
use crate::domain::passkey::sealed_certificate;
use crate::domain::{Approval, DecideRequest, ExecutionStatus, FieldError, Status};

pub(super) const REPORT_BODY_LIMIT: usize = 16 * 1024;

/// The caller may claim or report on `approval` only if it requested it, or holds the operator
/// role (checked again by the claim's condition; a report is bound to the claim's key anyway).
fn may_act_on(caller: &crate::auth::Caller, approval: &Approval) -> bool {
    caller.has(Role::Operator)
        || approval
            .requested_by
            .as_ref()
            .is_some_and(|r| r.identity() == caller.principal.identity())
}

fn roles(caller: &crate::auth::Caller) -> Result<bool, ApiError> {
    let operator = caller.has(Role::Operator);
    match operator || caller.has(Role::Requester) {
        true => Ok(!operator),
        false => Err(ApiError::Forbidden),
    }
}

/// `POST /approvals/{id}/execution/claim`: `not_started → running`, once, for the request
/// with this `Idempotency-Key`.
pub async fn claim(
    State(app): State<Arc<App>>,
    Caller(caller): Caller,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let requester_only = roles(&caller)?;
    let key = idempotency_key(&headers)?;
    let id = approval_id(id)?;
    let now = app.clock.now();
    let claimant = (&caller.principal, requester_only);
    let written = app
        .store
        .claim_execution(&caller.tenant, &id, key.as_str(), claimant, now)
        .await?;
    // The claim's answer carries a passkey-only approval's certificate.
    let certified = |approval: &Approval, mut view: Value| {
        if let (Some(certificate), Some(fields)) =
            (sealed_certificate(approval), view.as_object_mut())
        {
            fields.insert("certificate".to_owned(), certificate);
        }
        view
    };
    if let Ok(approval) = &written {
        return Ok(Json(certified(approval, json!(approval.view(now)))).into_response());
    }
    let (old, approval) = match refused(written, &caller, now)? {
        Written::Applied(response) => return Ok(response),
        Written::Refused(old, approval) => (old, approval),
    };
    match old.execution.claimed_by.as_deref() {
        Some(claimed) if claimed == key.as_str() => Ok(replayed(certified(&old, approval))),
        Some(_) => Err(ApiError::AlreadyClaimed { approval }),
        None if old.status_at(now) != Status::Approved => Err(ApiError::NotApproved { approval }),
        None if old.assurance.is_some() && old.certificate.is_none() => {
            Err(ApiError::CertificatePending)
        }
        None => Err(ApiError::Internal(crate::store::StoreError::Corrupt(
            "the claim's condition refused a claimable approval",
        ))),
    }
}

/// `POST /approvals/{id}/execution/report`: the claimer's outcome, with the claim's key.
pub async fn report(
    State(app): State<Arc<App>>,
    Caller(caller): Caller,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let requester_only = roles(&caller)?;
    let key = idempotency_key(&headers)?;
    if !is_json(&headers) {
        return Err(ApiError::UnsupportedMediaType);
    }
    let bytes = read_body(body, &headers, REPORT_BODY_LIMIT).await?;
    let (outcome, detail) = parse_report(&parse_json(&bytes)?).map_err(ApiError::invalid)?;
    let id = approval_id(id)?;
    let now = app.clock.now();
    let written = app
        .store
        .report_execution(
            &caller.tenant,
            &id,
            (key.as_str(), (&caller.principal, requester_only)),
            (outcome, detail.as_deref()),
            now,
        )
        .await?;
    let (old, approval) = match refused(written, &caller, now)? {
        Written::Applied(response) => return Ok(response),
        Written::Refused(old, approval) => (old, approval),
    };
    match old.execution.claimed_by.as_deref() {
        None => Err(ApiError::NotClaimed { approval }),
        Some(claimed) if claimed != key.as_str() => Err(ApiError::AlreadyClaimed { approval }),
        Some(_) if old.execution.status == outcome && old.execution.note == detail => {
            Ok(replayed(approval))
        }
        Some(_) => Err(ApiError::AlreadyReported { approval }),
    }
}

/// What a claim's or report's write did: applied (the answer), or refused on an approval the
/// caller may act on, of an approval-only type (the item as it was, and its view).
enum Written {
    Applied(Response),
    Refused(Box<Approval>, Value),
}

/// The refusals both writes share: no such approval (404), another requester's (403), a type
/// Countersign executes (409 `not_claimable`).
fn refused(
    written: Result<Approval, Option<Approval>>,
    caller: &crate::auth::Caller,
    now: i64,
) -> Result<Written, ApiError> {
    let old = match written {
        Ok(approval) => return Ok(Written::Applied(Json(approval.view(now)).into_response())),
        Err(None) => return Err(ApiError::NotFound),
        Err(Some(old)) => old,
    };
    let approval = json!(old.view(now));
    if !may_act_on(caller, &old) {
        return Err(ApiError::Forbidden);
    }
    if old.executes {
        return Err(ApiError::NotClaimable { approval });
    }
    Ok(Written::Refused(Box::new(old), approval))
}

fn replayed(approval: Value) -> Response {
    let mut response = (StatusCode::OK, Json(approval)).into_response();
    response
        .headers_mut()
        .insert(REPLAYED, HeaderValue::from_static("true"));
    response
}

/// `{"outcome": "succeeded" | "failed", "detail"?: "…"}`.
fn parse_report(body: &Value) -> Result<(ExecutionStatus, Option<String>), Vec<FieldError>> {
    let Some(body) = body.as_object() else {
        return Err(vec![FieldError::new("", "the body must be a JSON object")]);
    };
    let mut errors: Vec<FieldError> = body
        .keys()
        .filter(|k| !matches!(k.as_str(), "outcome" | "detail"))
        .map(|k| FieldError::new(k.clone(), "unknown field"))
        .collect();
    let outcome = outcome_of(body, &mut errors);
    let detail = match body.get("detail") {
        None | Some(Value::Null) => None,
        Some(Value::String(detail))
            if detail.chars().count() <= DecideRequest::MAX_COMMENT_CHARS =>
        {
            Some(detail.clone()).filter(|d| !d.trim().is_empty())
        }
        Some(_) => {
            errors.push(FieldError::new(
                "detail",
                "must be a string of at most 2000 characters",
            ));
            None
        }
    };
    match outcome {
        Some(outcome) if errors.is_empty() => Ok((outcome, detail)),
        _ => Err(errors),
    }
}
