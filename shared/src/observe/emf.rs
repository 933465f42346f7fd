//! Metrics in CloudWatch's Embedded Metric Format: each invocation (an HTTP request, a stream or
//! queue batch, a scheduled run) records into its own scope, and the scope is written out once at
//! the end, as JSON documents, one per line, on standard output (the function's log, from which
//! CloudWatch extracts the metrics: no API call on any path).
//!
//! Recording never fails and never waits: outside a scope it does nothing, and a write that fails
//! is dropped.

use std::collections::BTreeMap;
use std::future::Future;
use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Map, Value, json};

use super::metric::{Dimension, Metric};

/// The `Function` dimension's value: the function's name (`config::Function::as_str`).
pub type FunctionName = &'static str;

/// EMF's limits: metrics per document, and values per metric.
const MAX_METRICS: usize = 100;
const MAX_VALUES: usize = 100;

tokio::task_local! {
    static CURRENT: Scope;
}

/// How metrics are written and where.
#[derive(Debug, Clone)]
pub struct MetricsConfig {
    /// `METRICS_NAMESPACE`.
    pub namespace: String,
    /// `METRICS_TENANT_DIMENSION`: also publish each metric per tenant.
    pub tenant_dimension: bool,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        Self {
            namespace: "Countersign".to_owned(),
            tenant_dimension: false,
        }
    }
}

/// Where documents go: standard output, or (for tests) a list of lines.
#[derive(Debug, Clone, Default)]
pub enum Sink {
    #[default]
    Stdout,
    Memory(Arc<Mutex<Vec<String>>>),
}

/// Writes each invocation's metrics when it ends.
#[derive(Debug, Clone)]
pub struct Emitter {
    config: MetricsConfig,
    sink: Sink,
}

#[derive(Clone)]
struct Scope {
    recorder: Arc<Recorder>,
    /// The tenant of the work in hand, where one invocation serves several (a batch of jobs).
    tenant: Option<Arc<str>>,
}

struct Recorder {
    function: Mutex<FunctionName>,
    /// The tenant of the whole invocation, once known (an HTTP request, after its key is read).
    tenant: Mutex<Option<Arc<str>>>,
    entries: Mutex<Vec<Entry>>,
}

struct Entry {
    metric: Metric,
    values: Vec<String>,
    tenant: Option<Arc<str>>,
    value: u64,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic elsewhere must not stop metrics: the data under the lock is still whole.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Emitter {
    pub fn new(config: MetricsConfig, sink: Sink) -> Self {
        Self { config, sink }
    }

    /// Runs `work` as one invocation of `function`, then writes what it recorded.
    pub async fn invocation<F: Future>(&self, function: FunctionName, work: F) -> F::Output {
        let recorder = Arc::new(Recorder {
            function: Mutex::new(function),
            tenant: Mutex::new(None),
            entries: Mutex::new(Vec::new()),
        });
        let scope = Scope {
            recorder: recorder.clone(),
            tenant: None,
        };
        let output = CURRENT.scope(scope, work).await;
        self.flush(&recorder);
        output
    }

    /// [`Emitter::invocation`] for work that outlives its caller (a background task).
    pub async fn invocation_owned<F: Future>(self, function: FunctionName, work: F) -> F::Output {
        self.invocation(function, work).await
    }

    fn flush(&self, recorder: &Recorder) {
        let entries = std::mem::take(&mut *lock(&recorder.entries));
        if entries.is_empty() {
            return;
        }
        let function = *lock(&recorder.function);
        let timestamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let documents = documents(&self.config, function, timestamp, &entries);
        match &self.sink {
            Sink::Stdout => {
                let mut out = std::io::stdout().lock();
                for document in documents {
                    let _ = writeln!(out, "{document}");
                }
            }
            Sink::Memory(lines) => lock(lines).extend(documents),
        }
    }
}

/// Counts one occurrence of `metric`; `values` are its dimensions' values, in the order of
/// [`Metric::dimensions`]. Outside an invocation, nothing.
pub fn count(metric: Metric, values: &[&str]) {
    record(metric, values, 1);
}

/// Counts one occurrence for `tenant` (in a run that serves several tenants).
pub fn count_for(tenant: &str, metric: Metric, values: &[&str]) {
    record_for(Some(tenant), metric, values, 1);
}

/// Counts `n` occurrences (nothing when 0).
pub fn count_n(metric: Metric, values: &[&str], n: usize) {
    if n > 0 {
        record(metric, values, n as u64);
    }
}

/// Records a duration in milliseconds.
pub fn milliseconds(metric: Metric, values: &[&str], ms: i64) {
    record(metric, values, u64::try_from(ms).unwrap_or(0));
}

/// Records a duration in milliseconds for `tenant`.
pub fn milliseconds_for(tenant: &str, metric: Metric, values: &[&str], ms: i64) {
    record_for(Some(tenant), metric, values, u64::try_from(ms).unwrap_or(0));
}

fn record(metric: Metric, values: &[&str], value: u64) {
    record_for(None, metric, values, value);
}

fn record_for(tenant: Option<&str>, metric: Metric, values: &[&str], value: u64) {
    debug_assert_eq!(values.len(), metric.dimensions().len(), "{metric:?}");
    let _ = CURRENT.try_with(|scope| {
        let tenant = tenant
            .map(Arc::from)
            .or_else(|| scope.tenant.clone())
            .or_else(|| lock(&scope.recorder.tenant).clone());
        lock(&scope.recorder.entries).push(Entry {
            metric,
            values: values.iter().map(|v| (*v).to_owned()).collect(),
            tenant,
            value,
        });
    });
}

/// The invocation's function, where one router serves several (the local runner).
pub fn set_function(function: FunctionName) {
    let _ = CURRENT.try_with(|scope| *lock(&scope.recorder.function) = function);
}

/// The invocation's tenant, once its API key is read.
pub fn set_tenant(tenant: &str) {
    let _ = CURRENT.try_with(|scope| *lock(&scope.recorder.tenant) = Some(Arc::from(tenant)));
}

/// Runs `work` (one job of a batch) with its tenant.
pub async fn for_tenant<F: Future>(tenant: &str, work: F) -> F::Output {
    match CURRENT.try_with(Scope::clone) {
        Ok(scope) => {
            let scope = Scope {
                tenant: Some(Arc::from(tenant)),
                ..scope
            };
            CURRENT.scope(scope, work).await
        }
        Err(_) => work.await,
    }
}

/// What one document is about: its dimensions' names and values (a metric's own dimensions, and
/// the tenant when published per tenant).
type GroupKey = (Vec<(Dimension, String)>, Option<Arc<str>>);

/// The documents for one invocation: one per distinct set of dimension values (EMF puts a
/// document's dimension values at its top level, so two values of `Outcome` need two documents).
fn documents(
    config: &MetricsConfig,
    function: FunctionName,
    timestamp: u64,
    entries: &[Entry],
) -> Vec<String> {
    let mut groups: BTreeMap<GroupKey, BTreeMap<Metric, Vec<u64>>> = BTreeMap::new();
    for entry in entries {
        let dimensions = entry
            .metric
            .dimensions()
            .iter()
            .copied()
            .zip(entry.values.iter().cloned())
            .collect();
        let tenant = entry.tenant.clone().filter(|_| config.tenant_dimension);
        groups
            .entry((dimensions, tenant))
            .or_default()
            .entry(entry.metric)
            .or_default()
            .push(entry.value);
    }
    let mut documents = Vec::new();
    for ((dimensions, tenant), metrics) in groups {
        // Counts are summed; durations are kept one value each (EMF takes arrays).
        let metrics: Vec<(Metric, Vec<u64>)> = metrics
            .into_iter()
            .map(|(metric, values)| match metric.unit() {
                super::Unit::Count => (metric, vec![values.iter().sum()]),
                super::Unit::Milliseconds => (metric, values),
            })
            .collect();
        for chunk in metrics.chunks(MAX_METRICS) {
            let rounds = chunk
                .iter()
                .map(|(_, values)| values.len().div_ceil(MAX_VALUES))
                .max()
                .unwrap_or(0);
            for round in 0..rounds {
                let part: Vec<(Metric, &[u64])> = chunk
                    .iter()
                    .filter_map(|(metric, values)| {
                        let start = round * MAX_VALUES;
                        (start < values.len()).then(|| {
                            (
                                *metric,
                                &values[start..values.len().min(start + MAX_VALUES)],
                            )
                        })
                    })
                    .collect();
                documents.push(document(
                    config,
                    function,
                    timestamp,
                    &dimensions,
                    tenant.as_deref(),
                    &part,
                ));
            }
        }
    }
    documents
}

fn document(
    config: &MetricsConfig,
    function: FunctionName,
    timestamp: u64,
    dimensions: &[(Dimension, String)],
    tenant: Option<&str>,
    metrics: &[(Metric, &[u64])],
) -> String {
    let own: Vec<&str> = dimensions.iter().map(|(d, _)| d.as_str()).collect();
    // Per function, and across functions (an alarm watches the latter), and per tenant if asked.
    let mut sets = vec![
        std::iter::once(Dimension::Function.as_str())
            .chain(own.iter().copied())
            .collect::<Vec<_>>(),
        own.clone(),
    ];
    if tenant.is_some() {
        sets.push(
            own.iter()
                .copied()
                .chain(std::iter::once(Dimension::Tenant.as_str()))
                .collect(),
        );
    }
    let definitions: Vec<Value> = metrics
        .iter()
        .map(|(metric, _)| json!({"Name": metric.name(), "Unit": metric.unit().as_str()}))
        .collect();
    let mut doc = Map::new();
    doc.insert(
        "_aws".into(),
        json!({
            "Timestamp": timestamp,
            "CloudWatchMetrics": [{
                "Namespace": config.namespace,
                "Dimensions": sets,
                "Metrics": definitions,
            }],
        }),
    );
    doc.insert(Dimension::Function.as_str().into(), function.into());
    for (dimension, value) in dimensions {
        doc.insert(dimension.as_str().into(), value.as_str().into());
    }
    if let Some(tenant) = tenant {
        doc.insert(Dimension::Tenant.as_str().into(), tenant.into());
    }
    for (metric, values) in metrics {
        let value = match values {
            [one] => json!(one),
            many => json!(many),
        };
        doc.insert(metric.name().into(), value);
    }
    Value::Object(doc).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(metric: Metric, values: &[&str], value: u64) -> Entry {
        Entry {
            metric,
            values: values.iter().map(|v| (*v).to_owned()).collect(),
            tenant: Some(Arc::from("tenant-a")),
            value,
        }
    }

    #[test]
    fn one_document_per_set_of_dimension_values_counts_summed_durations_kept() {
        let entries = [
            entry(Metric::ApprovalDecided, &["approved"], 1),
            entry(Metric::ApprovalDecided, &["approved"], 1),
            entry(Metric::TimeToDecision, &["approved"], 1500),
            entry(Metric::TimeToDecision, &["approved"], 2500),
            entry(Metric::ApprovalDecided, &["rejected"], 1),
            entry(Metric::JobRetried, &[], 1),
        ];
        let docs: Vec<Value> = documents(&MetricsConfig::default(), "dispatch", 1, &entries)
            .iter()
            .map(|d| serde_json::from_str(d).expect("JSON"))
            .collect();
        assert_eq!(docs.len(), 3, "{docs:#?}");
        let approved = docs
            .iter()
            .find(|d| d["Outcome"] == "approved")
            .expect("approved");
        assert_eq!(approved["ApprovalDecided"], 2);
        assert_eq!(approved["TimeToDecision"], json!([1500, 2500]));
        assert_eq!(approved["Function"], "dispatch");
        assert_eq!(
            approved["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
            json!([["Function", "Outcome"], ["Outcome"]])
        );
        assert!(approved.get("Tenant").is_none(), "no tenant unless asked");
        let retried = docs
            .iter()
            .find(|d| d.get("JobRetried").is_some())
            .expect("retried");
        assert_eq!(
            retried["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
            json!([["Function"], []])
        );
    }

    #[test]
    fn the_tenant_dimension_only_when_asked_and_large_batches_split_at_100_values() {
        let config = MetricsConfig {
            tenant_dimension: true,
            ..MetricsConfig::default()
        };
        let entries: Vec<Entry> = (0..250)
            .map(|ms| entry(Metric::DecisionToEffect, &["deploy"], ms))
            .collect();
        let docs: Vec<Value> = documents(&config, "executor", 1, &entries)
            .iter()
            .map(|d| serde_json::from_str(d).expect("JSON"))
            .collect();
        let sizes: Vec<usize> = docs
            .iter()
            .map(|d| d["DecisionToEffect"].as_array().map_or(1, Vec::len))
            .collect();
        assert_eq!(sizes, [100, 100, 50]);
        assert!(docs.iter().all(|d| d["Tenant"] == "tenant-a"));
        assert_eq!(
            docs[0]["_aws"]["CloudWatchMetrics"][0]["Dimensions"][2],
            json!(["ActionType", "Tenant"])
        );
    }

    #[tokio::test]
    async fn outside_an_invocation_recording_does_nothing_and_inside_it_is_written_once() {
        count(Metric::JobRetried, &[]);
        let lines = Arc::new(Mutex::new(Vec::new()));
        let emitter = Emitter::new(MetricsConfig::default(), Sink::Memory(lines.clone()));
        emitter
            .invocation("api", async {
                set_function("decide");
                count(Metric::VoteCounted, &["api"]);
            })
            .await;
        emitter.invocation("api", async {}).await;
        let lines = lines.lock().expect("lines").clone();
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].contains(r#""Function":"decide""#), "{}", lines[0]);
    }
}
