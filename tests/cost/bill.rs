//! The whole bill: what a default deployment pays a month, beside what its approvals cost on
//! the request path — its fixed costs (secrets, alarms, dashboard, metrics, scheduled runs, the
//! queue's polls), what its tables store under `RetentionDays` and their point-in-time
//! recovery, its tracing at either `TracingMode`, and what a held read costs.

use crate::deployment::{Deployment, MONTH_SECONDS};
use crate::model::{Life, memory_mb};
use crate::prices::*;

/// The volumes the bill is given at, approvals a month.
pub(crate) const VOLUMES: [f64; 2] = [1e6, 1e7];

/// `SECRETS_REFRESH_SECONDS`' default: a warm instance reads its secrets again this often.
pub(crate) const SECRETS_REFRESH_SECONDS: f64 = 300.0;

/// The executor's event source mapping: Lambda long-polls the jobs queue with five pollers
/// (its documented starting number), each receive waiting up to 20 s when the queue is empty.
pub(crate) const QUEUE_POLLERS: f64 = 5.0;
pub(crate) const LONG_POLL_SECONDS: f64 = 20.0;

/// X-Ray's default sampling rule, which Lambda applies with `TracingMode: Active`: the first
/// request each second, and 5% of the others (each function on its own).
pub(crate) const RESERVOIR_PER_SECOND: f64 = 1.0;
pub(crate) const FIXED_RATE: f64 = 0.05;

/// A held read (`GET /approvals/{id}?wait=N`, shared/src/http/wait.rs) reads the approval at 0,
/// 0.2, 0.6 and 1.4 s, then once a second, until N seconds have passed.
pub(crate) fn reads_in_hold(seconds: f64) -> usize {
    let (mut at, mut pause, mut reads) = (0.0, 0.2_f64, 1);
    while at < seconds {
        at += pause.min(seconds - at);
        reads += 1;
        pause = (pause * 2.0).min(1.0);
    }
    reads
}

/// The function a logical id names, as the lives call it (`CreateFunction`: `create`).
pub(crate) fn function_of(logical_id: &str) -> String {
    let name = logical_id.trim_end_matches("Function");
    name[..1].to_lowercase() + &name[1..]
}

pub(crate) struct Bill<'a> {
    pub(crate) deployment: Deployment,
    /// The approval every one of the month's is taken to be: scenario (b).
    pub(crate) life: &'a Life,
    /// Every life played: the metrics they write together.
    pub(crate) lives: &'a [(&'a str, Life)],
    /// One run of each scheduled function with nothing to do.
    pub(crate) idle: &'a Life,
}

impl Bill<'_> {
    /// The request path at `volume` approvals a month.
    pub(crate) fn request_path(&self, volume: f64) -> f64 {
        self.life.per_million() * volume / 1e6
    }

    /// The mean number of `function`'s invocations running at once at `volume`.
    /// (Little's law: approvals a second times the function's billed seconds an approval.)
    fn concurrency(&self, function: &str, volume: f64) -> f64 {
        let seconds = self.life.billed_ms.get(function).copied().unwrap_or(0.0) / 1000.0;
        volume / MONTH_SECONDS * seconds
    }

    /// The warm instances that read secrets at `volume`, per function with secrets that runs:
    /// (function, instances, secrets each read). One instance per function the approvals or
    /// a schedule invoke, and one more per instance busy on average (room for bursts).
    pub(crate) fn secret_readers(&self, volume: f64) -> Vec<(String, f64, usize)> {
        let scheduled: Vec<String> = self
            .deployment
            .scheduled()
            .iter()
            .map(|(id, _)| function_of(id))
            .collect();
        self.deployment
            .secrets_read()
            .into_iter()
            .filter(|(_, secrets)| *secrets > 0)
            .map(|(id, secrets)| (function_of(&id), secrets))
            .filter(|(f, _)| {
                self.life.invocations.contains_key(f.as_str()) || scheduled.contains(f)
            })
            .map(|(f, secrets)| {
                let instances = 1.0 + self.concurrency(&f, volume).ceil();
                (f, instances, secrets)
            })
            .collect()
    }

    /// The fixed costs at `volume` (only the secrets' reads grow with it): (what, dollars).
    pub(crate) fn fixed(&self, volume: f64) -> Vec<(&'static str, f64)> {
        let d = &self.deployment;
        let (_, secrets) = d.count("AWS::SecretsManager::Secret");
        let reads: f64 = self
            .secret_readers(volume)
            .iter()
            .map(|(_, instances, secrets)| {
                instances * MONTH_SECONDS / SECRETS_REFRESH_SECONDS * *secrets as f64
            })
            .sum();
        let alarms = d.alarm_metrics();
        let (_, dashboards) = d.count("AWS::CloudWatch::Dashboard");
        vec![
            ("secrets", secrets as f64 * SECRET_MONTH),
            ("secrets' reads", reads * SECRET_CALL),
            (
                "alarms",
                alarms.standard as f64 * ALARM_METRIC_MONTH
                    + alarms.high_resolution as f64 * ALARM_METRIC_HIGH_RESOLUTION_MONTH,
            ),
            ("dashboard", dashboards as f64 * DASHBOARD_MONTH),
            (
                "custom metrics",
                self.metric_series() as f64 * CUSTOM_METRIC_MONTH,
            ),
            ("scheduled runs", self.scheduled_runs()),
            ("the jobs queue's empty polls", self.queue_polls()),
        ]
    }

    /// The distinct CloudWatch metrics the lives' EMF documents write to.
    pub(crate) fn metric_series(&self) -> usize {
        let mut series = std::collections::BTreeSet::new();
        for (_, life) in self.lives {
            series.extend(life.metric_series.iter());
        }
        series.len()
    }

    /// The scheduled functions' runs a month, each at what one idle run costs.
    pub(crate) fn scheduled_runs(&self) -> f64 {
        let runs = self.deployment.scheduled();
        let each = runs.first().expect("scheduled functions").1;
        assert!(
            runs.iter().all(|(_, n)| *n == each),
            "every scheduled function runs as often (the idle minute runs each once)"
        );
        self.idle.per_million() / 1e6 * each
    }

    pub(crate) fn queue_polls(&self) -> f64 {
        QUEUE_POLLERS * MONTH_SECONDS / LONG_POLL_SECONDS * SQS_REQUEST
    }

    /// GB-months an approval of the month is stored, in all (over its stay), by the tables;
    /// `recovered`: what point-in-time recovery is billed on, in the tables that have it.
    pub(crate) fn gb_months(&self, recovered: bool) -> f64 {
        let tables = self.deployment.recovered_tables();
        self.life
            .kept
            .values()
            .filter(|k| !recovered || tables.contains(&k.logical_id))
            .map(|k| {
                if recovered {
                    k.recovered_byte_days
                } else {
                    k.byte_days
                }
            })
            .sum::<f64>()
            / 30.4
            / 1e9
    }

    /// The log groups' storage an approval adds: its bytes ingested, kept the retention.
    pub(crate) fn log_gb_months(&self) -> f64 {
        (self.life.emf_bytes + self.life.log_bytes) as f64 / 1e9
            * self.deployment.log_retention_days()
            / 30.4
    }

    /// Storage a month in steady state (every month's approvals kept their whole stay), per
    /// approval a month: the tables' and the logs'.
    pub(crate) fn storage_per_approval(&self) -> f64 {
        self.gb_months(false) * STORAGE_GB_MONTH + self.log_gb_months() * LOGS_STORED_GB_MONTH
    }

    pub(crate) fn recovery_per_approval(&self) -> f64 {
        self.gb_months(true) * RECOVERY_GB_MONTH
    }

    /// Traces recorded a month with `TracingMode: Active` at `volume`: each function's
    /// sampled invocations (the approvals', spread evenly; a stream or a queue starts a new
    /// trace), and every scheduled run (one a minute, each under the reservoir).
    pub(crate) fn traces(&self, volume: f64) -> f64 {
        let per_second: f64 = self
            .life
            .invocations
            .values()
            .map(|&per_approval| {
                let rate = volume * per_approval as f64 / MONTH_SECONDS;
                rate.min(RESERVOIR_PER_SECOND) + FIXED_RATE * (rate - RESERVOIR_PER_SECOND).max(0.0)
            })
            .sum();
        let scheduled: f64 = self.deployment.scheduled().iter().map(|(_, n)| n).sum();
        per_second * MONTH_SECONDS + scheduled
    }

    pub(crate) fn tracing(&self, volume: f64, mode: &str) -> f64 {
        match mode {
            "Active" => self.traces(volume) * XRAY_TRACE,
            "PassThrough" => 0.0,
            other => panic!("a TracingMode the bill does not know: {other}"),
        }
    }

    /// A month's bill at `volume` with `mode`: (request path, fixed, storage, recovery,
    /// tracing, total).
    pub(crate) fn month(&self, volume: f64, mode: &str) -> [f64; 6] {
        let parts = [
            self.request_path(volume),
            self.fixed(volume).iter().map(|(_, usd)| usd).sum(),
            self.storage_per_approval() * volume,
            self.recovery_per_approval() * volume,
            self.tracing(volume, mode),
        ];
        let total = parts.iter().sum();
        [parts[0], parts[1], parts[2], parts[3], parts[4], total]
    }

    /// One held read of `seconds`: (what, dollars). The read function is billed the whole hold
    /// and its own work outside it (the model's 5 ms an invocation, 10 ms a request: the first
    /// read and the seat's take and give-back); its reads are strongly consistent reads of
    /// (b)'s approval; the seat's item is under 1 KB while fewer than about 25 reads hold.
    pub(crate) fn held_read(&self, seconds: f64) -> Vec<(&'static str, f64)> {
        let mut parts = self.read_request(
            seconds + (5.0 + 3.0 * 10.0) / 1000.0,
            reads_in_hold(seconds),
        );
        parts.push(("DynamoDB writes (the seat)", 2.0 * WRITE_UNIT));
        parts
    }

    /// One poll of an MCP task (`tasks/get`: one plain `GET /approvals/{id}`, no hold, no
    /// seat): the read function's own work (the model's 5 ms an invocation, 10 ms a request),
    /// one strongly consistent read of (b)'s approval, its log line.
    pub(crate) fn task_poll(&self) -> Vec<(&'static str, f64)> {
        self.read_request((5.0 + 10.0) / 1000.0, 1)
    }

    /// A request to the read function billed `seconds`, reading (b)'s approval `reads` times
    /// (strongly consistent), with its log line.
    fn read_request(&self, seconds: f64, reads: usize) -> Vec<(&'static str, f64)> {
        let memory_gb = memory_mb("read") / 1024.0;
        let approval = self.life.kept["approvals"].item_bytes;
        let units = approval.div_ceil(4096).max(1) as f64;
        let line = self.life.log_bytes as f64 / self.life.log_lines.max(1) as f64;
        vec![
            (
                "Lambda duration",
                memory_gb * seconds * LAMBDA_GB_SECOND_ARM,
            ),
            ("Lambda request", LAMBDA_REQUEST),
            ("API Gateway request", API_REQUEST),
            ("DynamoDB reads", reads as f64 * units * READ_UNIT),
            ("its log line", line / 1e9 * LOGS_INGESTED_GB),
        ]
    }
}
