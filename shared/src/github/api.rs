//! The GitHub App's calls: its JWT (RS256, `jsonwebtoken`), an installation token minted for
//! each answer and never stored, the answer to a waiting rule, and the App's webhook deliveries
//! (listed, and asked for again).

use std::time::Duration;

use jsonwebtoken::{Algorithm, Header};
use reqwest::{Method, StatusCode};
use serde::Serialize;
use serde_json::{Value, json};

use super::GithubApp;
use super::event::callback_run;
use crate::domain::EpochSeconds;

/// GitHub's REST API version the calls are written against.
const API_VERSION: &str = "2022-11-28";
const USER_AGENT: &str = "countersign";
/// The JWT's `iat` is set this far in the past (GitHub's advice, for clock drift) ...
const JWT_BACKDATE_SECONDS: i64 = 60;
/// ... and its `exp` this far ahead: GitHub takes at most 10 minutes.
const JWT_LIFETIME_SECONDS: i64 = 540;
/// Deliveries listed per page (GitHub's largest).
pub const DELIVERIES_PER_PAGE: u32 = 100;

/// The wall clock, for the App's JWTs: GitHub checks them against its own time, whatever clock
/// the rest of Countersign runs on (tests move theirs).
fn wall_clock() -> EpochSeconds {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

/// How a GitHub answer that found nothing waiting for it begins its reason (GitHub's 422).
pub const NOTHING_WAITS: &str = "GitHub answered 422: nothing waits";

/// How a GitHub answer not sent because its round closed begins its reason.
pub const ROUND_CLOSED: &str = "not sent: its round is closed";

/// Whether an execution's failure is only that nothing waits for its answer at GitHub any more
/// (the run ended or was reviewed elsewhere, a newer round took over): a race that harms
/// nothing, counted apart from the failures that page.
pub fn nothing_waits(why: &str) -> bool {
    why.starts_with(NOTHING_WAITS) || why.starts_with(ROUND_CLOSED)
}

/// How an answer to GitHub went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answered {
    /// 204: GitHub took the review.
    Taken,
    /// 422: nothing waits for a review at GitHub any more (answered already, or the run ended).
    NothingPending(String),
    /// Not sent (a token could not be minted, the URL is not the tenant's API), or refused for
    /// now (5xx, 429, 408): safe to send again. `retry_after`: GitHub's, when it gave one.
    Retryable {
        why: String,
        retry_after: Option<u64>,
    },
    /// GitHub refused it (another 4xx): the same request would be refused again.
    Refused(String),
    /// It may have reached GitHub: no answer, a lost connection.
    Unknown(String),
}

/// One of the App's webhook deliveries, as `GET /app/hook/deliveries` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub id: u64,
    pub guid: String,
    pub delivered_at: EpochSeconds,
    pub redelivery: bool,
    /// The HTTP status the delivery got (0: none, a timeout).
    pub status_code: u16,
    pub event: String,
    /// The event's action, where it has one (`requested`, `completed`, …).
    pub action: Option<String>,
}

impl Delivery {
    pub fn succeeded(&self) -> bool {
        (200..300).contains(&self.status_code)
    }

    /// Whether it is one Countersign acts on: a job waiting, or a run that ended (a failed
    /// delivery of anything else is not worth asking for).
    pub fn acted_on(&self) -> bool {
        self.event == "deployment_protection_rule"
            || (self.event == "workflow_run" && self.action.as_deref() == Some("completed"))
    }
}

/// A workflow run as GitHub has it now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunState {
    /// `status` is `completed` (not queued, in progress or waiting).
    pub completed: bool,
    /// `run_attempt`: a re-run keeps the run's id and counts up.
    pub attempt: u64,
}

impl RunState {
    /// Whether a round whose run's end (of `ended_attempt`, if GitHub named it) was unclear
    /// belongs to the attempt that ended: the run is still completed at that attempt. A newer
    /// attempt, or a run going again, means a re-run waits: its round is kept.
    pub fn closes(&self, ended_attempt: Option<u64>) -> bool {
        self.completed && ended_attempt.is_none_or(|ended| self.attempt <= ended)
    }
}

/// A page of deliveries and the next page's cursor (from `Link: rel="next"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryPage {
    pub deliveries: Vec<Delivery>,
    pub next: Option<String>,
}

#[derive(Serialize)]
struct Claims {
    iat: i64,
    exp: i64,
    iss: String,
}

pub struct GithubApi {
    http: reqwest::Client,
}

impl GithubApi {
    /// `timeout`: a call's longest time.
    pub fn new(timeout: Duration) -> Result<Self, reqwest::Error> {
        let http = reqwest::Client::builder()
            .connect_timeout(timeout.min(Duration::from_secs(2)))
            .timeout(timeout)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(USER_AGENT)
            .build()?;
        Ok(Self { http })
    }

    /// A client with no TLS configuration of its own (when building one failed): its calls
    /// fail, which the caller counts.
    pub fn unconfigured() -> Self {
        Self {
            http: reqwest::Client::new(),
        }
    }

    /// The App's JWT at `now`: RS256 with its private key, `iat` a minute back, `exp` nine
    /// minutes ahead, `iss` the App's id.
    pub fn app_jwt(app: &GithubApp, now: EpochSeconds) -> Result<String, String> {
        let key = app
            .private_key
            .as_ref()
            .ok_or("no private key for this App (GITHUB_PRIVATE_KEYS)")?;
        let claims = Claims {
            iat: now - JWT_BACKDATE_SECONDS,
            exp: now + JWT_LIFETIME_SECONDS,
            iss: app.app_id.to_string(),
        };
        jsonwebtoken::encode(&Header::new(Algorithm::RS256), &claims, key.encoding_key())
            .map_err(|e| format!("the App's JWT could not be signed: {e}"))
    }

    fn request(&self, method: Method, url: &str, bearer: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, url)
            .bearer_auth(bearer)
            .header("accept", "application/vnd.github+json")
            .header("x-github-api-version", API_VERSION)
    }

    /// A token of the installation, minted now (it lasts an hour at GitHub; it is used for one
    /// call and dropped).
    async fn installation_token(
        &self,
        app: &GithubApp,
        installation_id: u64,
    ) -> Result<String, Answered> {
        let jwt = Self::app_jwt(app, wall_clock()).map_err(|why| Answered::Retryable {
            why,
            retry_after: None,
        })?;
        let url = format!(
            "{}/app/installations/{installation_id}/access_tokens",
            app.api_url
        );
        let response = self
            .request(Method::POST, &url, &jwt)
            .send()
            .await
            .map_err(|e| Answered::Retryable {
                why: format!("not sent: no installation token: {}", describe(&e)),
                retry_after: None,
            })?;
        let status = response.status();
        let retry_after = retry_after(&response);
        let body: Value = response.json().await.unwrap_or(Value::Null);
        match body["token"].as_str() {
            Some(token) if status.is_success() => Ok(token.to_owned()),
            // Minting a token changes nothing at GitHub: whatever went wrong, the answer was
            // not sent and may be tried again (a revoked installation ends with the attempts).
            _ => Err(Answered::Retryable {
                why: format!(
                    "not sent: no installation token: HTTP {} {}",
                    status.as_u16(),
                    message(&body)
                ),
                retry_after,
            }),
        }
    }

    /// Tells GitHub the review of the rule waiting at `callback_url` (the event's
    /// `deployment_callback_url`, sent only when it is on the tenant's `api_url` for
    /// `repository`): `{environment_name, state, comment}`.
    pub async fn answer(
        &self,
        app: &GithubApp,
        (installation_id, repository, callback_url): (u64, &str, &str),
        environment: &str,
        approved: bool,
        comment: &str,
    ) -> Answered {
        if let Err(problem) = callback_run(callback_url, &app.api_url, repository) {
            return Answered::Refused(format!("not sent: the callback URL {problem}"));
        }
        let token = match self.installation_token(app, installation_id).await {
            Ok(token) => token,
            Err(not_sent) => return not_sent,
        };
        let body = json!({
            "environment_name": environment,
            "state": if approved { "approved" } else { "rejected" },
            "comment": comment,
        });
        let sent = self
            .request(Method::POST, callback_url, &token)
            .json(&body)
            .send()
            .await;
        let response = match sent {
            Ok(response) => response,
            Err(e) if e.is_connect() => {
                return Answered::Retryable {
                    why: format!("not sent: {}", describe(&e)),
                    retry_after: None,
                };
            }
            Err(e) => return Answered::Unknown(describe(&e)),
        };
        let status = response.status();
        let retry_after = retry_after(&response);
        let rate_limit_reset = rate_limit_reset(&response);
        let body: Value = response.json().await.unwrap_or(Value::Null);
        match status {
            StatusCode::NO_CONTENT | StatusCode::OK => Answered::Taken,
            StatusCode::UNPROCESSABLE_ENTITY => Answered::NothingPending(format!(
                "{NOTHING_WAITS} for a review of {environment} in this run any more ({})",
                message(&body)
            )),
            StatusCode::TOO_MANY_REQUESTS | StatusCode::REQUEST_TIMEOUT => Answered::Retryable {
                why: format!("GitHub answered {}: {}", status.as_u16(), message(&body)),
                retry_after,
            },
            // Rate limits come as 403 (or 429): a secondary one with Retry-After, the primary
            // with no requests remaining until x-ratelimit-reset.
            StatusCode::FORBIDDEN if retry_after.is_some() || rate_limit_reset.is_some() => {
                Answered::Retryable {
                    why: format!("GitHub answered 403 (rate limited): {}", message(&body)),
                    retry_after: retry_after.or(rate_limit_reset),
                }
            }
            s if s.is_server_error() => Answered::Retryable {
                why: format!("GitHub answered {}: {}", s.as_u16(), message(&body)),
                retry_after,
            },
            s => Answered::Refused(format!(
                "GitHub answered {}: {}",
                s.as_u16(),
                message(&body)
            )),
        }
    }

    /// A workflow run as GitHub has it now (`GET {api_url}/repos/{repository}/actions/runs/{run
    /// id}`, with an installation token): its status and its latest attempt.
    pub async fn run(
        &self,
        app: &GithubApp,
        (installation_id, repository): (u64, &str),
        run_id: u64,
    ) -> Result<RunState, String> {
        let token = match self.installation_token(app, installation_id).await {
            Ok(token) => token,
            Err(
                Answered::Retryable { why, .. } | Answered::Refused(why) | Answered::Unknown(why),
            ) => {
                return Err(why);
            }
            Err(other) => return Err(format!("{other:?}")),
        };
        let url = format!("{}/repos/{repository}/actions/runs/{run_id}", app.api_url);
        let response = self
            .request(Method::GET, &url, &token)
            .send()
            .await
            .map_err(|e| describe(&e))?;
        let status = response.status();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        if !status.is_success() {
            return Err(format!(
                "GitHub answered {} for the run: {}",
                status.as_u16(),
                message(&body)
            ));
        }
        match (body["status"].as_str(), body["run_attempt"].as_u64()) {
            (Some(state), Some(attempt)) => Ok(RunState {
                completed: state == "completed",
                attempt,
            }),
            _ => Err("GitHub's run has no status or run_attempt".to_owned()),
        }
    }

    /// One page of the App's deliveries, newest first (`cursor`: the one the last page named).
    pub async fn deliveries(
        &self,
        app: &GithubApp,
        cursor: Option<&str>,
    ) -> Result<DeliveryPage, String> {
        let jwt = Self::app_jwt(app, wall_clock())?;
        let mut url = url::Url::parse(&format!("{}/app/hook/deliveries", app.api_url))
            .map_err(|e| e.to_string())?;
        url.query_pairs_mut()
            .append_pair("per_page", &DELIVERIES_PER_PAGE.to_string());
        if let Some(cursor) = cursor {
            url.query_pairs_mut().append_pair("cursor", cursor);
        }
        let response = self
            .request(Method::GET, url.as_str(), &jwt)
            .send()
            .await
            .map_err(|e| describe(&e))?;
        let status = response.status();
        let next = next_cursor(&response);
        let body: Value = response.json().await.map_err(|e| describe(&e))?;
        if !status.is_success() {
            return Err(format!(
                "GET /app/hook/deliveries: HTTP {} {}",
                status.as_u16(),
                message(&body)
            ));
        }
        let deliveries = body
            .as_array()
            .ok_or("GET /app/hook/deliveries: not a list")?
            .iter()
            .filter_map(delivery)
            .collect();
        Ok(DeliveryPage { deliveries, next })
    }

    /// Asks GitHub to deliver `delivery` again.
    pub async fn redeliver(&self, app: &GithubApp, delivery: u64) -> Result<(), String> {
        let jwt = Self::app_jwt(app, wall_clock())?;
        let url = format!("{}/app/hook/deliveries/{delivery}/attempts", app.api_url);
        let response = self
            .request(Method::POST, &url, &jwt)
            .send()
            .await
            .map_err(|e| describe(&e))?;
        let status = response.status();
        if status.is_success() {
            Ok(())
        } else {
            let body: Value = response.json().await.unwrap_or(Value::Null);
            Err(format!(
                "POST /app/hook/deliveries/{delivery}/attempts: HTTP {} {}",
                status.as_u16(),
                message(&body)
            ))
        }
    }
}

fn delivery(item: &Value) -> Option<Delivery> {
    let delivered_at = time::OffsetDateTime::parse(
        item["delivered_at"].as_str()?,
        &time::format_description::well_known::Rfc3339,
    )
    .ok()?
    .unix_timestamp();
    Some(Delivery {
        id: item["id"].as_u64()?,
        guid: item["guid"].as_str()?.to_owned(),
        delivered_at,
        redelivery: item["redelivery"].as_bool().unwrap_or(false),
        status_code: item["status_code"]
            .as_u64()
            .and_then(|s| u16::try_from(s).ok())
            .unwrap_or(0),
        event: item["event"].as_str().unwrap_or_default().to_owned(),
        action: item["action"].as_str().map(str::to_owned),
    })
}

/// The `cursor` of the `Link` header's `rel="next"` URL.
fn next_cursor(response: &reqwest::Response) -> Option<String> {
    let link = response.headers().get("link")?.to_str().ok()?;
    link.split(',').find_map(|part| {
        let (target, params) = part.split_once(';')?;
        if !params.split(';').any(|p| p.trim() == r#"rel="next""#) {
            return None;
        }
        let target = target.trim().strip_prefix('<')?.strip_suffix('>')?;
        let url = url::Url::parse(target).ok()?;
        url.query_pairs()
            .find(|(k, _)| k == "cursor")
            .map(|(_, v)| v.into_owned())
    })
}

/// Seconds until the primary rate limit resets, when no request remains
/// (`x-ratelimit-remaining: 0`, `x-ratelimit-reset` in epoch seconds).
fn rate_limit_reset(response: &reqwest::Response) -> Option<u64> {
    let header = |name: &str| {
        response
            .headers()
            .get(name)?
            .to_str()
            .ok()?
            .trim()
            .parse::<i64>()
            .ok()
    };
    if header("x-ratelimit-remaining")? != 0 {
        return None;
    }
    let reset = header("x-ratelimit-reset")?;
    u64::try_from(reset - wall_clock()).ok().map(|s| s.max(1))
}

fn retry_after(response: &reqwest::Response) -> Option<u64> {
    response
        .headers()
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// GitHub's `message`, cut short (never a token: GitHub's messages hold none).
fn message(body: &Value) -> String {
    body["message"]
        .as_str()
        .unwrap_or_default()
        .chars()
        .take(200)
        .collect()
}

/// A reqwest error with its causes.
fn describe(error: &reqwest::Error) -> String {
    let mut text = if error.is_timeout() {
        "the request timed out".to_owned()
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

#[cfg(test)]
mod tests {
    use jsonwebtoken::{DecodingKey, Validation};

    use super::*;
    use crate::github::config::tests::TEST_KEY;
    use crate::github::parse_github;

    #[test]
    fn the_apps_jwt_is_rs256_issued_by_the_app_backdated_and_short_lived() {
        let raw = json!({"acme": {"app_id": 4242, "private_key": TEST_KEY, "webhook_secret": "s"}});
        let apps = parse_github(&raw.to_string()).unwrap();
        let app = apps.values().next().unwrap();
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        let jwt = GithubApi::app_jwt(app, now).unwrap();
        let public = include_str!("testdata/app_key.pub.pem");
        let mut validation = Validation::new(Algorithm::RS256);
        validation.set_issuer(&["4242"]);
        let claims = jsonwebtoken::decode::<Value>(
            &jwt,
            &DecodingKey::from_rsa_pem(public.as_bytes()).unwrap(),
            &validation,
        )
        .unwrap()
        .claims;
        assert_eq!(claims["iat"], now - 60);
        assert!(
            claims["exp"].as_i64().unwrap() - now <= 600,
            "at most 10 minutes"
        );
    }
}
