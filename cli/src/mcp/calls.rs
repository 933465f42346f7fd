//! The API calls the tools make. Each is safe to repeat (a read, or a write carrying its
//! `Idempotency-Key`), so transient failures are retried within a short window.

use std::time::{Duration, Instant};

use reqwest::Method;
use rmcp::model::CallToolResult;
use serde_json::{Value, json};

use crate::client::{Api, Patience, with_retries};
use crate::error::CliError;

/// How long one tool keeps retrying lost connections and 5xx before it answers an error.
const RETRY_WINDOW: Duration = Duration::from_secs(20);
/// The longest one held read asks the server to hold (the API's limit).
const HOLD_SECONDS: u64 = 20;
/// How much longer than its hold a held read may take (the server's last read, the network):
/// a wait never answers later than this after its deadline.
const HOLD_GRACE: Duration = Duration::from_secs(3);

pub struct Calls {
    api: Api,
}

/// A refused or failed call as the agent sees it: `isError`, the problem's code and detail.
pub fn tool_error(error: &CliError) -> CallToolResult {
    let mut problem = json!({"code": error.code(), "detail": error.to_string()});
    if let CliError::Api(p) = error {
        problem["detail"] = json!(p.detail);
        problem["status"] = json!(p.status);
        if !p.errors.is_empty() {
            problem["errors"] = error.to_json()["errors"].clone();
        }
    }
    CallToolResult::structured_error(problem)
}

impl Calls {
    pub fn new(api: Api) -> Self {
        Self { api }
    }

    async fn call(
        &self,
        method: Method,
        segments: &[&str],
        key: Option<&str>,
        body: Option<&Value>,
    ) -> Result<Value, CliError> {
        let patience = Patience {
            deadline: None,
            window: RETRY_WINDOW,
        };
        self.call_within(patience, (method, segments, &[]), key, body)
            .await
    }

    /// One request, retried while transient failures last within `patience` (each try's
    /// timeout is what is left of it).
    async fn call_within(
        &self,
        patience: Patience,
        (method, segments, query): (Method, &[&str], &[(&str, &str)]),
        key: Option<&str>,
        body: Option<&Value>,
    ) -> Result<Value, CliError> {
        let url = self.api.url(segments, query);
        let headers: Vec<(&str, &str)> = key.map(|k| ("idempotency-key", k)).into_iter().collect();
        let body = body.map(Value::to_string);
        let reply = with_retries(
            patience,
            |limit| {
                self.api.call(
                    method.clone(),
                    url.clone(),
                    &headers,
                    body.as_deref(),
                    limit,
                )
            },
            |_, _| {},
        )
        .await?;
        Ok(reply.body)
    }

    /// `POST /approvals` under `key` (a repeat returns the same approval).
    pub async fn create(&self, key: &str, body: &Value) -> Result<Value, CliError> {
        self.call(Method::POST, &["approvals"], Some(key), Some(body))
            .await
    }

    pub async fn get(&self, id: &str) -> Result<Value, CliError> {
        self.call(Method::GET, &["approvals", id], None, None).await
    }

    /// Held reads (`?wait=`) until the approval is no longer pending or `seconds` pass: a
    /// request every 20 s at most, never a busy loop.
    pub async fn wait_for_decision(&self, id: &str, seconds: u64) -> Result<Value, CliError> {
        let deadline = Instant::now() + Duration::from_secs(seconds);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            // Whole seconds, rounded up: the server holds at most what is asked.
            let hold = left
                .as_millis()
                .div_ceil(1000)
                .clamp(1, u128::from(HOLD_SECONDS));
            let hold = hold.to_string();
            let asked = Instant::now();
            let query = [("wait", hold.as_str())];
            // Each try may take its hold and the grace; retries end with the wait's deadline.
            let patience = Patience {
                deadline: Some(deadline + HOLD_GRACE),
                window: Duration::from_secs(HOLD_SECONDS) + HOLD_GRACE,
            };
            let read = (Method::GET, &["approvals", id][..], &query[..]);
            let approval = self.call_within(patience, read, None, None).await?;
            let left = deadline.saturating_duration_since(Instant::now());
            if approval["status"] != "pending" || left.is_zero() {
                return Ok(approval);
            }
            // A server that does not hold reads (an older version) answers at once: poll it
            // once a second instead.
            if asked.elapsed() < Duration::from_millis(500) {
                tokio::time::sleep(Duration::from_secs(1).min(left)).await;
            }
        }
    }

    /// `POST /approvals/{id}/cancel` with `reason` (a repeat is answered as the first).
    pub async fn cancel(&self, id: &str, reason: &str) -> Result<Value, CliError> {
        let body = json!({ "reason": reason });
        self.call(
            Method::POST,
            &["approvals", id, "cancel"],
            None,
            Some(&body),
        )
        .await
    }

    pub async fn claim(&self, id: &str, key: &str) -> Result<Value, CliError> {
        let segments = ["approvals", id, "execution", "claim"];
        self.call(Method::POST, &segments, Some(key), None).await
    }

    pub async fn report(&self, id: &str, key: &str, body: &Value) -> Result<Value, CliError> {
        let segments = ["approvals", id, "execution", "report"];
        self.call(Method::POST, &segments, Some(key), Some(body))
            .await
    }
}
