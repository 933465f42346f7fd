//! What an approval costs on AWS (issue 24): four representative lives, each played on the
//! local stack the way Lambda runs it (`countersign_tests::chain`), every AWS request metered
//! and priced, written to `docs/COST.md`. The committed file must be what this test computes:
//! a change that makes an approval dearer (or cheaper) changes the file in the same commit.
//! `COUNTERSIGN_WRITE_COST=1 cargo test -p countersign-tests --test cost` rewrites it.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{LazyLock, Mutex};

use countersign_tests::chain::{Chain, Step};
use countersign_tests::*;
use serde_json::{Value, json};

/// List prices, US East (N. Virginia), as AWS's pricing pages give them on the date below.
struct Price {
    what: &'static str,
    usd: f64,
    per: &'static str,
    source: &'static str,
}

const PRICES_TAKEN: &str = "2026-12-02";
const API_REQUEST: f64 = 1.00 / 1e6;
const LAMBDA_REQUEST: f64 = 0.20 / 1e6;
const LAMBDA_GB_SECOND_ARM: f64 = 0.000_013_333_4;
const WRITE_UNIT: f64 = 0.625 / 1e6;
const READ_UNIT: f64 = 0.125 / 1e6;
const SQS_REQUEST: f64 = 0.40 / 1e6;
const STORAGE_GB_MONTH: f64 = 0.25;
const STATE_TRANSITION: f64 = 0.025 / 1e3;
const LOGS_INGESTED_GB: f64 = 0.50;
const XRAY_TRACE: f64 = 5.00 / 1e6;

const PRICES: &[Price] = &[
    Price {
        what: "API Gateway HTTP API, request",
        usd: API_REQUEST * 1e6,
        per: "million (first 300 million a month)",
        source: "https://aws.amazon.com/api-gateway/pricing/",
    },
    Price {
        what: "Lambda, request",
        usd: LAMBDA_REQUEST * 1e6,
        per: "million",
        source: "https://aws.amazon.com/lambda/pricing/",
    },
    Price {
        what: "Lambda, arm64 duration",
        usd: LAMBDA_GB_SECOND_ARM,
        per: "GB-second (first 7.5 billion a month)",
        source: "https://aws.amazon.com/lambda/pricing/",
    },
    Price {
        what: "DynamoDB on demand, write request unit",
        usd: WRITE_UNIT * 1e6,
        per: "million",
        source: "https://aws.amazon.com/dynamodb/pricing/on-demand/",
    },
    Price {
        what: "DynamoDB on demand, read request unit",
        usd: READ_UNIT * 1e6,
        per: "million",
        source: "https://aws.amazon.com/dynamodb/pricing/on-demand/",
    },
    Price {
        what: "CloudWatch Logs, data ingested (the EMF metrics' documents and the log lines)",
        usd: LOGS_INGESTED_GB,
        per: "GB",
        source: "https://aws.amazon.com/cloudwatch/pricing/",
    },
    Price {
        what: "DynamoDB storage (Standard table class)",
        usd: STORAGE_GB_MONTH,
        per: "GB-month (first 25 GB free)",
        source: "https://aws.amazon.com/dynamodb/pricing/on-demand/",
    },
    Price {
        what: "DynamoDB Streams read by Lambda",
        usd: 0.0,
        per: "(free)",
        source: "https://aws.amazon.com/dynamodb/pricing/on-demand/",
    },
    Price {
        what: "SQS standard queue, request (64 KiB chunk)",
        usd: SQS_REQUEST * 1e6,
        per: "million (after the first million a month)",
        source: "https://aws.amazon.com/sqs/pricing/",
    },
    Price {
        what: "X-Ray, trace recorded",
        usd: XRAY_TRACE * 1e6,
        per: "million (after the first 100,000 a month)",
        source: "https://aws.amazon.com/xray/pricing/",
    },
    Price {
        what: "Step Functions Standard, state transition",
        usd: STATE_TRANSITION * 1e3,
        per: "thousand",
        source: "https://aws.amazon.com/step-functions/pricing/",
    },
];

/// Billed Lambda time is modelled, not measured: the handler's time on this machine depends on
/// the machine and on moto, and a file a test compares must not. Each invocation is billed its
/// own work at these latencies, added up as if nothing in it ran in parallel (an upper bound).
const MS_PER_INVOCATION: f64 = 5.0;
const MS_PER_DYNAMODB: f64 = 10.0;
const MS_PER_TRANSACTION: f64 = 20.0;
const MS_PER_SQS: f64 = 15.0;
const MS_PER_OUTBOUND: f64 = 100.0;

/// Where each function's memory comes from: the template (Globals, or its own MemorySize).
fn memory_mb(function: &str) -> f64 {
    let doc = countersign_tests::template();
    let logical = format!("{}{}Function", function[..1].to_uppercase(), &function[1..]);
    doc["Resources"][&logical]["Properties"]["MemorySize"]
        .as_f64()
        .or(doc["Globals"]["Function"]["MemorySize"].as_f64())
        .expect("a MemorySize")
}

fn aws_ms(calls: &[countersign_tests::meter::AwsCall]) -> f64 {
    calls
        .iter()
        .map(
            |c| match (c.service.as_str(), c.operation.starts_with("Transact")) {
                ("dynamodb", true) => MS_PER_TRANSACTION,
                ("dynamodb", false) => MS_PER_DYNAMODB,
                _ => MS_PER_SQS,
            },
        )
        .sum()
}

/// An invocation's work, one request after another; an executor's jobs run at once (its batch),
/// so it is billed its longest job — each job's requests one after another, and its calls out
/// in rounds (a notify job calls its approvers together).
fn billed_ms(step: &Step) -> f64 {
    if step.jobs.is_empty() {
        return MS_PER_INVOCATION + aws_ms(&step.calls) + MS_PER_OUTBOUND * step.outbound as f64;
    }
    let longest = step
        .jobs
        .iter()
        .map(|job| aws_ms(&step.calls[job.calls.clone()]) + MS_PER_OUTBOUND * job.rounds as f64)
        .fold(0.0, f64::max);
    MS_PER_INVOCATION + longest
}

/// The app's log lines as its functions write them (JSON, at the template's default
/// `LogLevel`): this test is its own process, and its one subscriber writes here.
static LOG: LazyLock<Mutex<Vec<u8>>> = LazyLock::new(Mutex::default);

struct LogWriter;

impl std::io::Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        LOG.lock().expect("log").extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The template's default log level.
fn log_level() -> String {
    countersign_tests::template()["Parameters"]["LogLevel"]["Default"]
        .as_str()
        .expect("a LogLevel parameter with a default")
        .to_owned()
}

fn capture_logs() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let filter = countersign::telemetry::filter_for(&log_level());
        let subscriber = countersign::telemetry::subscriber(|| LogWriter, &filter);
        tracing::subscriber::set_global_default(subscriber).expect("the process's subscriber");
    });
}

/// The lines written since the last call: (lines, bytes as CloudWatch Logs ingests them, the
/// newline included), each line's timestamp and durations at their widest (nanoseconds; 12
/// digits): what they measure varies from run to run, the file must not.
fn take_log_lines() -> (usize, usize) {
    let text = String::from_utf8(std::mem::take(&mut *LOG.lock().expect("log"))).expect("UTF-8");
    let lines: Vec<usize> = text
        .lines()
        .map(|line| {
            let mut line: Value = serde_json::from_str(line).expect("a JSON line");
            if let Some(fields) = line.as_object_mut() {
                for (name, value) in fields.iter_mut() {
                    if name == "timestamp" {
                        *value = json!("2026-12-02T00:00:00.000000000Z");
                    } else if name.ends_with("_ms") && value.is_number() {
                        *value = json!(99_999.999_999_999);
                    }
                }
            }
            line.to_string().len() + 1
        })
        .collect();
    (lines.len(), lines.iter().sum())
}

/// The tables a request names (short names).
fn tables_named(request: &Value) -> Vec<&str> {
    fn short(t: &str) -> &str {
        t.rsplit_once('-').map_or("", |(_, n)| n)
    }
    let mut names: Vec<&str> = Vec::new();
    if let Some(t) = request["TableName"].as_str() {
        names.push(short(t));
    }
    for item in request["TransactItems"].as_array().into_iter().flatten() {
        if let Some((_, action)) = item.as_object().and_then(|o| o.iter().next()) {
            names.push(short(action["TableName"].as_str().unwrap_or_default()));
        }
    }
    if let Some(items) = request["RequestItems"].as_object() {
        for (t, writes) in items {
            for _ in writes.as_array().into_iter().flatten() {
                names.push(short(t));
            }
        }
    }
    names
}

/// One life's counts, summed over its steps.
#[derive(Debug, Default)]
struct Life {
    api_requests: usize,
    invocations: BTreeMap<&'static str, usize>,
    billed_ms: BTreeMap<&'static str, f64>,
    measured_ms: BTreeMap<&'static str, f64>,
    lambda_usd: f64,
    reads: usize,
    writes: usize,
    read_units: f64,
    write_units: f64,
    /// Write units per function, to see where they go.
    write_units_by: BTreeMap<&'static str, f64>,
    /// Write units per table (its indexes' included).
    write_units_to: BTreeMap<String, f64>,
    sqs_billed: f64,
    target_calls: usize,
    notifications: usize,
    callbacks: usize,
    stored_bytes: usize,
    stored_items: usize,
    /// The EMF documents the invocations wrote to their logs, and their bytes (see [`emf_bytes`]).
    emf_documents: usize,
    emf_bytes: usize,
    /// The log lines the invocations wrote, and their bytes (see [`take_log_lines`]).
    log_lines: usize,
    log_bytes: usize,
    /// What the tables keep for good, as DynamoDB bills it stored (`Chain::kept_bytes`).
    kept_bytes: usize,
    /// Each request, for the test's output: function, operation, tables, units.
    detail: Vec<String>,
}

impl Life {
    fn of(chain: &Chain<'_>, downstream: &jobs::Downstream) -> Self {
        let mut life = Self::default();
        for step in &chain.steps {
            if matches!(step.function, "create" | "decide") {
                life.api_requests += 1;
            }
            *life.invocations.entry(step.function).or_default() += 1;
            let ms = billed_ms(step);
            *life.billed_ms.entry(step.function).or_default() += ms;
            *life.measured_ms.entry(step.function).or_default() +=
                step.duration.as_secs_f64() * 1000.0;
            life.lambda_usd += LAMBDA_REQUEST
                + memory_mb(step.function) / 1024.0 * ms / 1000.0 * LAMBDA_GB_SECOND_ARM;
            for call in step.calls.iter().filter(|c| c.service == "dynamodb") {
                if capacity::is_write(call) {
                    life.writes += 1;
                } else {
                    life.reads += 1;
                }
            }
            life.read_units += step.units.reads;
            life.write_units += step.units.writes;
            *life.write_units_by.entry(step.function).or_default() += step.units.writes;
            for (table, units) in &step.writes_by_table {
                *life.write_units_to.entry(table.clone()).or_default() += units;
            }
            life.sqs_billed += step.sqs_billed;
            for (call, units) in step.calls.iter().zip(&step.call_units) {
                let tables: Vec<&str> = tables_named(&call.request);
                life.detail.push(format!(
                    "{} {} {:?} w{} r{}",
                    step.function, call.operation, tables, units.writes, units.reads
                ));
            }
        }
        life.notifications = downstream.calls_to("/notify").len();
        life.callbacks = downstream.calls_to("/callback").len();
        life.target_calls = downstream.total_calls() - life.notifications - life.callbacks;
        (life.stored_bytes, life.stored_items) = chain.stored();
        life.kept_bytes = chain.kept_bytes();
        life
    }

    fn usd(&self) -> [(&'static str, f64); 6] {
        [
            (
                "CloudWatch Logs (EMF metrics and log lines)",
                (self.emf_bytes + self.log_bytes) as f64 / 1e9 * LOGS_INGESTED_GB,
            ),
            ("API Gateway", self.api_requests as f64 * API_REQUEST),
            ("Lambda", self.lambda_usd),
            ("DynamoDB writes", self.write_units * WRITE_UNIT),
            ("DynamoDB reads", self.read_units * READ_UNIT),
            ("SQS", self.sqs_billed * SQS_REQUEST),
        ]
    }

    fn per_million(&self) -> f64 {
        self.usd().iter().map(|(_, usd)| usd).sum::<f64>() * 1e6
    }
}

async fn play(subscribed: bool, life: impl AsyncFnOnce(&TestApp, &mut Chain<'_>)) -> Life {
    let subscription =
        json!({TENANT_A: {"url": "{downstream}/callback", "secret": CALLBACK_SECRET}}).to_string();
    let mut overrides: Vec<(&str, &str)> = Vec::new();
    if subscribed {
        overrides.push(("EVENT_SUBSCRIPTIONS", &subscription));
    }
    capture_logs();
    let t = TestApp::jobs_without_runner(&overrides, None).await;
    let downstream = t.downstream().clone();
    let outbound = downstream.clone();
    let mut chain = Chain::new(&t, move || outbound.total_calls()).await;
    take_log_lines();
    life(&t, &mut chain).await;
    let (log_lines, log_bytes) = take_log_lines();
    let mut life = Life::of(&chain, &downstream);
    (life.log_lines, life.log_bytes) = (log_lines, log_bytes);
    let documents = t.metrics.take();
    life.emf_documents = documents.len();
    life.emf_bytes = documents.iter().map(|d| emf_bytes(d)).sum();
    life
}

/// A document's bytes in the log, newline included, with its timestamp and durations at their
/// widest (13 and 5 digits): what a duration measures varies from run to run, the file must not.
fn emf_bytes(document: &str) -> usize {
    let mut doc: Value = serde_json::from_str(document).expect("an EMF document");
    doc["_aws"]["Timestamp"] = json!(1_700_000_000_000u64);
    for metric in countersign::observe::Metric::ALL {
        if metric.unit() == countersign::observe::Unit::Milliseconds
            && let Some(value) = doc.get_mut(metric.name())
        {
            *value = match value {
                Value::Array(values) => json!(vec![99_999; values.len()]),
                _ => json!(99_999),
            };
        }
    }
    doc.to_string().len() + 1
}

/// A deploy as people send it: a payload, a context to show the approvers, a day to decide.
fn deploy_for(approvers: &[&str], policy: Option<Value>) -> String {
    let body = CreateBody::new("deploy", approvers)
        .payload(json!({"service": "payments-api", "build": 4312, "image": "registry.example.com/payments-api@sha256:9f2c4a7e1b3d5f6a8c0e2b4d6f8a0c2e4b6d8f0a2c4e6b8d0f2a4c6e8b0d2f4a"}))
        .context(json!({"summary": "Deploy payments-api build 4312 to production", "requested_by": "ci", "link": "https://ci.example.com/builds/4312"}))
        .expires_in(86_400);
    match policy {
        Some(policy) => body.policy(policy).to_string(),
        None => body.to_string(),
    }
}

async fn vote(t: &TestApp, chain: &mut Chain<'_>, id: &str, approver: &str, decision: &str) {
    let reply = chain
        .step(
            "decide",
            t.decide(DECIDER_A, id, decision_body(decision, approver)),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    chain.settle().await;
}

async fn create(t: &TestApp, chain: &mut Chain<'_>, body: &str) -> String {
    let reply = chain.step("create", t.create(KEY_A, "cost-1", body)).await;
    assert_eq!(reply.status, 201, "{}", reply.text());
    chain.settle().await;
    reply.json()["id"].as_str().expect("an id").to_owned()
}

async fn ends(t: &TestApp, id: &str, status: &str, execution: Option<&str>) {
    let approval = t.get(KEY_A, id).await.json();
    assert_eq!(approval["status"], status, "{approval}");
    assert_eq!(
        approval["execution"]["status"].as_str(),
        execution,
        "{approval}"
    );
}

/// The four lives: (a) one approver, approved, executed, no subscription; (b) two of three,
/// executed, a subscription to every event; (c) rejected; (d) expired.
async fn lives() -> Vec<(&'static str, Life)> {
    let a = play(false, async |t, chain| {
        let id = create(t, chain, &deploy_for(&[ALICE], None)).await;
        vote(t, chain, &id, ALICE, "approve").await;
        ends(t, &id, "approved", Some("succeeded")).await;
    })
    .await;
    let b = play(true, async |t, chain| {
        let quorum = json!({"rules": [{"name": "oncall", "approvers": [ALICE, BOB, CAROL], "min_approvals": 2}]});
        let id = create(t, chain, &deploy_for(&[ALICE, BOB, CAROL], Some(quorum))).await;
        vote(t, chain, &id, ALICE, "approve").await;
        vote(t, chain, &id, BOB, "approve").await;
        ends(t, &id, "approved", Some("succeeded")).await;
    })
    .await;
    let c = play(false, async |t, chain| {
        let id = create(t, chain, &deploy_for(&[ALICE], None)).await;
        vote(t, chain, &id, ALICE, "reject").await;
        ends(t, &id, "rejected", Some("not_started")).await;
    })
    .await;
    let d = play(false, async |t, chain| {
        let id = create(t, chain, &deploy_for(&[ALICE], None)).await;
        t.clock.advance(86_401);
        chain.sweep().await;
        chain.settle().await;
        ends(t, &id, "expired", Some("not_started")).await;
    })
    .await;
    vec![
        ("(a) one approver, executed", a),
        ("(b) 2 of 3, executed, subscribed to every event", b),
        ("(c) rejected", c),
        ("(d) expired", d),
    ]
}

const TARGET_PER_MILLION: f64 = 50.0;
const GOAL_PER_MILLION: f64 = 25.0;

/// The tables, as `infra/tables.json` names them.
const TABLES: [&str; 6] = [
    "approvals",
    "approval_index",
    "events",
    "execution_ledger",
    "idempotency_keys",
    "webhook_inbox",
];

/// Scenario (b) at each step of issue 24's cuts, and each change since: (what changed, write
/// units, dollars per million approvals). The last row must be what this test computes now.
const CUTS: &[(&str, f64, f64)] = &[
    ("first measurement", 182.0, 130.10),
    (
        "a transaction of one update is sent as that conditional update (ledger begins, ends without an event): half the units, the same atomicity",
        171.0,
        122.86,
    ),
    (
        "callbacks keep no ledger item: their outcome event is their record (delivered and failed share one id, put once), read before each delivery",
        139.0,
        103.59,
    ),
    (
        "the quorum marker `while_pending` cut to a boolean (the votes' conditions test only that it exists): a quorum approval's create fits in 1 KB, for the item and each index",
        135.0,
        101.09,
    ),
    (
        "not a cut — metrics (issue 26): each invocation's EMF documents, 1650 bytes in all, ingested by CloudWatch Logs; and the create's trace kept on the approval in 17 bytes (a binary attribute), which keeps every write's units",
        135.0,
        101.92,
    ),
    (
        "not a cut — `ApprovalCreated` names its `Channel` (api, or github for a GitHub deployment's round): 36 more EMF bytes",
        135.0,
        101.93,
    ),
    (
        "the approvals' listing indexes keys only: `by_status_keys` (status, then id) replaces `by_status` and `by_tenant`, which copied the whole item on every write; a keys-only index is written only when its keys move (the status), and a listing page is its query (one per status, sent together, without a status filter) and one BatchGetItem",
        118.0,
        91.31,
    ),
    (
        "the trail keyed by its order in the events table itself, its local index no longer written: the events one change derives share one item, an event the executor records (a notification, a callback's outcome) is one item of its own",
        96.0,
        77.56,
    ),
    (
        "the listing index keyed by facet and status, written once at the create and moved once at the decision (a delete and a put, no index entry to move), and without the approver-and-requester facets (4 items for three approvers, not 7): that filter reads the approver's facet and keeps the requester's approvals, a page possibly short",
        73.0,
        63.18,
    ),
    (
        "an approval's notifications one job under one ledger item (each approver still called once, with its own key, all at once; a retry calls only those not done), their events one item per attempt",
        63.0,
        56.73,
    ),
    (
        "not a cut — the log lines counted: the functions' JSON lines at the default `LogLevel` info (one per API request; a job's routine progress is debug, the trail records it), 1,316 bytes; Lambda's own START/END/REPORT lines none (`SystemLogLevel: WARN`)",
        63.0,
        57.39,
    ),
    (
        "not a cut, a truer model — an executor's batch runs its jobs at once (as `handle_batch` always has) and a notify job calls its approvers together: an invocation is billed its longest job, not the sum of all",
        63.0,
        54.33,
    ),
    (
        "an execution's ledger on its approval (`execution.lg_*`): its attempt's begin and end each one conditional update of the approval instead of a transaction of two items (the ledger item and the approval); an execution begun before v5 keeps its ledger item",
        55.0,
        49.26,
    ),
    (
        "the idempotency record's saved response deflated: the create's record fits 1 KB, half its units in the transaction",
        53.0,
        48.01,
    ),
];

/// The same gate on Step Functions Standard, counted by hand for (b): notify the approvers
/// (a task), then for each of the two votes wait for it (a task with a task token), record it
/// (a task) and ask whether the quorum is met (a choice); then run the action (a task) and end
/// (succeed). Its transitions alone; the tables, functions and callbacks it would still need
/// are not counted.
const STEP_FUNCTIONS_TRANSITIONS: usize = 1 + 2 * 3 + 1 + 1;

fn money(usd: f64) -> String {
    format!("${usd:.2}")
}

/// 1,000,000 (for a count of approvals).
fn thousands(n: f64) -> String {
    let digits = format!("{n:.0}");
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// X-Ray's traces per million approvals like `life` at `volume` approvals a month, spread
/// evenly: each function samples the first invocation each second and 5% of the others.
fn xray_per_million(life: &Life, volume: f64) -> f64 {
    const MONTH_SECONDS: f64 = 30.0 * 86_400.0;
    let traces_per_second: f64 = life
        .invocations
        .values()
        .map(|&per_approval| {
            let rate = volume * per_approval as f64 / MONTH_SECONDS;
            rate.min(1.0) + 0.05 * (rate - 1.0).max(0.0)
        })
        .sum();
    let traces_per_approval = traces_per_second * MONTH_SECONDS / volume;
    traces_per_approval * XRAY_TRACE * 1e6
}

fn row(out: &mut String, what: &str, cells: impl Iterator<Item = String>) {
    let cells: Vec<String> = cells.collect();
    writeln!(out, "| {what} | {} |", cells.join(" | ")).expect("write");
}

fn render(lives: &[(&str, Life)]) -> String {
    let mut out = String::new();
    let w = &mut out;
    writeln!(w, "# What an approval costs on AWS\n").expect("write");
    writeln!(
        w,
        "Written by `tests/cost.rs`, which `make test` runs: it plays four representative \
         approvals on the local stack the way Lambda runs them (each HTTP request one invocation, \
         each stream batch one dispatch, each receive of up to ten jobs one executor run), meters \
         every DynamoDB and SQS request on the wire, and fails when this file differs from what \
         it computes. `COUNTERSIGN_WRITE_COST=1 cargo test -p countersign-tests --test cost` \
         rewrites it.\n"
    )
    .expect("write");
    let b = &lives[1].1;
    writeln!(
        w,
        "**per million approvals: {}** — scenario (b), two of three approvers, executed, with a \
         subscription to every event. The same gate on Step Functions Standard: {} state \
         transitions, **{} per million approvals** in transitions alone.\n",
        money(b.per_million()),
        STEP_FUNCTIONS_TRANSITIONS,
        money(STEP_FUNCTIONS_TRANSITIONS as f64 * STATE_TRANSITION * 1e6),
    )
    .expect("write");

    let target = if b.per_million() <= TARGET_PER_MILLION {
        "met".to_owned()
    } else {
        format!(
            "**not met**: {} over it (see \"Where (b)'s write units go\")",
            money(b.per_million() - TARGET_PER_MILLION)
        )
    };
    writeln!(
        w,
        "The target for (b) is {} per million approvals (the goal beyond it {}): {target}.\n",
        money(TARGET_PER_MILLION),
        money(GOAL_PER_MILLION)
    )
    .expect("write");
    writeln!(w, "## Per approval\n").expect("write");
    let header: Vec<&str> = lives.iter().map(|(name, _)| *name).collect();
    writeln!(w, "| | {} |", header.join(" | ")).expect("write");
    writeln!(w, "|---|{}", "---|".repeat(lives.len())).expect("write");
    let each = |f: &dyn Fn(&Life) -> String| lives.iter().map(|(_, l)| f(l)).collect::<Vec<_>>();
    row(
        w,
        "API requests",
        each(&|l| l.api_requests.to_string()).into_iter(),
    );
    for function in ["create", "decide", "dispatch", "executor", "sweeper"] {
        row(
            w,
            &format!("Lambda `{function}`: invocations, billed ms (model)"),
            each(&|l| match l.invocations.get(function) {
                Some(n) => format!("{n}, {:.0}", l.billed_ms[function]),
                None => "—".into(),
            })
            .into_iter(),
        );
    }
    row(
        w,
        "DynamoDB requests: reads, writes",
        each(&|l| format!("{}, {}", l.reads, l.writes)).into_iter(),
    );
    row(
        w,
        "DynamoDB read request units",
        each(&|l| format!("{:.1}", l.read_units)).into_iter(),
    );
    row(
        w,
        "DynamoDB write request units",
        each(&|l| format!("{:.0}", l.write_units)).into_iter(),
    );
    for function in ["create", "decide", "dispatch", "executor", "sweeper"] {
        row(
            w,
            &format!("… of which by `{function}`"),
            each(&|l| {
                l.write_units_by
                    .get(function)
                    .map_or("—".into(), |u| format!("{u:.0}"))
            })
            .into_iter(),
        );
    }
    for table in TABLES {
        row(
            w,
            &format!("… of which to `{table}` (its indexes included)"),
            each(&|l| {
                l.write_units_to
                    .get(table)
                    .map_or("—".into(), |u| format!("{u:.0}"))
            })
            .into_iter(),
        );
    }
    row(
        w,
        "SQS requests (billed, 64 KiB chunks)",
        each(&|l| format!("{:.0}", l.sqs_billed)).into_iter(),
    );
    row(
        w,
        "calls to the action's target",
        each(&|l| l.target_calls.to_string()).into_iter(),
    );
    row(
        w,
        "notifications sent",
        each(&|l| l.notifications.to_string()).into_iter(),
    );
    row(
        w,
        "callbacks sent",
        each(&|l| l.callbacks.to_string()).into_iter(),
    );
    row(
        w,
        "EMF metrics written to the functions' logs: documents, bytes",
        each(&|l| format!("{}, {}", l.emf_documents, l.emf_bytes)).into_iter(),
    );
    row(
        w,
        &format!(
            "log lines written (JSON, `LogLevel` {}): lines, bytes",
            log_level()
        ),
        each(&|l| format!("{}, {}", l.log_lines, l.log_bytes)).into_iter(),
    );
    row(
        w,
        "kept in DynamoDB afterwards (but what TTL deletes within days): items, bytes",
        each(&|l| format!("{}, {}", l.stored_items, l.stored_bytes)).into_iter(),
    );
    row(
        w,
        "stored for good, as billed (items, index entries, 100 bytes each of overhead): bytes",
        each(&|l| l.kept_bytes.to_string()).into_iter(),
    );
    for (i, (part, _)) in lives[0].1.usd().iter().enumerate() {
        row(
            w,
            &format!("{part}, per million approvals"),
            each(&|l| money(l.usd()[i].1 * 1e6)).into_iter(),
        );
    }
    row(
        w,
        "**per million approvals**",
        each(&|l| format!("**{}**", money(l.per_million()))).into_iter(),
    );

    writeln!(w, "\n## Beside the headline\n").expect("write");
    let xray: Vec<String> = [1e6, 1e7, 1e8]
        .iter()
        .map(|&volume| {
            format!(
                "{} at {} approvals a month",
                money(xray_per_million(b, volume)),
                thousands(volume)
            )
        })
        .collect();
    for line in [
        format!(
            "X-Ray, at the template's default `TracingMode: Active`, per million approvals of (b): {}. Lambda samples the first request each second and 5% of the others, for each function; the volume is assumed spread evenly over a 30-day month, each of (b)'s {} invocations its own trace (a stream or a queue starts a new one), the free tier left out. Sampling makes it dearer per approval the lower the volume. `TracingMode: PassThrough` records only traces an upstream caller sampled: none of these.",
            xray.join(", "),
            b.invocations.values().sum::<usize>()
        ),
        format!(
            "Storage: what (b) keeps for good, {} bytes as DynamoDB bills them (its items and index entries, 100 bytes of overhead each; the idempotency record, deleted by TTL within a day, left out), is {} per million approvals for each month they are kept — approvals are not deleted, so a month's approvals add that to every month after.",
            b.kept_bytes,
            money(b.kept_bytes as f64 / 1e9 * STORAGE_GB_MONTH * 1e6)
        ),
        "Lambda's own log lines: none per invocation. The template logs JSON with `SystemLogLevel: WARN`, so Lambda writes no START, END or REPORT line (they are INFO); a cold start's init lines are not per approval. Without it (the text format's default), those three lines are roughly 350 bytes an invocation, about $0.18 per million invocations.".to_owned(),
    ] {
        writeln!(w, "- {line}").expect("write");
    }

    writeln!(w, "\n## What was cut\n").expect("write");
    writeln!(w, "Scenario (b), step by step:\n").expect("write");
    writeln!(
        w,
        "| change | write units | per million approvals |\n|---|---|---|"
    )
    .expect("write");
    for (change, units, usd) in CUTS {
        writeln!(w, "| {change} | {units:.0} | {} |", money(*usd)).expect("write");
    }
    let units_to = |table: &str| b.write_units_to.get(table).copied().unwrap_or_default();
    writeln!(w, "\n## Where (b)'s write units go\n").expect("write");
    writeln!(
        w,
        "Of (b)'s {:.0} write units (DynamoDB writes are {} of its {}):\n",
        b.write_units,
        money(b.write_units * WRITE_UNIT * 1e6),
        money(b.per_million())
    )
    .expect("write");
    for line in [
        format!(
            "`approvals`, {:.0}: its create (in the idempotency record's transaction), each vote, the decision, and the execution's begin and end — its ledger is on the approval since v5, each one conditional update. An item over 1 KB (a quorum's, with its votes) costs two units a write; `by_status_keys` is written when the status moves, `due` when what is due does (the expiry, then the execution's end).",
            units_to("approvals")
        ),
        format!(
            "`events`, {:.0}: one item per change the stream delivers (its events together) and one per event the executor records — a callback's outcome each (eight callbacks in (b), each its own record, one unit), the notifications of one attempt together.",
            units_to("events")
        ),
        format!(
            "`approval_index`, {:.0}: one item per facet (the requester, each approver: 4 for three approvers), written at the create and moved once at the decision (a delete and a put).",
            units_to("approval_index")
        ),
        format!(
            "`execution_ledger`, {:.0}: the notifications' one item, begun and completed (the completion with its events, in a transaction): one call per approver and notification, kept by the ledger.",
            units_to("execution_ledger")
        ),
        format!(
            "`idempotency_keys`, {:.0}: the create's record, its saved response deflated, in the create's transaction.",
            units_to("idempotency_keys")
        ),
    ] {
        writeln!(w, "- {line}").expect("write");
    }

    writeln!(w, "\n## Keys and secrets\n").expect("write");
    // The secrets as the template declares them (one conditional: ApiKeysSecret).
    let template = countersign_tests::template();
    let secrets: Vec<&serde_norway::Value> = template["Resources"]
        .as_mapping()
        .expect("the template's resources")
        .values()
        .filter(|r| r["Type"].as_str() == Some("AWS::SecretsManager::Secret"))
        .collect();
    let conditional = secrets
        .iter()
        .filter(|r| r.get("Condition").is_some())
        .count();
    let secrets_line = format!(
        "Secrets Manager is fixed, not per approval: the template's {} secrets ({} without `ApiKeys`) at $0.40 a month each, and $0.05 per 10,000 calls — one `BatchGetSecretValue` per function environment at start and every `SECRETS_REFRESH_SECONDS` (300: 8,640 a month per warm environment, about $0.04), and early after a failed signature at most every 30 s.",
        secrets.len(),
        secrets.len() - conditional
    );
    for line in [
        "A table API key adds nothing per approval on a warm function: its item is cached for `KEY_CACHE_SECONDS` (default 60), so the scenarios above cost the same with table keys (`tests/api/round_trips.rs` counts the round trips). A cold key costs one strongly consistent `GetItem` of an item under 4 KB, 1 read unit ($0.125 per million), once per key, function environment and cache time; and `last_used_at` one write unit at most once an hour per key (at most 720 a month per key, under $0.0005).",
        &secrets_line,
    ] {
        writeln!(w, "- {line}").expect("write");
    }

    writeln!(w, "\n## Prices\n").expect("write");
    writeln!(w, "List prices in US East (N. Virginia), as published on {PRICES_TAKEN}; free tiers left out.\n").expect("write");
    writeln!(w, "| | USD | per | source |\n|---|---|---|---|").expect("write");
    for p in PRICES {
        writeln!(w, "| {} | {} | {} | {} |", p.what, p.usd, p.per, p.source).expect("write");
    }
    let memory: Vec<String> = ["create", "decide", "dispatch", "executor", "sweeper"]
        .iter()
        .map(|f| format!("`{f}` {} MB", memory_mb(f)))
        .collect();
    writeln!(
        w,
        "\nLambda: arm64, memory as `infra/template.yaml` sets it ({}).\n",
        memory.join(", ")
    )
    .expect("write");

    writeln!(w, "## How it is counted\n").expect("write");
    for line in [
        "DynamoDB units follow its documented rules, from the items' sizes (attribute names and values, as DynamoDB sizes them, but a number's trailing zeros counted, so that a timestamp's size does not depend on the second it was taken): a write is one unit per KB of the larger of the item before and after it, at least one; a transactional write two; a write that changes what an index holds writes the index too (one write per KB of the entry, the larger of before and after; a moved key a delete and a put; at the standard rate, in a transaction too — AWS documents the doubling for the table's own write only); a write whose condition fails costs the units of the item it checked; a strongly consistent read one unit per 4 KB, an eventually consistent one half, a transactional one two; a query the sum of what it reads. The approvals table's writes are sized from its stream's before and after images of each write; the other tables' from snapshots around each invocation.",
        "SQS requests are billed per 64 KiB chunk of payload (measured on the request or answer body, a little larger than the payload); an executor invocation also pays its event source mapping's receive and delete. The mapping's empty long polls are fixed, not per approval (below).",
        "Lambda's billed time is a model, because measured times depend on the machine: 5 ms per invocation, 10 ms per DynamoDB request (20 ms per transaction), 15 ms per SQS request, 100 ms per round of outbound HTTP calls, a function's requests one after another — but an executor's batch runs its jobs at once, so its invocation is billed its longest job (each job's requests metered apart), and a notify job calls its approvers together (one round). The test prints the measured handler times beside it.",
        "CloudWatch Logs: the bytes ingested of every EMF document and every log line the functions write (JSON, at the template's default `LogLevel`), each line's newline included and its timestamp and durations at their widest. Lambda's own lines: see \"Beside the headline\".",
        "Stream reads by Lambda are free. TTL deletions are free.",
        "Fixed, whatever the traffic: the sweeper and the reconciler run every minute (86,400 invocations a month, well under $0.10), and the executor's event source mapping long-polls the queue (a few hundred thousand empty receives a month, about $0.26).",
    ] {
        writeln!(w, "- {line}").expect("write");
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_cost_of_an_approval_is_what_docs_cost_md_says() {
    let lives = lives().await;
    // Each request and its units, when asked for (COUNTERSIGN_COST_DETAIL=1): where to look
    // for the next cut.
    let detail = std::env::var_os("COUNTERSIGN_COST_DETAIL").is_some();
    for (name, life) in &lives {
        for line in life.detail.iter().filter(|_| detail) {
            println!("{name} {line}");
        }
        let times: Vec<String> = life
            .measured_ms
            .iter()
            .map(|(function, ms)| {
                format!(
                    "{function} {ms:.0} ms (model {:.0})",
                    life.billed_ms[function]
                )
            })
            .collect();
        println!(
            "{name}: handler time on this machine, per function: {}",
            times.join(", ")
        );
    }
    let computed = render(&lives);
    let path = workspace_root().join("docs/COST.md");
    if std::env::var_os("COUNTERSIGN_WRITE_COST").is_some() {
        std::fs::write(&path, &computed).expect("write docs/COST.md");
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == computed,
        "docs/COST.md differs from what this test computes; rewrite it with \
         COUNTERSIGN_WRITE_COST=1 and commit it. Computed:\n{computed}"
    );
    // The cuts' table ends where the code is: a change that makes (b) dearer or cheaper adds
    // its row (and no figure in it is stale).
    let b = &lives[1].1;
    let (_, units, usd) = CUTS.last().expect("a first measurement");
    assert_eq!(
        (format!("{units:.0}"), money(*usd)),
        (format!("{:.0}", b.write_units), money(b.per_million())),
        "scenario (b) now; add a row to CUTS"
    );
}
