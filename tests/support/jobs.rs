//! The jobs side of a test: its own queue and DLQ, a downstream HTTP server that plays the
//! action targets and the notifier (counting calls and effects per Idempotency-Key), and the
//! runner's pollers (the stream into dispatch, the queue into the executor).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use countersign::runner::{Deployment, JobQueues, Pollers, ensure_queues};
use serde_json::Value;

use super::TestApp;

/// Every call the downstream received, and what it did.
#[derive(Debug, Default)]
struct Recorded {
    /// (path, Idempotency-Key, body) of every call, in arrival order.
    calls: Vec<(String, String, Value)>,
    /// Keys whose effect happened (a target that dedupes applies each key once).
    effects: HashMap<String, u32>,
    arrivals: Vec<(String, Instant)>,
    /// Status queries per key.
    status_queries: HashMap<String, u32>,
    /// When the first status query of each key arrived.
    first_queries: HashMap<String, Instant>,
    /// What `/notify` answers instead of 200 (a notifier whose credentials were rotated).
    notify_status: Option<StatusCode>,
    /// (path, `traceparent` header) of every call and status query, in arrival order.
    traceparents: Vec<(String, String)>,
    /// Whether the `down-until-up` status URL answers (see [`Downstream::bring_status_up`]).
    status_up: bool,
}

/// The downstream: `/{behaviour}` answers
/// - `ok`: 200, the effect applied once per key;
/// - `flaky`: 503 to the first two calls of a key, then as `ok`;
/// - `reject-once`: 400 to the first call of a key, then as `ok`;
/// - `slow-reject-once`: as `reject-once`, its 400 a second late (a test can act meanwhile);
/// - `hang-once`: never answers the first call of a key (no effect), then as `ok`;
/// - `always-503`: 503, always;
/// - `see-other`: acts, then answers 303 See Other (post-redirect-get);
/// - `bad-gateway-before`: 502 to the first call of a key without acting, then as `ok`;
/// - `bad-gateway-after`: acts on the first call of a key, then answers 502, then as `ok`;
/// - `gateway-timeout-acts-later`: answers 504 at once, and acts 3 s later — every call, as a
///   backend behind a gateway that does not dedupe (each call is one more effect).
///
/// `/notify` is the notifier: 200, but for an approver named `flaky-…` 503 to the first call
/// of its key, for one named `refused-…` 410 to every call, and for one named `slow-…` 200
/// after 200 ms.
///
/// `GET /status/{mode}/{key}` is the targets' status URL (never counted as a call):
/// - `truth`: `succeeded` once the key's effect happened, `not_found` before;
/// - `pending-twice`: `pending` to the first two queries of a key, then as `truth`;
/// - `down`: 503, always;
/// - `down-until-up`: 503 until the test calls [`Downstream::bring_status_up`], then as `truth`.
#[derive(Clone, Default)]
pub struct Downstream {
    recorded: Arc<Mutex<Recorded>>,
}

impl Downstream {
    /// Serves the downstream on a loopback port; returns its base URL.
    pub async fn serve(&self) -> String {
        let router = Router::new()
            .route("/{behaviour}", post(answer))
            .route("/status/{mode}/{key}", axum::routing::get(status))
            .with_state(self.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        tokio::spawn(async move { axum::serve(listener, router).await });
        base
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Recorded> {
        self.recorded.lock().expect("downstream lock")
    }

    /// Calls received with this key.
    pub fn calls(&self, key: &str) -> usize {
        self.lock()
            .calls
            .iter()
            .filter(|(_, k, _)| k == key)
            .count()
    }

    /// The `down-until-up` status URL answers from now on (as `truth`).
    pub fn bring_status_up(&self) {
        self.lock().status_up = true;
    }

    /// Status queries received for this key.
    pub fn status_queries(&self, key: &str) -> u32 {
        self.lock().status_queries.get(key).copied().unwrap_or(0)
    }

    /// Effects applied for this key.
    pub fn effects(&self, key: &str) -> u32 {
        self.lock().effects.get(key).copied().unwrap_or(0)
    }

    /// All calls to `path` (e.g. `/notify`): (key, body).
    pub fn calls_to(&self, path: &str) -> Vec<(String, Value)> {
        self.lock()
            .calls
            .iter()
            .filter(|(p, _, _)| p == path)
            .map(|(_, k, b)| (k.clone(), b.clone()))
            .collect()
    }

    /// The `traceparent` of every call to `path` (and status query under it), in arrival
    /// order; "" for one sent without.
    pub fn traceparents(&self, path: &str) -> Vec<String> {
        self.lock()
            .traceparents
            .iter()
            .filter(|(p, _)| p == path)
            .map(|(_, t)| t.clone())
            .collect()
    }

    pub fn total_calls(&self) -> usize {
        self.lock().calls.len()
    }

    /// From now on, `/notify` answers `status` to every call (and acts on none).
    pub fn refuse_notifications(&self, status: StatusCode) {
        self.lock().notify_status = Some(status);
    }

    /// When the first status query for this key arrived.
    pub fn first_status_query(&self, key: &str) -> Option<Instant> {
        self.lock().first_queries.get(key).copied()
    }

    /// When the first call with this key arrived.
    pub fn first_arrival(&self, key: &str) -> Option<Instant> {
        self.lock()
            .arrivals
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, at)| *at)
    }
}

fn traceparent(headers: &HeaderMap) -> String {
    headers
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

async fn answer(
    State(downstream): State<Downstream>,
    Path(behaviour): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> StatusCode {
    let key = headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let body_approver = body["approver"].as_str().map(str::to_owned);
    let earlier = {
        let mut recorded = downstream.lock();
        recorded
            .traceparents
            .push((format!("/{behaviour}"), traceparent(&headers)));
        let earlier = recorded.calls.iter().filter(|(_, k, _)| *k == key).count();
        recorded
            .calls
            .push((format!("/{behaviour}"), key.clone(), body));
        recorded.arrivals.push((key.clone(), Instant::now()));
        earlier
    };
    let refused = downstream.lock().notify_status;
    // The notifier answers by approver too: `flaky-…` 503 to a key's first call, `refused-…`
    // 410 to every call.
    let approver = body_approver.unwrap_or_default();
    let status = match (behaviour.as_str(), earlier) {
        ("notify", _) if refused.is_some() => refused.unwrap_or(StatusCode::OK),
        ("notify", 0) if approver.starts_with("flaky-") => StatusCode::SERVICE_UNAVAILABLE,
        ("notify", _) if approver.starts_with("refused-") => StatusCode::GONE,
        ("notify", _) if approver.starts_with("slow-") => {
            tokio::time::sleep(Duration::from_millis(200)).await;
            StatusCode::OK
        }
        ("flaky", 0 | 1) | ("flaky-once", 0) | ("always-503", _) => StatusCode::SERVICE_UNAVAILABLE,
        ("reject-once", 0) => StatusCode::BAD_REQUEST,
        ("slow-reject-once", 0) => {
            tokio::time::sleep(Duration::from_secs(1)).await;
            StatusCode::BAD_REQUEST
        }
        ("see-other", _) => StatusCode::SEE_OTHER,
        ("bad-gateway-before", 0) => StatusCode::BAD_GATEWAY,
        ("bad-gateway-after", 0) => {
            downstream.lock().effects.insert(key.clone(), 1);
            StatusCode::BAD_GATEWAY
        }
        ("gateway-timeout-acts-later", _) => {
            let later = downstream.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(3)).await;
                *later.lock().effects.entry(key).or_insert(0) += 1;
            });
            return StatusCode::GATEWAY_TIMEOUT;
        }
        ("hang-once", 0) => {
            tokio::time::sleep(Duration::from_secs(600)).await;
            StatusCode::GATEWAY_TIMEOUT
        }
        _ => StatusCode::OK,
    };
    if status == StatusCode::OK || status == StatusCode::SEE_OTHER {
        let mut recorded = downstream.lock();
        let effects = recorded.effects.entry(key).or_insert(0);
        // A target that dedupes by Idempotency-Key applies each key once, whatever it is sent.
        if *effects == 0 {
            *effects = 1;
        }
    }
    status
}

async fn status(
    State(downstream): State<Downstream>,
    Path((mode, key)): Path<(String, String)>,
    headers: HeaderMap,
) -> (StatusCode, axum::Json<Value>) {
    let mut recorded = downstream.lock();
    recorded
        .traceparents
        .push((format!("/status/{mode}"), traceparent(&headers)));
    let header = headers.get("idempotency-key").and_then(|v| v.to_str().ok());
    assert_eq!(
        header,
        Some(key.as_str()),
        "the key in the path and the header"
    );
    recorded
        .first_queries
        .entry(key.clone())
        .or_insert_with(Instant::now);
    let queries = recorded.status_queries.entry(key.clone()).or_insert(0);
    *queries += 1;
    let queries = *queries;
    let truth = if recorded.effects.get(&key).is_some_and(|e| *e > 0) {
        "succeeded"
    } else {
        "not_found"
    };
    let up = recorded.status_up;
    match mode.as_str() {
        "down" | "down-until-up" if mode == "down" || !up => (
            StatusCode::SERVICE_UNAVAILABLE,
            axum::Json(serde_json::json!({})),
        ),
        "pending-twice" if queries <= 2 => (
            StatusCode::OK,
            axum::Json(serde_json::json!({"status": "pending"})),
        ),
        _ => (
            StatusCode::OK,
            axum::Json(serde_json::json!({"status": truth})),
        ),
    }
}

pub struct JobsEnv {
    pub queues: JobQueues,
    pub downstream: Downstream,
    /// The downstream's base URL.
    pub downstream_base: String,
    pollers: Mutex<Option<Pollers>>,
}

impl TestApp {
    /// A test app with its own jobs queue, the downstream, and the runner's pollers running.
    /// Action types: `deploy` (ok), `flaky`, `reject_once`, `hang_once`, `always_503`, and
    /// `unsafe` (ok, but configured as not idempotent). Leases are 2 s. An override's value may
    /// name the downstream's base URL as `{downstream}`.
    pub async fn start_jobs(overrides: &[(&str, &str)]) -> Self {
        Self::start_jobs_via(overrides, None).await
    }

    /// [`TestApp::start_jobs`] with the app's AWS clients configured by `via` (see
    /// [`TestApp::build_via`]).
    pub async fn start_jobs_via(
        overrides: &[(&str, &str)],
        via: Option<aws_config::SdkConfig>,
    ) -> Self {
        let app = Self::jobs_without_runner(overrides, via).await;
        app.start_runner();
        app
    }

    /// [`TestApp::start_jobs`] with nothing polling the stream or the queue: the test plays
    /// Lambda's event source mappings itself (see `tests/api/cost.rs`).
    pub async fn jobs_without_runner(
        overrides: &[(&str, &str)],
        via: Option<aws_config::SdkConfig>,
    ) -> Self {
        Self::jobs_deployed(overrides, via, Deployment::default()).await
    }

    /// [`TestApp::jobs_without_runner`], its stack deployed as `deployment` says (the
    /// template's parameters, grants withheld).
    pub async fn jobs_deployed(
        overrides: &[(&str, &str)],
        via: Option<aws_config::SdkConfig>,
        deployment: Deployment<'_>,
    ) -> Self {
        let downstream = Downstream::default();
        let base = downstream.serve().await;
        let sqs = aws_sdk_sqs::Client::new(&super::sdk_config().await);
        let queue_name = format!("q-{}", ulid::Ulid::new().to_string().to_lowercase());
        let visibility = overrides
            .iter()
            .find(|(k, _)| *k == "JOB_VISIBILITY_TIMEOUT_SECONDS")
            .map_or(2, |(_, v)| v.parse().expect("visibility"));
        let attempts = overrides
            .iter()
            .find(|(k, _)| *k == "JOB_MAX_ATTEMPTS")
            .map_or(5, |(_, v)| v.parse().expect("attempts"));
        let queues = ensure_queues(&sqs, &queue_name, visibility, attempts)
            .await
            .expect("create the test queues");
        let targets = serde_json::json!({
            "deploy": {"url": format!("{base}/ok"), "idempotent": true},
            "refund": {"url": format!("{base}/ok"), "idempotent": true},
            "flaky": {"url": format!("{base}/flaky"), "idempotent": true},
            "flaky_once": {"url": format!("{base}/flaky-once"), "idempotent": true},
            "reject_once": {"url": format!("{base}/reject-once"), "idempotent": true},
            "slow_reject_once": {"url": format!("{base}/slow-reject-once"), "idempotent": true},
            "hang_once": {"url": format!("{base}/hang-once"), "idempotent": true},
            "always_503": {"url": format!("{base}/always-503"), "idempotent": true},
            "unsafe": {"url": format!("{base}/ok"), "idempotent": false},
            // Approval-only: claimed by its caller, never called.
            "agent": {"executes": false},
            "unsafe_flaky": {"url": format!("{base}/flaky"), "idempotent": false},
            "unsafe_hang": {"url": format!("{base}/hang-once"), "idempotent": false},
            "unsafe_see_other": {"url": format!("{base}/see-other"), "idempotent": false},
            "unsafe_502": {"url": format!("{base}/bad-gateway-before"), "idempotent": false},
            "checked": {"url": format!("{base}/ok"), "idempotent": true,
                        "status_url": format!("{base}/status/truth/{{idempotency_key}}"), "status_delay_seconds": 1},
            "unsafe_checked": {"url": format!("{base}/ok"), "idempotent": false,
                               "status_url": format!("{base}/status/truth/{{idempotency_key}}"), "status_delay_seconds": 1},
            "unsafe_502_before": {"url": format!("{base}/bad-gateway-before"), "idempotent": false,
                                  "status_url": format!("{base}/status/truth/{{idempotency_key}}"), "status_delay_seconds": 1},
            "unsafe_502_after": {"url": format!("{base}/bad-gateway-after"), "idempotent": false,
                                 "status_url": format!("{base}/status/truth/{{idempotency_key}}"), "status_delay_seconds": 1},
            "unsafe_pending": {"url": format!("{base}/bad-gateway-after"), "idempotent": false,
                               "status_url": format!("{base}/status/pending-twice/{{idempotency_key}}"), "status_delay_seconds": 1},
            "unsafe_status_down": {"url": format!("{base}/bad-gateway-after"), "idempotent": false,
                                   "status_url": format!("{base}/status/down/{{idempotency_key}}"), "status_delay_seconds": 1},
            // Acted (then 502) / did not act (502): the status URL down until a test brings it up.
            "unsafe_acted_status_later": {"url": format!("{base}/bad-gateway-after"), "idempotent": false,
                                          "status_url": format!("{base}/status/down-until-up/{{idempotency_key}}"), "status_delay_seconds": 1},
            "unsafe_not_acted_status_later": {"url": format!("{base}/bad-gateway-before"), "idempotent": false,
                                              "status_url": format!("{base}/status/down-until-up/{{idempotency_key}}"), "status_delay_seconds": 1},
            // A gateway that answers 504 at once while the backend acts (and records the key)
            // 3 s later: asked after 5 s, never before.
            "unsafe_504_acts_later": {"url": format!("{base}/gateway-timeout-acts-later"), "idempotent": false,
                                      "status_url": format!("{base}/status/truth/{{idempotency_key}}"),
                                      "status_delay_seconds": 5},
        })
        .to_string();
        let notifier = format!("{base}/notify");
        let visibility = visibility.to_string();
        let mut vars: Vec<(&str, &str)> = vec![
            ("ACTION_TARGETS", &targets),
            ("JOBS_QUEUE_URL", &queues.queue_url),
            ("NOTIFIER_URL", &notifier),
            ("PUBLIC_BASE_URL", "https://approvals.example.com"),
            ("JOB_VISIBILITY_TIMEOUT_SECONDS", &visibility),
        ];
        // An override may name the downstream as `{downstream}` (e.g. a subscription to it).
        let overrides: Vec<(&str, String)> = overrides
            .iter()
            .map(|(k, v)| (*k, v.replace("{downstream}", &base)))
            .collect();
        vars.extend(overrides.iter().map(|(k, v)| (*k, v.as_str())));
        let mut app = Self::build_deployed(&vars, via, &[], deployment).await;
        app.app
            .store
            .ensure_tables()
            .await
            .expect("create the test tables");
        app.calls.take();
        app.jobs = Some(JobsEnv {
            queues,
            downstream,
            downstream_base: base.clone(),
            pollers: Mutex::new(None),
        });
        app
    }

    pub fn downstream(&self) -> &Downstream {
        &self
            .jobs
            .as_ref()
            .expect("started with start_jobs")
            .downstream
    }

    /// A URL on the downstream, e.g. `/notify`.
    pub fn downstream_url(&self, path: &str) -> String {
        format!(
            "{}{path}",
            self.jobs
                .as_ref()
                .expect("started with start_jobs")
                .downstream_base
        )
    }

    pub fn queues(&self) -> &JobQueues {
        &self.jobs.as_ref().expect("started with start_jobs").queues
    }

    /// Starts the runner's pollers (again).
    pub fn start_runner(&self) {
        let pollers = self.start_another_runner();
        let env = self.jobs.as_ref().expect("started with start_jobs");
        *env.pollers.lock().expect("pollers lock") = Some(pollers);
    }

    /// Another runner beside the first, as a second Lambda instance would be: its pollers run
    /// until the returned handle is dropped.
    pub fn start_another_runner(&self) -> Pollers {
        assert!(self.jobs.is_some(), "started with start_jobs");
        Pollers::start(&self.functions, self.app.store.clone()).expect("the runner's configuration")
    }

    /// Stops the runner's pollers, as a crash would: in-flight work is abandoned.
    pub async fn stop_runner(&self) {
        let env = self.jobs.as_ref().expect("started with start_jobs");
        let pollers = env.pollers.lock().expect("pollers lock").take();
        if let Some(pollers) = pollers {
            pollers.stop().await;
        }
    }

    /// Polls the approval until `done` holds for it, or fails the test after `timeout`.
    pub async fn wait_for_approval(
        &self,
        api_key: &str,
        id: &str,
        timeout: Duration,
        done: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let approval = self.get(api_key, id).await.json();
            if done(&approval) {
                return approval;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting; the approval is now {approval}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until the execution reaches one of the final statuses, and returns the approval.
    pub async fn wait_for_execution(&self, api_key: &str, id: &str, timeout: Duration) -> Value {
        self.wait_for_approval(api_key, id, timeout, |a| {
            matches!(
                a["execution"]["status"].as_str(),
                Some("succeeded" | "failed" | "needs_reconciliation")
            )
        })
        .await
    }

    /// Messages in a queue (visible and in flight).
    /// The bodies of the messages in `queue_url` now (received and made visible again at
    /// once: a look that takes nothing).
    pub async fn peek(&self, queue_url: &str) -> Vec<String> {
        let sqs = aws_sdk_sqs::Client::new(&super::sdk_config().await);
        let received = sqs
            .receive_message()
            .queue_url(queue_url)
            .max_number_of_messages(10)
            .visibility_timeout(0)
            .send()
            .await
            .expect("receive");
        received
            .messages()
            .iter()
            .filter_map(|m| m.body().map(str::to_owned))
            .collect()
    }

    pub async fn queue_depth(&self, queue_url: &str) -> usize {
        use aws_sdk_sqs::types::QueueAttributeName;
        let attributes = aws_sdk_sqs::Client::new(&self.sdk)
            .get_queue_attributes()
            .queue_url(queue_url)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
            .send()
            .await
            .expect("queue attributes")
            .attributes
            .unwrap_or_default();
        [
            QueueAttributeName::ApproximateNumberOfMessages,
            QueueAttributeName::ApproximateNumberOfMessagesNotVisible,
        ]
        .iter()
        .filter_map(|name| attributes.get(name).and_then(|v| v.parse::<usize>().ok()))
        .sum()
    }
}
