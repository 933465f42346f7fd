//! The hot paths: create (first, replay), decide (winner, loser), webhook (first, duplicate).

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::{
    AttributeValue, Put, ReturnValue, ReturnValuesOnConditionCheckFailure, TransactWriteItem,
    Update,
};
use axum::body::Body;
use axum::http::Request;
use countersign::webhook::WebhookSecret;
use countersign_tests::{ACME_SECRET, KEY_A, TestApp, decided_event, deploy_body};
use serde_json::json;
use std::collections::HashMap;
use tower::ServiceExt;

use crate::{Stats, drive};

pub struct Ratios {
    pub create: f64,
    pub decide: f64,
    pub webhook: f64,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Raw,
    InProcess,
    Loopback,
}

const MODES: [Mode; 3] = [Mode::Raw, Mode::InProcess, Mode::Loopback];
const CONCURRENCY: [usize; 3] = [1, 8, 32];
const ALICE: &str = "alice@example.com";

struct Bench {
    t: TestApp,
    raw: Client,
    router: axum::Router,
    ops: usize,
}

fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

fn n(v: impl ToString) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

fn names(pairs: &[&str]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|n| (format!("#{n}"), (*n).to_owned()))
        .collect()
}

impl Bench {
    async fn send(&self, mode: Mode, request: Request<Body>) -> u16 {
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

    fn create_request(key: &str, body: &str) -> Request<Body> {
        Request::post("/approvals")
            .header("authorization", format!("Bearer {KEY_A}"))
            .header("content-type", "application/json")
            .header("idempotency-key", key)
            .body(Body::from(body.to_owned()))
            .expect("request")
    }

    fn decide_request(id: &str, decision: &str, approver: &str) -> Request<Body> {
        Request::post(format!("/approvals/{id}/decision"))
            .header("authorization", format!("Bearer {KEY_A}"))
            .header("content-type", "application/json")
            .body(Body::from(
                json!({"decision": decision, "approver": approver}).to_string(),
            ))
            .expect("request")
    }

    fn webhook_request(event_id: &str, body: &str, now: i64) -> Request<Body> {
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
    async fn pending(&self, count: usize, tag: &str) -> Vec<String> {
        let body = deploy_body(1, &[ALICE, "bob@example.com"]);
        let mut ids = Vec::with_capacity(count);
        let keys: Vec<String> = (0..count).map(|i| format!("{tag}-{i}")).collect();
        for chunk in keys.chunks(16) {
            let replies =
                futures::future::join_all(chunk.iter().map(|key| self.t.create(KEY_A, key, &body)))
                    .await;
            for reply in replies {
                assert_eq!(reply.status, 201);
                ids.push(reply.json()["id"].as_str().expect("id").to_owned());
            }
        }
        self.t.calls.take();
        ids
    }

    // ---- the raw operations: the same DynamoDB requests, built by hand, no Countersign code.

    fn raw_approval_item(&self, id: &str, key: &str, now: i64) -> HashMap<String, AttributeValue> {
        HashMap::from([
            ("pk".to_owned(), s(format!("tenant-a#{id}"))),
            ("tenant".to_owned(), s("tenant-a")),
            ("id".to_owned(), s(id)),
            ("status".to_owned(), s("pending")),
            ("action_type".to_owned(), s("deploy")),
            ("payload".to_owned(), s(r#"{"service":"api","build":1}"#)),
            (
                "context".to_owned(),
                s(r#"{"summary":"Deploy api build 1 to prod","requested_by":"ci"}"#),
            ),
            (
                "approvers".to_owned(),
                AttributeValue::L(vec![s(ALICE), s("bob@example.com")]),
            ),
            ("idempotency_key".to_owned(), s(key)),
            ("created_at".to_owned(), n(now)),
            ("expires_at".to_owned(), n(now + 86_400)),
            (
                "execution".to_owned(),
                AttributeValue::M(HashMap::from([
                    ("status".to_owned(), s("not_started")),
                    ("attempts".to_owned(), n(0)),
                    ("updated_at".to_owned(), n(now)),
                    ("generation".to_owned(), n(0)),
                ])),
            ),
        ])
    }

    async fn raw_create(&self, key: &str, now: i64) {
        let id = format!("apr_{}", ulid::Ulid::new());
        let body = vec![b'x'; 420];
        let claim = Put::builder()
            .table_name(&self.t.app.config.tables.idempotency_keys)
            .item("pk", s(format!("tenant-a#{key}")))
            .item("fingerprint", s("0".repeat(64)))
            .item("approval_id", s(&id))
            .item("response_status", n(201))
            .item("response_body", AttributeValue::B(Blob::new(body)))
            .item("created_at", n(now))
            .item("expires_at", n(now + 86_400))
            .condition_expression("attribute_not_exists(#pk) OR #expires_at < :now")
            .set_expression_attribute_names(Some(names(&["pk", "expires_at"])))
            .expression_attribute_values(":now", n(now))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .expect("put");
        let approval = Put::builder()
            .table_name(&self.t.app.config.tables.approvals)
            .set_item(Some(self.raw_approval_item(&id, key, now)))
            .condition_expression("attribute_not_exists(#pk)")
            .set_expression_attribute_names(Some(names(&["pk"])))
            .build()
            .expect("put");
        let _ = self
            .raw
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().put(claim).build())
            .transact_items(TransactWriteItem::builder().put(approval).build())
            .send()
            .await;
    }

    fn raw_decide_update(
        approver: &str,
        now: i64,
    ) -> (String, String, HashMap<String, AttributeValue>) {
        let update = "SET #status = :outcome, #decision = :decision, #execution.#status = :queued, #execution.#updated_at = :now";
        let condition =
            "#status = :pending AND #expires_at > :now AND contains(#approvers, :approver)";
        let values = HashMap::from([
            (":outcome".to_owned(), s("approved")),
            (
                ":decision".to_owned(),
                AttributeValue::M(HashMap::from([
                    ("outcome".to_owned(), s("approved")),
                    ("approver".to_owned(), s(approver)),
                    ("decided_at".to_owned(), n(now)),
                    ("channel".to_owned(), s("api")),
                ])),
            ),
            (":queued".to_owned(), s("queued")),
            (":pending".to_owned(), s("pending")),
            (":now".to_owned(), n(now)),
            (":approver".to_owned(), s(approver)),
        ]);
        (update.to_owned(), condition.to_owned(), values)
    }

    async fn raw_decide(&self, id: &str, now: i64) {
        let (update, condition, values) = Self::raw_decide_update(ALICE, now);
        let _ = self
            .raw
            .update_item()
            .table_name(&self.t.app.config.tables.approvals)
            .key("pk", s(format!("tenant-a#{id}")))
            .update_expression(update)
            .condition_expression(condition)
            .set_expression_attribute_names(Some(names(&[
                "status",
                "decision",
                "execution",
                "updated_at",
                "expires_at",
                "approvers",
            ])))
            .set_expression_attribute_values(Some(values))
            .return_values(ReturnValue::AllNew)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
    }

    async fn raw_webhook(&self, id: &str, event_id: &str, now: i64) {
        let inbox = Put::builder()
            .table_name(&self.t.app.config.tables.webhook_inbox)
            .item("pk", s(format!("acme#{event_id}")))
            .item("source", s("acme"))
            .item("event_id", s(event_id))
            .item("event_type", s("approval.decided"))
            .item("approval_id", s(id))
            .item("outcome", s("applied"))
            .item("received_at", n(now))
            .item("webhook_timestamp", n(now))
            .item("request_id", s("req_bench"))
            .item("body_sha256", s("0".repeat(64)))
            .item("expires_at", n(now + 2_592_000))
            .condition_expression("attribute_not_exists(#pk)")
            .set_expression_attribute_names(Some(names(&["pk"])))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .expect("put");
        let (update, condition, values) = Self::raw_decide_update(ALICE, now);
        let decide = Update::builder()
            .table_name(&self.t.app.config.tables.approvals)
            .key("pk", s(format!("tenant-a#{id}")))
            .update_expression(update)
            .condition_expression(condition)
            .set_expression_attribute_names(Some(names(&[
                "status",
                "decision",
                "execution",
                "updated_at",
                "expires_at",
                "approvers",
            ])))
            .set_expression_attribute_values(Some(values))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .expect("update");
        let _ = self
            .raw
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().put(inbox).build())
            .transact_items(TransactWriteItem::builder().update(decide).build())
            .send()
            .await;
    }
}

struct Row {
    operation: &'static str,
    concurrency: usize,
    mode: Mode,
    stats: Stats,
    calls_per_op: f64,
}

pub async fn run(ops: usize) -> Ratios {
    let t = TestApp::start().await;
    let router = countersign::http::router(t.app.clone());
    let raw = Client::new(&countersign_tests::sdk_config().await);
    let bench = Bench {
        t,
        raw,
        router,
        ops,
    };
    let mut rows = Vec::new();
    let b = &bench;
    let body = deploy_body(1, &[ALICE, "bob@example.com"]);
    let now = b.t.clock.now();

    // Fixtures for the "second" variants: an existing key, a decided approval, a processed event.
    let replay_key = "bench-replay";
    assert_eq!(b.t.create(KEY_A, replay_key, &body).await.status, 201);
    b.raw_create("bench-raw-replay", now).await;
    let decided = b.pending(1, "bench-decided").await.remove(0);
    assert_eq!(
        b.t.decide(
            KEY_A,
            &decided,
            json!({"decision": "approve", "approver": ALICE})
        )
        .await
        .status,
        200
    );
    let duplicate_target = b.pending(1, "bench-dup").await.remove(0);
    let duplicate_body = decided_event(&duplicate_target, "approve", ALICE);
    assert_eq!(
        b.send(
            Mode::InProcess,
            Bench::webhook_request("msg_bench_dup", &duplicate_body, now)
        )
        .await,
        200
    );
    b.raw_webhook(&duplicate_target, "msg_bench_raw_dup", now)
        .await;
    b.t.calls.take();

    for concurrency in CONCURRENCY {
        for mode in MODES {
            let tag = format!("{mode:?}-{concurrency}");

            // create, first
            let stats = drive(ops, concurrency, |i| {
                let key = format!("bench-create-{tag}-{i}");
                let body = body.clone();
                async move {
                    match mode {
                        Mode::Raw => b.raw_create(&key, now).await,
                        _ => {
                            assert_eq!(b.send(mode, Bench::create_request(&key, &body)).await, 201)
                        }
                    }
                }
            })
            .await;
            rows.push(row(b, "create first", concurrency, mode, stats));

            // create, replay
            let stats = drive(ops, concurrency, |_| {
                let body = body.clone();
                async move {
                    match mode {
                        Mode::Raw => b.raw_create("bench-raw-replay", now).await,
                        _ => assert_eq!(
                            b.send(mode, Bench::create_request(replay_key, &body)).await,
                            201
                        ),
                    }
                }
            })
            .await;
            rows.push(row(b, "create replay", concurrency, mode, stats));

            // decide, winner (a fresh pending approval per operation)
            let pending = b.pending(ops, &format!("bench-win-{tag}")).await;
            let stats = drive(ops, concurrency, |i| {
                let id = pending[i].clone();
                async move {
                    match mode {
                        Mode::Raw => b.raw_decide(&id, now).await,
                        _ => assert_eq!(
                            b.send(mode, Bench::decide_request(&id, "approve", ALICE))
                                .await,
                            200
                        ),
                    }
                }
            })
            .await;
            rows.push(row(b, "decide winner", concurrency, mode, stats));

            // decide, loser (already decided)
            let stats = drive(ops, concurrency, |_| {
                let id = decided.clone();
                async move {
                    match mode {
                        Mode::Raw => b.raw_decide(&id, now).await,
                        _ => assert_eq!(
                            b.send(
                                mode,
                                Bench::decide_request(&id, "reject", "bob@example.com")
                            )
                            .await,
                            409
                        ),
                    }
                }
            })
            .await;
            rows.push(row(b, "decide loser", concurrency, mode, stats));

            // webhook, first delivery (a fresh pending approval per operation)
            let pending = b.pending(ops, &format!("bench-hook-{tag}")).await;
            let stats = drive(ops, concurrency, |i| {
                let id = pending[i].clone();
                let event_id = format!("msg_{tag}_{i}");
                async move {
                    match mode {
                        Mode::Raw => b.raw_webhook(&id, &event_id, now).await,
                        _ => {
                            let event = decided_event(&id, "approve", ALICE);
                            assert_eq!(
                                b.send(
                                    mode,
                                    Bench::webhook_request(&event_id, &event, b.t.clock.now())
                                )
                                .await,
                                200
                            )
                        }
                    }
                }
            })
            .await;
            rows.push(row(b, "webhook first", concurrency, mode, stats));

            // webhook, duplicate
            let stats = drive(ops, concurrency, |_| {
                let event = duplicate_body.clone();
                let duplicate_target = &duplicate_target;
                async move {
                    match mode {
                        Mode::Raw => {
                            b.raw_webhook(duplicate_target, "msg_bench_raw_dup", now)
                                .await
                        }
                        _ => assert_eq!(
                            b.send(
                                mode,
                                Bench::webhook_request("msg_bench_dup", &event, b.t.clock.now())
                            )
                            .await,
                            200
                        ),
                    }
                }
            })
            .await;
            rows.push(row(b, "webhook duplicate", concurrency, mode, stats));
        }
    }

    print_table(&rows);
    let ratio = |ops: [&str; 2]| {
        let at = |op: &str, mode: Mode| {
            rows.iter()
                .find(|r| r.operation == op && r.concurrency == 8 && r.mode == mode)
                .map_or(0.0, |r| r.stats.ops_per_s)
        };
        ops.iter()
            .map(|op| at(op, Mode::InProcess) / at(op, Mode::Raw))
            .sum::<f64>()
            / 2.0
    };
    Ratios {
        create: ratio(["create first", "create replay"]),
        decide: ratio(["decide winner", "decide loser"]),
        webhook: ratio(["webhook first", "webhook duplicate"]),
    }
}

fn row(b: &Bench, operation: &'static str, concurrency: usize, mode: Mode, stats: Stats) -> Row {
    let calls = b.t.calls.take().len();
    Row {
        operation,
        concurrency,
        mode,
        stats,
        calls_per_op: if mode == Mode::Raw {
            1.0
        } else {
            calls as f64 / b.ops as f64
        },
    }
}

fn print_table(rows: &[Row]) {
    println!(
        "\nHot paths ({} operations per row; raw = the same DynamoDB requests through the SDK alone)",
        rows.len()
    );
    println!(
        "{:<18} {:>4}  {:<10} {:>9} {:>9} {:>9} {:>13}",
        "operation", "conc", "path", "ops/s", "p50 ms", "p99 ms", "DynamoDB/op"
    );
    for r in rows {
        println!(
            "{:<18} {:>4}  {:<10} {:>9.0} {:>9.2} {:>9.2} {:>13.2}",
            r.operation,
            r.concurrency,
            match r.mode {
                Mode::Raw => "raw",
                Mode::InProcess => "in-process",
                Mode::Loopback => "loopback",
            },
            r.stats.ops_per_s,
            r.stats.p50.as_secs_f64() * 1000.0,
            r.stats.p99.as_secs_f64() * 1000.0,
            r.calls_per_op
        );
    }
}
