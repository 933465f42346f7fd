//! The hot paths: create (first, replay), decide (winner, loser), quorum votes (2-of-3: a
//! counted vote, and the vote that completes it), webhook (first, duplicate), GitHub events
//! (open, join), and the sweeper's reminder step.
//!
//! Here the run: the rows, their measurement and the table they print. A cell's requests are
//! in `paths/requests.rs`, each operation per mode in `paths/operations.rs`, the raw DynamoDB
//! calls in `paths/raw.rs`, the reminder's both in `paths/stall.rs`, the large-table row in
//! `paths/table_size.rs`.

use aws_sdk_dynamodb::Client;
use countersign_tests::{DECIDER_A, KEY_A, TestApp};

use crate::{Stats, drive};

mod operations;
mod raw;
mod requests;
mod resume;
mod stall;
mod table_size;

use table_size::table_size;

pub struct Ratios {
    pub create: f64,
    pub decide: f64,
    /// vote (2-of-3), the counted vote.
    pub vote: f64,
    pub vote_completing: f64,
    pub webhook: f64,
    /// A GitHub deployment's event: one that opens a round, one that joins it.
    pub github: f64,
    /// The sweeper's reminder step (`store.remind`, no router).
    pub reminder: f64,
    /// The executor's resume job (one job message handled, no router).
    pub resume: f64,
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
    Reminder,
    Resume,
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
            Op::Reminder => Function::Sweeper,
            Op::Resume => Function::Executor,
        }
    }

    /// The modes it is measured in: a scheduled function's step has no HTTP route.
    fn modes(self) -> &'static [Mode] {
        match self {
            Op::Reminder | Op::Resume => &[Mode::Raw, Mode::InProcess],
            _ => &MODES,
        }
    }
}

const OPS: [Op; 12] = [
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
    Op::Reminder,
    Op::Resume,
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
            Op::Reminder => "reminder",
            Op::Resume => "resume",
        }
    }
}

/// What a cell's operations act on, made before the timed part.
struct Fixture {
    /// One pending approval per operation (decide winner, webhook first), or one decided
    /// approval / one processed event's approval (decide loser, webhook duplicate).
    ids: Vec<String>,
    /// The approvals as read before the timed part (a sweep's step writes from what it read).
    approvals: Vec<countersign::domain::Approval>,
    /// The executor and the executor role's Lambda client (the resume row).
    workflows: Option<resume::Workflows>,
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
        for &mode in op.modes() {
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
    op.modes()
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
    let t = TestApp::start_with(&[
        ("KEY_CACHE_SECONDS", "300"),
        ("GITHUB", &github.config()),
        // The executor's configuration (the resume row: its queue is never sent to).
        (
            "JOBS_QUEUE_URL",
            "https://sqs.us-east-1.amazonaws.com/123456789012/bench-unused",
        ),
        ("PUBLIC_BASE_URL", "https://approvals.example.com"),
        ("RESUME_TYPES", "lambda_durable"),
    ])
    .await;
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
        reminder: ratio(["reminder", "reminder"]),
        resume: ratio(["resume", "resume"]),
        table_size: if only().is_some() {
            f64::NAN
        } else {
            table_size(ops, &t.app.config.tables.api_keys).await
        },
    }
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
