//! The scenarios: the four lives played on the local stack, and the log lines and metrics
//! their invocations write.

use std::sync::{LazyLock, Mutex};

use countersign_tests::chain::Chain;
use countersign_tests::*;
use serde_json::{Value, json};

use crate::model::{Life, Mark};
use crate::storage;

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
pub(crate) fn log_level() -> String {
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
pub(crate) fn take_log_lines() -> (usize, usize) {
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

pub(crate) async fn play(
    subscribed: bool,
    life: impl AsyncFnOnce(&TestApp, &mut Chain<'_>),
) -> Life {
    play_from(
        subscribed,
        async |_, _| (),
        async |t, chain, ()| life(t, chain).await,
    )
    .await
}

/// `setup`, unmeasured (its requests, calls out, log lines and metrics left out), then
/// `measured`, given what `setup` returned: a life counted from a point on. With nothing to
/// set up, the whole life.
pub(crate) async fn play_from<T>(
    subscribed: bool,
    setup: impl AsyncFnOnce(&TestApp, &mut Chain<'_>) -> T,
    measured: impl AsyncFnOnce(&TestApp, &mut Chain<'_>, T),
) -> Life {
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
    let set_up = setup(&t, &mut chain).await;
    let from = Mark::now(&chain, &downstream);
    // Only what a set-up wrote is dropped: a whole life counts as it always has.
    if from.steps > 0 {
        take_log_lines();
        t.metrics.take();
    }
    measured(&t, &mut chain, set_up).await;
    let (log_lines, log_bytes) = take_log_lines();
    let mut life = Life::since(&chain, &downstream, from);
    (life.log_lines, life.log_bytes) = (log_lines, log_bytes);
    let documents = t.metrics.take();
    life.emf_documents = documents.len();
    life.emf_bytes = documents.iter().map(|d| emf_bytes(d)).sum();
    life.metric_series = documents.iter().flat_map(|d| metric_series(d)).collect();
    // What a life measured from a point on leaves is not its own alone: left out.
    if from.steps == 0 {
        life.kept = storage::kept(&t).await;
    }
    life
}

/// The CloudWatch metrics a document writes to, each as CloudWatch bills it: one per
/// namespace, metric name and set of dimension values.
pub(crate) fn metric_series(document: &str) -> Vec<String> {
    let doc: Value = serde_json::from_str(document).expect("an EMF document");
    let mut series = Vec::new();
    for directive in doc["_aws"]["CloudWatchMetrics"]
        .as_array()
        .into_iter()
        .flatten()
    {
        for set in directive["Dimensions"].as_array().into_iter().flatten() {
            let dimensions: Vec<String> = set
                .as_array()
                .into_iter()
                .flatten()
                .map(|name| {
                    let name = name.as_str().expect("a dimension's name");
                    format!("{name}={}", doc[name].as_str().expect("its value"))
                })
                .collect();
            for metric in directive["Metrics"].as_array().into_iter().flatten() {
                series.push(format!(
                    "{} {} {}",
                    directive["Namespace"].as_str().expect("a namespace"),
                    metric["Name"].as_str().expect("a metric's name"),
                    dimensions.join(",")
                ));
            }
        }
    }
    series
}

/// A document's bytes in the log, newline included, with its timestamp and durations at their
/// widest (13 and 5 digits): what a duration measures varies from run to run, the file must not.
pub(crate) fn emf_bytes(document: &str) -> usize {
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
pub(crate) fn deploy_for(approvers: &[&str], policy: Option<Value>) -> String {
    let body = CreateBody::new("deploy", approvers)
        .payload(json!({"service": "payments-api", "build": 4312, "image": "registry.example.com/payments-api@sha256:9f2c4a7e1b3d5f6a8c0e2b4d6f8a0c2e4b6d8f0a2c4e6b8d0f2a4c6e8b0d2f4a"}))
        .context(json!({"summary": "Deploy payments-api build 4312 to production", "requested_by": "ci", "link": "https://ci.example.com/builds/4312"}))
        .expires_in(86_400);
    match policy {
        Some(policy) => body.policy(policy).to_string(),
        None => body.to_string(),
    }
}

pub(crate) async fn vote(
    t: &TestApp,
    chain: &mut Chain<'_>,
    id: &str,
    approver: &str,
    decision: &str,
) {
    let reply = chain
        .step(
            "decide",
            t.decide(DECIDER_A, id, decision_body(decision, approver)),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    chain.settle().await;
}

pub(crate) async fn create(t: &TestApp, chain: &mut Chain<'_>, body: &str) -> String {
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

/// A minute with nothing to do: one run of each scheduled function on empty tables.
pub(crate) async fn idle_minute() -> Life {
    play(false, async |t, chain| {
        chain.sweep().await;
        let reconciler =
            countersign::jobs::Reconciler::new(t.function(countersign::Function::Reconciler));
        let report = chain.step("reconciler", reconciler.run()).await;
        report.expect("the reconciler's run succeeds");
    })
    .await
}

/// The four lives: (a) one approver, approved, executed, no subscription; (b) two of three,
/// executed, a subscription to every event; (c) rejected; (d) expired.
pub(crate) async fn lives() -> Vec<(&'static str, Life)> {
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
