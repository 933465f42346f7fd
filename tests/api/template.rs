//! The SAM template against the code: the same tables as `infra/tables.json` (the local stack
//! and the tests create theirs from that file), every route of the API, one role per function.
//! Least privilege (no wildcard action or resource but the named few) is `template_grants.rs`;
//! what operators see, `alarms.rs`.

use std::collections::{BTreeMap, BTreeSet};

use countersign::store::schema::{IndexDefinition, definitions};
use serde_norway::Value;

pub(crate) use countersign_tests::template;

pub(crate) fn resources(template: &Value) -> Vec<(String, &Value)> {
    template["Resources"]
        .as_mapping()
        .expect("Resources")
        .iter()
        .map(|(k, v)| (k.as_str().unwrap_or_default().to_owned(), v))
        .collect()
}

pub(crate) fn of_type<'a>(template: &'a Value, kind: &str) -> Vec<(String, &'a Value)> {
    resources(template)
        .into_iter()
        .filter(|(_, r)| r["Type"].as_str() == Some(kind))
        .collect()
}

/// A key schema as (attribute, key type) pairs, in order.
fn key_schema(keys: &Value) -> Vec<(String, String)> {
    keys.as_sequence()
        .into_iter()
        .flatten()
        .map(|key| {
            (
                key["AttributeName"].as_str().unwrap_or_default().to_owned(),
                key["KeyType"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn expected_key_schema(partition: &str, sort: Option<&str>) -> Vec<(String, String)> {
    let mut keys = vec![(partition.to_owned(), "HASH".to_owned())];
    keys.extend(sort.map(|sort| (sort.to_owned(), "RANGE".to_owned())));
    keys
}

/// A table's indexes of one kind (`GlobalSecondaryIndexes` or `LocalSecondaryIndexes`), by name:
/// key schema and projection type.
/// A list's entries as a stack created now has them: an entry under a condition
/// (`!If [C, entry, !Ref AWS::NoValue]`, an upgrade step's) is left out — the conditions hold
/// only on the way from an older stack (see `an_upgrade_changes_one_index_per_deploy`).
fn final_entries(list: &Value) -> Vec<&Value> {
    list.as_sequence()
        .into_iter()
        .flatten()
        .filter(|entry| !matches!(entry, Value::Tagged(tagged) if tagged.tag == "!If"))
        .collect()
}

fn indexes(table: &Value, property: &str) -> BTreeMap<String, (Vec<(String, String)>, String)> {
    final_entries(&table[property])
        .into_iter()
        .map(|index| {
            (
                index["IndexName"].as_str().unwrap_or_default().to_owned(),
                (
                    key_schema(&index["KeySchema"]),
                    index["Projection"]["ProjectionType"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                ),
            )
        })
        .collect()
}

fn expected_indexes<'a>(
    defined: impl Iterator<Item = &'a IndexDefinition>,
) -> BTreeMap<String, (Vec<(String, String)>, String)> {
    defined
        .map(|index| {
            (
                index.name.clone(),
                (
                    expected_key_schema(&index.partition_key, Some(&index.sort_key)),
                    index.projection.clone(),
                ),
            )
        })
        .collect()
}

/// A function's role: the logical id of the `!GetAtt <Role>.Arn` it is given.
pub(crate) fn role_of(function: &Value) -> String {
    let role = &function["Properties"]["Role"];
    let Value::Tagged(tagged) = role else {
        panic!("the role is !GetAtt <Role>.Arn, not {role:?}");
    };
    let target = tagged.value.as_str().unwrap_or_default();
    target
        .strip_suffix(".Arn")
        .unwrap_or_else(|| panic!("the role is !GetAtt <Role>.Arn, not {target}"))
        .to_owned()
}

/// Every statement of a role's inline policies; a statement under a condition (`!If [C,
/// statement, !Ref AWS::NoValue]`) as the statement it is when the condition holds.
pub(crate) fn statements(role: &Value) -> Vec<&Value> {
    role["Properties"]["Policies"]
        .as_sequence()
        .expect("inline policies")
        .iter()
        .flat_map(|policy| {
            policy["PolicyDocument"]["Statement"]
                .as_sequence()
                .expect("statements")
        })
        .map(|statement| match statement {
            Value::Tagged(tagged) if tagged.tag == "!If" => &tagged.value[1],
            plain => plain,
        })
        .collect()
}

/// A string, or the string inside an intrinsic function's tag (`!Sub "…"`).
pub(crate) fn text(value: &Value) -> String {
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
        assert_eq!(
            key_schema(&table["KeySchema"]),
            expected_key_schema(&def.partition_key, def.sort_key.as_deref()),
            "{}: key schema",
            def.name
        );

        // Every key attribute (table and indexes), with its type, and nothing else: CloudFormation
        // refuses an attribute definition no key uses.
        let attributes: Vec<(String, String)> = final_entries(&table["AttributeDefinitions"])
            .into_iter()
            .map(|a| {
                (
                    a["AttributeName"].as_str().unwrap_or_default().to_owned(),
                    a["AttributeType"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect();
        let declared: BTreeSet<_> = attributes.iter().cloned().collect();
        assert_eq!(
            declared.len(),
            attributes.len(),
            "{}: an attribute defined twice",
            def.name
        );
        let expected: BTreeSet<_> = def.key_attributes().into_iter().collect();
        assert_eq!(declared, expected, "{}: attribute definitions", def.name);

        // The same indexes, each with the same keys and projection, and none that the code
        // does not know.
        for (property, kind) in [
            ("GlobalSecondaryIndexes", "global"),
            ("LocalSecondaryIndexes", "local"),
        ] {
            assert_eq!(
                indexes(table, property),
                expected_indexes(def.indexes.iter().filter(|i| i.kind == kind)),
                "{}: {property}",
                def.name
            );
        }
        assert!(
            def.indexes
                .iter()
                .all(|i| i.kind == "global" || i.kind == "local"),
            "{}: an index is global or local",
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

/// A stack from before v5 reaches the final indexes in three deploys (`ApprovalsIndexesStep` 1,
/// 2, final), each adding or removing one index of the approvals table (DynamoDB changes one
/// per update), the new keys-only index there from the first (the code lists through it).
#[test]
fn an_upgrade_changes_one_index_per_deploy() {
    let template = template();
    let table = &template["Resources"]["ApprovalsTable"]["Properties"];
    let step = |step: &str| -> BTreeSet<String> {
        let holds = |condition: &str| match condition {
            "KeepByTenant" => step == "1",
            "KeepByStatus" => step != "final",
            other => panic!("an unknown condition {other}"),
        };
        table["GlobalSecondaryIndexes"]
            .as_sequence()
            .expect("indexes")
            .iter()
            .filter_map(|entry| match entry {
                Value::Tagged(tagged) if tagged.tag == "!If" => {
                    let condition = tagged.value[0].as_str().expect("a condition");
                    holds(condition).then(|| &tagged.value[1])
                }
                plain => Some(plain),
            })
            .map(|index| index["IndexName"].as_str().expect("a name").to_owned())
            .collect()
    };
    let before: BTreeSet<String> = ["by_tenant", "by_status", "due"].map(String::from).into();
    let steps = ["1", "2", "final"].map(step);
    assert_eq!(
        steps[2],
        BTreeSet::from(["by_status_keys".to_owned(), "due".to_owned()])
    );
    let mut previous = before;
    for (n, indexes) in steps.iter().enumerate() {
        let changed = previous.symmetric_difference(indexes).count();
        assert_eq!(changed, 1, "step {}: {previous:?} → {indexes:?}", n + 1);
        assert!(indexes.contains("by_status_keys"), "step {}", n + 1);
        previous = indexes.clone();
    }
    let parameter = &template["Parameters"]["ApprovalsIndexesStep"];
    assert_eq!(parameter["Default"].as_str(), Some("final"));
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
        "GET /approvals",
        "GET /approvals/{id}",
        "GET /approvals/{id}/events",
        "POST /approvals/{id}/decision",
        "GET /approvals/{id}/review",
        "GET /auth/{tenant}/login",
        "GET /auth/{tenant}/callback",
        "POST /auth/{tenant}/logout",
        "GET /inbox/{tenant}",
        "GET /auth/{tenant}/passkeys",
        "POST /auth/{tenant}/passkeys",
        "GET /approvals/{id}/certificate",
        "GET /.well-known/countersign/jwks.json",
        "POST /approvals/{id}/cancel",
        "POST /approvals/{id}/execution/retry",
        "POST /approvals/{id}/resume/retry",
        "POST /approvals/{id}/execution/resolve",
        "POST /approvals/{id}/execution/claim",
        "POST /approvals/{id}/execution/report",
        "PUT /delegations/{identity}",
        "GET /delegations/{identity}",
        "DELETE /delegations/{identity}",
        "POST /webhooks/{source}",
        "POST /slack/interactions/{tenant}",
        "POST /github/events/{tenant}",
        "GET /health",
        "GET /openapi.json",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    assert_eq!(routes, expected, "the template's routes");
    assert_eq!(router_routes(), expected, "the router's routes");
    assert_eq!(
        documented_routes(),
        expected,
        "docs/openapi.json's operations"
    );
}

/// Every operation `docs/openapi.json` documents, as `METHOD /path`.
fn documented_routes() -> BTreeSet<String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/openapi.json");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("docs/openapi.json"))
            .expect("docs/openapi.json is JSON");
    let mut routes = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in ["get", "post", "put", "patch", "delete"] {
            if item.get(method).is_some() {
                routes.insert(format!("{} {path}", method.to_uppercase()));
            }
        }
    }
    routes
}

/// Every route the router serves, read from its source (`shared/src/http/mod.rs`): each
/// `.route("<path>", get(…).post(…))` gives one route per method.
fn router_routes() -> BTreeSet<String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/src/http/mod.rs");
    let source = std::fs::read_to_string(path).expect("shared/src/http/mod.rs");
    let mut routes = BTreeSet::new();
    for (start, _) in source.match_indices(".route(") {
        // rustfmt puts a long route's arguments on lines of their own.
        let arguments = source[start + ".route(".len()..].trim_start();
        let path = arguments
            .strip_prefix('"')
            .and_then(|rest| rest.split_once('"'))
            .map(|(path, _)| path)
            .expect("a route's path is a string literal");
        // The handlers: method names called at the top level of the second argument, up to the
        // parenthesis that closes `.route(`.
        let handlers = &arguments[path.len() + 2..];
        let mut depth = 0;
        let mut word = String::new();
        for c in handlers.chars() {
            match c {
                '(' => {
                    if depth == 0
                        && ["get", "post", "put", "patch", "delete"].contains(&word.as_str())
                    {
                        routes.insert(format!("{} {path}", word.to_uppercase()));
                    }
                    depth += 1;
                    word.clear();
                }
                ')' if depth == 0 => break,
                ')' => depth -= 1,
                c if c.is_alphanumeric() || c == '_' => word.push(c),
                _ => word.clear(),
            }
        }
    }
    routes
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
    let expected: BTreeSet<String> = countersign::Function::ALL
        .into_iter()
        .map(|f| f.as_str().to_owned())
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
        // JSON logs, none of Lambda's own per invocation (START and REPORT are its INFO), and
        // whatever the functions' LOG_LEVEL writes let through (the EMF metrics, which carry no
        // level, count as INFO): what docs/COST.md counts.
        let logging = &function["Properties"]["LoggingConfig"];
        assert_eq!(logging["LogFormat"].as_str(), Some("JSON"), "{id}");
        assert_eq!(logging["SystemLogLevel"].as_str(), Some("WARN"), "{id}");
        assert_eq!(
            logging["ApplicationLogLevel"].as_str(),
            Some("DEBUG"),
            "{id}"
        );
    }
    assert_eq!(
        text(&globals["Environment"]["Variables"]["LOG_LEVEL"]),
        "!Ref LogLevel"
    );
    let executor = &template["Resources"]["ExecutorFunction"]["Properties"];
    assert_eq!(
        executor["Events"]["Jobs"]["Properties"]["FunctionResponseTypes"][0].as_str(),
        Some("ReportBatchItemFailures")
    );
}

#[test]
fn the_sweeper_and_the_reconciler_run_every_minute_with_their_own_roles() {
    let template = template();
    let functions = of_type(&template, "AWS::Serverless::Function");
    for id in ["SweeperFunction", "ReconcilerFunction"] {
        let function = &template["Resources"][id];
        let events = function["Properties"]["Events"]
            .as_mapping()
            .unwrap_or_else(|| panic!("{id}: events"));
        assert_eq!(events.len(), 1, "{id}: one event");
        let (_, event) = events.iter().next().expect("one event");
        assert_eq!(event["Type"].as_str(), Some("Schedule"), "{id}");
        assert_eq!(
            event["Properties"]["Schedule"].as_str(),
            Some("rate(1 minute)"),
            "{id}"
        );

        let role = role_of(function);
        assert_eq!(
            template["Resources"][role.as_str()]["Type"].as_str(),
            Some("AWS::IAM::Role"),
            "{id}: {role} is a role of the template"
        );
        for (other, other_function) in &functions {
            if other != id {
                assert_ne!(
                    role_of(other_function),
                    role,
                    "{id} shares its role with {other}"
                );
            }
        }
    }

    // The sweeper only expires approvals: it has no business with the execution ledger.
    let sweeper_role = role_of(&template["Resources"]["SweeperFunction"]);
    for statement in statements(&template["Resources"][sweeper_role.as_str()]) {
        let resource = text(&statement["Resource"]);
        assert!(
            !resource.contains("ExecutionLedgerTable"),
            "{sweeper_role}: grants on the ledger ({resource})"
        );
    }

    // What is due is read through the due index, never by a scan: no role may Scan.
    for (id, role) in of_type(&template, "AWS::IAM::Role") {
        for statement in statements(role) {
            for action in statement["Action"].as_sequence().expect("actions listed") {
                assert_ne!(
                    action.as_str().map(str::to_ascii_lowercase).as_deref(),
                    Some("dynamodb:scan"),
                    "{id}: a Scan"
                );
            }
        }
    }
}

/// A scheduled run in which a candidate failed ends in an error once the others are handled: an
/// alarm on each scheduled function's `Errors` makes it seen (as the DLQ alarms do for jobs).
#[test]
fn the_scheduled_functions_errors_raise_alarms() {
    let template = template();
    let alarms = of_type(&template, "AWS::CloudWatch::Alarm");
    for function in ["SweeperFunction", "ReconcilerFunction"] {
        let watching: Vec<&String> = alarms
            .iter()
            .filter(|(_, alarm)| {
                let p = &alarm["Properties"];
                p["Namespace"].as_str() == Some("AWS/Lambda")
                    && p["MetricName"].as_str() == Some("Errors")
                    && text(&p["Dimensions"]).contains(function)
            })
            .map(|(id, _)| id)
            .collect();
        assert_eq!(
            watching.len(),
            1,
            "{function}: one Errors alarm, {watching:?}"
        );
    }
}

/// `examples/slack/manifest.yaml` asks for the scopes the Web API calls need — `chat:write`
/// (chat.postMessage, chat.update), `channels:history` and `groups:history`
/// (conversations.history, public and private channels) — and no more, and points the
/// interactivity request URL at the route the template declares.
#[test]
fn the_slack_manifest_asks_for_the_scopes_the_code_uses() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/slack/manifest.yaml"
    );
    let manifest: Value =
        serde_norway::from_str(&std::fs::read_to_string(path).expect("the manifest"))
            .expect("YAML");
    let scopes: BTreeSet<&str> = manifest["oauth_config"]["scopes"]["bot"]
        .as_sequence()
        .expect("bot scopes")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(
        scopes,
        BTreeSet::from(["chat:write", "channels:history", "groups:history"])
    );
    let interactivity = &manifest["settings"]["interactivity"];
    assert_eq!(interactivity["is_enabled"].as_bool(), Some(true));
    let url = interactivity["request_url"].as_str().expect("request URL");
    assert!(
        url.starts_with("https://") && url.contains("/slack/interactions/"),
        "{url}"
    );
    let source = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/src/slack/api.rs");
    let source = std::fs::read_to_string(source).expect("the Web API calls");
    for method in ["chat.postMessage", "chat.update", "conversations.history"] {
        assert!(source.contains(method), "{method}");
    }
}

/// `examples/github/app-manifest.json` asks for what the App's calls and events need —
/// Deployments read and write (reviewing a deployment protection rule), Actions read — and the
/// two events acted on, and no more; its webhook goes to the route the template declares.
#[test]
fn the_github_app_manifest_asks_for_what_the_code_uses() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/github/app-manifest.json"
    );
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("the manifest")).expect("JSON");
    assert_eq!(
        manifest["default_permissions"],
        serde_json::json!({"deployments": "write", "actions": "read"})
    );
    let events: BTreeSet<&str> = manifest["default_events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(serde_json::Value::as_str)
        .collect();
    assert_eq!(
        events,
        BTreeSet::from(["deployment_protection_rule", "workflow_run"])
    );
    let url = manifest["hook_attributes"]["url"]
        .as_str()
        .expect("webhook URL");
    assert!(
        url.starts_with("https://") && url.contains("/github/events/"),
        "{url}"
    );
    assert_eq!(manifest["hook_attributes"]["active"], true);
    let source = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/src/github/event.rs");
    let source = std::fs::read_to_string(source).expect("the events");
    for event in ["deployment_protection_rule", "workflow_run"] {
        assert!(source.contains(event), "{event}");
    }
}
