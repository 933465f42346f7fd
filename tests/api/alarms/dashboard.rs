//! The CloudWatch dashboard of the template against the code: its `!Sub` body parsed, every
//! metric its widgets show (rows and `SEARCH` expressions), checked against `Metric::ALL` and
//! against every alarm of the template. Apart from the alarms themselves (`alarms.rs`, whose
//! reading of them it shares) because the dashboard is a parse of its own: JSON inside YAML.

use std::collections::{BTreeMap, BTreeSet};

use countersign::observe::Metric;
use serde_norway::Value;

use super::{alarms, emitted_dimension_sets, function_values, metric_named, outcomes};
use crate::template::{of_type, template};

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
