//! The HTTP side of a test's app: the requests a test sends its router (creates, decisions,
//! reads, webhook deliveries, the trail page by page, review links) and the [`Reply`] it reads
//! back, checked for what every API response must have. Apart from the stack's start-up
//! (`lib.rs`, `stack.rs`) and the tables (`tables.rs`), so a suite's requests read in one place.

use countersign::Clock;
use countersign::webhook::WebhookSecret;
use serde_json::Value;

use crate::{DECIDER_A, KEY_A, TENANT_A, TOKEN_SECRET, TestApp, decision_body};

impl TestApp {
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
