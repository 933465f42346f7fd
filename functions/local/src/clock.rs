//! `LOCAL_CLOCK=advanceable`: a route that moves the runner's clock forward, so reminders,
//! escalation steps and expiry can be tried (and the long-lived test can drive them) without
//! waiting for them. Off by default; the Lambda functions have no such route.

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use countersign::Clock;
use serde_json::{Value, json};

/// The most one call moves the clock: a month, the longest an approval waits.
const MOST_SECONDS: i64 = 2_592_000;

/// Whether the runner's clock may be moved (`LOCAL_CLOCK=advanceable`); anything else set is
/// refused at start rather than ignored.
pub fn advanceable() -> Result<bool, String> {
    match std::env::var("LOCAL_CLOCK").ok().as_deref() {
        None | Some("") | Some("system") => Ok(false),
        Some("advanceable") => Ok(true),
        Some(other) => Err(format!(
            "LOCAL_CLOCK={other:?}: either system (the default) or advanceable"
        )),
    }
}

/// `POST /_local/clock` `{"advance_seconds": n}` (1 to a month): the clock every function of
/// this runner reads moves forward by n; answers the new time.
pub fn router(clock: Clock) -> Router {
    Router::new()
        .route("/_local/clock", post(advance))
        .with_state(clock)
}

async fn advance(State(clock): State<Clock>, Json(body): Json<Value>) -> (StatusCode, Json<Value>) {
    match body["advance_seconds"].as_i64() {
        Some(seconds) if (1..=MOST_SECONDS).contains(&seconds) => {
            clock.advance(seconds);
            (StatusCode::OK, Json(json!({"now": clock.now()})))
        }
        _ => (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": format!("advance_seconds: an integer from 1 to {MOST_SECONDS}")})),
        ),
    }
}
