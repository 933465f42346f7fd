//! The HTTP API, as one client: Bearer authentication, problem+json errors, and retries of what
//! is worth retrying (lost connections, timeouts, 5xx, 429) with backoff — only for requests
//! that are safe to repeat: reads, and a create, which its Idempotency-Key makes a replay.

use std::future::Future;
use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde::Deserialize;
use serde_json::Value;
use url::Url;

use crate::error::CliError;

/// No single request may hang longer than this, whatever the deadline.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The first pause after a failed request; it doubles up to [`MAX_RETRY_DELAY`].
const FIRST_RETRY_DELAY: Duration = Duration::from_millis(250);
const MAX_RETRY_DELAY: Duration = Duration::from_secs(10);

/// An RFC 9457 problem as the API writes it.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Problem {
    #[serde(default)]
    pub status: u16,
    #[serde(default)]
    pub code: String,
    #[serde(default)]
    pub title: String,
    #[serde(default)]
    pub detail: String,
    /// `invalid_request` and `policy_unsatisfiable`: each offending field.
    #[serde(default)]
    pub errors: Vec<FieldError>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct FieldError {
    #[serde(default)]
    pub field: String,
    #[serde(default)]
    pub message: String,
}

/// Why one request did not give an answer to use.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// No answer (connection refused or lost, timeout) or a 5xx / 429: worth another try, not
    /// sooner than the answer's `Retry-After` when it has one.
    #[error("{0}")]
    Transient(String, Option<Duration>),
    /// The API refused the request (4xx): repeating it changes nothing.
    #[error("{} ({}, HTTP {})", .0.detail, .0.code, .0.status)]
    Refused(Problem),
    /// An answer that is not the API's (not JSON, or an unexpected status).
    #[error("{0}")]
    Unexpected(String),
}

/// A successful answer: its status, whether it repeats an earlier outcome
/// (`Idempotent-Replayed: true`), and its JSON body.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: StatusCode,
    pub replayed: bool,
    pub body: Value,
}

pub struct Api {
    http: reqwest::Client,
    base: Url,
    key: String,
}

impl Api {
    pub fn new(base: &str, key: &str) -> Result<Self, CliError> {
        let mut base = Url::parse(base.trim())
            .map_err(|e| CliError::Usage(format!("COUNTERSIGN_URL `{base}` is not a URL: {e}")))?;
        if !matches!(base.scheme(), "http" | "https") || base.cannot_be_a_base() {
            return Err(CliError::Usage(format!(
                "COUNTERSIGN_URL `{base}` must be an http(s) URL"
            )));
        }
        // Paths are appended as segments: a base with a path (an API Gateway stage) keeps it.
        if !base.path().ends_with('/') {
            let path = format!("{}/", base.path());
            base.set_path(&path);
        }
        base.set_query(None);
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(REQUEST_TIMEOUT)
            .user_agent(concat!("countersign-cli/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| CliError::Transport(format!("cannot set up HTTP: {e}")))?;
        Ok(Self {
            http,
            base,
            key: key.to_owned(),
        })
    }

    /// The configured API key (`countersign mcp` derives its task-id key from it).
    pub(crate) fn key(&self) -> &str {
        &self.key
    }

    /// The URL of `segments` under the base, each segment percent-encoded (ids come from the
    /// command line), with `query` pairs.
    pub fn url(&self, segments: &[&str], query: &[(&str, &str)]) -> Url {
        let mut url = self.base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(segments);
        }
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        url
    }

    /// One request; `body` is sent as JSON text when given, `limit` caps how long it may take.
    pub async fn call(
        &self,
        method: Method,
        url: Url,
        headers: &[(&str, &str)],
        body: Option<&str>,
        limit: Option<Duration>,
    ) -> Result<Reply, CallError> {
        let mut request = self
            .http
            .request(method, url)
            .bearer_auth(&self.key)
            .header("accept", "application/json");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        if let Some(body) = body {
            request = request
                .header("content-type", "application/json")
                .body(body.to_owned());
        }
        if let Some(limit) = limit {
            request = request.timeout(limit.clamp(Duration::from_millis(100), REQUEST_TIMEOUT));
        }
        let response = request
            .send()
            .await
            .map_err(|e| CallError::Transient(describe(&e), None))?;
        let status = response.status();
        let retry_after = retry_after(response.headers());
        let replayed = response
            .headers()
            .get("idempotent-replayed")
            .is_some_and(|v| v == "true");
        let bytes = response
            .bytes()
            .await
            .map_err(|e| CallError::Transient(describe(&e), None))?;
        // A success without a body (204: a delegation ended) answers nothing to read.
        if status.is_success() && bytes.is_empty() {
            return Ok(Reply {
                status,
                replayed,
                body: Value::Null,
            });
        }
        let json = serde_json::from_slice::<Value>(&bytes);
        if status.is_success() {
            return json
                .map(|body| Reply {
                    status,
                    replayed,
                    body,
                })
                .map_err(|_| {
                    CallError::Unexpected(format!("HTTP {status} with a body that is not JSON"))
                });
        }
        let problem = json
            .ok()
            .and_then(|v| serde_json::from_value::<Problem>(v).ok())
            .filter(|p| !p.code.is_empty());
        if status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS {
            let what = problem.map_or_else(
                || format!("HTTP {status}"),
                |p| format!("{} ({}, HTTP {})", p.detail, p.code, status.as_u16()),
            );
            return Err(CallError::Transient(what, retry_after));
        }
        match problem {
            Some(mut problem) => {
                problem.status = status.as_u16();
                Err(CallError::Refused(problem))
            }
            None => Err(CallError::Unexpected(format!(
                "HTTP {status} from something that is not the Countersign API (check COUNTERSIGN_URL)"
            ))),
        }
    }
}

/// `Retry-After` in whole seconds (a 429 `too_many_waits`, a 503), at most a minute; an HTTP
/// date or anything else is ignored (the backoff decides).
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let seconds: u64 = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(seconds.min(60)))
}

/// A reqwest error with its causes: "error sending request" alone says little.
fn describe(error: &reqwest::Error) -> String {
    let mut text = if error.is_timeout() {
        "the request timed out".to_owned()
    } else if error.is_connect() {
        error.url().map_or_else(
            || "cannot connect".to_owned(),
            |url| format!("cannot connect to {}", url.origin().ascii_serialization()),
        )
    } else {
        error.to_string()
    };
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// How long a command keeps retrying transient failures: until its deadline (`--timeout`), and
/// for at most `window` of failures in a row (so an unreachable URL without a timeout still
/// ends).
#[derive(Debug, Clone, Copy)]
pub struct Patience {
    pub deadline: Option<Instant>,
    pub window: Duration,
}

impl Patience {
    pub fn remaining(&self) -> Option<Duration> {
        self.deadline
            .map(|d| d.saturating_duration_since(Instant::now()))
    }

    pub fn expired(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
    }
}

/// Runs `call` until it answers, retrying transient failures with backoff within `patience`;
/// `on_retry` hears of each failure and the pause before the next try.
pub async fn with_retries<T, F, Fut>(
    patience: Patience,
    mut call: F,
    mut on_retry: impl FnMut(&str, Duration),
) -> Result<T, CliError>
where
    F: FnMut(Option<Duration>) -> Fut,
    Fut: Future<Output = Result<T, CallError>>,
{
    let started = Instant::now();
    let give_up = patience.deadline.map_or(started + patience.window, |d| {
        d.min(started + patience.window)
    });
    let mut delay = FIRST_RETRY_DELAY;
    loop {
        let limit = give_up.saturating_duration_since(Instant::now());
        match call(Some(limit.max(Duration::from_secs(1)))).await {
            Ok(value) => return Ok(value),
            Err(CallError::Transient(what, retry_after)) => {
                let left = give_up.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(CliError::Transport(format!(
                        "{what} (gave up after {} of retries)",
                        crate::duration::human(started.elapsed())
                    )));
                }
                let pause = delay.max(retry_after.unwrap_or_default()).min(left);
                on_retry(&what, pause);
                tokio::time::sleep(pause).await;
                delay = (delay * 2).min(MAX_RETRY_DELAY);
            }
            Err(CallError::Refused(problem)) => return Err(CliError::Api(problem)),
            Err(CallError::Unexpected(what)) => return Err(CliError::Transport(what)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_path_segments_under_the_base_path() {
        let api = Api::new("https://api.example.com/prod", "k").expect("api");
        let url = api.url(
            &["approvals", "apr_1/../x", "events"],
            &[("cursor", "a b&c")],
        );
        assert_eq!(
            url.as_str(),
            "https://api.example.com/prod/approvals/apr_1%2F..%2Fx/events?cursor=a+b%26c"
        );
        let api = Api::new("http://127.0.0.1:3000/", "k").expect("api");
        assert_eq!(
            api.url(&["approvals"], &[]).as_str(),
            "http://127.0.0.1:3000/approvals"
        );
    }

    #[test]
    fn refuses_a_base_that_is_no_http_url() {
        for bad in [
            "127.0.0.1:3000",
            "ftp://example.com",
            "not a url",
            "mailto:a@b",
        ] {
            assert!(
                matches!(Api::new(bad, "k"), Err(CliError::Usage(_))),
                "{bad}"
            );
        }
    }
}
