//! The HTTP API: one axum router, hosted by `lambda_http` in Lambda and by the local runner.

mod approvals;
mod claims;
mod extract;
mod listing;
mod openapi;
mod operator;
mod pages;
mod problem;
mod review;
mod slack;
mod trail;
mod wait;
mod webhooks;

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::http::HeaderValue;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::json;

pub use approvals::{CREATE_BODY_LIMIT, DECIDE_BODY_LIMIT};
pub use openapi::document as openapi_document;
pub use problem::ApiError;

use crate::App;

/// Marks a response that repeats an earlier outcome instead of making a new one.
pub const REPLAYED: &str = "idempotent-replayed";
pub const REQUEST_ID: &str = "x-request-id";

/// This request's id (also its `x-request-id`), for handlers that record it.
#[derive(Debug, Clone)]
pub struct RequestId(pub String);

/// The API Lambda's routes: create, read, list, the trail, cancel, and the operator's.
pub fn api_router(app: Arc<App>) -> Router {
    finish(api_routes(), app)
}

/// The decide Lambda's routes.
pub fn decide_router(app: Arc<App>) -> Router {
    finish(decide_routes(), app)
}

/// The webhook Lambda's routes: provider webhooks and Slack's clicks.
pub fn webhook_router(app: Arc<App>) -> Router {
    finish(webhook_routes(), app)
}

/// Every route, for the local runner and the tests.
pub fn router(app: Arc<App>) -> Router {
    finish(
        api_routes().merge(decide_routes()).merge(webhook_routes()),
        app,
    )
}

fn api_routes() -> Router<Arc<App>> {
    Router::new()
        .route("/approvals", post(approvals::create).get(listing::list))
        .route("/approvals/{id}", get(approvals::get))
        .route("/approvals/{id}/events", get(trail::events))
        .route("/approvals/{id}/cancel", post(approvals::cancel))
        .route("/approvals/{id}/execution/retry", post(operator::retry))
        .route("/approvals/{id}/execution/resolve", post(operator::resolve))
        .route("/approvals/{id}/execution/claim", post(claims::claim))
        .route("/approvals/{id}/execution/report", post(claims::report))
}

fn decide_routes() -> Router<Arc<App>> {
    Router::new()
        .route("/approvals/{id}/decision", post(approvals::decide))
        .route("/approvals/{id}/review", get(review::show))
}

fn webhook_routes() -> Router<Arc<App>> {
    Router::new()
        .route("/webhooks/{source}", post(webhooks::ingest))
        .route("/slack/interactions/{tenant}", post(slack::interactions))
}

fn finish(routes: Router<Arc<App>>, app: Arc<App>) -> Router {
    routes
        .route("/health", get(health))
        .route("/openapi.json", get(openapi_json))
        .fallback(|| async { ApiError::NoRoute })
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
        .layer(middleware::from_fn(request_context))
        .with_state(app)
}

/// 200 once the tables answer; 503 otherwise.
async fn health(State(app): State<Arc<App>>) -> Response {
    match app.check().await {
        Ok(()) => axum::Json(json!({"status": "ok"})).into_response(),
        Err(err) => {
            tracing::warn!(error = %err, "health check failed");
            ApiError::Unavailable.into_response()
        }
    }
}

/// The API's OpenAPI document (no key needed: it describes, it does not reveal).
async fn openapi_json() -> Response {
    axum::Json(openapi::document()).into_response()
}

/// Gives every response an `x-request-id` and writes one JSON log line per request. Only the
/// route template is logged, never the query string or headers (they may hold secrets).
async fn request_context(mut request: Request, next: Next) -> Response {
    let started = Instant::now();
    let request_id = format!("req_{}", ulid::Ulid::new());
    request
        .extensions_mut()
        .insert(RequestId(request_id.clone()));
    let method = request.method().clone();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "(unmatched)".to_owned(), |p| p.as_str().to_owned());
    let mut response = next.run(request).await;
    if let Ok(value) = HeaderValue::from_str(&request_id) {
        response.headers_mut().insert(REQUEST_ID, value);
    }
    tracing::info!(
        request_id,
        method = %method,
        route,
        status = response.status().as_u16(),
        duration_ms = started.elapsed().as_secs_f64() * 1000.0,
        "request"
    );
    response
}
