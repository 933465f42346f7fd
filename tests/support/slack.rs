//! A fake Slack Web API that the tests run: real HTTP, answering like Slack (`ok`, `error`,
//! `ratelimited` with `Retry-After`), recording every call. It keeps each channel's messages
//! (with their metadata, for `conversations.history`) and draws the latest state of one as HTML,
//! for the eye and the screenshot. Faults are scripted per method: the next call's answer lost
//! (done, then no answer within the client's timeout), failed (HTTP 500, nothing done), or
//! rate limited.
//!
//! Here the fixture the tests drive (start it, script it, read what it received, click as a
//! user); its HTTP side, answering the app, is in `slack/web_api.rs`, and the HTML drawing of a
//! message in `slack/render.rs`.

mod render;
mod web_api;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::{get, post};
use countersign::slack::SlackSecret;
use countersign::slack::signature::sign;
use serde_json::{Value, json};

use crate::fixtures::{ALICE, BOB, CAROL, ERIN, TENANT_A};
use render::page;
use web_api::{auth_test, history, post_message, respond, update};

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
