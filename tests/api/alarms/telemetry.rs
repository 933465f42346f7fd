//! Tracing and the metrics variables on every function of the template, and X-Ray's write
//! actions on every role: what the functions need for what operators see (traces, metrics in
//! the chosen namespace), as opposed to the alarms and dashboard that read it.

use serde_norway::Value;

use super::function_values;
use crate::template::{of_type, role_of, statements, template, text};
use crate::template_grants::is_xray_write;

/// `Tracing` from the `TracingMode` parameter on every function (a Global none overrides), the
/// metrics variables from their parameters on every function, and X-Ray's write actions granted
/// to every role (SAM grants nothing to a role it did not create).
#[test]
fn every_function_is_traced_as_configured_and_told_where_its_metrics_go() {
    let template = template();
    let parameters = &template["Parameters"];
    // The cheap default that still answers "why" (a caller's sampled trace, every log line's
    // trace id); Active one parameter away (docs/COST.md prices both).
    assert_eq!(
        parameters["TracingMode"]["Default"].as_str(),
        Some("PassThrough")
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
