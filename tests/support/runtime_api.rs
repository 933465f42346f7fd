//! A minimal Lambda Runtime API on loopback: enough for a function's real `main` to start, fetch
//! invocations and post their results, as it does in Lambda.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::Value;

#[derive(Default)]
struct Invocations {
    pending: VecDeque<(String, Value)>,
    /// (request id, body) of each response, and of each error report.
    responses: Vec<(String, Value)>,
    errors: Vec<(String, Value)>,
    /// When the function first asked for an invocation: its init is over.
    first_next: Option<Instant>,
}

#[derive(Clone, Default)]
pub struct RuntimeApi {
    state: Arc<Mutex<Invocations>>,
    pub address: String,
    /// How long each invocation may run (the function's timeout): 30 s unless set.
    timeout: Option<Duration>,
}

impl RuntimeApi {
    /// Serves the Runtime API on a free loopback port, with `events` queued as invocations.
    pub async fn start(events: Vec<Value>) -> Self {
        Self::start_with_timeout(events, Duration::from_secs(30)).await
    }

    /// [`RuntimeApi::start`] for a function whose invocations end after `timeout`.
    pub async fn start_with_timeout(events: Vec<Value>, timeout: Duration) -> Self {
        let mut api = Self {
            timeout: Some(timeout),
            ..Self::default()
        };
        {
            let mut state = api.state.lock().expect("runtime state");
            for (i, event) in events.into_iter().enumerate() {
                state.pending.push_back((format!("req-{i}"), event));
            }
        }
        let router = Router::new()
            .route("/2018-06-01/runtime/invocation/next", get(next))
            .route(
                "/2018-06-01/runtime/invocation/{id}/response",
                post(response),
            )
            .route("/2018-06-01/runtime/invocation/{id}/error", post(error))
            .route("/2018-06-01/runtime/init/error", post(init_error))
            .with_state(api.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        api.address = listener.local_addr().expect("addr").to_string();
        tokio::spawn(async move { axum::serve(listener, router).await });
        api
    }

    /// The response (or error) to invocation `n`, once the function has posted it.
    pub fn try_result(&self, n: usize) -> Option<Result<Value, Value>> {
        let id = format!("req-{n}");
        let state = self.state.lock().expect("runtime state");
        if let Some((_, body)) = state.responses.iter().find(|(r, _)| *r == id) {
            return Some(Ok(body.clone()));
        }
        state
            .errors
            .iter()
            .find(|(r, _)| *r == id || r == "init")
            .map(|(_, body)| Err(body.clone()))
    }

    /// Waits for the result of invocation `n` from the function running as `child`; fails the
    /// test if the process exits first (a `main` that fails its start-up).
    pub async fn result(
        &self,
        n: usize,
        child: &mut Child,
        timeout: Duration,
    ) -> Result<Value, Value> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(result) = self.try_result(n) {
                return result;
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("the function exited before answering invocation {n}: {status}");
            }
            assert!(Instant::now() < deadline, "no result for invocation {n}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// When the function first asked for work, if it has.
    pub fn first_next(&self) -> Option<Instant> {
        self.state.lock().expect("runtime state").first_next
    }
}

async fn next(State(api): State<RuntimeApi>) -> Response {
    loop {
        let event = {
            let mut state = api.state.lock().expect("runtime state");
            state.first_next.get_or_insert_with(Instant::now);
            state.pending.pop_front()
        };
        if let Some((id, event)) = event {
            let mut headers = HeaderMap::new();
            let timeout = api.timeout.unwrap_or(Duration::from_secs(30));
            let deadline = (time_now_ms() + timeout.as_millis()).to_string();
            for (name, value) in [
                ("lambda-runtime-aws-request-id", id.as_str()),
                ("lambda-runtime-deadline-ms", deadline.as_str()),
                (
                    "lambda-runtime-invoked-function-arn",
                    "arn:aws:lambda:us-east-1:000000000000:function:smoke",
                ),
                (
                    "lambda-runtime-trace-id",
                    "Root=1-00000000-000000000000000000000000",
                ),
            ] {
                headers.insert(name, HeaderValue::from_str(value).expect("header"));
            }
            return (StatusCode::OK, headers, event.to_string()).into_response();
        }
        // Like the real API, `next` blocks until there is an invocation.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn time_now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
}

async fn response(
    State(api): State<RuntimeApi>,
    Path(id): Path<String>,
    body: String,
) -> StatusCode {
    let body = serde_json::from_str(&body).unwrap_or(Value::String(body));
    api.state
        .lock()
        .expect("runtime state")
        .responses
        .push((id, body));
    StatusCode::ACCEPTED
}

async fn error(State(api): State<RuntimeApi>, Path(id): Path<String>, body: String) -> StatusCode {
    let body = serde_json::from_str(&body).unwrap_or(Value::String(body));
    api.state
        .lock()
        .expect("runtime state")
        .errors
        .push((id, body));
    StatusCode::ACCEPTED
}

async fn init_error(State(api): State<RuntimeApi>, body: String) -> StatusCode {
    let body = serde_json::from_str(&body).unwrap_or(Value::String(body));
    api.state
        .lock()
        .expect("runtime state")
        .errors
        .push(("init".to_owned(), body));
    StatusCode::ACCEPTED
}

/// A function's binary, built for the host by `cargo build --workspace --bins` (`make test`
/// does it before the tests; `debug` or `release`).
pub fn function_binary(name: &str, profile: &str) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let path = target.join(profile).join(name);
    assert!(
        path.exists(),
        "{} is missing: build the functions first (`cargo build --workspace --bins`; make test does)",
        path.display()
    );
    path
}

/// Starts a function's binary against the Runtime API, with `env` as its whole configuration
/// (plus what the Lambda service always sets).
pub fn start_function(binary: &PathBuf, api: &RuntimeApi, env: &[(String, String)]) -> Child {
    let mut command = Command::new(binary);
    command
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("AWS_LAMBDA_RUNTIME_API", &api.address)
        .env("AWS_LAMBDA_FUNCTION_NAME", "smoke")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env("AWS_LAMBDA_LOG_GROUP_NAME", "/aws/lambda/smoke")
        .env("AWS_LAMBDA_LOG_STREAM_NAME", "smoke")
        .env(
            "RUST_LOG",
            std::env::var("SMOKE_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .stdout(Stdio::null())
        .stderr(if std::env::var_os("SMOKE_DEBUG").is_some() {
            Stdio::inherit()
        } else {
            Stdio::null()
        });
    for (name, value) in env {
        command.env(name, value);
    }
    command
        .spawn()
        .unwrap_or_else(|e| panic!("start {}: {e}", binary.display()))
}
