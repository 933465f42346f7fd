//! The Web API calls the message makes (`chat.postMessage`, `chat.update`,
//! `conversations.history`) and the answer to a click (`response_url`), over our reqwest
//! client. Requests are slack-morphism's models; answers are read leniently (only the fields
//! used), so that a message of a kind this version does not model never fails a lookup.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::Value;
use slack_morphism::prelude::*;

use super::SlackApp;
use super::message::{EVENT_TYPE, MessageState};
use crate::domain::{EpochSeconds, SlackMessage};

/// A tenant whose bot token this function was not given (the executor's start requires it).
const NO_BOT_TOKEN: &str = "no bot token for this tenant (SLACK_BOT_TOKENS)";

/// How a post or an update went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sent {
    /// Slack took it: the message is where this says.
    Done(SlackMessage),
    /// Slack answered `ratelimited`: nothing was done; again after this many seconds.
    RateLimited(u64),
    /// Nothing reached Slack (the connection failed).
    NotSent(String),
    /// Slack refused it (`ok: false`): the same request would be refused again.
    Refused(String),
    /// It may have been done: no answer, a lost connection, a 5xx, an internal error.
    Unknown(String),
}

/// What the channel's history says about an approval's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    Posted(SlackMessage),
    NotPosted,
    RateLimited(u64),
    CouldNotTell(String),
}

/// Pages of history read at most: a lookup follows a doubtful post within minutes, so the
/// message, if posted, is among the channel's latest.
const HISTORY_PAGES: usize = 10;
const HISTORY_PAGE_SIZE: u16 = 200;
/// Slack's clock and ours may differ: the lookup starts this long before the approval.
const HISTORY_SLACK_SECONDS: i64 = 300;

pub struct SlackApi {
    http: reqwest::Client,
    /// Each bot token's own `bot_id` (`auth.test`), by the token's SHA-256: a history lookup
    /// adopts only this app's messages. Asked once per token and process, and only when a
    /// lookup happens (a post in doubt), so no other path pays for it.
    bot_ids: std::sync::Mutex<std::collections::HashMap<[u8; 32], String>>,
}

impl SlackApi {
    /// `timeout`: a call's longest time.
    pub fn new(timeout: Duration) -> Result<Self, reqwest::Error> {
        let http = reqwest::Client::builder()
            .connect_timeout(timeout.min(Duration::from_secs(2)))
            .timeout(timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Self {
            http,
            bot_ids: Default::default(),
        })
    }

    fn content(state: &MessageState) -> SlackMessageContent {
        SlackMessageContent::new()
            .with_text(state.text())
            .with_blocks(state.blocks())
            .with_metadata(state.metadata())
    }

    /// Posts the approval's message to the tenant's channel.
    pub async fn post(&self, app: &SlackApp, state: &MessageState) -> Sent {
        let request =
            SlackApiChatPostMessageRequest::new(app.channel.clone().into(), Self::content(state));
        let sent = self.call(app, "chat.postMessage", &request).await;
        match sent {
            Ok(answer) => match (answer["channel"].as_str(), answer["ts"].as_str()) {
                (Some(channel), Some(ts)) => Sent::Done(SlackMessage {
                    channel: channel.to_owned(),
                    ts: ts.to_owned(),
                }),
                _ => Sent::Unknown("chat.postMessage answered ok without channel and ts".into()),
            },
            Err(sent) => sent,
        }
    }

    /// Draws `state` over the message.
    pub async fn update(
        &self,
        app: &SlackApp,
        message: &SlackMessage,
        state: &MessageState,
    ) -> Sent {
        let request = SlackApiChatUpdateRequest::new(
            message.channel.clone().into(),
            Self::content(state),
            message.ts.clone().into(),
        );
        match self.call(app, "chat.update", &request).await {
            Ok(_) => Sent::Done(message.clone()),
            Err(sent) => sent,
        }
    }

    /// Replies `text` in the thread of `message` (a plain reply: the channel is not told).
    pub async fn reply(&self, app: &SlackApp, message: &SlackMessage, text: &str) -> Sent {
        let request = SlackApiChatPostMessageRequest::new(
            message.channel.clone().into(),
            SlackMessageContent::new().with_text(text.to_owned()),
        )
        .with_thread_ts(message.ts.clone().into());
        match self.call(app, "chat.postMessage", &request).await {
            Ok(_) => Sent::Done(message.clone()),
            Err(sent) => sent,
        }
    }

    /// Looks for the approval's message (by its metadata) in the channel since `since`.
    /// `may_call`: whether there is time for another page.
    pub async fn find_posted(
        &self,
        app: &SlackApp,
        state: &MessageState,
        since: EpochSeconds,
        may_call: &(dyn Fn() -> bool + Sync),
    ) -> Found {
        let bot_id = match self.bot_id(app).await {
            Ok(bot_id) => bot_id,
            Err(Sent::RateLimited(seconds)) => return Found::RateLimited(seconds),
            Err(other) => return Found::CouldNotTell(format!("auth.test: {other:?}")),
        };
        let mut cursor: Option<String> = None;
        for page in 0..HISTORY_PAGES {
            if page > 0 && !may_call() {
                return Found::CouldNotTell("the lease ends before another page".to_owned());
            }
            let Ok(mut url) =
                url::Url::parse(&format!("{}/conversations.history", app.api_base_url))
            else {
                return Found::CouldNotTell("api_base_url is not a URL".to_owned());
            };
            url.query_pairs_mut()
                .append_pair("channel", &app.channel)
                .append_pair("include_all_metadata", "true")
                .append_pair("limit", &HISTORY_PAGE_SIZE.to_string())
                .append_pair(
                    "oldest",
                    &format!("{}.000000", since - HISTORY_SLACK_SECONDS),
                );
            if let Some(cursor) = &cursor {
                url.query_pairs_mut().append_pair("cursor", cursor);
            }
            let Some(token) = &app.bot_token else {
                return Found::CouldNotTell(NO_BOT_TOKEN.to_owned());
            };
            let request = self.http.get(url).bearer_auth(token.expose());
            let answer = match answer(request.send().await).await {
                Ok(answer) => answer,
                Err(Sent::RateLimited(seconds)) => return Found::RateLimited(seconds),
                Err(other) => {
                    return Found::CouldNotTell(format!("conversations.history: {other:?}"));
                }
            };
            let messages = answer["messages"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or_default();
            // Another app's message may carry the same metadata: only this bot's counts.
            let ours = messages.iter().find(|m| {
                m["bot_id"] == bot_id.as_str()
                    && m["metadata"]["event_type"] == EVENT_TYPE
                    && m["metadata"]["event_payload"]["approval_id"] == state.approval_id.as_str()
            });
            if let Some(ts) = ours.and_then(|m| m["ts"].as_str()) {
                return Found::Posted(SlackMessage {
                    channel: app.channel.clone(),
                    ts: ts.to_owned(),
                });
            }
            cursor = answer["response_metadata"]["next_cursor"]
                .as_str()
                .filter(|c| !c.is_empty())
                .map(str::to_owned);
            if cursor.is_none() {
                return Found::NotPosted;
            }
        }
        Found::CouldNotTell(format!(
            "more than {} messages since the approval: the lookup stops there",
            HISTORY_PAGES * usize::from(HISTORY_PAGE_SIZE)
        ))
    }

    /// This bot token's `bot_id`, from `auth.test` the first time.
    async fn bot_id(&self, app: &SlackApp) -> Result<String, Sent> {
        use sha2::{Digest, Sha256};
        let Some(bot_token) = &app.bot_token else {
            return Err(Sent::Refused(NO_BOT_TOKEN.to_owned()));
        };
        let token: [u8; 32] = Sha256::digest(bot_token.expose().as_bytes()).into();
        let known = self
            .bot_ids
            .lock()
            .ok()
            .and_then(|ids| ids.get(&token).cloned());
        if let Some(bot_id) = known {
            return Ok(bot_id);
        }
        let answer = self.call(app, "auth.test", &serde_json::json!({})).await?;
        let bot_id = answer["bot_id"]
            .as_str()
            .filter(|b| !b.is_empty())
            .ok_or_else(|| Sent::Refused("auth.test names no bot_id: not a bot token".into()))?
            .to_owned();
        if let Ok(mut ids) = self.bot_ids.lock() {
            ids.insert(token, bot_id.clone());
        }
        Ok(bot_id)
    }

    /// Answers the clicking user alone (an ephemeral message through the click's
    /// `response_url`).
    pub async fn tell(&self, response_url: &str, text: &str) -> Result<(), String> {
        let body = serde_json::json!({
            "response_type": "ephemeral",
            "replace_original": false,
            "text": text,
        });
        let response = self
            .http
            .post(response_url)
            .json(&body)
            .send()
            .await
            .map_err(|e| error_kind(&e))?;
        match response.status().is_success() {
            true => Ok(()),
            false => Err(format!(
                "response_url answered HTTP {}",
                response.status().as_u16()
            )),
        }
    }

    async fn call(
        &self,
        app: &SlackApp,
        method: &str,
        request: &impl serde::Serialize,
    ) -> Result<Value, Sent> {
        let Some(token) = &app.bot_token else {
            return Err(Sent::Refused(NO_BOT_TOKEN.to_owned()));
        };
        let sent = self
            .http
            .post(format!("{}/{method}", app.api_base_url))
            .bearer_auth(token.expose())
            .json(request)
            .send()
            .await;
        answer(sent).await
    }
}

/// Reads an answer of the Web API: its JSON when `ok`, else what the failure means.
async fn answer(sent: Result<reqwest::Response, reqwest::Error>) -> Result<Value, Sent> {
    let response = match sent {
        Ok(response) => response,
        Err(e) if e.is_connect() => return Err(Sent::NotSent(error_kind(&e))),
        Err(e) => return Err(Sent::Unknown(error_kind(&e))),
    };
    let status = response.status();
    let retry_after = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if status == StatusCode::TOO_MANY_REQUESTS {
        return Err(Sent::RateLimited(retry_after.unwrap_or(1)));
    }
    if !status.is_success() {
        return Err(Sent::Unknown(format!("HTTP {}", status.as_u16())));
    }
    let body: Value = match response.json().await {
        Ok(body) => body,
        Err(e) => return Err(Sent::Unknown(format!("no JSON answer: {}", error_kind(&e)))),
    };
    if body["ok"] == true {
        return Ok(body);
    }
    let error = body["error"]
        .as_str()
        .unwrap_or("no error named")
        .to_owned();
    Err(match error.as_str() {
        "ratelimited" => Sent::RateLimited(retry_after.unwrap_or(1)),
        // Slack's own words: some of the operation may have happened.
        "internal_error" | "fatal_error" | "service_unavailable" | "request_timeout" => {
            Sent::Unknown(error)
        }
        _ => Sent::Refused(error),
    })
}

/// The error's kind without its URL (a response URL is a credential of sorts).
fn error_kind(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    if let Some(url) = error.url() {
        text = text.replace(url.as_str(), "<url>");
    }
    text
}
