//! The demo's downstreams: an `echo` action target that dedupes by `Idempotency-Key` (as a
//! well-behaved target does) and can say what became of a key, a notifier that prints review links, and a callback receiver
//! that verifies each lifecycle event's signature and prints it.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use countersign::Clock;
use countersign::webhook::{WebhookSecret, verify};
use serde_json::{Value, json};

type Performed = Arc<Mutex<HashSet<String>>>;

/// `clock`: the runner's, which the demo's receiver checks timestamps against (a moved clock,
/// `LOCAL_CLOCK=advanceable`, signs callbacks at the moved time).
pub fn router(callback_secret: Option<WebhookSecret>, clock: Clock) -> Router {
    Router::new()
        .route("/_demo/echo", post(echo))
        .route("/_demo/echo/status/{key}", axum::routing::get(echo_status))
        .route("/_demo/notify", post(notify))
        .with_state(Performed::default())
        .route(
            "/_demo/callback",
            post(callback).with_state(Arc::new((callback_secret, clock))),
        )
}

/// Verifies a callback as a receiver must (Standard Webhooks, on the raw body) and prints it.
async fn callback(
    State(receiver): State<Arc<(Option<WebhookSecret>, Clock)>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> StatusCode {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let (secret, clock) = receiver.as_ref();
    let verified = secret.as_ref().is_some_and(|secret| {
        verify(
            std::slice::from_ref(secret),
            header("webhook-id"),
            header("webhook-timestamp"),
            header("webhook-signature"),
            &body,
            clock.now(),
        )
        .is_ok()
    });
    if !verified {
        println!("callback: signature did not verify; refused");
        return StatusCode::BAD_REQUEST;
    }
    let event: Value = serde_json::from_slice(&body).unwrap_or_default();
    println!(
        "callback: {} {} (approval {}, signature verified)",
        event["type"].as_str().unwrap_or_default(),
        header("webhook-id").unwrap_or_default(),
        event["data"]["approval"]["id"].as_str().unwrap_or_default(),
    );
    StatusCode::NO_CONTENT
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

/// The echo target's status URL: what became of a key (asked when a call's outcome is unknown).
async fn echo_status(
    State(performed): State<Performed>,
    axum::extract::Path(key): axum::extract::Path<String>,
) -> Json<Value> {
    let done = performed.lock().map(|p| p.contains(&key)).unwrap_or(false);
    let status = if done { "succeeded" } else { "not_found" };
    println!("echo: asked what became of {key}: {status}");
    Json(json!({ "status": status }))
}

async fn notify(Json(body): Json<Value>) -> Json<Value> {
    // A reminder or an escalation step says so; a delegate's copy names whose place it is.
    let why = match (body["reason"].as_str(), body["number"].as_u64()) {
        (Some(reason), Some(number)) => format!(" ({reason} {number})"),
        _ => String::new(),
    };
    let place = body["in_place_of"]
        .as_str()
        .map_or_else(String::new, |p| format!(" in the place of {p}"));
    println!(
        "notify{why}: {}{place} — review {} at {}",
        body["approver"].as_str().unwrap_or_default(),
        body["approval_id"].as_str().unwrap_or_default(),
        body["review_url"].as_str().unwrap_or_default()
    );
    Json(json!({"delivered": true}))
}

/// Prints each email the local SES sends (its recipient and subject), read from the local
/// AWS's `GET /_countersign/emails` once a second, as a demo's approvers would get them.
pub fn print_emails(aws_endpoint: String) {
    tokio::spawn(async move {
        let http = reqwest::Client::new();
        let url = format!("{}/_countersign/emails", aws_endpoint.trim_end_matches('/'));
        let mut printed = 0;
        loop {
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            let Ok(answer) = http.get(&url).send().await else {
                continue;
            };
            let Ok(emails) = answer.json::<Vec<Value>>().await else {
                continue;
            };
            for email in emails.iter().skip(printed) {
                println!(
                    "email to {}: {}",
                    email["to"]
                        .as_array()
                        .map(|to| to
                            .iter()
                            .filter_map(Value::as_str)
                            .collect::<Vec<_>>()
                            .join(", "))
                        .unwrap_or_default(),
                    email["subject"].as_str().unwrap_or_default()
                );
            }
            printed = printed.max(emails.len());
        }
    });
}
