//! What operators see, in the SAM template against the code: the SPEC's alarms, each pointing at
//! docs/OPERATIONS.md, the dashboard against the metrics the code emits (`Metric::ALL`), tracing
//! and the metrics variables on every function, and the runbook against both.

use std::collections::{BTreeMap, BTreeSet};

use countersign::observe::{Dimension, Metric, Unit};
use serde_norway::Value;

use crate::template::{is_xray_write, of_type, role_of, statements, template, text};

/// The `Function` dimension values: the binary each function runs.
fn function_values() -> Vec<&'static str> {
    countersign::Function::ALL
        .map(countersign::Function::as_str)
        .to_vec()
}

/// The SPEC's closed `Outcome` sets ("Operating it": metrics), per metric that has one.
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

/// `${Name}` and `${Name.Attribute}` in a `!Sub` string, each replaced by `sub:<inside>` (so the
/// dashboard's custom namespace reads `sub:MetricsNamespace`); `${!…}` is a literal `${…}`.
/// Also answers the names it replaced.
fn substitute(body: &str) -> (String, BTreeSet<String>) {
    let mut out = String::with_capacity(body.len());
    let mut names = BTreeSet::new();
    let mut rest = body;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after.find('}').expect("a closed ${…}");
        let inside = &after[..end];
        if let Some(literal) = inside.strip_prefix('!') {
            out.push_str("${");
            out.push_str(literal);
            out.push('}');
        } else {
            out.push_str("sub:");
            out.push_str(inside);
            names.insert(inside.to_owned());
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    (out, names)
}

/// One metric a dashboard widget shows: its namespace, name and dimensions (a search
/// expression's dimension names, with no values).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Shown {
    namespace: String,
    metric: String,
    dimensions: BTreeMap<String, Option<String>>,
}

/// `SEARCH('{"<namespace>",<Dim>,…} MetricName="<name>"', '<stat>', <period>)`.
fn parse_search(expression: &str) -> Shown {
    let inner = expression
        .strip_prefix("SEARCH('")
        .and_then(|e| e.split_once("',"))
        .map(|(inner, _)| inner)
        .unwrap_or_else(|| panic!("a SEARCH expression: {expression}"));
    let schema = inner
        .strip_prefix('{')
        .and_then(|s| s.split_once('}'))
        .map(|(schema, _)| schema)
        .unwrap_or_else(|| panic!("a {{namespace,dimensions}} schema: {expression}"));
    let mut parts = schema.split(',').map(|p| p.trim().trim_matches('"'));
    let namespace = parts.next().expect("a namespace").to_owned();
    let dimensions = parts.map(|d| (d.to_owned(), None)).collect();
    let metric = inner
        .split_once("MetricName=\"")
        .and_then(|(_, rest)| rest.split_once('"'))
        .map(|(name, _)| name.to_owned())
        .unwrap_or_else(|| panic!("one MetricName=\"…\": {expression}"));
    Shown {
        namespace,
        metric,
        dimensions,
    }
}

/// The dashboard: its body parsed (placeholders substituted), the names it substitutes, and
/// every metric its widgets show.
fn dashboard(template: &Value) -> (serde_json::Value, BTreeSet<String>, Vec<Shown>) {
    let dashboards = of_type(template, "AWS::CloudWatch::Dashboard");
    assert_eq!(dashboards.len(), 1, "one dashboard");
    let body = &dashboards[0].1["Properties"]["DashboardBody"];
    let Value::Tagged(tagged) = body else {
        panic!("the body is a !Sub string, not {body:?}");
    };
    assert_eq!(tagged.tag.to_string(), "!Sub");
    let (json, names) = substitute(tagged.value.as_str().expect("a string"));
    let body: serde_json::Value =
        serde_json::from_str(&json).unwrap_or_else(|e| panic!("the body is JSON: {e}\n{json}"));
    let mut shown = Vec::new();
    for widget in body["widgets"].as_array().expect("widgets") {
        if widget["type"] != "metric" {
            continue;
        }
        let properties = &widget["properties"];
        assert!(
            properties["region"].is_string(),
            "a metric widget names its region: {widget}"
        );
        let (mut namespace, mut metric) = (String::new(), String::new());
        for row in properties["metrics"].as_array().expect("metrics") {
            let row = row.as_array().expect("a metric row is an array");
            if let Some(expression) = row[0]["expression"].as_str() {
                shown.push(parse_search(expression));
                continue;
            }
            let strings: Vec<&str> = row.iter().map_while(serde_json::Value::as_str).collect();
            assert!(
                strings.len() >= 2 && strings.len().is_multiple_of(2),
                "{row:?}"
            );
            // "." repeats the previous row's value.
            if strings[0] != "." {
                namespace = strings[0].to_owned();
            }
            if strings[1] != "." {
                metric = strings[1].to_owned();
            }
            let dimensions = strings[2..]
                .chunks(2)
                .map(|pair| (pair[0].to_owned(), Some(pair[1].to_owned())))
                .collect();
            shown.push(Shown {
                namespace: namespace.clone(),
                metric: metric.clone(),
                dimensions,
            });
        }
    }
    (body, names, shown)
}

/// "A dashboard of these metrics and alarms; every metric it shows is one the code emits" — and
/// every metric the code emits is on it, each read by a dimension set it is emitted with; with
/// every alarm, and every AWS metric an alarm watches.
#[test]
fn the_dashboard_shows_the_metrics_the_code_emits_and_every_alarm() {
    let template = template();
    let (body, names, shown) = dashboard(&template);
    let namespace = "sub:MetricsNamespace";

    // Every placeholder is a parameter, a resource (or its attribute) or a pseudo parameter.
    for name in &names {
        let id = name.split_once('.').map_or(name.as_str(), |(id, _)| id);
        assert!(
            id.starts_with("AWS::")
                || !template["Parameters"][id].is_null()
                || !template["Resources"][id].is_null(),
            "${{{name}}} names nothing in the template"
        );
    }

    let custom: Vec<&Shown> = shown.iter().filter(|s| s.namespace == namespace).collect();
    let names_shown: BTreeSet<&str> = custom.iter().map(|s| s.metric.as_str()).collect();
    let emitted: BTreeSet<&str> = Metric::ALL.iter().map(|m| m.name()).collect();
    assert_eq!(
        names_shown, emitted,
        "the dashboard's Countersign metrics are Metric::ALL"
    );
    for s in &custom {
        let metric = metric_named(&s.metric).expect("in Metric::ALL");
        let dimensions: BTreeSet<String> = s.dimensions.keys().cloned().collect();
        assert!(
            emitted_dimension_sets(metric).contains(&dimensions),
            "{}: not emitted with the dimensions {dimensions:?}",
            s.metric
        );
        for (dimension, value) in &s.dimensions {
            let Some(value) = value else { continue };
            match dimension.as_str() {
                "Outcome" => assert!(
                    outcomes(metric)
                        .expect("an outcome set")
                        .contains(value.as_str()),
                    "{}: outcome {value}",
                    s.metric
                ),
                "Function" => assert!(function_values().contains(&value.as_str()), "{value}"),
                // A request refused for one reason an alarm watches (the problem's code).
                "Reason" if metric == Metric::RequestRefused => assert!(
                    countersign::http::ApiError::CODES
                        .iter()
                        .any(|(code, _)| code == value),
                    "RequestRefused: {value} is no problem code"
                ),
                other => panic!("{}: {other} has open values: search by it", s.metric),
            }
        }
    }
    // A closed set of outcomes is shown whole (or searched).
    for metric in [
        Metric::ApprovalDecided,
        Metric::ExecutionEnded,
        Metric::StatusQuery,
    ] {
        let rows: Vec<&&Shown> = custom
            .iter()
            .filter(|s| s.metric == metric.name())
            .collect();
        let searched = rows
            .iter()
            .any(|s| s.dimensions.get("Outcome") == Some(&None));
        let listed: BTreeSet<&str> = rows
            .iter()
            .filter_map(|s| s.dimensions.get("Outcome"))
            .filter_map(Option::as_deref)
            .collect();
        assert!(
            searched || Some(listed.clone()) == outcomes(metric),
            "{metric:?}: every outcome, {listed:?}"
        );
    }

    // Every alarm on the alarm widget, and nothing else.
    let on_widget: BTreeSet<String> = body["widgets"]
        .as_array()
        .expect("widgets")
        .iter()
        .filter(|w| w["type"] == "alarm")
        .flat_map(|w| {
            w["properties"]["alarms"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .map(|arn| {
            let arn = arn.as_str().expect("an ARN");
            arn.strip_prefix("sub:")
                .and_then(|a| a.strip_suffix(".Arn"))
                .unwrap_or_else(|| panic!("${{<Alarm>.Arn}}, not {arn}"))
                .to_owned()
        })
        .collect();
    let alarms = alarms(&template);
    let declared: BTreeSet<String> = alarms.iter().map(|a| a.id.clone()).collect();
    assert_eq!(on_widget, declared, "the alarm widget");

    // What each alarm watches is on the dashboard, by the same dimensions and values.
    let as_shown = |value: &str| -> String {
        value
            .strip_prefix("!Ref ")
            .or_else(|| value.strip_prefix("!GetAtt "))
            .map_or_else(|| value.to_owned(), |v| format!("sub:{v}"))
    };
    for alarm in &alarms {
        let wanted = Shown {
            namespace: as_shown(&alarm.namespace),
            metric: alarm.metric.clone(),
            dimensions: alarm
                .dimensions
                .iter()
                .map(|(k, v)| (k.clone(), Some(as_shown(v))))
                .collect(),
        };
        assert!(
            shown.contains(&wanted),
            "{}: {wanted:?} is not on the dashboard",
            alarm.id
        );
    }
}

/// `Tracing` from the `TracingMode` parameter on every function (a Global none overrides), the
/// metrics variables from their parameters on every function, and X-Ray's write actions granted
/// to every role (SAM grants nothing to a role it did not create).
#[test]
fn every_function_is_traced_as_configured_and_told_where_its_metrics_go() {
    let template = template();
    let parameters = &template["Parameters"];
    assert_eq!(
        parameters["TracingMode"]["Default"].as_str(),
        Some("Active")
    );
    let modes: Vec<&str> = parameters["TracingMode"]["AllowedValues"]
        .as_sequence()
        .expect("TracingMode's values")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(modes, ["Active", "PassThrough"]);
    assert_eq!(
        parameters["MetricsNamespace"]["Default"].as_str(),
        Some("Countersign")
    );
    assert_eq!(
        parameters["MetricsTenantDimension"]["Default"].as_str(),
        Some("false")
    );

    let globals = &template["Globals"]["Function"];
    assert_eq!(text(&globals["Tracing"]), "!Ref TracingMode");
    let variables = &globals["Environment"]["Variables"];
    let expected = [
        ("METRICS_NAMESPACE", "!Ref MetricsNamespace"),
        ("METRICS_TENANT_DIMENSION", "!Ref MetricsTenantDimension"),
    ];
    for (variable, value) in expected {
        assert_eq!(text(&variables[variable]), value, "Globals: {variable}");
    }

    let functions = of_type(&template, "AWS::Serverless::Function");
    assert_eq!(functions.len(), function_values().len());
    for (id, function) in &functions {
        let properties = &function["Properties"];
        let tracing = &properties["Tracing"];
        assert!(
            tracing.is_null() || text(tracing) == "!Ref TracingMode",
            "{id}: Tracing {tracing:?}"
        );
        let own = &properties["Environment"]["Variables"];
        for (variable, value) in expected {
            assert!(
                own[variable].is_null() || text(&own[variable]) == value,
                "{id}: {variable} overridden"
            );
        }
        assert!(
            own.as_mapping().is_some_and(|v| !v.is_empty()),
            "{id}: keeps its own variables"
        );
        let role = role_of(function);
        assert!(
            statements(&template["Resources"][role.as_str()])
                .into_iter()
                .any(is_xray_write),
            "{id}: {role} may write its trace segments"
        );
    }
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
