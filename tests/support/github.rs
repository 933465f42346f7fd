//! A fake GitHub that the tests run: real HTTP, answering like GitHub's REST API for a GitHub
//! App. It verifies the App's JWT with the App's public key (RS256, `iss` the App's id, `iat` in
//! the past, `exp` at most 10 minutes after it), mints installation tokens that expire and
//! refuses expired or unknown ones, answers a deployment protection rule's review 204 once per
//! waiting round and 422 after, lists the App's hook deliveries in pages (`Link: rel="next"`
//! with a cursor) and records each redelivery asked for. Faults are scripted for the review
//! call: a 500, a 429 with `Retry-After`, no answer (a timeout, nothing done), and a lost
//! answer (done, then no answer within the client's timeout).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::{Reply, TestApp};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use countersign::github::GithubSecret;
use countersign::github::signature::sign;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Value, json};

use crate::fixtures::{ALICE, BOB, CAROL, DAVE, TENANT_A};

/// The App's private key (test only) and its public half, as the fake verifies JWTs with it.
pub const APP_KEY: &str = include_str!("../../shared/src/github/testdata/app_key.pem");
pub const APP_PUBLIC_KEY: &str = include_str!("../../shared/src/github/testdata/app_key.pub.pem");
pub const APP_ID: u64 = 424_242;
pub const INSTALLATION_ID: u64 = 77_001;
pub const GITHUB_WEBHOOK_SECRET: &str = "github-webhook-secret-0123456789";
pub const REPOSITORY: &str = "acme/api";
pub const REPOSITORY_ID: u64 = 5_150;
/// The environment whose waiting jobs tenant A decides with a 2-of-3 quorum (alice, bob,
/// carol); `solo` has one approver (bob); any other environment has no entry.
pub const PRODUCTION: &str = "production";
pub const SOLO: &str = "solo";
/// GitHub users: the sender of deployments is mapped to alice (the requester, for separation of
/// duties); `GH_DAVE` to dave; `GH_NOBODY` to nobody.
pub const GH_ALICE: u64 = 1_001;
pub const GH_BOB: u64 = 1_002;
pub const GH_DAVE: u64 = 1_004;
pub const GH_NOBODY: u64 = 1_999;

/// A scripted answer for the next review call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// HTTP 500, nothing done.
    Fail,
    /// HTTP 429 with `Retry-After`, nothing done.
    RateLimited(u64),
    /// Nothing done, no answer for this long (the caller times out).
    Hang(Duration),
    /// Done, then no answer for this long (the caller times out, not knowing).
    LoseAnswer(Duration),
}

/// A review GitHub took (204) or refused (422).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Review {
    pub run_id: u64,
    pub environment: String,
    pub state: String,
    pub comment: String,
    /// 204, or 422 when nothing waited.
    pub status: u16,
}

/// One of the App's hook deliveries, as the fake lists it.
#[derive(Debug, Clone)]
pub struct HookDelivery {
    pub id: u64,
    pub guid: String,
    /// Seconds ago.
    pub age_seconds: i64,
    pub status_code: u16,
    pub event: String,
}

#[derive(Default)]
struct Inner {
    /// (run, environment) waiting for a review.
    waiting: Vec<(u64, String)>,
    reviews: Vec<Review>,
    faults: VecDeque<Fault>,
    /// Installation tokens minted: (token, expires at, epoch seconds).
    tokens: Vec<(String, i64)>,
    /// How long a token minted now lives (GitHub: an hour).
    token_ttl: i64,
    /// Requests refused for their authentication, by path.
    refused: Vec<String>,
    deliveries: Vec<HookDelivery>,
    /// Deliveries asked for again, by id.
    redeliveries: Vec<u64>,
    /// Asks for a redelivery to refuse (500) before taking one.
    failing_redeliveries: usize,
    /// Review calls that arrived (before any scripted fault or delay).
    review_arrivals: usize,
    /// Each run's state as `GET …/actions/runs/{run}` answers it: (completed, run_attempt).
    runs: std::collections::HashMap<u64, (bool, u64)>,
    /// Runs read through that route.
    run_reads: Vec<u64>,
    /// Token mints to refuse (500) before minting one.
    failing_tokens: usize,
}

#[derive(Clone, Default)]
pub struct FakeGithub {
    inner: Arc<Mutex<Inner>>,
    pub base: String,
}

fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

impl FakeGithub {
    pub async fn start() -> Self {
        let mut github = Self::default();
        github.inner.lock().expect("fake GitHub").token_ttl = 3600;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the fake GitHub");
        github.base = format!("http://{}", listener.local_addr().expect("addr"));
        let router = Router::new()
            .route(
                "/app/installations/{installation}/access_tokens",
                post(access_token),
            )
            .route(
                "/repos/{owner}/{repo}/actions/runs/{run}/deployment_protection_rule",
                post(review),
            )
            .route("/repos/{owner}/{repo}/actions/runs/{run}", get(run_state))
            .route("/app/hook/deliveries", get(deliveries))
            .route("/app/hook/deliveries/{id}/attempts", post(redeliver))
            .with_state(github.clone());
        tokio::spawn(async move { axum::serve(listener, router).await });
        github
    }

    /// `GITHUB` for tenant A, pointed at this fake.
    pub fn config(&self) -> String {
        json!({ TENANT_A: {
            "app_id": APP_ID,
            "private_key": APP_KEY,
            "webhook_secret": GITHUB_WEBHOOK_SECRET,
            "api_url": self.base,
            "environments": {
                PRODUCTION: {
                    "approvers": [ALICE, BOB, CAROL],
                    "policy": {"rules": [{"name": "two of three", "approvers": [ALICE, BOB, CAROL], "min_approvals": 2}]}
                },
                SOLO: {"approvers": [BOB], "expires_in_seconds": 60},
            },
            "users": {GH_ALICE.to_string(): ALICE, GH_BOB.to_string(): BOB, GH_DAVE.to_string(): DAVE},
        }})
        .to_string()
    }

    /// [`FakeGithub::config`] as a deployment gives it: `GITHUB` without the App's key, which
    /// is in `GITHUB_PRIVATE_KEYS` (the webhook function is given no App key).
    pub fn split_env(&self) -> [(&'static str, String); 2] {
        let mut github: Value = serde_json::from_str(&self.config()).expect("the config");
        let key = github[TENANT_A]
            .as_object_mut()
            .and_then(|app| app.remove("private_key"))
            .expect("a private key");
        [
            ("GITHUB", github.to_string()),
            ("GITHUB_PRIVATE_KEYS", json!({ TENANT_A: key }).to_string()),
        ]
    }

    /// A job of `run` starts waiting on `environment` (GitHub then sends the event).
    pub fn wait(&self, run: u64, environment: &str) {
        let mut inner = self.inner.lock().expect("fake GitHub");
        let round = (run, environment.to_owned());
        if !inner.waiting.contains(&round) {
            inner.waiting.push(round);
        }
    }

    /// Whether a job of `run` still waits on `environment`.
    pub fn is_waiting(&self, run: u64, environment: &str) -> bool {
        let inner = self.inner.lock().expect("fake GitHub");
        inner.waiting.contains(&(run, environment.to_owned()))
    }

    /// The run ended: nothing of it waits any more.
    pub fn end_run(&self, run: u64) {
        self.inner
            .lock()
            .expect("fake GitHub")
            .waiting
            .retain(|(r, _)| *r != run);
    }

    pub fn fault_next(&self, fault: Fault) {
        self.inner
            .lock()
            .expect("fake GitHub")
            .faults
            .push_back(fault);
    }

    /// Tokens minted from now on expire after `seconds`.
    pub fn set_token_ttl(&self, seconds: i64) {
        self.inner.lock().expect("fake GitHub").token_ttl = seconds;
    }

    /// The reviews of `run` (204s and 422s).
    pub fn reviews(&self, run: u64) -> Vec<Review> {
        self.inner
            .lock()
            .expect("fake GitHub")
            .reviews
            .iter()
            .filter(|r| r.run_id == run)
            .cloned()
            .collect()
    }

    /// The reviews of `run` that GitHub took (204): what decided its jobs.
    pub fn decisions(&self, run: u64) -> Vec<Review> {
        self.reviews(run)
            .into_iter()
            .filter(|r| r.status == 204)
            .collect()
    }

    pub fn review_arrivals(&self) -> usize {
        self.inner.lock().expect("fake GitHub").review_arrivals
    }

    /// Requests refused for their JWT or token.
    pub fn refused(&self) -> Vec<String> {
        self.inner.lock().expect("fake GitHub").refused.clone()
    }

    /// The App's hook deliveries listed from now on (newest first, as GitHub lists them).
    pub fn set_deliveries(&self, deliveries: Vec<HookDelivery>) {
        self.inner.lock().expect("fake GitHub").deliveries = deliveries;
    }

    /// The next `n` asks for a redelivery fail (500), nothing asked.
    pub fn fail_redeliveries(&self, n: usize) {
        self.inner.lock().expect("fake GitHub").failing_redeliveries = n;
    }

    /// `run` as `GET …/actions/runs/{run}` answers from now on: completed or going, at its
    /// `attempt`.
    pub fn set_run(&self, run: u64, completed: bool, attempt: u64) {
        self.inner
            .lock()
            .expect("fake GitHub")
            .runs
            .insert(run, (completed, attempt));
    }

    /// The runs read through `GET …/actions/runs/{run}`, in order.
    pub fn run_reads(&self) -> Vec<u64> {
        self.inner.lock().expect("fake GitHub").run_reads.clone()
    }

    /// The next `n` installation token mints fail (500), nothing minted.
    pub fn fail_tokens(&self, n: usize) {
        self.inner.lock().expect("fake GitHub").failing_tokens = n;
    }

    pub fn redeliveries(&self) -> Vec<u64> {
        self.inner.lock().expect("fake GitHub").redeliveries.clone()
    }

    /// Waits until `run` has `count` reviews, or `timeout` passes; returns them.
    pub async fn wait_for_reviews(&self, run: u64, count: usize, timeout: Duration) -> Vec<Review> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let reviews = self.reviews(run);
            if reviews.len() >= count || std::time::Instant::now() >= deadline {
                return reviews;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn refuse(&self, path: &str) -> Response {
        self.inner
            .lock()
            .expect("fake GitHub")
            .refused
            .push(path.to_owned());
        (
            StatusCode::UNAUTHORIZED,
            Json(json!({"message": "Bad credentials"})),
        )
            .into_response()
    }
}

/// The App's JWT from `Authorization: Bearer`, verified as GitHub does.
fn app_jwt(headers: &HeaderMap) -> Result<(), String> {
    let token = bearer(headers).ok_or("no bearer token")?;
    let mut validation = Validation::new(Algorithm::RS256);
    validation.set_issuer(&[APP_ID.to_string()]);
    validation.set_required_spec_claims(&["iat", "exp", "iss"]);
    validation.leeway = 0;
    let key = DecodingKey::from_rsa_pem(APP_PUBLIC_KEY.as_bytes()).map_err(|e| e.to_string())?;
    let claims = jsonwebtoken::decode::<Value>(&token, &key, &validation)
        .map_err(|e| e.to_string())?
        .claims;
    let (iat, exp) = (
        claims["iat"].as_i64().ok_or("iat")?,
        claims["exp"].as_i64().ok_or("exp")?,
    );
    if iat > now() {
        return Err("iat in the future".into());
    }
    if exp - now() > 600 || exp - iat > 660 {
        return Err("exp more than 10 minutes ahead".into());
    }
    Ok(())
}

fn bearer(headers: &HeaderMap) -> Option<String> {
    let value = headers.get("authorization")?.to_str().ok()?;
    value
        .strip_prefix("Bearer ")
        .or_else(|| value.strip_prefix("token "))
        .map(str::to_owned)
}

async fn access_token(
    State(github): State<FakeGithub>,
    Path(installation): Path<u64>,
    headers: HeaderMap,
) -> Response {
    if app_jwt(&headers).is_err() || installation != INSTALLATION_ID {
        return github.refuse("access_tokens");
    }
    let mut inner = github.inner.lock().expect("fake GitHub");
    if inner.failing_tokens > 0 {
        inner.failing_tokens -= 1;
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(json!({"message": "token service down"})),
        )
            .into_response();
    }
    let token = format!("ghs_{}", ulid::Ulid::new());
    let expires = now() + inner.token_ttl;
    inner.tokens.push((token.clone(), expires));
    let expires_at = time::OffsetDateTime::from_unix_timestamp(expires)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        });
    (
        StatusCode::CREATED,
        Json(json!({"token": token, "expires_at": expires_at})),
    )
        .into_response()
}

/// `GET /repos/{owner}/{repo}/actions/runs/{run}` with an installation token: the run's status
/// and `run_attempt` (404 for a run the test did not set).
async fn run_state(
    State(github): State<FakeGithub>,
    Path((owner, repo, run)): Path<(String, String, u64)>,
    headers: HeaderMap,
) -> Response {
    let mut inner = github.inner.lock().expect("fake GitHub");
    let token_ok = bearer(&headers).is_some_and(|token| {
        inner
            .tokens
            .iter()
            .any(|(t, expires)| *t == token && *expires > now())
    });
    if !token_ok || format!("{owner}/{repo}") != REPOSITORY {
        drop(inner);
        return github.refuse("actions/runs");
    }
    inner.run_reads.push(run);
    match inner.runs.get(&run) {
        Some((completed, attempt)) => Json(json!({
            "id": run,
            "status": if *completed { "completed" } else { "in_progress" },
            "run_attempt": attempt,
        }))
        .into_response(),
        None => (StatusCode::NOT_FOUND, Json(json!({"message": "Not Found"}))).into_response(),
    }
}

async fn review(
    State(github): State<FakeGithub>,
    Path((owner, repo, run)): Path<(String, String, u64)>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let token_ok = {
        let inner = github.inner.lock().expect("fake GitHub");
        bearer(&headers).is_some_and(|token| {
            inner
                .tokens
                .iter()
                .any(|(t, expires)| *t == token && *expires > now())
        })
    };
    if !token_ok || format!("{owner}/{repo}") != REPOSITORY {
        return github.refuse("deployment_protection_rule");
    }
    let fault = {
        let mut inner = github.inner.lock().expect("fake GitHub");
        inner.review_arrivals += 1;
        inner.faults.pop_front()
    };
    match fault {
        Some(Fault::Fail) => {
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                Json(json!({"message": "boom"})),
            )
                .into_response();
        }
        Some(Fault::RateLimited(seconds)) => {
            return (
                StatusCode::TOO_MANY_REQUESTS,
                [("retry-after", seconds.to_string())],
                Json(json!({"message": "API rate limit exceeded"})),
            )
                .into_response();
        }
        Some(Fault::Hang(hold)) => {
            tokio::time::sleep(hold).await;
            return StatusCode::GATEWAY_TIMEOUT.into_response();
        }
        _ => {}
    }
    let environment = body["environment_name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let state = body["state"].as_str().unwrap_or_default().to_owned();
    if !matches!(state.as_str(), "approved" | "rejected") {
        return (
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(json!({"message": "state"})),
        )
            .into_response();
    }
    let status = {
        let mut inner = github.inner.lock().expect("fake GitHub");
        let round = (run, environment.clone());
        let waited = inner.waiting.contains(&round);
        inner.waiting.retain(|r| *r != round);
        let status = if waited { 204 } else { 422 };
        inner.reviews.push(Review {
            run_id: run,
            environment,
            state,
            comment: body["comment"].as_str().unwrap_or_default().to_owned(),
            status,
        });
        status
    };
    if let Some(Fault::LoseAnswer(hold)) = fault {
        tokio::time::sleep(hold).await;
    }
    if status == 204 {
        StatusCode::NO_CONTENT.into_response()
    } else {
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(json!({"message": "No pending deployment requests to review"})),
        )
            .into_response()
    }
}

async fn deliveries(
    State(github): State<FakeGithub>,
    Query(query): Query<Vec<(String, String)>>,
    headers: HeaderMap,
) -> Response {
    if app_jwt(&headers).is_err() {
        return github.refuse("deliveries");
    }
    let param = |name: &str| {
        query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let per_page: usize = param("per_page")
        .and_then(|p| p.parse().ok())
        .unwrap_or(30)
        .clamp(1, 100);
    // Pages of at most 2 deliveries here, whatever is asked: the paging is what is tested.
    let per_page = per_page.min(2);
    let start: usize = param("cursor").and_then(|c| c.parse().ok()).unwrap_or(0);
    let all = github.inner.lock().expect("fake GitHub").deliveries.clone();
    let page: Vec<Value> = all
        .iter()
        .skip(start)
        .take(per_page)
        .map(|d| {
            let at = time::OffsetDateTime::from_unix_timestamp(now() - d.age_seconds)
                .ok()
                .and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok());
            let action = if d.event == "workflow_run" { "completed" } else { "requested" };
            json!({"id": d.id, "guid": d.guid, "delivered_at": at, "redelivery": false,
                   "duration": 0.1, "status": if d.status_code / 100 == 2 { "OK" } else { "failed" },
                   "status_code": d.status_code, "event": d.event, "action": action})
        })
        .collect();
    let mut response = Json(Value::Array(page)).into_response();
    if start + per_page < all.len() {
        let next = format!(
            "<{}/app/hook/deliveries?per_page={per_page}&cursor={}>; rel=\"next\"",
            github.base,
            start + per_page
        );
        if let Ok(value) = next.parse() {
            response.headers_mut().insert("link", value);
        }
    }
    response
}

async fn redeliver(
    State(github): State<FakeGithub>,
    Path(id): Path<u64>,
    headers: HeaderMap,
) -> Response {
    if app_jwt(&headers).is_err() {
        return github.refuse("attempts");
    }
    {
        let mut inner = github.inner.lock().expect("fake GitHub");
        if inner.failing_redeliveries > 0 {
            inner.failing_redeliveries -= 1;
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                Json(json!({"message": "boom"})),
            )
                .into_response();
        }
        inner.redeliveries.push(id);
    }
    (StatusCode::ACCEPTED, Json(json!({}))).into_response()
}

/// A `deployment_protection_rule` / `requested` event of `run` on `environment`, sent by the
/// GitHub user `sender` (its id), with the callback URL on `api_url`.
pub fn deployment_event(api_url: &str, run: u64, environment: &str, sender: u64) -> Value {
    // GitHub creates a deployment for each waiting job attempt: each event names its own.
    static DEPLOYMENTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(9_000_000);
    let deployment = DEPLOYMENTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    json!({
        "action": "requested",
        "environment": environment,
        "event": "push",
        "sha": "1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d",
        "ref": "refs/heads/main",
        "deployment_callback_url": format!("{api_url}/repos/{REPOSITORY}/actions/runs/{run}/deployment_protection_rule"),
        "deployment": {"id": deployment, "environment": environment},
        "repository": {"id": REPOSITORY_ID, "full_name": REPOSITORY, "name": "api"},
        "installation": {"id": INSTALLATION_ID},
        "sender": {"login": format!("user{sender}"), "id": sender}
    })
}

/// A `workflow_run` / `completed` event of `run`.
pub fn run_completed_event(run: u64, conclusion: &str) -> Value {
    json!({
        "action": "completed",
        "workflow_run": {"id": run, "conclusion": conclusion, "status": "completed", "run_attempt": 1},
        "repository": {"id": REPOSITORY_ID, "full_name": REPOSITORY},
        "installation": {"id": INSTALLATION_ID},
    })
}

/// GitHub's headers for a delivery of `event` (`delivery`: its `X-GitHub-Delivery`) with
/// `body`, signed with `secret`.
pub fn github_headers(
    secret: &str,
    event: &str,
    delivery: &str,
    body: &str,
) -> Vec<(&'static str, String)> {
    vec![
        ("x-github-event", event.to_owned()),
        ("x-github-delivery", delivery.to_owned()),
        (
            "x-hub-signature-256",
            sign(&GithubSecret::new(secret), body.as_bytes()),
        ),
        ("content-type", "application/json".to_owned()),
        ("user-agent", "GitHub-Hookshot/test".to_owned()),
    ]
}

/// Delivers `body` as GitHub's event `event` (delivery id `delivery`), signed with the App's
/// webhook secret, to tenant A's route.
pub async fn deliver(t: &TestApp, event: &str, delivery: &str, body: &Value) -> Reply {
    deliver_signed(t, GITHUB_WEBHOOK_SECRET, event, delivery, body).await
}

pub async fn deliver_signed(
    t: &TestApp,
    secret: &str,
    event: &str,
    delivery: &str,
    body: &Value,
) -> Reply {
    let body = body.to_string();
    let mut request = t
        .http
        .post(t.url("/github/events/tenant-a"))
        .body(body.clone());
    for (name, value) in github_headers(secret, event, delivery, &body) {
        request = request.header(name, value);
    }
    t.send(request).await
}

/// The approval a delivery opened.
pub fn opened_id(reply: &Reply) -> String {
    assert_eq!(reply.status, 200, "{}", reply.text());
    reply.json()["approval_id"]
        .as_str()
        .unwrap_or_else(|| panic!("an approval: {}", reply.text()))
        .to_owned()
}
