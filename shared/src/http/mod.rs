//! The HTTP API: one axum router, hosted by `lambda_http` in Lambda and by the local runner.

mod approvals;
mod certificates;
mod claims;
mod create;
mod delegations;
mod extract;
mod github;
mod governed;
mod html;
mod inbox;
mod listing;
mod openapi;
mod operator;
mod pages;
pub(crate) mod passkeys;
mod problem;
mod review;
mod sign_in;
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
use axum::routing::{get, post, put};
use serde_json::json;

pub use approvals::DECIDE_BODY_LIMIT;
pub use create::CREATE_BODY_LIMIT;
pub use delegations::DELEGATION_BODY_LIMIT;
pub use openapi::document as openapi_document;
pub use problem::{ApiError, ProblemCode};

use crate::observe::trace::{TRACEPARENT, XRAY_HEADER};
use crate::observe::{self, Metric, TraceContext};
use crate::{App, Function};

/// Marks a response that repeats an earlier outcome instead of making a new one.
pub const REPLAYED: &str = "idempotent-replayed";
pub const REQUEST_ID: &str = "x-request-id";

/// This request's id (also its `x-request-id`), for handlers that record it.
#[derive(Debug, Clone)]
pub struct RequestId(pub String);

/// The API Lambda's routes: create, list, the trail, cancel, the operator's, and delegations.
pub fn api_router(app: Arc<App>) -> Router {
    finish(api_routes(), app, Function::Api)
}

/// The read Lambda's route: `GET /approvals/{id}`, held (`wait=N`) or not.
pub fn read_router(app: Arc<App>) -> Router {
    finish(read_routes(), app, Function::Read)
}

/// Marks the routes' requests as `function`'s in their metrics, where one router serves several
/// functions' routes (the local runner).
fn of_function(routes: Router<Arc<App>>, function: Function) -> Router<Arc<App>> {
    routes.route_layer(middleware::from_fn(move |request: Request, next: Next| {
        observe::set_function(function.as_str());
        next.run(request)
    }))
}

/// The decide Lambda's routes.
pub fn decide_router(app: Arc<App>) -> Router {
    finish(decide_routes(), app, Function::Decide)
}

/// The webhook Lambda's routes: provider webhooks, Slack's clicks and GitHub's events.
pub fn webhook_router(app: Arc<App>) -> Router {
    finish(webhook_routes(), app, Function::Webhook)
}

/// Every route on one port, each served by its own function's app (its role, its variables),
/// as API Gateway routes one API to the functions: the local runner and the tests.
/// `app_of` gives each function's app.
pub fn local_router(app_of: impl Fn(Function) -> Arc<App>) -> Router {
    let hosted = |routes: Router<Arc<App>>, function: Function| -> Router {
        let app = app_of(function);
        routes
            .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
            .layer(middleware::from_fn_with_state(
                (app.clone(), function),
                request_context,
            ))
            .with_state(app)
    };
    Router::new()
        .merge(hosted(api_routes(), Function::Api))
        .merge(hosted(read_routes(), Function::Read))
        .merge(hosted(decide_routes(), Function::Decide))
        .merge(hosted(webhook_routes(), Function::Webhook))
        // /health, /openapi.json and what matches no route: the API function's.
        .merge(finish(Router::new(), app_of(Function::Api), Function::Api))
}

fn api_routes() -> Router<Arc<App>> {
    let routes = Router::new()
        .route("/approvals", post(create::create).get(listing::list))
        .route("/approvals/{id}/events", get(trail::events))
        .route("/approvals/{id}/cancel", post(approvals::cancel))
        .route("/approvals/{id}/execution/retry", post(operator::retry))
        .route("/approvals/{id}/resume/retry", post(operator::retry_resume))
        .route("/approvals/{id}/execution/resolve", post(operator::resolve))
        .route("/approvals/{id}/execution/claim", post(claims::claim))
        .route("/approvals/{id}/execution/report", post(claims::report))
        .route(
            "/delegations/{identity}",
            put(delegations::put)
                .get(delegations::get)
                .delete(delegations::end),
        );
    of_function(routes, Function::Api)
}

fn read_routes() -> Router<Arc<App>> {
    let routes = Router::new()
        .route("/approvals/{id}", get(approvals::get))
        .route(
            "/approvals/{id}/certificate",
            get(certificates::certificate),
        )
        .route(
            "/.well-known/countersign/jwks.json",
            get(certificates::jwks),
        );
    of_function(routes, Function::Read)
}

fn decide_routes() -> Router<Arc<App>> {
    let routes = Router::new()
        .route("/approvals/{id}/decision", post(approvals::decide))
        .route("/approvals/{id}/review", get(review::show))
        .route("/auth/{tenant}/login", get(sign_in::login))
        .route("/auth/{tenant}/callback", get(sign_in::callback))
        .route("/auth/{tenant}/logout", post(sign_in::logout))
        .route(
            "/auth/{tenant}/passkeys",
            get(passkeys::show).post(passkeys::post),
        )
        .route("/inbox/{tenant}", get(inbox::show));
    of_function(routes, Function::Decide)
}

fn webhook_routes() -> Router<Arc<App>> {
    let routes = Router::new()
        .route("/webhooks/{source}", post(webhooks::ingest))
        .route("/slack/interactions/{tenant}", post(slack::interactions))
        .route("/github/events/{tenant}", post(github::events));
    of_function(routes, Function::Webhook)
}

/// `function`: whose metrics the requests outside the routes (unmatched, `/health`) are.
fn finish(routes: Router<Arc<App>>, app: Arc<App>, function: Function) -> Router {
    routes
        .route("/health", get(health))
        .route("/openapi.json", get(openapi_json))
        .fallback(|| async { ApiError::NoRoute })
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
        .layer(middleware::from_fn_with_state(
            (app.clone(), function),
            request_context,
        ))
        .with_state(app)
}

/// Counts a vote cast through `channel`: counted (`None`), or refused.
pub(crate) fn count_vote(
    channel: crate::domain::Channel,
    refused: Option<&crate::domain::DecideRefusal>,
) {
    match refused {
        None => observe::count(Metric::VoteCounted, &[channel.as_str()]),
        Some(refusal) => {
            if let Some(reason) = refusal.reason() {
                observe::count(Metric::VoteRefused, &[reason]);
            }
        }
    }
}

/// [`count_vote`] for a refusal, handed on.
pub(crate) fn refused_vote(
    channel: crate::domain::Channel,
    refusal: crate::domain::DecideRefusal,
) -> crate::domain::DecideRefusal {
    count_vote(channel, Some(&refusal));
    refusal
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

/// Gives every response an `x-request-id`, runs the request as one invocation for metrics (a
/// refusal is counted by its problem's `code`), and writes one JSON log line per request inside
/// a span carrying the approval, the tenant and the trace. Only the route template is logged,
/// never the query string or headers (they may hold secrets).
async fn request_context(
    State((app, function)): State<(Arc<App>, Function)>,
    mut request: Request,
    next: Next,
) -> Response {
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
    let trace = {
        let header = |name: &str| request.headers().get(name).and_then(|v| v.to_str().ok());
        TraceContext::from_headers(header(TRACEPARENT), header(XRAY_HEADER))
            .unwrap_or_else(TraceContext::fresh)
    };
    request.extensions_mut().insert(trace);
    let span = tracing::info_span!(
        "request",
        approval_id = tracing::field::Empty,
        tenant = tracing::field::Empty,
        trace_id = %trace.trace_id(),
    );
    // Only an id that is an approval id: the path is the caller's to write.
    if route.starts_with("/approvals/{id}")
        && let Some(Ok(id)) = request
            .uri()
            .path()
            .split('/')
            .nth(2)
            .map(crate::domain::ApprovalId::parse)
    {
        span.record("approval_id", id.as_str());
    }
    let work = async move {
        let mut response = app
            .metrics
            .invocation(function.as_str(), async {
                let response = next.run(request).await;
                if let Some(ProblemCode(code)) = response.extensions().get::<ProblemCode>()
                    && response.status().is_client_error()
                {
                    observe::count(Metric::RequestRefused, &[code]);
                }
                response
            })
            .await;
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
    };
    tracing::Instrument::instrument(work, span).await
}
