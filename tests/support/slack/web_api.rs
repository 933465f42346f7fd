//! The fake's Web API, as Slack answers it: each method's handler (`chat.postMessage`,
//! `chat.update`, `conversations.history`, `auth.test`, and the `response_url` a click's
//! ephemeral answer goes to), the scripted faults applied before their work, and Slack's limits
//! on a message, which the fake refuses as Slack does. Apart from the fixture's own API
//! (`slack.rs`), which the tests call: these only the app under test calls, over HTTP.

use std::time::Duration;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{BOT_ID, FakeSlack, Fault, Message, SLACK_TOKEN};

/// Slack's documented limits on a message (Block Kit reference, chat.postMessage): what Slack
/// refuses with `invalid_blocks` (or `msg_too_long`), the fake refuses too.
fn valid_message(body: &Value) -> Result<(), String> {
    let chars = |v: &Value| v.as_str().map_or(0, |s| s.chars().count());
    let text = |v: &Value, max: usize, what: &str| {
        if chars(v) > max {
            Err(format!("{what} over {max} characters"))
        } else {
            Ok(())
        }
    };
    text(&body["text"], 40_000, "text")?;
    // As Slack: `text` alone is a message (a thread reply); without it, blocks are required.
    let blocks = match body["blocks"].as_array() {
        Some(blocks) => blocks,
        None if chars(&body["text"]) > 0 => return Ok(()),
        None => return Err("no blocks and no text".to_owned()),
    };
    if blocks.len() > 50 {
        return Err("more than 50 blocks".to_owned());
    }
    for block in blocks {
        match block["type"].as_str() {
            Some("header") => {
                // A text object's text is at least one character (an empty header is
                // `invalid_blocks`).
                if chars(&block["text"]["text"]) == 0 {
                    return Err("an empty header".to_owned());
                }
                text(&block["text"]["text"], 150, "a header")?
            }
            Some("section") => {
                text(&block["text"]["text"], 3_000, "a section")?;
                let fields = block["fields"]
                    .as_array()
                    .map(Vec::as_slice)
                    .unwrap_or_default();
                if fields.len() > 10 {
                    return Err("more than 10 fields".to_owned());
                }
                for field in fields {
                    text(&field["text"], 2_000, "a field")?;
                }
            }
            Some("actions") => {
                for element in block["elements"].as_array().into_iter().flatten() {
                    text(&element["text"]["text"], 75, "a button's text")?;
                    text(&element["value"], 2_000, "a button's value")?;
                    text(&element["action_id"], 255, "an action id")?;
                }
            }
            Some("context") => {
                let elements = block["elements"]
                    .as_array()
                    .map(Vec::as_slice)
                    .unwrap_or_default();
                if elements.len() > 10 {
                    return Err("more than 10 context elements".to_owned());
                }
            }
            other => return Err(format!("a block of type {other:?}")),
        }
    }
    let event_type = body["metadata"]["event_type"].as_str().unwrap_or_default();
    if !event_type.is_empty()
        && !event_type
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_')
    {
        return Err("a metadata event_type outside [a-zA-Z0-9_]".to_owned());
    }
    Ok(())
}

fn authorised(headers: &HeaderMap) -> bool {
    headers.get("authorization").and_then(|v| v.to_str().ok())
        == Some(&format!("Bearer {SLACK_TOKEN}"))
}

fn slack_error(error: &str) -> Response {
    Json(json!({"ok": false, "error": error})).into_response()
}

/// Applies the method's scripted fault before its work; `None`: go on (after any delay).
async fn before(
    slack: &FakeSlack,
    method: &str,
    body: &Value,
) -> Result<Option<Duration>, Response> {
    match slack.take_fault(method) {
        None => Ok(None),
        Some(Fault::Fail) => {
            slack.record(method, body.clone(), "http_500");
            Err(StatusCode::INTERNAL_SERVER_ERROR.into_response())
        }
        Some(Fault::RateLimited(seconds)) => {
            slack.record(method, body.clone(), "ratelimited");
            Err((
                StatusCode::TOO_MANY_REQUESTS,
                [("retry-after", seconds.to_string())],
                Json(json!({"ok": false, "error": "ratelimited"})),
            )
                .into_response())
        }
        Some(Fault::LoseAnswer(hold)) => Ok(Some(hold)),
        Some(Fault::Slow(delay)) => {
            tokio::time::sleep(delay).await;
            Ok(None)
        }
        // Applied later on its own, whether the caller still waits or not (a handler whose
        // client went away is dropped: the work must not be).
        Some(Fault::LateApply(delay)) => {
            let (late, body) = (slack.clone(), body.clone());
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                apply_update(&late, &body);
            });
            tokio::time::sleep(delay + Duration::from_secs(5)).await;
            Err(StatusCode::GATEWAY_TIMEOUT.into_response())
        }
    }
}

pub(super) async fn post_message(
    State(slack): State<FakeSlack>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    if !authorised(&headers) {
        return slack_error("invalid_auth");
    }
    let hold = match before(&slack, "chat.postMessage", &body).await {
        Ok(hold) => hold,
        Err(response) => return response,
    };
    let Some(channel) = body["channel"].as_str().map(str::to_owned) else {
        return slack_error("channel_not_found");
    };
    if let Err(problem) = valid_message(&body) {
        slack.record("chat.postMessage", body, &problem);
        return slack_error("invalid_blocks");
    }
    let ts = {
        let mut inner = slack.inner.lock().expect("fake Slack lock");
        inner.push(Message {
            ts: String::new(),
            channel: channel.clone(),
            text: body["text"].as_str().unwrap_or_default().to_owned(),
            blocks: body["blocks"].clone(),
            metadata: body["metadata"].clone(),
            bot_id: BOT_ID.to_owned(),
            updates: 0,
        })
    };
    slack.record(
        "chat.postMessage",
        body,
        if hold.is_some() { "lost" } else { "ok" },
    );
    if let Some(hold) = hold {
        tokio::time::sleep(hold).await;
    }
    Json(json!({"ok": true, "channel": channel, "ts": ts, "message": {"ts": ts}})).into_response()
}

/// Draws `body` over its message, and records the call; false when there is no such message.
fn apply_update(slack: &FakeSlack, body: &Value) -> bool {
    let found = {
        let mut inner = slack.inner.lock().expect("fake Slack lock");
        match inner.messages.iter_mut().find(|m| {
            Some(m.ts.as_str()) == body["ts"].as_str()
                && Some(m.channel.as_str()) == body["channel"].as_str()
        }) {
            Some(message) => {
                message.blocks = body["blocks"].clone();
                message.text = body["text"].as_str().unwrap_or_default().to_owned();
                message.updates += 1;
                true
            }
            None => false,
        }
    };
    slack.record(
        "chat.update",
        body.clone(),
        if found { "ok" } else { "message_not_found" },
    );
    found
}

pub(super) async fn update(
    State(slack): State<FakeSlack>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    if !authorised(&headers) {
        return slack_error("invalid_auth");
    }
    let hold = match before(&slack, "chat.update", &body).await {
        Ok(hold) => hold,
        Err(response) => return response,
    };
    if let Err(problem) = valid_message(&body) {
        slack.record("chat.update", body, &problem);
        return slack_error("invalid_blocks");
    }
    if !apply_update(&slack, &body) {
        return slack_error("message_not_found");
    }
    if let Some(hold) = hold {
        tokio::time::sleep(hold).await;
    }
    Json(json!({"ok": true, "channel": body["channel"], "ts": body["ts"]})).into_response()
}

/// `auth.test` as Slack answers it for a bot token (its `bot_id` among the rest).
pub(super) async fn auth_test(State(slack): State<FakeSlack>, headers: HeaderMap) -> Response {
    if !authorised(&headers) {
        return slack_error("invalid_auth");
    }
    slack.record("auth.test", json!({}), "ok");
    Json(json!({
        "ok": true, "url": "https://acme.slack.com/", "team": "Acme", "user": "countersign",
        "team_id": "T0ACME", "user_id": "U0COUNTERSIGN", "bot_id": BOT_ID,
    }))
    .into_response()
}

pub(super) async fn history(
    State(slack): State<FakeSlack>,
    headers: HeaderMap,
    Query(query): Query<std::collections::HashMap<String, String>>,
) -> Response {
    if !authorised(&headers) {
        return slack_error("invalid_auth");
    }
    let asked = json!(query);
    if let Err(response) = before(&slack, "conversations.history", &asked).await {
        return response;
    }
    slack.record("conversations.history", asked, "ok");
    let with_metadata = query.get("include_all_metadata").map(String::as_str) == Some("true");
    let oldest: f64 = query
        .get("oldest")
        .and_then(|o| o.parse().ok())
        .unwrap_or(0.0);
    let page = slack.inner.lock().expect("fake Slack lock").history_page;
    let limit: usize = query
        .get("limit")
        .and_then(|l| l.parse().ok())
        .unwrap_or(100)
        .min(page.unwrap_or(200));
    let start: usize = query
        .get("cursor")
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let mut messages: Vec<Message> = slack
        .messages()
        .into_iter()
        .filter(|m| Some(m.channel.as_str()) == query.get("channel").map(String::as_str))
        .filter(|m| m.ts.parse::<f64>().unwrap_or(0.0) >= oldest)
        .collect();
    messages.reverse(); // newest first, as Slack answers
    let page: Vec<Value> = messages
        .iter()
        .skip(start)
        .take(limit)
        .map(|m| {
            let mut shown =
                json!({"type": "message", "ts": m.ts, "text": m.text, "blocks": m.blocks, "bot_id": m.bot_id});
            if with_metadata {
                shown["metadata"] = m.metadata.clone();
            }
            shown
        })
        .collect();
    let more = start + limit < messages.len();
    Json(json!({
        "ok": true,
        "messages": page,
        "has_more": more,
        "response_metadata": {"next_cursor": if more { (start + limit).to_string() } else { String::new() }},
    }))
    .into_response()
}

pub(super) async fn respond(
    State(slack): State<FakeSlack>,
    Path(user): Path<String>,
    Json(mut body): Json<Value>,
) -> StatusCode {
    body["user"] = json!(user);
    slack
        .inner
        .lock()
        .expect("fake Slack lock")
        .ephemerals
        .push(body);
    StatusCode::OK
}
