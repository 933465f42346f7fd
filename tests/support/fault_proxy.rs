//! A fault-injecting proxy between the app's AWS SDK clients and the local AWS: it forwards each
//! request, or — by rules drawn with a seeded generator — answers what AWS answers when it is
//! overloaded or fails: throttling, a 500, a `TransactionConflict` cancellation, or a response
//! lost after the write was applied (forwarded, then answered 500 so the SDK retries a request
//! that already took effect). moto does none of these by itself.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Fault {
    /// `ThrottlingException` before anything is applied.
    Throttled,
    /// HTTP 500 before anything is applied.
    ServerError,
    /// The request is applied, then its response is lost (answered 500): the SDK retries.
    LostAfterApplied,
    /// `TransactionCanceledException` with `TransactionConflict` reasons (TransactWriteItems).
    TransactionConflict,
}

/// Injects `fault` into a share `probability` of the requests for `operation` (`*`: any).
#[derive(Debug, Clone)]
pub struct Rule {
    pub operation: &'static str,
    pub fault: Fault,
    pub probability: f64,
}

struct ProxyState {
    upstream: String,
    http: reqwest::Client,
    rng: StdRng,
    rules: Vec<Rule>,
    injected: BTreeMap<(String, Fault), usize>,
}

#[derive(Clone)]
pub struct FaultProxy {
    pub endpoint: String,
    state: Arc<Mutex<ProxyState>>,
}

impl FaultProxy {
    /// Serves on a loopback port, forwarding to `upstream`; no rules yet.
    pub async fn start(upstream: &str, seed: u64) -> Self {
        let state = Arc::new(Mutex::new(ProxyState {
            upstream: upstream.trim_end_matches('/').to_owned(),
            http: reqwest::Client::new(),
            rng: StdRng::seed_from_u64(seed),
            rules: Vec::new(),
            injected: BTreeMap::new(),
        }));
        let router = Router::new().fallback(proxy).with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let endpoint = format!("http://{}", listener.local_addr().expect("addr"));
        tokio::spawn(async move { axum::serve(listener, router).await });
        Self { endpoint, state }
    }

    pub fn set_rules(&self, rules: Vec<Rule>) {
        self.lock().rules = rules;
    }

    /// Faults injected so far, by (operation, fault).
    pub fn injected(&self) -> BTreeMap<(String, Fault), usize> {
        self.lock().injected.clone()
    }

    pub fn injected_total(&self) -> usize {
        self.lock().injected.values().sum()
    }

    /// An SDK configuration whose clients go through this proxy.
    pub async fn sdk_config(&self) -> aws_config::SdkConfig {
        aws_config::defaults(aws_config::BehaviorVersion::latest())
            .endpoint_url(&self.endpoint)
            .region(aws_config::Region::new("us-east-1"))
            .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
                "test", "test", None, None, "tests",
            ))
            .load()
            .await
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ProxyState> {
        self.state.lock().expect("proxy lock")
    }
}

/// The operation a request names (`TransactWriteItems`, `SendMessageBatch`, …).
fn operation(headers: &HeaderMap) -> String {
    headers
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .and_then(|t| t.rsplit('.').next())
        .unwrap_or("?")
        .to_owned()
}

fn aws_error(status: StatusCode, kind: &str, extra: Value) -> Response {
    let mut body = json!({"__type": format!("com.amazonaws.dynamodb.v20120810#{kind}"), "message": format!("injected {kind}")});
    if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
        body.extend(extra.clone());
    }
    let mut response = (status, body.to_string()).into_response();
    let headers = response.headers_mut();
    headers.insert(
        "content-type",
        HeaderValue::from_static("application/x-amz-json-1.0"),
    );
    headers.insert(
        "x-amzn-query-error",
        HeaderValue::from_str(&format!("{kind};Sender")).unwrap_or(HeaderValue::from_static("x")),
    );
    response
}

async fn forward(
    state: &Arc<Mutex<ProxyState>>,
    method: axum::http::Method,
    path: &str,
    headers: &HeaderMap,
    body: Bytes,
) -> Response {
    let (http, upstream) = {
        let state = state.lock().expect("proxy lock");
        (state.http.clone(), state.upstream.clone())
    };
    let mut request = http.request(method, format!("{upstream}{path}")).body(body);
    for (name, value) in headers {
        if name != "host" && name != "content-length" {
            request = request.header(name, value);
        }
    }
    match request.send().await {
        Ok(answer) => {
            let status = answer.status();
            let headers = answer.headers().clone();
            let body = answer.bytes().await.unwrap_or_default();
            let mut response = (status, body).into_response();
            for (name, value) in &headers {
                if name != "content-length" && name != "transfer-encoding" && name != "connection" {
                    response.headers_mut().insert(name, value.clone());
                }
            }
            response
        }
        Err(_) => StatusCode::BAD_GATEWAY.into_response(),
    }
}

async fn proxy(State(state): State<Arc<Mutex<ProxyState>>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX)
        .await
        .unwrap_or_default();
    let op = operation(&parts.headers);
    let path = parts
        .uri
        .path_and_query()
        .map_or("/".to_owned(), |p| p.as_str().to_owned());
    let fault = {
        let mut state = state.lock().expect("proxy lock");
        let rules: Vec<Rule> = state
            .rules
            .iter()
            .filter(|r| r.operation == "*" || r.operation == op)
            .filter(|r| r.fault != Fault::TransactionConflict || op == "TransactWriteItems")
            .cloned()
            .collect();
        let mut chosen = None;
        for rule in rules {
            if state.rng.random_bool(rule.probability) {
                chosen = Some(rule.fault);
                break;
            }
        }
        if let Some(fault) = chosen {
            *state.injected.entry((op.clone(), fault)).or_insert(0) += 1;
        }
        chosen
    };
    match fault {
        None => forward(&state, parts.method, &path, &parts.headers, body).await,
        Some(Fault::Throttled) => {
            aws_error(StatusCode::BAD_REQUEST, "ThrottlingException", json!({}))
        }
        Some(Fault::ServerError) => aws_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalServerError",
            json!({}),
        ),
        Some(Fault::LostAfterApplied) => {
            let _applied = forward(&state, parts.method, &path, &parts.headers, body).await;
            aws_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "InternalServerError",
                json!({}),
            )
        }
        Some(Fault::TransactionConflict) => {
            let items = serde_json::from_slice::<Value>(&body)
                .ok()
                .and_then(|b| b["TransactItems"].as_array().map(Vec::len))
                .unwrap_or(1);
            let reasons: Vec<Value> = (0..items)
                .map(|i| {
                    if i == 0 {
                        json!({"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"})
                    } else {
                        json!({"Code": "None"})
                    }
                })
                .collect();
            aws_error(
                StatusCode::BAD_REQUEST,
                "TransactionCanceledException",
                json!({"CancellationReasons": reasons}),
            )
        }
    }
}
