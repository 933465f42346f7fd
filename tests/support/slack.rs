//! A fake Slack Web API that the tests run: real HTTP, answering like Slack (`ok`, `error`,
//! `ratelimited` with `Retry-After`), recording every call. It keeps each channel's messages
//! (with their metadata, for `conversations.history`) and draws the latest state of one as HTML,
//! for the eye and the screenshot. Faults are scripted per method: the next call's answer lost
//! (done, then no answer within the client's timeout), failed (HTTP 500, nothing done), or
//! rate limited.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use countersign::slack::SlackSecret;
use countersign::slack::signature::sign;
use serde_json::{Value, json};

use crate::fixtures::{ALICE, BOB, CAROL, ERIN, TENANT_A};

pub const SLACK_TOKEN: &str = "xoxb-test-0123456789-abcdefghij";
pub const SLACK_SIGNING_SECRET: &str = "slack-signing-secret-0123456789abcdef";
pub const SLACK_CHANNEL: &str = "C0TESTAPPROVALS";
/// Slack users: alice, bob and carol decide as themselves; the requester's user is mapped to
/// tenant A's requester principal; erin is mapped but approves nothing the tests create;
/// `UNOBODY01` is not mapped at all.
/// The `bot_id` of the fake's Countersign app (what `auth.test` answers).
pub const BOT_ID: &str = "B0COUNTERSIGN";
pub const U_ALICE: &str = "UALICE001";
pub const U_BOB: &str = "UBOB00001";
pub const U_CAROL: &str = "UCAROL001";
pub const U_REQUESTER: &str = "UREQUEST1";
pub const U_ERIN: &str = "UERIN0001";
pub const U_NOBODY: &str = "UNOBODY01";

/// A scripted answer for the next call of a method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Done (a post is stored), then no answer for `hold`: the client times out.
    LoseAnswer(Duration),
    /// HTTP 500, nothing done.
    Fail,
    /// HTTP 429 `ratelimited`, `Retry-After` seconds, nothing done.
    RateLimited(u64),
    /// Done, answered after `delay`.
    Slow(Duration),
    /// No answer within the client's timeout, and done only after `delay`: a request Slack
    /// applies after its caller gave up (`chat.update` only).
    LateApply(Duration),
}

#[derive(Debug, Clone)]
pub struct Message {
    pub ts: String,
    pub channel: String,
    pub text: String,
    pub blocks: Value,
    pub metadata: Value,
    /// The app that posted it: [`BOT_ID`] for Countersign's, another for an impostor.
    pub bot_id: String,
    /// How many `chat.update`s applied to it.
    pub updates: u32,
}

impl Message {
    pub fn approval_id(&self) -> &str {
        self.metadata["event_payload"]["approval_id"]
            .as_str()
            .unwrap_or("")
    }

    /// Whether it still shows the Approve / Reject buttons.
    pub fn has_buttons(&self) -> bool {
        self.blocks
            .as_array()
            .is_some_and(|b| b.iter().any(|b| b["type"] == "actions"))
    }

    /// All of its text, for asserting what it shows.
    pub fn shown(&self) -> String {
        self.blocks.to_string()
    }
}

/// One call the fake received.
#[derive(Debug, Clone)]
pub struct Call {
    pub method: String,
    pub body: Value,
    pub at: Instant,
    /// What it answered: `ok`, or the fault's name.
    pub answer: String,
}

#[derive(Default)]
struct Inner {
    messages: Vec<Message>,
    calls: Vec<Call>,
    faults: Vec<(String, VecDeque<Fault>)>,
    ephemerals: Vec<Value>,
    next_ts: u64,
    /// Calls received so far, counted on arrival (before any scripted delay), by method.
    arrivals: Vec<String>,
    /// Messages per page of history, at most (Slack's own limit is the request's, up to 200).
    history_page: Option<usize>,
}

impl Inner {
    /// Adds `message` as the channel's newest, with the next `ts`; returns it.
    fn push(&mut self, mut message: Message) -> String {
        self.next_ts += 1;
        message.ts = format!("{}.{:06}", 1_800_000_000 + self.next_ts, self.next_ts);
        let ts = message.ts.clone();
        self.messages.push(message);
        ts
    }
}

#[derive(Clone, Default)]
pub struct FakeSlack {
    inner: Arc<Mutex<Inner>>,
    pub base: String,
}

impl FakeSlack {
    pub async fn start() -> Self {
        let mut slack = Self::default();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the fake Slack");
        slack.base = format!("http://{}", listener.local_addr().expect("addr"));
        let router = Router::new()
            .route("/api/chat.postMessage", post(post_message))
            .route("/api/chat.update", post(update))
            .route("/api/conversations.history", get(history))
            .route("/api/auth.test", post(auth_test))
            .route("/respond/{user}", post(respond))
            .route("/messages/{ts}", get(page))
            .with_state(slack.clone());
        tokio::spawn(async move { axum::serve(listener, router).await });
        slack
    }

    /// `SLACK` for tenant A, pointed at this fake.
    pub fn config(&self) -> String {
        json!({ TENANT_A: {
            "bot_token": SLACK_TOKEN,
            "signing_secret": SLACK_SIGNING_SECRET,
            "channel": SLACK_CHANNEL,
            "users": {
                U_ALICE: ALICE, U_BOB: BOB, U_CAROL: CAROL, U_REQUESTER: TENANT_A, U_ERIN: ERIN,
            },
            "api_base_url": format!("{}/api", self.base),
        }})
        .to_string()
    }

    /// [`FakeSlack::config`] as a deployment gives it: `SLACK` without the bot token, which is
    /// in `SLACK_BOT_TOKENS` (the webhook function is given no bot token).
    pub fn split_env(&self) -> [(&'static str, String); 2] {
        let mut slack: Value = serde_json::from_str(&self.config()).expect("the config");
        let token = slack[TENANT_A]
            .as_object_mut()
            .and_then(|app| app.remove("bot_token"))
            .expect("a bot token");
        [
            ("SLACK", slack.to_string()),
            ("SLACK_BOT_TOKENS", json!({ TENANT_A: token }).to_string()),
        ]
    }

    /// The next call of `method` gets `fault`.
    pub fn fault_next(&self, method: &str, fault: Fault) {
        let mut inner = self.inner.lock().expect("fake Slack lock");
        match inner.faults.iter_mut().find(|(m, _)| m == method) {
            Some((_, queue)) => queue.push_back(fault),
            None => inner
                .faults
                .push((method.to_owned(), VecDeque::from([fault]))),
        }
    }

    /// Answers history in pages of at most `messages` (to exercise the lookup's paging).
    pub fn set_history_page(&self, messages: usize) {
        self.inner.lock().expect("fake Slack lock").history_page = Some(messages);
    }

    /// How many calls of `method` have arrived, answered or not yet.
    pub fn arrivals(&self, method: &str) -> usize {
        let inner = self.inner.lock().expect("fake Slack lock");
        inner.arrivals.iter().filter(|m| *m == method).count()
    }

    pub fn messages(&self) -> Vec<Message> {
        self.inner.lock().expect("fake Slack lock").messages.clone()
    }

    /// The approval's messages posted by Countersign (one, if all is well).
    pub fn messages_of(&self, approval_id: &str) -> Vec<Message> {
        self.messages()
            .into_iter()
            .filter(|m| m.approval_id() == approval_id && m.bot_id == BOT_ID)
            .collect()
    }

    /// Another app's message in `channel` carrying Countersign's metadata for `approval_id`
    /// (newer than every message so far); returns its `ts`.
    pub fn plant_impostor(&self, channel: &str, approval_id: &str) -> String {
        let mut inner = self.inner.lock().expect("fake Slack lock");
        inner.push(Message {
            ts: String::new(),
            channel: channel.to_owned(),
            text: "Approve here".to_owned(),
            blocks: json!([]),
            metadata: json!({"event_type": countersign::slack::message::EVENT_TYPE,
                             "event_payload": {"approval_id": approval_id, "tenant": TENANT_A}}),
            bot_id: "B0IMPOSTOR".to_owned(),
            updates: 0,
        })
    }

    pub fn calls(&self, method: &str) -> Vec<Call> {
        self.inner
            .lock()
            .expect("fake Slack lock")
            .calls
            .iter()
            .filter(|c| c.method == method)
            .cloned()
            .collect()
    }

    /// The posts made for one approval (by the metadata they carry).
    pub fn posts_of(&self, approval_id: &str) -> Vec<Call> {
        self.calls("chat.postMessage")
            .into_iter()
            .filter(|c| c.body["metadata"]["event_payload"]["approval_id"] == approval_id)
            .collect()
    }

    /// The ephemeral answers sent to clicking users, each with `user`.
    pub fn ephemerals(&self) -> Vec<Value> {
        self.inner
            .lock()
            .expect("fake Slack lock")
            .ephemerals
            .clone()
    }

    /// Waits until `done` holds for the approval's one message; returns it.
    pub async fn wait_for_message(
        &self,
        approval_id: &str,
        timeout: Duration,
        done: impl Fn(&Message) -> bool,
    ) -> Message {
        let deadline = Instant::now() + timeout;
        loop {
            let messages = self.messages_of(approval_id);
            if let [message] = &messages[..]
                && done(message)
            {
                return message.clone();
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for the Slack message of {approval_id}: {messages:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// A click of `user` on `action` (`countersign.approve` / `countersign.reject`) of the
    /// approval's message, as Slack posts it: the form body.
    pub fn click_body(&self, user: &str, action: &str, approval_id: &str) -> String {
        let payload = json!({
            "type": "block_actions",
            "user": {"id": user, "username": user.to_lowercase()},
            "team": {"id": "T0TEST"},
            "channel": {"id": SLACK_CHANNEL},
            "response_url": format!("{}/respond/{user}", self.base),
            "actions": [{"action_id": action, "value": approval_id, "type": "button",
                         "block_id": "countersign.decide", "action_ts": "1.2"}],
        });
        url::form_urlencoded::Serializer::new(String::new())
            .append_pair("payload", &payload.to_string())
            .finish()
    }

    fn take_fault(&self, method: &str) -> Option<Fault> {
        let mut inner = self.inner.lock().expect("fake Slack lock");
        inner.arrivals.push(method.to_owned());
        inner
            .faults
            .iter_mut()
            .find(|(m, _)| m == method)
            .and_then(|(_, q)| q.pop_front())
    }

    fn record(&self, method: &str, body: Value, answer: &str) {
        self.inner
            .lock()
            .expect("fake Slack lock")
            .calls
            .push(Call {
                method: method.to_owned(),
                body,
                at: Instant::now(),
                answer: answer.to_owned(),
            });
    }
}

/// Slack's headers for `body` signed at `timestamp` with `secret`.
pub fn slack_headers(secret: &str, timestamp: i64, body: &str) -> Vec<(&'static str, String)> {
    let timestamp = timestamp.to_string();
    vec![
        ("x-slack-request-timestamp", timestamp.clone()),
        (
            "x-slack-signature",
            sign(&SlackSecret::new(secret), &timestamp, body.as_bytes()),
        ),
        (
            "content-type",
            "application/x-www-form-urlencoded".to_owned(),
        ),
    ]
}

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
    let blocks = body["blocks"].as_array().ok_or("no blocks")?;
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

async fn post_message(
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

async fn update(
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
async fn auth_test(State(slack): State<FakeSlack>, headers: HeaderMap) -> Response {
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

async fn history(
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

async fn respond(
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

/// The message as Slack would roughly draw it: header, fields, sections, buttons, context.
async fn page(State(slack): State<FakeSlack>, Path(ts): Path<String>) -> Response {
    let Some(message) = slack.messages().into_iter().find(|m| m.ts == ts) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    Html(render(&message)).into_response()
}

fn mrkdwn(text: &str) -> String {
    // `<!date^…|fallback>` shows its fallback; `&`, `<` and `>` come escaped, as HTML's.
    let mut text = text.to_owned();
    while let Some(start) = text.find("<!date^") {
        let (Some(bar), Some(end)) = (text[start..].find('|'), text[start..].find('>')) else {
            break;
        };
        text = format!(
            "{}{}{}",
            &text[..start],
            &text[start + bar + 1..start + end],
            &text[start + end + 1..]
        );
    }
    // Slack's emoji, as glyphs any font has.
    let text = text
        .replace(":white_check_mark:", "<span class=yes>✔</span>")
        .replace(":x:", "<span class=no>✘</span>");
    let mut html = String::new();
    let (mut bold, mut code) = (false, false);
    for c in text.chars() {
        match c {
            '*' if !code => {
                html.push_str(if bold { "</b>" } else { "<b>" });
                bold = !bold;
            }
            '`' => {
                html.push_str(if code { "</code>" } else { "<code>" });
                code = !code;
            }
            '\n' => html.push_str("<br>"),
            c => html.push(c),
        }
    }
    html
}

fn render(message: &Message) -> String {
    let mut body = String::new();
    for block in message.blocks.as_array().into_iter().flatten() {
        match block["type"].as_str() {
            Some("header") => body.push_str(&format!(
                "<h2>{}</h2>",
                block["text"]["text"]
                    .as_str()
                    .unwrap_or_default()
                    .replace('<', "&lt;")
            )),
            Some("section") => {
                if let Some(fields) = block["fields"].as_array() {
                    body.push_str("<div class=fields>");
                    for f in fields {
                        body.push_str(&format!(
                            "<div>{}</div>",
                            mrkdwn(f["text"].as_str().unwrap_or_default())
                        ));
                    }
                    body.push_str("</div>");
                }
                if let Some(text) = block["text"]["text"].as_str() {
                    body.push_str(&format!("<p>{}</p>", mrkdwn(text)));
                }
            }
            Some("actions") => {
                body.push_str("<div class=actions>");
                for e in block["elements"].as_array().into_iter().flatten() {
                    body.push_str(&format!(
                        "<button class={}>{}</button>",
                        e["style"].as_str().unwrap_or("default"),
                        e["text"]["text"].as_str().unwrap_or_default()
                    ));
                }
                body.push_str("</div>");
            }
            Some("context") => {
                for e in block["elements"].as_array().into_iter().flatten() {
                    body.push_str(&format!(
                        "<p class=context>{}</p>",
                        mrkdwn(e["text"].as_str().unwrap_or_default())
                    ));
                }
            }
            _ => {}
        }
    }
    format!(
        r#"<!doctype html><meta charset=utf-8><title>Countersign in Slack</title>
<style>
body {{ font: 15px/1.46 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; background: #fff; margin: 0; padding: 20px; width: 620px; color: #1d1c1d }}
.msg {{ display: flex; gap: 10px }} .avatar {{ width: 36px; height: 36px; border-radius: 6px; background: #4a154b; color: #fff; font-weight: 700; display: grid; place-items: center }}
.name {{ font-weight: 900 }} .app {{ font-size: 10px; background: #ddd; border-radius: 2px; padding: 1px 3px; color: #555; margin-left: 4px }}
h2 {{ font-size: 18px; margin: 6px 0 }} .fields {{ display: grid; grid-template-columns: 1fr 1fr; gap: 8px 16px; margin: 8px 0 }}
code {{ background: #f4f4f4; border: 1px solid #ddd; border-radius: 3px; padding: 0 3px; color: #e01e5a; font-size: 12px }}
p {{ margin: 8px 0 }} .yes {{ color: #2eb67d; font-weight: 700 }} .no {{ color: #e01e5a; font-weight: 700 }} .context {{ color: #616061; font-size: 12px }}
button {{ font: inherit; font-weight: 700; font-size: 14px; border-radius: 4px; padding: 4px 14px; margin-right: 8px; border: 1px solid #ddd; background: #fff }}
button.primary {{ background: #007a5a; color: #fff; border-color: #007a5a }} button.danger {{ color: #e01e5a; border-color: #e01e5a }}
</style>
<div class=msg><div class=avatar>CS</div><div><span class=name>Countersign</span><span class=app>APP</span>{body}</div></div>"#
    )
}

impl crate::TestApp {
    /// A jobs test app (see [`crate::TestApp::start_jobs`]) whose tenant A decides in Slack,
    /// against a fake Slack of its own.
    pub async fn start_slack(overrides: &[(&str, &str)]) -> (Self, FakeSlack) {
        let slack = FakeSlack::start().await;
        let split = slack.split_env();
        let mut vars: Vec<(&str, &str)> = split.iter().map(|(k, v)| (*k, v.as_str())).collect();
        vars.extend(overrides.iter().copied());
        (Self::start_jobs(&vars).await, slack)
    }

    /// Posts `body` to tenant `tenant`'s interactivity URL with `headers`.
    pub async fn slack_interaction(
        &self,
        tenant: &str,
        headers: &[(&str, String)],
        body: &str,
    ) -> crate::Reply {
        let mut request = self
            .http
            .post(self.url(&format!("/slack/interactions/{tenant}")))
            .body(body.to_owned());
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        self.send_any(request).await
    }

    /// `user` clicks `action` on the approval's message, signed as Slack signs it now
    /// (`retry`: as Slack's own retry of a delivery, `X-Slack-Retry-Num: 1`).
    pub async fn click(
        &self,
        slack: &FakeSlack,
        user: &str,
        action: &str,
        id: &str,
        retry: bool,
    ) -> crate::Reply {
        let body = slack.click_body(user, action, id);
        let mut headers = slack_headers(SLACK_SIGNING_SECRET, self.clock.now(), &body);
        if retry {
            headers.push(("x-slack-retry-num", "1".to_owned()));
            headers.push(("x-slack-retry-reason", "http_timeout".to_owned()));
        }
        self.slack_interaction(TENANT_A, &headers, &body).await
    }
}
