//! The demo's downstreams: an `echo` action target that dedupes by `Idempotency-Key` (as a
//! well-behaved target does) and a notifier that prints review links.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use serde_json::{Value, json};

type Performed = Arc<Mutex<HashSet<String>>>;

pub fn router() -> Router {
    Router::new()
        .route("/_demo/echo", post(echo))
        .route("/_demo/notify", post(notify))
        .with_state(Performed::default())
}

async fn echo(
    State(performed): State<Performed>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Json<Value> {
    let key = headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let first = performed
        .lock()
        .map(|mut p| p.insert(key.clone()))
        .unwrap_or(false);
    if first {
        println!("echo: performing {key}: {}", body["action"]);
    } else {
        println!("echo: {key} was already performed; not again");
    }
    Json(json!({"performed": first}))
}

async fn notify(Json(body): Json<Value>) -> Json<Value> {
    println!(
        "notify: {} — review {} at {}",
        body["approver"].as_str().unwrap_or_default(),
        body["approval_id"].as_str().unwrap_or_default(),
        body["review_url"].as_str().unwrap_or_default()
    );
    Json(json!({"delivered": true}))
}
