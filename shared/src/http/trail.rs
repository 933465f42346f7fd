//! An approval's audit trail (`GET /approvals/{id}/events`), oldest first, in pages with signed
//! cursors.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::ApiError;
use super::approvals::approval_id;
use super::extract::Caller;
use super::pages::{cursor_key, page_limit, query_params};
use crate::App;

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
            // A cursor signed with a rotated key this function has not read yet: refresh early.
            let position = key.open(&scope, cursor).ok_or_else(|| {
                app.secret_failed();
                ApiError::InvalidCursor
            })?;
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
