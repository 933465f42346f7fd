//! The SAM template against each function's environment: no secret value in any of them (each
//! reads only its own secrets, whose parameters are NoEcho), and the read function's reserved
//! room for held reads, one tenant's share of it and the stage's throttling.

use std::collections::BTreeSet;

use crate::template::{of_type, resources, role_of, statements, text};
use countersign_tests::template;

/// The template's secret-bearing parameters: each a NoEcho parameter and a secret.
const SECRET_PARAMETERS: [&str; 11] = [
    "ApiKeys",
    "WebhookSources",
    "DecisionTokenSecret",
    "EventSubscriptions",
    "Slack",
    "SlackBotTokens",
    "Github",
    "GithubPrivateKeys",
    "ActionTargets",
    "NotifierUrl",
    "Oidc",
];

/// No secret value in any function's environment: every secret-bearing variable is a
/// `<NAME>_SECRET_ARN` naming one of the template's secrets, and each function may read
/// (`GetSecretValue`) exactly the secrets its variables name.
#[test]
fn no_function_environment_holds_a_secret_and_each_reads_only_its_own() {
    let template = template();
    let secret_parameters = SECRET_PARAMETERS;
    let secrets: BTreeSet<String> = of_type(&template, "AWS::SecretsManager::Secret")
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(
        secrets.len(),
        secret_parameters.len(),
        "one secret per secret parameter"
    );
    let mut functions = 0;
    for (id, function) in of_type(&template, "AWS::Serverless::Function") {
        functions += 1;
        let variables = function["Properties"]["Environment"]["Variables"]
            .as_mapping()
            .cloned()
            .unwrap_or_default();
        let mut named = BTreeSet::new();
        for (name, value) in &variables {
            let name = name.as_str().unwrap_or_default();
            let shown = text(value);
            for parameter in secret_parameters {
                assert_ne!(
                    shown,
                    format!("!Ref {parameter}"),
                    "{id}: {name} is the secret parameter {parameter} itself"
                );
            }
            for variable in countersign::config::secrets::SECRET_VARIABLES {
                assert_ne!(name, variable, "{id}: {variable} in the environment");
            }
            if name.ends_with("_SECRET_ARN") {
                let secret = secrets
                    .iter()
                    .find(|s| shown.contains(s.as_str()))
                    .unwrap_or_else(|| panic!("{id}: {name} names none of the secrets: {shown}"));
                named.insert(secret.clone());
            }
        }
        let role_id = role_of(function);
        let role = resources(&template)
            .into_iter()
            .find(|(r, _)| *r == role_id)
            .map(|(_, r)| r)
            .expect("the function's role");
        let mut readable = BTreeSet::new();
        for statement in statements(role) {
            let actions = text(&statement["Action"]);
            if actions.contains("secretsmanager:GetSecretValue") {
                let resources = text(&statement["Resource"]);
                for secret in &secrets {
                    if resources.contains(secret.as_str()) {
                        readable.insert(secret.clone());
                    }
                }
            }
        }
        assert_eq!(
            readable, named,
            "{id}: GetSecretValue on exactly the secrets it names"
        );
        // The internet-facing function verifies Slack's and GitHub's requests; it never acts
        // as their apps.
        if id == "WebhookFunction" {
            for credentials in ["SlackBotTokensSecret", "GithubPrivateKeysSecret"] {
                assert!(!readable.contains(credentials), "{id} reads {credentials}");
            }
        }
    }
    assert_eq!(functions, countersign::Function::ALL.len());
}

#[test]
fn secrets_are_no_echo_parameters() {
    let template = template();
    for secret in SECRET_PARAMETERS {
        assert_eq!(
            template["Parameters"][secret]["NoEcho"].as_bool(),
            Some(true),
            "{secret}"
        );
    }
}

/// Held reads (`GET /approvals/{id}?wait=20`) run in a function of their own (docs/API.md,
/// "Held reads"): the route goes to it alone; its reserved concurrency is the
/// `HeldReadConcurrency` parameter (default 50), of which `HeldReadHeadroom` is kept for plain
/// reads and the 429 answers; it outlasts the longest hold and fits the HTTP API's 30 s; and it
/// may write only the held reads' seats.
#[test]
fn held_reads_run_in_their_own_function_with_reserved_concurrency() {
    let template = template();
    let mut serving = Vec::new();
    for (id, function) in of_type(&template, "AWS::Serverless::Function") {
        for (_, event) in function["Properties"]["Events"]
            .as_mapping()
            .into_iter()
            .flatten()
        {
            let properties = &event["Properties"];
            if properties["Method"].as_str() == Some("GET")
                && properties["Path"].as_str() == Some("/approvals/{id}")
            {
                serving.push(id.clone());
            }
        }
    }
    assert_eq!(
        serving,
        ["ReadFunction"],
        "GET /approvals/{{id}} is served by"
    );

    let read = &template["Resources"]["ReadFunction"]["Properties"];
    // Opt-in: Lambda keeps 100 of an account's concurrency unreserved, and a new account may
    // have 10, so a reservation by default would fail the deploy there.
    assert_eq!(
        text(&read["ReservedConcurrentExecutions"]),
        "!If ReservesHeldReads !Ref HeldReadConcurrency !Ref AWS::NoValue"
    );
    assert_eq!(
        template["Parameters"]["ReserveHeldReadConcurrency"]["Default"].as_str(),
        Some("false"),
        "no reserved concurrency by default"
    );
    assert_eq!(
        text(&template["Conditions"]["ReservesHeldReads"]),
        "!Equals !Ref ReserveHeldReadConcurrency true"
    );
    let parameter = &template["Parameters"]["HeldReadConcurrency"];
    assert_eq!(parameter["Default"].as_u64(), Some(50));
    let headroom = &template["Parameters"]["HeldReadHeadroom"];
    assert!(
        headroom["Default"]
            .as_u64()
            .is_some_and(|h| (1..50).contains(&h)),
        "a default headroom inside the default concurrency"
    );
    // CloudFormation cannot compare two parameters: their ranges keep seats for held reads
    // whatever is chosen (a headroom ≥ the concurrency would fail the function at start).
    assert!(
        headroom["MaxValue"].as_u64() < parameter["MinValue"].as_u64(),
        "the headroom's range below the concurrency's"
    );
    assert!(
        parameter["MaxValue"].as_u64() <= Some(200),
        "the seats' one item"
    );
    let variables = &read["Environment"]["Variables"];
    assert_eq!(
        text(&variables["HELD_READ_CONCURRENCY"]),
        "!Ref HeldReadConcurrency"
    );
    assert_eq!(
        text(&variables["HELD_READ_HEADROOM"]),
        "!Ref HeldReadHeadroom"
    );
    // Review of v5, finding 1: no tenant takes every seat (0: half the seats), and the stage
    // throttles every route before a function runs, so junk cannot fill the reservation.
    assert!(
        text(&variables["HELD_READS_PER_TENANT"]).contains("HeldReadsPerTenant"),
        "{:?}",
        variables["HELD_READS_PER_TENANT"]
    );
    assert_eq!(
        template["Parameters"]["HeldReadsPerTenant"]["Default"].as_u64(),
        Some(0)
    );
    let throttling = &template["Resources"]["HttpApi"]["Properties"]["DefaultRouteSettings"];
    assert_eq!(
        text(&throttling["ThrottlingRateLimit"]),
        "!Ref ApiThrottlingRateLimit"
    );
    assert_eq!(
        text(&throttling["ThrottlingBurstLimit"]),
        "!Ref ApiThrottlingBurstLimit"
    );
    let timeout = read["Timeout"]
        .as_u64()
        .expect("the read function's timeout");
    assert!((21..30).contains(&timeout), "{timeout} s");
    // The other HTTP functions hold nothing: the default timeout, and no reservation that would
    // cap votes or creates.
    for id in ["CreateFunction", "DecideFunction", "WebhookFunction"] {
        let properties = &template["Resources"][id]["Properties"];
        assert!(properties["ReservedConcurrentExecutions"].is_null(), "{id}");
        assert!(
            properties["Timeout"].is_null(),
            "{id}: the Globals' timeout"
        );
    }

    // Least privilege: the read function reads approvals and writes only through UpdateItem
    // (the seats' item of the ledger table).
    let role = role_of(&template["Resources"]["ReadFunction"]);
    for statement in statements(&template["Resources"][role.as_str()]) {
        let actions = text(&statement["Action"]);
        let resource = text(&statement["Resource"]);
        if resource.contains("ApprovalsTable") {
            assert!(
                !actions.contains("Put") && !actions.contains("Update"),
                "{actions}"
            );
        }
        if resource.contains("ExecutionLedgerTable") {
            assert_eq!(actions, "dynamodb:UpdateItem");
        }
    }
}

// ------------------------------------------------------------------ what operators see
