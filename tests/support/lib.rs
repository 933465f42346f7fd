//! Test support: a real AWS wire protocol (moto from PyPI, started serialized on a free port, or
//! whatever `AWS_ENDPOINT_URL` names), the real router served over loopback HTTP, fresh tables per
//! test, and a DynamoDB call counter installed as an SDK interceptor.

pub mod browser;
pub mod capacity;
pub mod chain;
pub mod fault_proxy;
pub mod fixtures;
pub mod github;
pub mod jobs;
pub mod local_aws;
pub mod local_runner;
pub mod meter;
pub mod receiver;
pub mod runtime_api;
pub mod slack;
mod stack;

pub use fixtures::*;
pub use meter::CallCounter;

/// `infra/template.yaml`, parsed.
pub fn template() -> serde_norway::Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../infra/template.yaml");
    let text = std::fs::read_to_string(path).expect("infra/template.yaml");
    serde_norway::from_str(&text).expect("the template is YAML")
}
pub use local_aws::{aws_endpoint, moto_resident_bytes, python, sdk_config, workspace_root};

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::{AttributeValue, Select};
use countersign::runner::{Deployment, Functions};
use countersign::webhook::WebhookSecret;
use countersign::{App, Clock};
use serde_json::Value;

/// The `Idempotency-Key` an execution of tenant A's approval `id`, created with `create_key`,
/// sends downstream: `{tenant}:{create key}:{approval id}`.
pub fn execute_key(create_key: &str, id: &str) -> String {
    format!("{TENANT_A}:{create_key}:{id}")
}

/// One test's Countersign: its own tables, the real router on a loopback port.
pub struct TestApp {
    pub base: String,
    pub http: reqwest::Client,
    /// The deployer's app: every variable, the administrator's credentials. The test's own
    /// reads and writes of the store go through it; the routes, jobs and sweeps never do.
    pub app: Arc<App>,
    /// Each function as deployed: the routes, the pollers, the jobs and the sweeps.
    pub functions: Functions,
    /// The app's DynamoDB calls.
    pub calls: CallCounter,
    /// The app's DynamoDB and SQS requests with their bodies, once started (see [`meter`]).
    pub meter: meter::Meter,
    /// An uncounted client for the test's own inspection of the tables.
    pub dynamodb: aws_sdk_dynamodb::Client,
    pub clock: Clock,
    pub sdk: aws_config::SdkConfig,
    /// Set by [`TestApp::start_jobs`]: the queues, the downstream and the running pollers.
    pub jobs: Option<jobs::JobsEnv>,
    /// Every request the app received: (method, path).
    pub requests: RequestLog,
    /// The EMF documents the app wrote (to standard output, in Lambda and the runner).
    pub metrics: MetricLines,
    /// The app's Secrets Manager calls.
    pub secret_calls: CallCounter,
    /// The secrets [`TestApp::start_with_secrets`] made, by variable.
    pub secret_arns: HashMap<String, String>,
}

/// EMF documents, one JSON text each, as written.
#[derive(Clone, Default)]
pub struct MetricLines(pub Arc<Mutex<Vec<String>>>);

impl MetricLines {
    /// The documents written since the last take.
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().expect("metrics lock"))
    }
}

impl TestApp {
    pub async fn start() -> Self {
        Self::start_with(&[]).await
    }

    /// Starts with the test defaults plus `overrides` (variable name → value).
    pub async fn start_with(overrides: &[(&str, &str)]) -> Self {
        let app = Self::build(overrides).await;
        app.app
            .store
            .ensure_tables()
            .await
            .expect("create the test tables");
        app.calls.take(); // count the app's requests, not the set-up
        app
    }

    /// Like [`TestApp::start_with`], without creating the tables.
    pub async fn build(overrides: &[(&str, &str)]) -> Self {
        Self::build_via(overrides, None).await
    }

    /// [`TestApp::build`], with the app's AWS clients (router and runner) configured by `via`
    /// (a fault-injecting proxy's endpoint) instead of the local AWS's; the test's own clients
    /// still reach the local AWS directly.
    pub async fn build_via(overrides: &[(&str, &str)], via: Option<aws_config::SdkConfig>) -> Self {
        Self::build_inner(overrides, via, &[]).await
    }

    /// [`TestApp::start_with`], with each of `secrets` (variable → value) put in a Secrets
    /// Manager secret of its own and given as `<NAME>_SECRET_ARN` instead of the variable. The
    /// secrets' ARNs are in [`TestApp::secret_arns`].
    pub async fn start_with_secrets(overrides: &[(&str, &str)], secrets: &[(&str, &str)]) -> Self {
        let app = Self::build_inner(overrides, None, secrets).await;
        app.app
            .store
            .ensure_tables()
            .await
            .expect("create the test tables");
        app.calls.take();
        app
    }

    /// A Secrets Manager client of the local AWS (uncounted).
    pub fn secretsmanager(&self) -> aws_sdk_secretsmanager::Client {
        aws_sdk_secretsmanager::Client::new(&self.sdk)
    }

    /// Puts a new value in the secret of `variable` (as `aws secretsmanager put-secret-value`).
    pub async fn rotate_secret(&self, variable: &str, value: &str) {
        self.secretsmanager()
            .put_secret_value()
            .secret_id(&self.secret_arns[variable])
            .secret_string(value)
            .send()
            .await
            .expect("put the secret's new value");
    }

    async fn build_inner(
        overrides: &[(&str, &str)],
        via: Option<aws_config::SdkConfig>,
        secrets: &[(&str, &str)],
    ) -> Self {
        Self::build_deployed(overrides, via, secrets, Deployment::default()).await
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// `POST /approvals` as `api_key` with `Idempotency-Key: key` and a JSON body given as text
    /// (so tests control its exact bytes).
    pub async fn create(&self, api_key: &str, key: &str, body: &str) -> Reply {
        self.send(
            self.http
                .post(self.url("/approvals"))
                .bearer_auth(api_key)
                .header("content-type", "application/json")
                .header("idempotency-key", key)
                .body(body.to_owned()),
        )
        .await
    }

    /// Creates an approval and returns its id.
    pub async fn create_ok(&self, api_key: &str, key: &str, body: &str) -> String {
        let reply = self.create(api_key, key, body).await;
        assert_eq!(reply.status, 201, "create failed: {}", reply.text());
        reply.json()["id"].as_str().expect("id").to_owned()
    }

    pub async fn decide(&self, api_key: &str, id: &str, body: Value) -> Reply {
        self.send(
            self.http
                .post(self.url(&format!("/approvals/{id}/decision")))
                .bearer_auth(api_key)
                .json(&body),
        )
        .await
    }

    /// Tenant A's decider approves `id` for `approver`; anything but a 200 fails the test.
    /// Returns the approval as answered.
    pub async fn approve(&self, id: &str, approver: &str) -> Value {
        let reply = self
            .decide(DECIDER_A, id, decision_body("approve", approver))
            .await;
        assert_eq!(reply.status, 200, "{}", reply.text());
        reply.json()
    }

    /// Creates `body` as tenant A's requester under `key` and approves it for `approver` (see
    /// [`TestApp::approve`]); returns its id.
    pub async fn create_approved(&self, key: &str, body: &str, approver: &str) -> String {
        let id = self.create_ok(KEY_A, key, body).await;
        self.approve(&id, approver).await;
        id
    }

    /// `POST /approvals/{id}/execution/retry` as tenant A's key, with `Idempotency-Key: key`
    /// when one is given.
    pub fn retry_request(&self, id: &str, key: Option<&str>) -> reqwest::RequestBuilder {
        self.retry_request_as(KEY_A, id, key)
    }

    /// [`TestApp::retry_request`] as `api_key`.
    pub fn retry_request_as(
        &self,
        api_key: &str,
        id: &str,
        key: Option<&str>,
    ) -> reqwest::RequestBuilder {
        let request = self
            .http
            .post(self.url(&format!("/approvals/{id}/execution/retry")))
            .bearer_auth(api_key);
        match key {
            Some(key) => request.header("idempotency-key", key),
            None => request,
        }
    }

    pub async fn get(&self, api_key: &str, id: &str) -> Reply {
        self.get_path(api_key, &format!("/approvals/{id}")).await
    }

    /// `GET path` as `api_key`, with [`TestApp::send`]'s checks.
    pub async fn get_path(&self, api_key: &str, path: &str) -> Reply {
        self.send(self.http.get(self.url(path)).bearer_auth(api_key))
            .await
    }

    /// `POST /approvals/{id}/cancel` as `api_key`, with `reason`.
    pub async fn cancel(&self, api_key: &str, id: &str, reason: &str) -> Reply {
        let path = format!("/approvals/{id}/cancel");
        self.post_path(api_key, &path, serde_json::json!({ "reason": reason }))
            .await
    }

    /// `POST {path}` as `api_key` with a JSON body.
    pub async fn post_path(&self, api_key: &str, path: &str, body: Value) -> Reply {
        self.send(
            self.http
                .post(self.url(path))
                .bearer_auth(api_key)
                .json(&body),
        )
        .await
    }

    /// Sends an API request and checks what every API response must have: no 5xx, an
    /// `x-request-id`.
    pub async fn send(&self, request: reqwest::RequestBuilder) -> Reply {
        let reply = self.send_any(request).await;
        assert!(
            reply.status < 500,
            "server error {}: {}",
            reply.status,
            reply.text()
        );
        reply
    }

    /// Sends a request whose contract may be a 5xx (health); still checks the `x-request-id`.
    pub async fn send_any(&self, request: reqwest::RequestBuilder) -> Reply {
        let response = request.send().await.expect("HTTP request");
        let reply = Reply {
            status: response.status().as_u16(),
            headers: response.headers().clone(),
            body: response.bytes().await.expect("body").to_vec(),
        };
        assert!(
            reply.headers.contains_key("x-request-id"),
            "no x-request-id"
        );
        reply
    }

    /// Delivers a webhook with explicit headers (`None` leaves a header out).
    pub async fn deliver_raw(
        &self,
        source: &str,
        id: Option<&str>,
        timestamp: Option<&str>,
        signature: Option<&str>,
        body: &str,
    ) -> Reply {
        let mut request = self
            .http
            .post(self.url(&format!("/webhooks/{source}")))
            .header("content-type", "application/json")
            .body(body.to_owned());
        for (name, value) in [
            ("webhook-id", id),
            ("webhook-timestamp", timestamp),
            ("webhook-signature", signature),
        ] {
            if let Some(value) = value {
                request = request.header(name, value);
            }
        }
        self.send(request).await
    }

    /// Delivers `body` as event `id`, signed with `secret` at the app's current time.
    pub async fn deliver(&self, source: &str, secret: &str, id: &str, body: &str) -> Reply {
        self.deliver_at(source, secret, id, body, self.clock.now())
            .await
    }

    /// Delivers `body` as event `id`, signed with `secret` at `timestamp`.
    pub async fn deliver_at(
        &self,
        source: &str,
        secret: &str,
        id: &str,
        body: &str,
        timestamp: i64,
    ) -> Reply {
        let signature =
            WebhookSecret::parse(secret)
                .expect("test secret")
                .sign(id, timestamp, body.as_bytes());
        self.deliver_raw(
            source,
            Some(id),
            Some(&timestamp.to_string()),
            Some(&signature),
            body,
        )
        .await
    }

    /// The inbox item of `source`'s event `id`.
    pub async fn inbox_item(
        &self,
        source: &str,
        id: &str,
    ) -> Option<HashMap<String, AttributeValue>> {
        self.item(
            &self.app.config.tables.webhook_inbox,
            &format!("{source}#{id}"),
        )
        .await
    }

    /// Items in a table, counted by a strongly consistent scan.
    pub async fn count_items(&self, table: &str) -> usize {
        let mut total = 0;
        let mut start = None;
        loop {
            let page = self
                .dynamodb
                .scan()
                .table_name(table)
                .select(Select::Count)
                .consistent_read(true)
                .set_exclusive_start_key(start)
                .send()
                .await
                .expect("scan");
            total += page.count() as usize;
            match page.last_evaluated_key() {
                Some(key) => start = Some(key.clone()),
                None => return total,
            }
        }
    }

    /// An approval item this version cannot read (no `execution`, no `approvers`), as a botched
    /// migration or a later version could leave one, due since 1000 s ago as `due_kind`.
    pub async fn put_unreadable_approval(&self, id: &str, due_kind: &str, status: &str) {
        let now = self.clock.now();
        self.dynamodb
            .put_item()
            .table_name(&self.app.config.tables.approvals)
            .item("pk", AttributeValue::S(format!("tenant-a#{id}")))
            .item("tenant", AttributeValue::S("tenant-a".into()))
            .item("id", AttributeValue::S(id.into()))
            .item("status", AttributeValue::S(status.into()))
            .item("expires_at", AttributeValue::N((now - 10).to_string()))
            .item("due_kind", AttributeValue::S(due_kind.into()))
            .item("due_at", AttributeValue::N((now - 1_000).to_string()))
            .send()
            .await
            .expect("the unreadable item");
    }

    pub async fn approval_count(&self) -> usize {
        self.count_items(&self.app.config.tables.approvals).await
    }

    /// Every record of the test's approvals stream, from its start.
    pub async fn whole_stream(&self) -> Vec<countersign::jobs::StreamChange> {
        let streams = aws_sdk_dynamodbstreams::Client::new(&self.sdk);
        let table = self
            .dynamodb
            .describe_table()
            .table_name(&self.app.config.tables.approvals)
            .send()
            .await
            .expect("describe table");
        let arn = table
            .table()
            .and_then(|t| t.latest_stream_arn())
            .expect("a stream")
            .to_owned();
        let stream = streams
            .describe_stream()
            .stream_arn(&arn)
            .send()
            .await
            .expect("describe stream");
        let mut changes = Vec::new();
        for shard in stream
            .stream_description()
            .map(|d| d.shards())
            .unwrap_or_default()
        {
            let mut iterator = streams
                .get_shard_iterator()
                .stream_arn(&arn)
                .shard_id(shard.shard_id().expect("shard id"))
                .shard_iterator_type(aws_sdk_dynamodbstreams::types::ShardIteratorType::TrimHorizon)
                .send()
                .await
                .expect("iterator")
                .shard_iterator
                .expect("an iterator");
            loop {
                let records = streams
                    .get_records()
                    .shard_iterator(&iterator)
                    .send()
                    .await
                    .expect("records");
                if records.records().is_empty() {
                    break;
                }
                changes.extend(
                    records
                        .records()
                        .iter()
                        .map(countersign::jobs::StreamChange::from_streams),
                );
                match records.next_shard_iterator() {
                    Some(next) => iterator = next.to_owned(),
                    None => break,
                }
            }
        }
        changes
    }

    /// Tenant A's approval `id`'s item, attribute by attribute, read with the uncounted client.
    pub async fn approval_item(&self, id: &str) -> HashMap<String, AttributeValue> {
        self.item(
            &self.app.config.tables.approvals,
            &format!("{TENANT_A}#{id}"),
        )
        .await
        .expect("the approval")
    }

    /// Tenant A's approval `id` as stored, read with the uncounted client.
    pub async fn stored_approval(&self, id: &str) -> countersign::domain::Approval {
        let item = self.approval_item(id).await;
        countersign::store::items_to_approval(&item).expect("an approval")
    }

    /// Every event of the approval's trail as `api_key` reads it, page by page (`limit` per
    /// page).
    pub async fn trail(&self, api_key: &str, id: &str, limit: usize) -> Vec<Value> {
        let mut events = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut url = self.url(&format!("/approvals/{id}/events?limit={limit}"));
            if let Some(c) = &cursor {
                url.push_str(&format!("&cursor={c}"));
            }
            let reply = self.send(self.http.get(url).bearer_auth(api_key)).await;
            assert_eq!(reply.status, 200, "{}", reply.text());
            let page = reply.json();
            let items = page["events"].as_array().expect("events").clone();
            assert!(items.len() <= limit);
            events.extend(items);
            match page["next_cursor"].as_str() {
                Some(next) => cursor = Some(next.to_owned()),
                None => return events,
            }
        }
    }

    /// An item as stored, by its `pk`.
    pub async fn item(&self, table: &str, pk: &str) -> Option<HashMap<String, AttributeValue>> {
        self.dynamodb
            .get_item()
            .table_name(table)
            .key("pk", AttributeValue::S(pk.to_owned()))
            .consistent_read(true)
            .send()
            .await
            .expect("get item")
            .item
    }
}

/// The requests an app received, for tests that count them (a browser's POSTs).
#[derive(Debug, Clone, Default)]
pub struct RequestLog(Arc<Mutex<Vec<(String, String)>>>);

impl RequestLog {
    fn record(&self, method: &str, path: &str) {
        self.0
            .lock()
            .expect("request log")
            .push((method.to_owned(), path.to_owned()));
    }

    /// How many `method` requests reached `path`.
    pub fn count(&self, method: &str, path: &str) -> usize {
        self.0
            .lock()
            .expect("request log")
            .iter()
            .filter(|(m, p)| m == method && p == path)
            .count()
    }

    /// How many `method` requests reached a path ending with `suffix`.
    pub fn count_ending(&self, method: &str, suffix: &str) -> usize {
        self.0
            .lock()
            .expect("request log")
            .iter()
            .filter(|(m, p)| m == method && p.ends_with(suffix))
            .count()
    }
}

impl TestApp {
    /// The review link the notifier would send `approver` for approval `id` of tenant A.
    pub fn review_link(&self, id: &str, approver: &str) -> String {
        self.review_link_for(TENANT_A, id, approver)
    }

    pub fn review_link_for(&self, tenant: &str, id: &str, approver: &str) -> String {
        format!(
            "{}/approvals/{id}/review?token={}",
            self.base,
            self.review_token(tenant, id, approver)
        )
    }

    pub fn review_token(&self, tenant: &str, id: &str, approver: &str) -> String {
        let secret = countersign::review_token::TokenSecret::parse(TOKEN_SECRET).expect("secret");
        let id = countersign::domain::ApprovalId::parse(id).expect("approval id");
        let tenant = countersign::domain::TenantId::parse(tenant).expect("tenant");
        let approver = countersign::domain::Approver::parse(approver).expect("approver");
        // The notifier mints links that expire with the approval; tests use a day.
        secret.mint(&tenant, &id, &approver, self.clock.now() + 86_400)
    }
}

/// A response, read whole.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn replayed(&self) -> bool {
        self.headers
            .get("idempotent-replayed")
            .is_some_and(|v| v == "true")
    }

    /// The status and the problem+json `code` (see [`Reply::code`]), to compare at once.
    pub fn problem(&self) -> (u16, String) {
        (self.status, self.code())
    }

    /// Fails the test unless the reply is the problem `code` with `status` (its body shown).
    #[track_caller]
    pub fn assert_problem(&self, status: u16, code: &str) {
        assert_eq!(self.problem(), (status, code.to_owned()), "{}", self.text());
    }

    /// The problem+json `code`, checking the content type on the way.
    pub fn code(&self) -> String {
        assert_eq!(
            self.headers
                .get("content-type")
                .and_then(|v| v.to_str().ok()),
            Some("application/problem+json"),
            "not a problem: {}",
            self.text()
        );
        self.json()["code"].as_str().expect("code").to_owned()
    }
}

/// A Standard Webhooks delivery of `body` as event `event_id` to `url`, signed now with `secret`
/// (a redelivery is the same call again: same id, a fresh timestamp and signature).
pub fn signed_delivery(
    http: &reqwest::Client,
    url: &str,
    secret: &WebhookSecret,
    event_id: &str,
    body: &str,
) -> reqwest::RequestBuilder {
    let now = Clock::system().now();
    http.post(url)
        .header("content-type", "application/json")
        .header("webhook-id", event_id)
        .header("webhook-timestamp", now.to_string())
        .header(
            "webhook-signature",
            secret.sign(event_id, now, body.as_bytes()),
        )
        .body(body.to_owned())
}

/// The events' types, in order.
pub fn event_types(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["type"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The events of type `kind`, in order.
pub fn events_of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

/// A string attribute of a stored item.
pub fn attr_s<'a>(item: &'a HashMap<String, AttributeValue>, name: &str) -> &'a str {
    item.get(name)
        .and_then(|v| v.as_s().ok())
        .unwrap_or_else(|| panic!("no string attribute {name}"))
}

/// Waits until `done` holds (polling every 100 ms), or fails the test with `what` after 30 s.
pub async fn eventually<F, Fut>(what: &str, mut done: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done().await {
        assert!(Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
