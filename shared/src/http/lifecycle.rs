//! Reading approvals' lives: an approval's audit trail (`GET /approvals/{id}/events`) and the
//! listing (`GET /approvals`), both in pages with signed cursors.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::ApiError;
use super::approvals::approval_id;
use super::extract::Caller;
use crate::App;
use crate::cursor::CursorKey;
use crate::domain::{Approver, Status};
use crate::store::ListQuery;

/// Pages hold 1–100 items, 50 unless asked.
pub(super) const DEFAULT_LIMIT: i32 = 50;
pub(super) const MAX_LIMIT: i32 = 100;

/// The query string's parameters; a parameter named twice, or one not in `allowed`, is refused.
pub(super) fn query_params(
    raw: Option<&str>,
    allowed: &[&str],
) -> Result<HashMap<String, String>, ApiError> {
    let mut params = HashMap::new();
    for (name, value) in url::form_urlencoded::parse(raw.unwrap_or_default().as_bytes()) {
        if !allowed.contains(&name.as_ref()) {
            return Err(ApiError::invalid_query(
                &name,
                "is not a parameter of this route",
            ));
        }
        if params.insert(name.to_string(), value.to_string()).is_some() {
            return Err(ApiError::invalid_query(&name, "is given more than once"));
        }
    }
    Ok(params)
}

pub(super) fn page_limit(params: &HashMap<String, String>) -> Result<i32, ApiError> {
    match params.get("limit") {
        None => Ok(DEFAULT_LIMIT),
        Some(raw) => match raw.parse::<i32>() {
            Ok(n) if (1..=MAX_LIMIT).contains(&n) => Ok(n),
            _ => Err(ApiError::invalid_query(
                "limit",
                "must be an integer from 1 to 100",
            )),
        },
    }
}

pub(super) fn cursor_key(app: &App) -> Result<CursorKey, ApiError> {
    // Required at start by every function that serves a list (`Config::check_for`).
    app.config
        .decision_token_secret
        .as_ref()
        .map(CursorKey::new)
        .ok_or(ApiError::Unavailable)
}

/// Every role reads an approval's events, oldest first.
pub async fn events(
    State(app): State<Arc<App>>,
    caller: Caller,
    id: Result<Path<String>, PathRejection>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let id = approval_id(id)?;
    let params = query_params(query.as_deref(), &["limit", "cursor"])?;
    let limit = page_limit(&params)?;
    let key = cursor_key(&app)?;
    let scope = format!("events\n{}\n{}", caller.tenant(), id);
    let after = match params.get("cursor") {
        None => None,
        Some(cursor) => {
            let position = key.open(&scope, cursor).ok_or(ApiError::InvalidCursor)?;
            match (position["o"].as_str(), position["i"].as_str()) {
                (Some(order), Some(event)) => Some((order.to_owned(), event.to_owned())),
                _ => return Err(ApiError::InvalidCursor),
            }
        }
    };
    let page = app
        .store
        .list_events(caller.tenant(), &id, after.clone(), limit)
        .await?;
    // An empty first page: no such approval (404), or one whose events are not recorded yet.
    if page.events.is_empty()
        && after.is_none()
        && app
            .store
            .get_approval(caller.tenant(), &id)
            .await?
            .is_none()
    {
        return Err(ApiError::NotFound);
    }
    let next_cursor: Option<String> = page
        .next
        .map(|(order, event)| key.seal(&scope, &json!({"o": order, "i": event})));
    let events: Vec<Value> = page.events.iter().map(|e| e.view()).collect();
    Ok(Json(json!({ "events": events, "next_cursor": next_cursor })).into_response())
}

/// `GET /approvals`: the caller's tenant's approvals, newest first, filtered by status,
/// approver and requester (an approver's inbox: `status=pending&approver=me`). Every role
/// lists.
pub async fn list(
    State(app): State<Arc<App>>,
    caller: Caller,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let params = query_params(
        query.as_deref(),
        &["status", "approver", "requested_by", "limit", "cursor"],
    )?;
    let limit = page_limit(&params)?;
    let status = params
        .get("status")
        .map(|raw| {
            Status::parse(raw).ok_or_else(|| {
                ApiError::invalid_query(
                    "status",
                    "must be pending, approved, rejected, expired or cancelled",
                )
            })
        })
        .transpose()?;
    // `me`: the caller's own principal (an approver's inbox without knowing its own name).
    let identity = |name: &str| {
        params
            .get(name)
            .map(|raw| match raw.as_str() {
                "me" => Ok(caller.0.principal.identity()),
                _ => Approver::parse(raw)
                    .map(|a| a.identity())
                    .map_err(|e| ApiError::invalid_query(name, &e.to_string())),
            })
            .transpose()
    };
    let list = ListQuery {
        tenant: caller.tenant().clone(),
        status,
        approver: identity("approver")?,
        requested_by: identity("requested_by")?,
    };
    let key = cursor_key(&app)?;
    // The cursor is bound to the tenant and every filter (not to the page size).
    let scope = format!(
        "list\n{}\n{}\n{}\n{}",
        list.tenant,
        list.status.map_or("", |s| s.as_str()),
        list.approver.as_deref().unwrap_or_default(),
        list.requested_by.as_deref().unwrap_or_default(),
    );
    let start = match params.get("cursor") {
        None => None,
        Some(cursor) => {
            let position = key.open(&scope, cursor).ok_or(ApiError::InvalidCursor)?;
            let position: HashMap<String, String> =
                serde_json::from_value(position).map_err(|_| ApiError::InvalidCursor)?;
            Some(position)
        }
    };
    let page = app.store.list_approvals(&list, start, limit).await?;
    let now = app.clock.now();
    let approvals: Vec<Value> = page
        .approvals
        .iter()
        .map(|listed| &listed.approval)
        // A pending approval past its expiry reads as expired until the sweeper stores it so.
        .filter(|a| {
            list.status
                .is_none_or(|s| s != Status::Pending || a.status_at(now) == s)
        })
        .map(|a| json!(a.view(now)))
        .collect();
    let next_cursor = page.next.map(|position| key.seal(&scope, &json!(position)));
    Ok(Json(json!({ "approvals": approvals, "next_cursor": next_cursor })).into_response())
}
