//! The deployment the bill is for: what `infra/template.yaml` creates with every parameter at
//! its default (its conditions evaluated), counted from the template so that no count in
//! `docs/COST.md` can drift from it.

use serde_norway::Value;

/// Seconds in the month the bill is for: 30.4 days (365 / 12), as AWS's monthly examples.
pub(crate) const MONTH_SECONDS: f64 = 30.4 * 86_400.0;

pub(crate) struct Deployment {
    doc: Value,
}

/// How CloudWatch bills a deployment's alarms: per alarm metric, standard or high resolution.
#[derive(Debug, Default)]
pub(crate) struct AlarmMetrics {
    pub(crate) standard: usize,
    pub(crate) high_resolution: usize,
    /// Alarms on a metric math expression or an anomaly band (each of their metrics billed).
    pub(crate) math: usize,
}

impl Deployment {
    pub(crate) fn read() -> Self {
        Self {
            doc: countersign_tests::template(),
        }
    }

    /// A parameter's default, as text.
    pub(crate) fn default_of(&self, parameter: &str) -> Option<String> {
        scalar(&self.doc["Parameters"][parameter]["Default"])
    }

    /// Whether the named condition holds at the parameters' defaults.
    fn condition(&self, name: &str) -> bool {
        self.holds(&self.doc["Conditions"][name])
    }

    fn holds(&self, condition: &Value) -> bool {
        let Value::Tagged(tagged) = condition else {
            panic!("a condition the bill cannot evaluate: {condition:?}")
        };
        let args = tagged.value.as_sequence();
        let arg = |i: usize| &args.expect("a condition's arguments")[i];
        if tagged.tag == "!Not" {
            !self.holds(arg(0))
        } else if tagged.tag == "!Equals" {
            self.value(arg(0)) == self.value(arg(1))
        } else if tagged.tag == "!And" {
            args.expect("arguments").iter().all(|c| self.holds(c))
        } else if tagged.tag == "!Or" {
            args.expect("arguments").iter().any(|c| self.holds(c))
        } else if tagged.tag == "!Condition" {
            self.condition(tagged.value.as_str().expect("a condition's name"))
        } else {
            panic!("a condition the bill cannot evaluate: {condition:?}")
        }
    }

    /// A value at the defaults: a scalar, a parameter's default (`!Ref`), or an `!If`'s branch;
    /// `None` for `AWS::NoValue`. A `!Ref` to a resource is its logical id.
    fn value(&self, value: &Value) -> Option<String> {
        match value {
            Value::Tagged(tagged) if tagged.tag == "!Ref" => {
                let name = tagged.value.as_str().expect("a !Ref's name");
                match name {
                    "AWS::NoValue" => None,
                    _ if self.doc["Parameters"].get(name).is_some() => self.default_of(name),
                    _ => Some(name.to_owned()),
                }
            }
            Value::Tagged(tagged) if tagged.tag == "!If" => {
                let args = tagged.value.as_sequence().expect("an !If's arguments");
                let name = args[0].as_str().expect("an !If's condition");
                self.value(&args[if self.condition(name) { 1 } else { 2 }])
            }
            other => scalar(other),
        }
    }

    /// The template's resources of `kind`: (logical id, properties, created at the defaults).
    pub(crate) fn resources(&self, kind: &str) -> Vec<(String, &Value, bool)> {
        self.doc["Resources"]
            .as_mapping()
            .expect("the template's resources")
            .iter()
            .filter(|(_, r)| r["Type"].as_str() == Some(kind))
            .map(|(id, r)| {
                let created = r
                    .get("Condition")
                    .and_then(Value::as_str)
                    .is_none_or(|c| self.condition(c));
                (
                    id.as_str().expect("a logical id").to_owned(),
                    &r["Properties"],
                    created,
                )
            })
            .collect()
    }

    /// How many resources of `kind` the template declares, and how many a default deployment
    /// creates.
    pub(crate) fn count(&self, kind: &str) -> (usize, usize) {
        let all = self.resources(kind);
        let created = all.iter().filter(|(_, _, created)| *created).count();
        (all.len(), created)
    }

    /// Each function's secrets at the defaults (its `<NAME>_SECRET_ARN` variables that name a
    /// secret the deployment creates), by the function's logical id.
    pub(crate) fn secrets_read(&self) -> Vec<(String, usize)> {
        let secrets: Vec<String> = self
            .resources("AWS::SecretsManager::Secret")
            .into_iter()
            .filter(|(_, _, created)| *created)
            .map(|(id, _, _)| id)
            .collect();
        self.resources("AWS::Serverless::Function")
            .into_iter()
            .map(|(id, properties, _)| {
                let variables = properties["Environment"]["Variables"].as_mapping();
                let read = variables
                    .into_iter()
                    .flatten()
                    .filter(|(name, _)| name.as_str().is_some_and(|n| n.ends_with("_SECRET_ARN")))
                    .filter_map(|(_, value)| self.value(value))
                    .filter(|secret| secrets.contains(secret))
                    .count();
                (id, read)
            })
            .collect()
    }

    /// The functions run on a schedule: (logical id, runs a month).
    pub(crate) fn scheduled(&self) -> Vec<(String, f64)> {
        let mut runs = Vec::new();
        for (id, properties, _) in self.resources("AWS::Serverless::Function") {
            for event in properties["Events"].as_mapping().into_iter().flatten() {
                let event = event.1;
                if event["Type"].as_str() != Some("Schedule") {
                    continue;
                }
                let rate = event["Properties"]["Schedule"]
                    .as_str()
                    .expect("a schedule");
                let every = rate
                    .strip_prefix("rate(")
                    .and_then(|r| r.strip_suffix(')'))
                    .and_then(|r| r.split_once(' '))
                    .expect("a rate(N unit) schedule");
                let seconds = match every.1.trim_end_matches('s') {
                    "minute" => 60.0,
                    "hour" => 3_600.0,
                    "day" => 86_400.0,
                    unit => panic!("a schedule's unit: {unit}"),
                };
                let n: f64 = every.0.parse().expect("a schedule's number");
                runs.push((id.clone(), MONTH_SECONDS / (n * seconds)));
            }
        }
        runs
    }

    /// The tables with point-in-time recovery, by logical id.
    pub(crate) fn recovered_tables(&self) -> Vec<String> {
        self.resources("AWS::DynamoDB::Table")
            .into_iter()
            .filter(|(_, p, _)| {
                p["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"].as_bool()
                    == Some(true)
            })
            .map(|(id, _, _)| id)
            .collect()
    }

    /// The alarms a default deployment creates, as CloudWatch bills them: a metric alarm one
    /// alarm metric (a period under a minute, high resolution); a metric math alarm each metric
    /// it reads; an anomaly detection alarm three (the metric and the band's two).
    pub(crate) fn alarm_metrics(&self) -> AlarmMetrics {
        let mut bill = AlarmMetrics::default();
        for (_, p, created) in self.resources("AWS::CloudWatch::Alarm") {
            if !created {
                continue;
            }
            match p["Metrics"].as_sequence() {
                None => {
                    if p["Period"].as_u64().is_some_and(|s| s < 60) {
                        bill.high_resolution += 1;
                    } else {
                        bill.standard += 1;
                    }
                }
                Some(metrics) => {
                    bill.math += 1;
                    let anomaly = metrics.iter().any(|m| {
                        m["Expression"]
                            .as_str()
                            .is_some_and(|e| e.contains("ANOMALY_DETECTION_BAND"))
                    });
                    let read = metrics.iter().filter(|m| m.get("MetricStat").is_some());
                    bill.standard += if anomaly { 3 } else { read.count() };
                }
            }
        }
        bill
    }

    /// The functions' log groups' retention in days (each the same).
    pub(crate) fn log_retention_days(&self) -> f64 {
        let days: Vec<f64> = self
            .resources("AWS::Logs::LogGroup")
            .iter()
            .map(|(_, p, _)| p["RetentionInDays"].as_f64().expect("a retention"))
            .collect();
        assert!(
            days.windows(2).all(|w| w[0] == w[1]),
            "the log groups keep logs alike"
        );
        days[0]
    }
}

fn scalar(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}
