//! The model: what a life's counts cost (units to dollars), and the billed Lambda time.

use std::collections::{BTreeMap, BTreeSet};

use countersign_tests::chain::{Chain, Step};
use countersign_tests::*;
use serde_json::Value;

use crate::prices::*;
use crate::storage::Kept;

/// Billed Lambda time is modelled, not measured: the handler's time on this machine depends on
/// the machine and on moto, and a file a test compares must not. Each invocation is billed its
/// own work at these latencies, added up as if nothing in it ran in parallel (an upper bound).
const MS_PER_INVOCATION: f64 = 5.0;
const MS_PER_DYNAMODB: f64 = 10.0;
const MS_PER_TRANSACTION: f64 = 20.0;
const MS_PER_SQS: f64 = 15.0;
const MS_PER_OUTBOUND: f64 = 100.0;

/// Where each function's memory comes from: the template (Globals, or its own MemorySize).
pub(crate) fn memory_mb(function: &str) -> f64 {
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

/// The tables a request names (short names).
fn tables_named(request: &Value) -> Vec<&str> {
    pub(crate) fn short(t: &str) -> &str {
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
pub(crate) struct Life {
    pub(crate) api_requests: usize,
    pub(crate) invocations: BTreeMap<&'static str, usize>,
    pub(crate) billed_ms: BTreeMap<&'static str, f64>,
    pub(crate) measured_ms: BTreeMap<&'static str, f64>,
    pub(crate) lambda_usd: f64,
    pub(crate) reads: usize,
    pub(crate) writes: usize,
    pub(crate) read_units: f64,
    pub(crate) write_units: f64,
    /// Write units per function, to see where they go.
    pub(crate) write_units_by: BTreeMap<&'static str, f64>,
    /// Write units per table (its indexes' included).
    pub(crate) write_units_to: BTreeMap<String, f64>,
    pub(crate) sqs_billed: f64,
    pub(crate) target_calls: usize,
    pub(crate) notifications: usize,
    pub(crate) callbacks: usize,
    /// The EMF documents the invocations wrote to their logs, and their bytes (see
    /// [`crate::scenarios::emf_bytes`]).
    pub(crate) emf_documents: usize,
    pub(crate) emf_bytes: usize,
    /// The log lines the invocations wrote, and their bytes (see
    /// [`crate::scenarios::take_log_lines`]).
    pub(crate) log_lines: usize,
    pub(crate) log_bytes: usize,
    /// The CloudWatch metrics its EMF documents write to: namespace, metric and dimensions
    /// (see [`crate::scenarios::metric_series`]).
    pub(crate) metric_series: BTreeSet<String>,
    /// What it leaves in the tables, by table, and for how long.
    pub(crate) kept: BTreeMap<String, Kept>,
    /// Each request, for the test's output: function, operation, tables, units.
    pub(crate) detail: Vec<String>,
    /// The AWS requests by kind ("DynamoDB UpdateItem"), the function's own (not an event
    /// source mapping's).
    pub(crate) requests: BTreeMap<String, usize>,
}

/// Where a measurement starts: the steps and the calls out so far (a life measured from a
/// point on, as a reminder's sweep is).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Mark {
    pub(crate) steps: usize,
    pub(crate) notifications: usize,
    pub(crate) callbacks: usize,
    pub(crate) total: usize,
}

impl Mark {
    pub(crate) fn now(chain: &Chain<'_>, downstream: &jobs::Downstream) -> Self {
        Self {
            steps: chain.steps.len(),
            notifications: downstream.calls_to("/notify").len(),
            callbacks: downstream.calls_to("/callback").len(),
            total: downstream.total_calls(),
        }
    }
}

impl Life {
    /// The counts of the steps after `from`, and of the calls out since.
    pub(crate) fn since(chain: &Chain<'_>, downstream: &jobs::Downstream, from: Mark) -> Self {
        let mut life = Self::default();
        for step in &chain.steps[from.steps..] {
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
            for call in &step.calls {
                let service = match call.service.as_str() {
                    "dynamodb" => "DynamoDB",
                    "sqs" => "SQS",
                    other => other,
                };
                *life
                    .requests
                    .entry(format!("{service} {}", call.operation))
                    .or_default() += 1;
            }
            for (call, units) in step.calls.iter().zip(&step.call_units) {
                let tables: Vec<&str> = tables_named(&call.request);
                life.detail.push(format!(
                    "{} {} {:?} w{} r{}",
                    step.function, call.operation, tables, units.writes, units.reads
                ));
            }
        }
        life.notifications = downstream.calls_to("/notify").len() - from.notifications;
        life.callbacks = downstream.calls_to("/callback").len() - from.callbacks;
        life.target_calls =
            downstream.total_calls() - from.total - life.notifications - life.callbacks;
        life
    }

    pub(crate) fn usd(&self) -> [(&'static str, f64); 6] {
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

    pub(crate) fn per_million(&self) -> f64 {
        self.usd().iter().map(|(_, usd)| usd).sum::<f64>() * 1e6
    }
}

/// The same gate on Step Functions Standard, counted by hand for (b): notify the approvers
/// (a task), then for each of the two votes wait for it (a task with a task token), record it
/// (a task) and ask whether the quorum is met (a choice); then run the action (a task) and end
/// (succeed). Its transitions alone; the tables, functions and callbacks it would still need
/// are not counted.
pub(crate) const STEP_FUNCTIONS_TRANSITIONS: usize = 1 + 2 * 3 + 1 + 1;
