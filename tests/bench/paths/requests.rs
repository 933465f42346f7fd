//! What a cell sends: the requests of each hot path as the router takes them (in-process, or
//! over loopback HTTP), the pending approvals made before the timed part, and the keys and
//! GitHub runs that keep one cell's requests apart from another's. Apart from what each
//! operation does with them (`operations.rs`).

use axum::body::Body;
use axum::http::Request;
use countersign::webhook::WebhookSecret;
use countersign_tests::{ACME_SECRET, ALICE, BOB, CAROL, KEY_A, deploy_body};
use serde_json::json;
use tower::ServiceExt;

use super::{Bench, GITHUB_API, JOINS_PER_ROUND, Mode, decider_key, requester_key};

impl Bench<'_> {
    pub(super) async fn send(&self, mode: Mode, request: Request<Body>) -> u16 {
        match mode {
            Mode::InProcess => self
                .router
                .clone()
                .oneshot(request)
                .await
                .expect("router")
                .status()
                .as_u16(),
            Mode::Loopback => {
                let (parts, body) = request.into_parts();
                let body = axum::body::to_bytes(body, usize::MAX).await.expect("body");
                let mut builder = self
                    .t
                    .http
                    .request(parts.method, self.t.url(&parts.uri.to_string()));
                for (name, value) in &parts.headers {
                    builder = builder.header(name, value);
                }
                builder
                    .body(body)
                    .send()
                    .await
                    .expect("loopback")
                    .status()
                    .as_u16()
            }
            Mode::Raw => unreachable!("raw operations do not go through HTTP"),
        }
    }

    pub(super) fn create_request(key: &str, body: &str) -> Request<Body> {
        Request::post("/approvals")
            .header("authorization", format!("Bearer {}", requester_key()))
            .header("content-type", "application/json")
            .header("idempotency-key", key)
            .body(Body::from(body.to_owned()))
            .expect("request")
    }

    pub(super) fn decide_request(id: &str, decision: &str, approver: &str) -> Request<Body> {
        Request::post(format!("/approvals/{id}/decision"))
            .header("authorization", format!("Bearer {}", decider_key()))
            .header("content-type", "application/json")
            .body(Body::from(
                json!({"decision": decision, "approver": approver}).to_string(),
            ))
            .expect("request")
    }

    pub(super) fn webhook_request(event_id: &str, body: &str, now: i64) -> Request<Body> {
        let signature =
            WebhookSecret::parse(ACME_SECRET)
                .expect("secret")
                .sign(event_id, now, body.as_bytes());
        Request::post("/webhooks/acme")
            .header("content-type", "application/json")
            .header("webhook-id", event_id)
            .header("webhook-timestamp", now.to_string())
            .header("webhook-signature", signature)
            .body(Body::from(body.to_owned()))
            .expect("request")
    }

    /// Pending approvals made through the API, outside the timed part.
    pub(super) async fn pending(&self, count: usize, tag: &str) -> Vec<String> {
        self.pending_with(count, tag, &deploy_body(1, &[ALICE, BOB]))
            .await
    }

    /// Pending 2-of-3 approvals (alice, bob, carol).
    pub(super) async fn pending_quorum(&self, count: usize, tag: &str) -> Vec<String> {
        let body = json!({
            "action": {"type": "deploy", "payload": {"service": "api", "build": 1}},
            "approvers": [ALICE, BOB, CAROL],
            "policy": {"rules": [{"name": "engineering", "approvers": [ALICE, BOB, CAROL], "min_approvals": 2}]},
            "context": {"summary": "Deploy api build 1 to prod"},
            "expires_in_seconds": 86_400
        });
        self.pending_with(count, tag, &body.to_string()).await
    }

    pub(super) async fn pending_with(&self, count: usize, tag: &str, body: &str) -> Vec<String> {
        let mut ids = Vec::with_capacity(count);
        let keys: Vec<String> = (0..count)
            .map(|i| format!("{}-{tag}-{i}", self.tag))
            .collect();
        for chunk in keys.chunks(16) {
            let replies =
                futures::future::join_all(chunk.iter().map(|key| self.t.create(KEY_A, key, body)))
                    .await;
            for reply in replies {
                assert_eq!(reply.status, 201);
                ids.push(reply.json()["id"].as_str().expect("id").to_owned());
            }
        }
        self.t.calls.take();
        ids
    }

    pub(super) fn key(&self, name: &str) -> String {
        format!("{}-{name}", self.tag)
    }

    /// A run of this cell's own (`n`: one per operation that opens a round; 0, the round joined).
    pub(super) fn run(&self, n: usize) -> u64 {
        let cell: u64 = self.tag.trim_start_matches("cell").parse().unwrap_or(0);
        cell * 1_000_000 + n as u64 + 1
    }

    /// The run whose round operation `i` joins.
    pub(super) fn join_run(&self, i: usize) -> u64 {
        self.run(900_000 + i / JOINS_PER_ROUND)
    }

    /// A signed `deployment_protection_rule` delivery of `run` on production.
    pub(super) fn github_request(&self, delivery: &str, run: u64) -> Request<Body> {
        let api = GITHUB_API
            .get()
            .map_or("https://api.github.com", String::as_str);
        let body = countersign_tests::github::deployment_event(
            api,
            run,
            countersign_tests::github::SOLO,
            countersign_tests::github::GH_DAVE,
        )
        .to_string();
        let mut request = Request::post("/github/events/tenant-a");
        for (name, value) in countersign_tests::github::github_headers(
            countersign_tests::github::GITHUB_WEBHOOK_SECRET,
            "deployment_protection_rule",
            delivery,
            &body,
        ) {
            request = request.header(name, value);
        }
        request.body(Body::from(body)).expect("request")
    }
}
