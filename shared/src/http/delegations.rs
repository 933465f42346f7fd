//! `PUT`, `GET`, `DELETE /delegations/{identity}` (docs/API.md "Delegation"): a person lets
//! another vote in their place for a window. Set, read and ended by that person with their own
//! `approver` key, or by an operator; anyone else is refused. The vote in someone's place is
//! the decide route's (`approvals::decide`).

use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::ApiError;
use super::extract::{Caller, is_json, parse_json, read_body};
use crate::App;
use crate::auth::{self, Role};
use crate::domain::delegation::Delegation;
use crate::domain::{Approver, FieldError, rfc3339};
use crate::store::StoredDelegation;

/// A delegation's body is a few short fields.
pub const DELEGATION_BODY_LIMIT: usize = 16 * 1024;

/// `PUT /delegations/{identity}`: sets (replaces) the person's delegation; 200 with it.
pub async fn put(
    State(app): State<Arc<App>>,
    caller: Caller,
    identity: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let Caller(caller) = caller;
    let delegator = delegator(identity)?;
    may_manage(&caller, &delegator)?;
    if !is_json(&headers) {
        return Err(ApiError::UnsupportedMediaType);
    }
    let bytes = read_body(body, &headers, DELEGATION_BODY_LIMIT).await?;
    let value = parse_json(&bytes)?;
    let now = app.clock.now();
    let delegation = Delegation::parse(&delegator, &value, now).map_err(ApiError::invalid)?;
    // Who hands on another person's vote says why (review of v6, finding 4): an operator
    // setting someone else's delegation must give a reason, shown beside it and kept.
    let themselves = caller.principal.same_identity(&delegator);
    if !themselves && delegation.reason.is_none() {
        return Err(ApiError::invalid(vec![FieldError::new(
            "reason",
            "is required when an operator sets another person's delegation",
        )]));
    }
    // Every vote cast under it records who set it: bounded as the delegate is (store::size).
    if caller.principal.as_str().len() > Delegation::MAX_DELEGATE_BYTES {
        return Err(ApiError::invalid(vec![FieldError::new(
            "set_by",
            "the principal setting a delegation must be at most 128 bytes",
        )]));
    }
    app.store
        .put_delegation(&caller.tenant, &delegation, &caller.principal, now)
        .await?;
    Ok(Json(view(&StoredDelegation {
        delegation,
        set_by: Some(caller.principal.clone()),
        created_at: now,
    }))
    .into_response())
}

/// `GET /delegations/{identity}`: the person's delegation, until it ends (404 after, or none).
pub async fn get(
    State(app): State<Arc<App>>,
    caller: Caller,
    identity: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let Caller(caller) = caller;
    let delegator = delegator(identity)?;
    may_manage(&caller, &delegator)?;
    let now = app.clock.now();
    match app.store.delegation(&caller.tenant, &delegator).await? {
        Some(stored) if stored.delegation.until > now => Ok(Json(view(&stored)).into_response()),
        _ => Err(ApiError::NoDelegation),
    }
}

/// `DELETE /delegations/{identity}`: ends it at once; 204 whether or not there was one (ending
/// twice changes nothing).
pub async fn end(
    State(app): State<Arc<App>>,
    caller: Caller,
    identity: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let Caller(caller) = caller;
    let delegator = delegator(identity)?;
    may_manage(&caller, &delegator)?;
    app.store.end_delegation(&caller.tenant, &delegator).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// The path's person: an identity as approvers are spelled.
fn delegator(raw: Result<Path<String>, PathRejection>) -> Result<Approver, ApiError> {
    let invalid = |message: &str| ApiError::InvalidRequest {
        detail: "the path does not name a person".to_owned(),
        errors: vec![FieldError::new("identity", message)],
    };
    let Path(raw) = raw.map_err(|_| invalid("must be UTF-8"))?;
    Approver::parse(&raw).map_err(|e| invalid(e.0))
}

/// The person themselves, with their own `approver` key, or an operator: a delegation hands on
/// a person's vote, so nobody else may set, read or end it (403 `forbidden`).
fn may_manage(caller: &auth::Caller, delegator: &Approver) -> Result<(), ApiError> {
    let themselves = caller.has(Role::Approver) && caller.principal.same_identity(delegator);
    if themselves || caller.has(Role::Operator) {
        Ok(())
    } else {
        Err(ApiError::Forbidden)
    }
}

/// The delegation as shown: who set it (the person, or an operator) and why, beside what it
/// says.
fn view(stored: &StoredDelegation) -> Value {
    let delegation = &stored.delegation;
    json!({
        "delegator": delegation.delegator,
        "delegate": delegation.delegate,
        "from": rfc3339(delegation.from),
        "until": rfc3339(delegation.until),
        "reason": delegation.reason,
        "set_by": stored.set_by,
    })
}
