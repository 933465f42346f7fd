//! What operators see, in the SAM template against the code: the runbook's alarms, each pointing at
//! docs/OPERATIONS.md, the dashboard against the metrics the code emits (`Metric::ALL`), tracing
//! and the metrics variables on every function, and the runbook against both.
//!
//! Here the alarms and the runbook, and the template's alarms and the code's metrics as the
//! other two read them; the dashboard in `alarms/dashboard.rs`, tracing and the metrics
//! variables in `alarms/telemetry.rs`.

use std::collections::{BTreeMap, BTreeSet};

use countersign::observe::{Dimension, Metric, Unit};
use serde_norway::Value;

use crate::template::{of_type, template, text};

mod dashboard;
mod telemetry;

/// The `Function` dimension values: the binary each function runs.
fn function_values() -> Vec<&'static str> {
    countersign::Function::ALL
        .map(countersign::Function::as_str)
        .to_vec()
}

/// The closed `Outcome` sets (docs/OPERATIONS.md, "Metrics"), per metric that has one.
fn outcomes(metric: Metric) -> Option<BTreeSet<&'static str>> {
    let decided = ["approved", "rejected", "expired", "cancelled"];
    let set: &[&str] = match metric {
        Metric::ApprovalDecided | Metric::TimeToDecision => &decided,
        Metric::ExecutionEnded => &["succeeded", "failed", "needs_reconciliation"],
        Metric::StatusQuery => &["succeeded", "failed", "not_found", "pending", "unknown"],
        _ => return None,
    };
    Some(set.iter().copied().collect())
}

fn metric_named(name: &str) -> Option<Metric> {
    Metric::ALL.iter().copied().find(|m| m.name() == name)
}

/// The dimension sets a metric is emitted with (and so may be read by): `[Function, D…]` and
/// `[D…]` (the `Tenant` set only on request: nothing in the template reads it).
fn emitted_dimension_sets(metric: Metric) -> [BTreeSet<String>; 2] {
    let own: BTreeSet<String> = metric
        .dimensions()
        .iter()
        .map(|d| d.as_str().to_owned())
        .collect();
    let mut with_function = own.clone();
    with_function.insert(Dimension::Function.as_str().to_owned());
    [with_function, own]
}

/// An alarm as the template declares it; intrinsic values as [`text`] renders them
/// (`!Ref DispatchFunction`, `!GetAtt JobsQueue.QueueName`).
#[derive(Debug)]
struct Alarm {
    id: String,
    namespace: String,
    metric: String,
    dimensions: BTreeMap<String, String>,
    statistic: String,
    period: u64,
    threshold: f64,
    comparison: String,
    missing_data: String,
    description: String,
    actions: String,
}

fn alarms(template: &Value) -> Vec<Alarm> {
    of_type(template, "AWS::CloudWatch::Alarm")
        .into_iter()
        .map(|(id, alarm)| {
            let p = &alarm["Properties"];
            let string = |key: &str| p[key].as_str().unwrap_or_default().to_owned();
            Alarm {
                namespace: text(&p["Namespace"]),
                metric: string("MetricName"),
                dimensions: p["Dimensions"]
                    .as_sequence()
                    .into_iter()
                    .flatten()
                    .map(|d| (text(&d["Name"]), text(&d["Value"])))
                    .collect(),
                statistic: string("Statistic"),
                period: p["Period"].as_u64().unwrap_or_default(),
                threshold: p["Threshold"].as_f64().unwrap_or(f64::NAN),
                comparison: string("ComparisonOperator"),
                missing_data: string("TreatMissingData"),
                description: string("AlarmDescription"),
                actions: text(&p["AlarmActions"]),
                id,
            }
        })
        .collect()
}

/// The alarms on `namespace`/`metric` with exactly these dimensions.
fn watching<'a>(
    alarms: &'a [Alarm],
    namespace: &str,
    metric: &str,
    dimensions: &[(&str, &str)],
) -> Vec<&'a Alarm> {
    let dimensions: BTreeMap<String, String> = dimensions
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    alarms
        .iter()
        .filter(|a| a.namespace == namespace && a.metric == metric && a.dimensions == dimensions)
        .collect()
}

/// The logical id inside `!GetAtt <Id>.Arn` (or `!GetAtt <Id>.<Attribute>`).
fn get_att_target(value: &Value) -> Option<String> {
    let Value::Tagged(tagged) = value else {
        return None;
    };
    if tagged.tag != "!GetAtt" {
        return None;
    }
    let target = tagged.value.as_str()?;
    Some(
        target
            .split_once('.')
            .map_or(target, |(id, _)| id)
            .to_owned(),
    )
}

/// Every queue that receives what failed for good: a queue's redrive target and an event
/// source's on-failure destination.
fn dead_letter_queues(template: &Value) -> BTreeSet<String> {
    let mut queues = BTreeSet::new();
    for (_, queue) in of_type(template, "AWS::SQS::Queue") {
        queues.extend(get_att_target(
            &queue["Properties"]["RedrivePolicy"]["deadLetterTargetArn"],
        ));
    }
    for (_, function) in of_type(template, "AWS::Serverless::Function") {
        for (_, event) in function["Properties"]["Events"]
            .as_mapping()
            .into_iter()
            .flatten()
        {
            queues.extend(get_att_target(
                &event["Properties"]["DestinationConfig"]["OnFailure"]["Destination"],
            ));
        }
    }
    queues
}

/// "Alarms in the template, each with a description …: any execution ending
/// needs_reconciliation; failed executions; the approvals stream's IteratorAge; the jobs queue's
/// ApproximateAgeOfOldestMessage; errors and throttles per function; the HTTP API's 5xx; the
/// scheduled functions' errors; the dead-letter queues" — each found by what it watches.
#[test]
fn every_alarm_the_spec_lists_is_in_the_template() {
    let template = template();
    let alarms = alarms(&template);
    let namespace = "!Ref MetricsNamespace";
    let one = |found: Vec<&Alarm>, what: &str| -> String {
        assert_eq!(
            found.len(),
            1,
            "{what}: one alarm, found {:?}",
            found.iter().map(|a| &a.id).collect::<Vec<_>>()
        );
        found[0].id.clone()
    };

    // A person must act on every unreconciled execution: one is enough, within a minute.
    let id = one(
        watching(
            &alarms,
            namespace,
            "ExecutionEnded",
            &[("Outcome", "needs_reconciliation")],
        ),
        "needs_reconciliation",
    );
    let a = alarms.iter().find(|a| a.id == id).expect("found");
    assert_eq!(
        (
            a.statistic.as_str(),
            a.period,
            a.threshold,
            a.comparison.as_str(),
            a.missing_data.as_str()
        ),
        (
            "Sum",
            60,
            1.0,
            "GreaterThanOrEqualToThreshold",
            "notBreaching"
        ),
        "{id}"
    );

    let id = one(
        watching(
            &alarms,
            namespace,
            "ExecutionEnded",
            &[("Outcome", "failed")],
        ),
        "failed executions",
    );
    let a = alarms.iter().find(|a| a.id == id).expect("found");
    assert_eq!(a.statistic, "Sum", "{id}");
    assert!(a.threshold >= 1.0, "{id}");

    let id = one(
        watching(
            &alarms,
            "AWS/Lambda",
            "IteratorAge",
            &[("FunctionName", "!Ref DispatchFunction")],
        ),
        "the approvals stream's IteratorAge",
    );
    let a = alarms.iter().find(|a| a.id == id).expect("found");
    assert_eq!(a.statistic, "Maximum", "{id}");
    assert!((1_000.0..=300_000.0).contains(&a.threshold), "{id}: ms");

    // The jobs queue's age: above a job's whole default retry budget (visibility x (attempts +
    // 3), the redrive's receive count), so a job still being retried does not raise it, and
    // above three of the longest visibility timeouts (SQS stops counting a message toward this
    // metric once it has been received three times).
    let id = one(
        watching(
            &alarms,
            "AWS/SQS",
            "ApproximateAgeOfOldestMessage",
            &[("QueueName", "!GetAtt JobsQueue.QueueName")],
        ),
        "the jobs queue's ApproximateAgeOfOldestMessage",
    );
    let a = alarms.iter().find(|a| a.id == id).expect("found");
    assert_eq!(a.statistic, "Maximum", "{id}");
    let visibility = &template["Parameters"]["JobVisibilityTimeoutSeconds"];
    let attempts = template["Parameters"]["JobMaxAttempts"]["Default"]
        .as_str()
        .expect("JobMaxAttempts' default");
    let receives = template["Mappings"]["Redrive"][attempts]["MaxReceiveCount"]
        .as_f64()
        .expect("the redrive's receive count for the default attempts");
    let budget = visibility["Default"].as_f64().expect("visibility") * receives;
    assert!(
        a.threshold >= budget,
        "{id}: {} s < {budget} s",
        a.threshold
    );
    let longest = visibility["MaxValue"]
        .as_f64()
        .expect("visibility's maximum");
    assert!(a.threshold >= 3.0 * longest, "{id}");

    // Errors and throttles of every function; the scheduled functions' errors among them.
    for (function, _) in of_type(&template, "AWS::Serverless::Function") {
        for metric in ["Errors", "Throttles"] {
            let reference = format!("!Ref {function}");
            let id = one(
                watching(
                    &alarms,
                    "AWS/Lambda",
                    metric,
                    &[("FunctionName", reference.as_str())],
                ),
                &format!("{function} {metric}"),
            );
            let a = alarms.iter().find(|a| a.id == id).expect("found");
            assert_eq!(a.statistic, "Sum", "{id}");
        }
    }
    for (function, alarm) in [
        ("SweeperFunction", "SweeperErrorsAlarm"),
        ("ReconcilerFunction", "ReconcilerErrorsAlarm"),
    ] {
        let reference = format!("!Ref {function}");
        let found = watching(
            &alarms,
            "AWS/Lambda",
            "Errors",
            &[("FunctionName", reference.as_str())],
        );
        assert_eq!(
            found[0].id, alarm,
            "the existing alarm keeps its logical id"
        );
    }

    // The HTTP API's 5xx: an HTTP API's metric is `5xx` (a REST API's is 5XXError), by ApiId
    // and Stage (SAM's stage is $default unless StageName says otherwise).
    let stage = template["Resources"]["HttpApi"]["Properties"]["StageName"]
        .as_str()
        .unwrap_or("$default");
    one(
        watching(
            &alarms,
            "AWS/ApiGateway",
            "5xx",
            &[("ApiId", "!Ref HttpApi"), ("Stage", stage)],
        ),
        "the HTTP API's 5xx",
    );

    // Every dead-letter queue, as before.
    let queues = dead_letter_queues(&template);
    assert_eq!(
        queues,
        BTreeSet::from([
            "JobsDeadLetterQueue".to_owned(),
            "DispatchFailureQueue".to_owned()
        ])
    );
    for queue in queues {
        let name = format!("!GetAtt {queue}.QueueName");
        let id = one(
            watching(
                &alarms,
                "AWS/SQS",
                "ApproximateNumberOfMessagesVisible",
                &[("QueueName", name.as_str())],
            ),
            &queue,
        );
        let kept = ["JobsDeadLetterAlarm", "DispatchFailureAlarm"];
        assert!(
            kept.contains(&id.as_str()),
            "{id}: the existing logical ids"
        );
    }
}

/// Each alarm says what it means and the first thing to do, points at its section of the
/// runbook, and notifies the alarm topic when there is one.
#[test]
fn every_alarm_says_what_it_means_and_points_at_its_runbook_section() {
    let template = template();
    let alarms = alarms(&template);
    assert!(alarms.len() >= 20, "{} alarms", alarms.len());
    let runbook = runbook();
    for alarm in &alarms {
        let id = &alarm.id;
        let description = alarm.description.trim();
        assert!(
            description.len() >= 80,
            "{id}: a description that says something"
        );
        assert!(description.len() <= 1024, "{id}: CloudWatch's limit");
        assert!(
            description.contains(&format!("docs/OPERATIONS.md, section {id}")),
            "{id}: points at its runbook section: {description}"
        );
        assert!(
            runbook.contains(&format!("### {id}\n")),
            "docs/OPERATIONS.md: a section `### {id}`"
        );
        assert_eq!(
            alarm.actions, "!If HasAlarmTopic !Ref AlarmTopicArn !Ref AWS::NoValue",
            "{id}: notifies the alarm topic"
        );
        assert!(
            !alarm.comparison.is_empty() && alarm.period >= 60 && alarm.threshold.is_finite(),
            "{id}: {alarm:?}"
        );
    }
}

/// An alarm on Countersign's own metrics names one the code emits, in the namespace the
/// functions write to, with a dimension set the code emits it with, and an outcome it has.
#[test]
fn alarms_on_countersign_metrics_name_metrics_the_code_emits() {
    let template = template();
    let mut custom = 0;
    for alarm in alarms(&template) {
        if alarm.namespace.starts_with("AWS/") {
            continue;
        }
        custom += 1;
        let id = &alarm.id;
        assert_eq!(alarm.namespace, "!Ref MetricsNamespace", "{id}");
        let metric = metric_named(&alarm.metric)
            .unwrap_or_else(|| panic!("{id}: {} is not in Metric::ALL", alarm.metric));
        let names: BTreeSet<String> = alarm.dimensions.keys().cloned().collect();
        assert!(
            emitted_dimension_sets(metric).contains(&names),
            "{id}: {metric:?} is not emitted with the dimensions {names:?}"
        );
        if let Some(outcome) = alarm.dimensions.get("Outcome") {
            let allowed = outcomes(metric).expect("an outcome set");
            assert!(allowed.contains(outcome.as_str()), "{id}: {outcome}");
        }
        if let Some(function) = alarm.dimensions.get("Function") {
            assert!(function_values().contains(&function.as_str()), "{id}");
        }
        let statistic = alarm.statistic.as_str();
        match metric.unit() {
            Unit::Count => assert_eq!(statistic, "Sum", "{id}"),
            Unit::Milliseconds => assert_ne!(statistic, "Sum", "{id}"),
        }
    }
    assert!(
        custom >= 2,
        "the execution alarms watch Countersign's metrics"
    );
}

fn runbook() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/OPERATIONS.md");
    std::fs::read_to_string(path).expect("docs/OPERATIONS.md")
}

/// docs/OPERATIONS.md has a section per alarm of the template, and a row per metric of the code
/// with its unit and dimensions as `Metric` declares them.
#[test]
fn the_runbook_covers_every_alarm_and_every_metric() {
    let template = template();
    let runbook = runbook();
    for alarm in alarms(&template) {
        assert!(
            runbook.contains(&format!("### {}\n", alarm.id)),
            "docs/OPERATIONS.md: no section for {}",
            alarm.id
        );
    }
    for metric in Metric::ALL {
        let prefix = format!("| `{}` |", metric.name());
        let rows: Vec<&str> = runbook
            .lines()
            .filter(|line| line.starts_with(&prefix))
            .collect();
        assert_eq!(rows.len(), 1, "docs/OPERATIONS.md: one row for {metric:?}");
        let cells: Vec<&str> = rows[0].split('|').map(str::trim).collect();
        assert_eq!(cells[2], metric.unit().as_str(), "{metric:?}: unit");
        let documented: BTreeSet<&str> = cells[3]
            .split('`')
            .skip(1)
            .step_by(2)
            .filter(|d| *d != Dimension::Tenant.as_str())
            .collect();
        let mut declared: BTreeSet<&str> = metric.dimensions().iter().map(|d| d.as_str()).collect();
        declared.insert(Dimension::Function.as_str());
        assert_eq!(documented, declared, "{metric:?}: dimensions");
        assert!(cells[4].len() > 10, "{metric:?}: what it means");
    }
}
