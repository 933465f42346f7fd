//! The SAM template against the code: the same tables as `infra/tables.json` (the local stack
//! and the tests create theirs from that file), every route of the API, and least privilege —
//! no IAM statement with a wildcard action or resource.

use std::collections::BTreeSet;

use countersign::store::schema::definitions;
use serde_norway::Value;

fn template() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../infra/template.yaml");
    let text = std::fs::read_to_string(path).expect("infra/template.yaml");
    serde_norway::from_str(&text).expect("the template is YAML")
}

fn resources(template: &Value) -> Vec<(String, &Value)> {
    template["Resources"]
        .as_mapping()
        .expect("Resources")
        .iter()
        .map(|(k, v)| (k.as_str().unwrap_or_default().to_owned(), v))
        .collect()
}

fn of_type<'a>(template: &'a Value, kind: &str) -> Vec<(String, &'a Value)> {
    resources(template)
        .into_iter()
        .filter(|(_, r)| r["Type"].as_str() == Some(kind))
        .collect()
}

/// A string, or the string inside an intrinsic function's tag (`!Sub "…"`).
fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Tagged(tagged) => format!("{} {}", tagged.tag, text(&tagged.value)),
        Value::Sequence(items) => items.iter().map(text).collect::<Vec<_>>().join(" "),
        other => format!("{other:?}"),
    }
}

#[test]
fn the_template_declares_the_tables_the_code_uses() {
    let template = template();
    let tables = of_type(&template, "AWS::DynamoDB::Table");
    let declared: BTreeSet<_> = tables.iter().map(|(id, _)| id.clone()).collect();
    let defined: BTreeSet<_> = definitions().iter().map(|d| d.logical_id.clone()).collect();
    assert_eq!(
        declared, defined,
        "the template's tables are infra/tables.json's"
    );

    for def in definitions() {
        let table = &template["Resources"][def.logical_id.as_str()]["Properties"];
        let key = &table["KeySchema"][0];
        assert_eq!(
            key["AttributeName"].as_str(),
            Some(def.partition_key.as_str()),
            "{}: key",
            def.name
        );
        assert_eq!(
            key["KeyType"].as_str(),
            Some("HASH"),
            "{}: key type",
            def.name
        );
        assert!(
            table["KeySchema"].get(1).is_none(),
            "{}: no sort key",
            def.name
        );
        let attribute = &table["AttributeDefinitions"][0];
        assert_eq!(
            attribute["AttributeName"].as_str(),
            Some(def.partition_key.as_str()),
            "{}",
            def.name
        );
        assert_eq!(
            attribute["AttributeType"].as_str(),
            Some("S"),
            "{}: key type S",
            def.name
        );
        let ttl = table["TimeToLiveSpecification"]["AttributeName"].as_str();
        assert_eq!(
            ttl,
            def.ttl_attribute.as_deref(),
            "{}: TTL attribute",
            def.name
        );
        if ttl.is_some() {
            assert_eq!(
                table["TimeToLiveSpecification"]["Enabled"].as_bool(),
                Some(true),
                "{}",
                def.name
            );
        }
        let stream = table["StreamSpecification"]["StreamViewType"].as_str();
        assert_eq!(stream, def.stream.as_deref(), "{}: stream", def.name);
        assert_eq!(
            table["BillingMode"].as_str(),
            Some("PAY_PER_REQUEST"),
            "{}",
            def.name
        );
    }
}

#[test]
fn every_route_of_the_api_is_declared() {
    let template = template();
    let mut routes = BTreeSet::new();
    for (_, function) in of_type(&template, "AWS::Serverless::Function") {
        for (_, event) in function["Properties"]["Events"]
            .as_mapping()
            .into_iter()
            .flatten()
        {
            if event["Type"].as_str() == Some("HttpApi") {
                let properties = &event["Properties"];
                routes.insert(format!(
                    "{} {}",
                    properties["Method"].as_str().unwrap_or_default(),
                    properties["Path"].as_str().unwrap_or_default()
                ));
            }
        }
    }
    let expected: BTreeSet<String> = [
        "POST /approvals",
        "GET /approvals/{id}",
        "POST /approvals/{id}/decision",
        "GET /approvals/{id}/review",
        "POST /approvals/{id}/cancel",
        "POST /approvals/{id}/execution/retry",
        "POST /approvals/{id}/execution/resolve",
        "POST /webhooks/{source}",
        "GET /health",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    assert_eq!(routes, expected);
}

#[test]
fn every_function_runs_on_graviton_al2023_with_its_own_role_and_binary() {
    let template = template();
    let functions = of_type(&template, "AWS::Serverless::Function");
    let binaries: BTreeSet<_> = functions
        .iter()
        .map(|(_, f)| {
            f["Metadata"]["BuildProperties"]["Binary"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    let expected: BTreeSet<String> = ["create", "decide", "webhook", "dispatch", "executor"]
        .into_iter()
        .map(str::to_owned)
        .collect();
    assert_eq!(binaries, expected);
    let globals = &template["Globals"]["Function"];
    assert_eq!(globals["Runtime"].as_str(), Some("provided.al2023"));
    assert_eq!(globals["Architectures"][0].as_str(), Some("arm64"));
    for (id, function) in &functions {
        assert_eq!(
            function["Metadata"]["BuildMethod"].as_str(),
            Some("rust-cargolambda"),
            "{id}"
        );
        assert!(
            text(&function["Properties"]["Role"]).contains("Role.Arn"),
            "{id}: its own role"
        );
    }
    let executor = &template["Resources"]["ExecutorFunction"]["Properties"];
    assert_eq!(
        executor["Events"]["Jobs"]["Properties"]["FunctionResponseTypes"][0].as_str(),
        Some("ReportBatchItemFailures")
    );
}

#[test]
fn no_iam_statement_has_a_wildcard_action_or_resource() {
    let template = template();
    let roles = of_type(&template, "AWS::IAM::Role");
    assert_eq!(roles.len(), 5, "one role per function");
    for (id, role) in roles {
        for policy in role["Properties"]["Policies"]
            .as_sequence()
            .expect("inline policies")
        {
            for statement in policy["PolicyDocument"]["Statement"]
                .as_sequence()
                .expect("statements")
            {
                for action in statement["Action"].as_sequence().expect("actions listed") {
                    let action = action.as_str().unwrap_or_default();
                    assert!(!action.contains('*'), "{id}: wildcard action {action}");
                }
                let resources = match &statement["Resource"] {
                    Value::Sequence(items) => items.clone(),
                    single => vec![single.clone()],
                };
                for resource in resources {
                    let resource = text(&resource);
                    // Lambda names its log streams itself: the one wildcard allowed is a stream
                    // name inside the function's own log group.
                    let scoped_log_streams =
                        resource.ends_with(":log-stream:*") && resource.matches('*').count() == 1;
                    assert!(
                        !resource.contains('*') || scoped_log_streams,
                        "{id}: wildcard resource {resource}"
                    );
                    assert!(!resource.trim().is_empty(), "{id}: empty resource");
                }
            }
        }
    }
}

#[test]
fn secrets_are_no_echo_parameters() {
    let template = template();
    for secret in ["ApiKeys", "WebhookSources", "DecisionTokenSecret"] {
        assert_eq!(
            template["Parameters"][secret]["NoEcho"].as_bool(),
            Some(true),
            "{secret}"
        );
    }
}
