//! The hot paths: create (first, replay), decide (winner, loser), quorum votes (2-of-3: a
//! counted vote, and the vote that completes it), webhook (first, duplicate).

use aws_sdk_dynamodb::Client;
use axum::body::Body;
use axum::http::Request;
use countersign::webhook::WebhookSecret;
use countersign_tests::{
    ACME_SECRET, ALICE, BOB, CAROL, DECIDER_A, KEY_A, TestApp, decided_event, deploy_body,
};
use serde_json::json;
use std::collections::HashMap;
use tower::ServiceExt;

use crate::{Stats, drive};

mod raw;

use raw::{n, s};

pub struct Ratios {
    pub create: f64,
    pub decide: f64,
    /// vote (2-of-3), the counted vote.
    pub vote: f64,
    pub vote_completing: f64,
    pub webhook: f64,
    /// A GitHub deployment's event: one that opens a round, one that joins it.
    pub github: f64,
    /// create first's in-process ops/s on tables holding 20,000 approvals ÷ on empty tables.
    pub table_size: f64,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Raw,
    InProcess,
    Loopback,
}

const MODES: [Mode; 3] = [Mode::Raw, Mode::InProcess, Mode::Loopback];
const CONCURRENCY: [usize; 3] = [1, 8, 32];
/// `--only TEXT`: only the operations whose name holds TEXT (for a profile of one path).
fn only() -> Option<&'static str> {
    static ONLY: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    ONLY.get_or_init(|| {
        let args: Vec<String> = std::env::args().collect();
        args.iter()
            .position(|a| a == "--only")
            .and_then(|i| args.get(i + 1).cloned())
    })
    .as_deref()
}

/// Rounds of each row; the median round is reported.
const ROUNDS: usize = 3;

/// Deliveries that join one round in the benchmark: an approval names at most 100.
const JOINS_PER_ROUND: usize = 50;

/// The fake GitHub's URL: the tenant's `api_url`, which callback URLs must be on.
static GITHUB_API: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// The keys the timed requests present: table keys (the requester's and the decider's), warm
/// in the app's cache after their first request, as a deployment's are.
static TABLE_KEYS: std::sync::OnceLock<(String, String)> = std::sync::OnceLock::new();

fn requester_key() -> &'static str {
    TABLE_KEYS
        .get()
        .map_or(KEY_A, |(requester, _)| requester.as_str())
}

fn decider_key() -> &'static str {
    TABLE_KEYS
        .get()
        .map_or(DECIDER_A, |(_, decider)| decider.as_str())
}

/// One cell's view of the shared store: `tag` keeps its keys apart from every other cell's.
struct Bench<'a> {
    t: &'a TestApp,
    raw: &'a Client,
    router: axum::Router,
    ops: usize,
    tag: String,
}

impl Bench<'_> {
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
            .header("authorization", format!("Bearer {}", requester_key()))
            .header("content-type", "application/json")
            .header("idempotency-key", key)
            .body(Body::from(body.to_owned()))
            .expect("request")
    }

    fn decide_request(id: &str, decision: &str, approver: &str) -> Request<Body> {
        Request::post(format!("/approvals/{id}/decision"))
            .header("authorization", format!("Bearer {}", decider_key()))
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
        self.pending_with(count, tag, &deploy_body(1, &[ALICE, BOB]))
            .await
    }

    /// Pending 2-of-3 approvals (alice, bob, carol).
    async fn pending_quorum(&self, count: usize, tag: &str) -> Vec<String> {
        let body = json!({
            "action": {"type": "deploy", "payload": {"service": "api", "build": 1}},
            "approvers": [ALICE, BOB, CAROL],
            "policy": {"rules": [{"name": "engineering", "approvers": [ALICE, BOB, CAROL], "min_approvals": 2}]},
            "context": {"summary": "Deploy api build 1 to prod"},
            "expires_in_seconds": 86_400
        });
        self.pending_with(count, tag, &body.to_string()).await
    }

    async fn pending_with(&self, count: usize, tag: &str, body: &str) -> Vec<String> {
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
}

struct Row {
    operation: String,
    concurrency: usize,
    mode: Mode,
    stats: Stats,
    calls_per_op: f64,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Op {
    CreateFirst,
    CreateReplay,
    DecideWinner,
    DecideLoser,
    VoteCounted,
    VoteCompleting,
    WebhookFirst,
    WebhookDuplicate,
    GithubOpen,
    GithubJoin,
}

impl Op {
    /// The function that serves it: its raw row sends the same requests as that function's
    /// role, so that both rows pay the local AWS's IAM check alike.
    fn function(self) -> countersign::Function {
        use countersign::Function;
        match self {
            Op::CreateFirst | Op::CreateReplay => Function::Api,
            Op::DecideWinner | Op::DecideLoser | Op::VoteCounted | Op::VoteCompleting => {
                Function::Decide
            }
            Op::WebhookFirst | Op::WebhookDuplicate | Op::GithubOpen | Op::GithubJoin => {
                Function::Webhook
            }
        }
    }
}

const OPS: [Op; 10] = [
    Op::CreateFirst,
    Op::CreateReplay,
    Op::DecideWinner,
    Op::DecideLoser,
    Op::VoteCounted,
    Op::VoteCompleting,
    Op::WebhookFirst,
    Op::WebhookDuplicate,
    Op::GithubOpen,
    Op::GithubJoin,
];

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::CreateFirst => "create first",
            Op::CreateReplay => "create replay",
            Op::DecideWinner => "decide winner",
            Op::DecideLoser => "decide loser",
            Op::VoteCounted => "vote (2-of-3)",
            Op::VoteCompleting => "vote completing 2-of-3",
            Op::WebhookFirst => "webhook first",
            Op::WebhookDuplicate => "webhook duplicate",
            Op::GithubOpen => "github-event open",
            Op::GithubJoin => "github-event join",
        }
    }
}

/// What a cell's operations act on, made before the timed part.
struct Fixture {
    /// One pending approval per operation (decide winner, webhook first), or one decided
    /// approval / one processed event's approval (decide loser, webhook duplicate).
    ids: Vec<String>,
}

impl<'a> Bench<'a> {
    /// A cell on the shared tables (as deployed: the approvals table has its stream). Every cell
    /// of the run writes to the same tables, which grow as it goes: with moto's transactions
    /// rolled back by a journal (infra/moto_patches.py), a write costs the same on a large table
    /// as on an empty one (the table-size rows check it).
    fn new(t: &'a TestApp, raw: &'a Client, ops: usize, tag: String) -> Self {
        Self {
            // Each route as its function: its role, checked by the local AWS as AWS checks it.
            router: countersign::http::local_router(|f| t.function(f)),
            t,
            raw,
            ops,
            tag,
        }
    }

    fn key(&self, name: &str) -> String {
        format!("{}-{name}", self.tag)
    }

    /// A run of this cell's own (`n`: one per operation that opens a round; 0, the round joined).
    fn run(&self, n: usize) -> u64 {
        let cell: u64 = self.tag.trim_start_matches("cell").parse().unwrap_or(0);
        cell * 1_000_000 + n as u64 + 1
    }

    /// The run whose round operation `i` joins.
    fn join_run(&self, i: usize) -> u64 {
        self.run(900_000 + i / JOINS_PER_ROUND)
    }

    /// A signed `deployment_protection_rule` delivery of `run` on production.
    fn github_request(&self, delivery: &str, run: u64) -> Request<Body> {
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

    async fn prepare(&self, op: Op, mode: Mode, now: i64) -> Fixture {
        let body = deploy_body(1, &[ALICE, "bob@example.com"]);
        let ids = match op {
            Op::CreateFirst => Vec::new(),
            Op::CreateReplay => {
                match mode {
                    Mode::Raw => self.raw_create(&self.key("replay"), now).await,
                    _ => assert_eq!(
                        self.t
                            .create(KEY_A, &self.key("replay"), &body)
                            .await
                            .status,
                        201
                    ),
                }
                Vec::new()
            }
            Op::DecideWinner | Op::WebhookFirst => self.pending(self.ops, "bench-pending").await,
            Op::VoteCounted => self.pending_quorum(self.ops, "bench-quorum").await,
            Op::VoteCompleting => {
                let ids = self.pending_quorum(self.ops, "bench-voted").await;
                for id in &ids {
                    let approve = json!({"decision": "approve", "approver": ALICE});
                    assert_eq!(self.t.decide(DECIDER_A, id, approve).await.status, 200);
                }
                ids
            }
            Op::DecideLoser => {
                let id = self.pending(1, "bench-decided").await.remove(0);
                let approve = json!({"decision": "approve", "approver": ALICE});
                assert_eq!(self.t.decide(DECIDER_A, &id, approve).await.status, 200);
                vec![id]
            }
            Op::GithubOpen => Vec::new(),
            // Rounds open, each joined by up to JOINS_PER_ROUND operations' deliveries (an
            // approval names at most 100 deliveries).
            Op::GithubJoin => {
                let mut ids = Vec::new();
                for round in 0..self.ops.div_ceil(JOINS_PER_ROUND) {
                    let run = self.join_run(round * JOINS_PER_ROUND);
                    let delivery = self.key(&format!("gh-open-{round}"));
                    match mode {
                        // The raw join names the open round's approval (Countersign learns it
                        // from the refused open).
                        Mode::Raw => ids.push(
                            self.raw_github_open(&delivery, run, now)
                                .await
                                .expect("opened"),
                        ),
                        _ => {
                            let request = self.github_request(&delivery, run);
                            assert_eq!(self.send(Mode::InProcess, request).await, 200);
                        }
                    }
                }
                ids
            }
            Op::WebhookDuplicate => {
                let id = self.pending(1, "bench-dup").await.remove(0);
                match mode {
                    Mode::Raw => self.raw_webhook(&id, &self.key("msg-dup"), now).await,
                    _ => {
                        let event = decided_event(&id, "approve", ALICE);
                        let request = Bench::webhook_request(&self.key("msg-dup"), &event, now);
                        assert_eq!(self.send(Mode::InProcess, request).await, 200);
                    }
                }
                vec![id]
            }
        };
        self.t.calls.take();
        Fixture { ids }
    }

    async fn operate(&self, op: Op, mode: Mode, i: usize, fixture: &Fixture, now: i64) {
        let body = || deploy_body(1, &[ALICE, "bob@example.com"]);
        match (op, mode) {
            (Op::CreateFirst, Mode::Raw) => {
                self.raw_create(&self.key(&format!("create-{i}")), now)
                    .await
            }
            (Op::CreateFirst, _) => {
                let request = Bench::create_request(&self.key(&format!("create-{i}")), &body());
                assert_eq!(self.send(mode, request).await, 201);
            }
            (Op::CreateReplay, Mode::Raw) => self.raw_create(&self.key("replay"), now).await,
            (Op::CreateReplay, _) => assert_eq!(
                self.send(mode, Bench::create_request(&self.key("replay"), &body()))
                    .await,
                201
            ),
            (Op::DecideWinner, Mode::Raw) => self.raw_decide(&fixture.ids[i], ALICE, 0, now).await,
            (Op::DecideWinner, _) => {
                assert_eq!(
                    self.send(
                        mode,
                        Bench::decide_request(&fixture.ids[i], "approve", ALICE)
                    )
                    .await,
                    200
                );
            }
            (Op::DecideLoser, Mode::Raw) => self.raw_reject(&fixture.ids[0], now).await,
            (Op::DecideLoser, _) => {
                let request = Bench::decide_request(&fixture.ids[0], "reject", "bob@example.com");
                assert_eq!(self.send(mode, request).await, 409);
            }
            (Op::VoteCounted, Mode::Raw) => self.raw_decide(&fixture.ids[i], ALICE, 1, now).await,
            (Op::VoteCounted, _) => {
                let request = Bench::decide_request(&fixture.ids[i], "approve", ALICE);
                assert_eq!(self.send(mode, request).await, 200);
            }
            // Refused as a counted vote (the item as it was comes back), then completing.
            (Op::VoteCompleting, Mode::Raw) => {
                self.raw_decide(&fixture.ids[i], BOB, 1, now).await;
                self.raw_complete(&fixture.ids[i], BOB, now).await;
            }
            (Op::VoteCompleting, _) => {
                let request = Bench::decide_request(&fixture.ids[i], "approve", BOB);
                assert_eq!(self.send(mode, request).await, 200);
            }
            (Op::WebhookFirst, Mode::Raw) => {
                self.raw_webhook(&fixture.ids[i], &self.key(&format!("msg-{i}")), now)
                    .await
            }
            (Op::WebhookFirst, _) => {
                let event = decided_event(&fixture.ids[i], "approve", ALICE);
                let request = Bench::webhook_request(
                    &self.key(&format!("msg-{i}")),
                    &event,
                    self.t.clock.now(),
                );
                assert_eq!(self.send(mode, request).await, 200);
            }
            (Op::GithubOpen, Mode::Raw) => {
                let delivery = self.key(&format!("gh-{i}"));
                assert!(
                    self.raw_github_open(&delivery, self.run(i + 1), now)
                        .await
                        .is_some()
                );
            }
            (Op::GithubOpen, _) => {
                let request = self.github_request(&self.key(&format!("gh-{i}")), self.run(i + 1));
                assert_eq!(self.send(mode, request).await, 200);
            }
            (Op::GithubJoin, Mode::Raw) => {
                let delivery = self.key(&format!("gh-join-{i}"));
                let round = &fixture.ids[i / JOINS_PER_ROUND];
                self.raw_github_join(&delivery, self.join_run(i), round, now)
                    .await
            }
            (Op::GithubJoin, _) => {
                let request =
                    self.github_request(&self.key(&format!("gh-join-{i}")), self.join_run(i));
                assert_eq!(self.send(mode, request).await, 200);
            }
            (Op::WebhookDuplicate, Mode::Raw) => {
                self.raw_webhook(&fixture.ids[0], &self.key("msg-dup"), now)
                    .await
            }
            (Op::WebhookDuplicate, _) => {
                let event = decided_event(&fixture.ids[0], "approve", ALICE);
                let request =
                    Bench::webhook_request(&self.key("msg-dup"), &event, self.t.clock.now());
                assert_eq!(self.send(mode, request).await, 200);
            }
        }
    }
}

/// Measures one row: three rounds of raw, in-process and loopback, interleaved in time; each
/// mode keeps its median round (moto pauses now and then, whichever path is running).
async fn measure(
    t: &TestApp,
    ops: usize,
    op: Op,
    operation: &str,
    concurrency: usize,
    cells: &mut usize,
) -> Vec<Row> {
    let raw = &Client::new(t.functions.sdk(op.function()));
    let mut rounds: Vec<(Mode, Stats, f64)> = Vec::new();
    for _ in 0..ROUNDS {
        for mode in MODES {
            *cells += 1;
            let bench = Bench::new(t, raw, ops, format!("cell{cells}"));
            let now = t.clock.now();
            let fixture = bench.prepare(op, mode, now).await;
            let (b, fixture) = (&bench, &fixture);
            let stats = drive(ops, concurrency, |i| async move {
                b.operate(op, mode, i, fixture, now).await
            })
            .await;
            let calls = t.calls.take().len() as f64 / ops as f64;
            rounds.push((mode, stats, if mode == Mode::Raw { 1.0 } else { calls }));
        }
    }
    MODES
        .iter()
        .map(|&mode| {
            let mut of_mode: Vec<_> = rounds.iter().filter(|(m, _, _)| *m == mode).collect();
            of_mode.sort_by(|a, b| a.1.ops_per_s.total_cmp(&b.1.ops_per_s));
            let (_, stats, calls_per_op) = of_mode[of_mode.len() / 2];
            Row {
                operation: operation.to_owned(),
                concurrency,
                mode,
                stats: stats.clone(),
                calls_per_op: *calls_per_op,
            }
        })
        .collect()
}

pub async fn run(ops: usize) -> Ratios {
    // One set of tables for the whole run, as a deployment has.
    // Table keys kept for the whole run (a deployment's default is 60 s: one GetItem a minute).
    let github = countersign_tests::github::FakeGithub::start().await;
    let _ = GITHUB_API.set(github.base.clone());
    let t =
        TestApp::start_with(&[("KEY_CACHE_SECONDS", "300"), ("GITHUB", &github.config())]).await;
    let requester = countersign_tests::table_key(
        &t.app.store,
        countersign_tests::TENANT_A,
        countersign_tests::TENANT_A,
        &["requester", "reader"],
        None,
    )
    .await;
    let decider = countersign_tests::table_key(
        &t.app.store,
        countersign_tests::TENANT_A,
        "portal@tenant-a",
        &["decider"],
        None,
    )
    .await;
    for key in [&requester, &decider] {
        t.send(
            t.http
                .get(t.url("/approvals/nope"))
                .bearer_auth(key.expose()),
        )
        .await;
    }
    let _ = TABLE_KEYS.set((requester.expose().to_owned(), decider.expose().to_owned()));
    let mut cells = 0;
    let mut rows = Vec::new();
    for concurrency in CONCURRENCY {
        for op in OPS
            .into_iter()
            .filter(|op| only().is_none_or(|o| op.name().contains(o)))
        {
            rows.extend(measure(&t, ops, op, op.name(), concurrency, &mut cells).await);
        }
    }
    print_table(
        &rows,
        ops,
        "the tables shared by every row, growing as the run goes",
    );

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
        vote: ratio(["vote (2-of-3)", "vote (2-of-3)"]),
        vote_completing: ratio(["vote completing 2-of-3", "vote completing 2-of-3"]),
        webhook: ratio(["webhook first", "webhook duplicate"]),
        github: ratio(["github-event open", "github-event join"]),
        table_size: if only().is_some() {
            f64::NAN
        } else {
            table_size(ops, &t.app.config.tables.api_keys).await
        },
    }
}

/// Approvals (and their idempotency records) written straight to the tables before the large-
/// table row.
const LARGE_TABLE: usize = 20_000;

/// create first on tables that start empty, then on the same tables holding 20,000 approvals:
/// the cost of a write must not grow with the table. Returns in-process ops/s large ÷ empty.
/// `keys_table`: where the run's table keys are (each app has tables of its own).
async fn table_size(ops: usize, keys_table: &str) -> f64 {
    let t = TestApp::start_with(&[("KEYS_TABLE", keys_table), ("KEY_CACHE_SECONDS", "300")]).await;
    let raw = Client::new(&countersign_tests::sdk_config().await);
    let mut cells = 0;
    let empty_label = "create first (empty)";
    let large_label = "create first (20,000)";
    let mut rows = measure(&t, ops, Op::CreateFirst, empty_label, 8, &mut cells).await;
    fill(&t, &raw, LARGE_TABLE).await;
    rows.extend(measure(&t, ops, Op::CreateFirst, large_label, 8, &mut cells).await);
    print_table(
        &rows,
        ops,
        "tables that start empty, then the same tables after 20,000 approvals were written",
    );
    let at = |label: &str| {
        rows.iter()
            .find(|r| r.operation == label && r.mode == Mode::InProcess)
            .map_or(0.0, |r| r.stats.ops_per_s)
    };
    at(large_label) / at(empty_label)
}

/// Writes `count` approvals and their idempotency records with BatchWriteItem (25 items a
/// call), outside any timing.
async fn fill(t: &TestApp, raw: &Client, count: usize) {
    use aws_sdk_dynamodb::types::{PutRequest, WriteRequest};
    use futures::StreamExt;
    let tables = &t.app.config.tables;
    let now = t.clock.now();
    let started = std::time::Instant::now();
    futures::stream::iter(
        (0..count)
            .collect::<Vec<_>>()
            .chunks(25)
            .map(<[usize]>::to_vec),
    )
    .map(|chunk| async move {
        let mut approvals = Vec::new();
        let mut keys = Vec::new();
        for i in chunk {
            let id = format!("apr_{}", ulid::Ulid::new());
            let key = format!("fill-{i}");
            let put = |item| {
                WriteRequest::builder()
                    .put_request(
                        PutRequest::builder()
                            .set_item(Some(item))
                            .build()
                            .expect("put"),
                    )
                    .build()
            };
            approvals.push(put(Bench::raw_approval_item(&id, &key, now)));
            keys.push(put(HashMap::from([
                ("pk".to_owned(), s(format!("tenant-a#{key}"))),
                ("fingerprint".to_owned(), s("0".repeat(64))),
                ("approval_id".to_owned(), s(&id)),
                ("response_status".to_owned(), n(201)),
                ("created_at".to_owned(), n(now)),
                ("expires_at".to_owned(), n(now + 86_400)),
            ])));
        }
        for (table, requests) in [
            (&tables.approvals, approvals),
            (&tables.idempotency_keys, keys),
        ] {
            let written = raw
                .batch_write_item()
                .request_items(table.as_str(), requests)
                .send()
                .await
                .expect("BatchWriteItem");
            assert!(
                written.unprocessed_items().is_none_or(|u| u.is_empty()),
                "moto left items unprocessed"
            );
        }
    })
    .buffer_unordered(4)
    .collect::<Vec<_>>()
    .await;
    t.calls.take();
    println!(
        "\nwrote {count} approvals and their idempotency records in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

fn print_table(rows: &[Row], ops: usize, tables: &str) {
    println!(
        "\nHot paths ({ops} operations per row, median of {ROUNDS} rounds, on {tables}; raw = the same DynamoDB requests through the SDK alone, as the same function's role)"
    );
    println!(
        "{:<22} {:>4}  {:<10} {:>9} {:>9} {:>9} {:>13}",
        "operation", "conc", "path", "ops/s", "p50 ms", "p99 ms", "DynamoDB/op"
    );
    for r in rows {
        println!(
            "{:<22} {:>4}  {:<10} {:>9.0} {:>9.2} {:>9.2} {:>13.2}",
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
