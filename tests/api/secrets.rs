//! Secrets in Secrets Manager (docs/KEYS.md): every secret-bearing variable read
//! from a secret in one call at start; a rotation reaching a running stack without a restart
//! (periodically, and early after a signature fails under every known secret, at most once
//! every 30 s); a failed refresh keeping the last good values; 100 Slack tenants in one secret.

use std::time::Duration;

use countersign_tests::slack::{FakeSlack, slack_headers};
use countersign_tests::{
    ACME_SECRET, ALICE, KEY_A, OTHER_SECRET, TENANT_A, TOKEN_SECRET, TestApp, deploy_body,
    eventually, test_api_keys,
};
use serde_json::json;

fn sources(secret: &str) -> String {
    json!({"acme": {"tenant": TENANT_A, "secrets": [secret]}}).to_string()
}

const EVENT: &str = r#"{"type": "ping", "data": {}}"#;

async fn deliver(t: &TestApp, secret: &str) -> u16 {
    let id = format!("msg_{}", ulid::Ulid::new());
    t.deliver("acme", secret, &id, EVENT).await.status
}

fn refresh_failures(t: &TestApp) -> usize {
    t.metrics
        .take()
        .iter()
        .filter(|doc| doc.contains("\"SecretRefreshFailed\""))
        .count()
}

#[tokio::test]
async fn every_secret_bearing_variable_is_read_from_its_secret_in_one_call() {
    let slack = FakeSlack::start().await;
    let subscriptions =
        json!({TENANT_A: {"url": "http://127.0.0.1:9/cb", "secret": OTHER_SECRET}}).to_string();
    let keys = test_api_keys();
    let webhook_sources = sources(ACME_SECRET);
    let slack_config = slack.config();
    let t = TestApp::start_with_secrets(
        &[],
        &[
            ("API_KEYS", &keys),
            ("WEBHOOK_SOURCES", &webhook_sources),
            ("EVENT_SUBSCRIPTIONS", &subscriptions),
            ("SLACK", &slack_config),
            ("DECISION_TOKEN_SECRET", TOKEN_SECRET),
        ],
    )
    .await;
    // Each function reads the secrets the template gives it in one call at its start: the six
    // that are given any of these; none reads another function's.
    assert_eq!(
        t.secret_calls.take(),
        ["BatchGetSecretValue"; 6],
        "one call per function with secrets"
    );
    let read = t.function(countersign::Function::Read).secrets();
    assert!(read.api_keys.is_some() && read.webhook_sources.is_empty() && read.slack.is_empty());
    let webhook = t.function(countersign::Function::Webhook).secrets();
    assert!(!webhook.webhook_sources.is_empty() && webhook.decision_token_secret.is_none());
    let id = t
        .create_ok(KEY_A, "from-secrets", &deploy_body(1, &[ALICE]))
        .await;
    assert_eq!(
        deliver(&t, ACME_SECRET).await,
        200,
        "the webhook source's secret"
    );
    let page = t.send(t.http.get(t.review_link(&id, ALICE))).await;
    assert_eq!(page.status, 200, "the review token's secret");
    let secrets = t.app.secrets();
    assert_eq!(secrets.slack.len(), 1);
    assert_eq!(secrets.event_subscriptions.len(), 1);
    let click = slack.click_body("UALICE001", "countersign.approve", &id);
    let headers = slack_headers(
        countersign_tests::slack::SLACK_SIGNING_SECRET,
        t.clock.now(),
        &click,
    );
    assert_eq!(
        t.slack_interaction(TENANT_A, &headers, &click).await.status,
        200,
        "Slack's"
    );
    assert!(t.secret_calls.take().is_empty(), "no call per request");
}

#[tokio::test]
async fn a_rotation_reaches_a_running_stack_at_the_next_periodic_refresh() {
    let old = countersign_tests::ApiKeys::new()
        .key_in(
            TENANT_A,
            "ci@tenant-a",
            &["requester", "reader"],
            "old-key-0123456789abcdef",
        )
        .to_string();
    let new = countersign_tests::ApiKeys::new()
        .key_in(
            TENANT_A,
            "ci@tenant-a",
            &["requester", "reader"],
            "new-key-0123456789abcdef",
        )
        .to_string();
    let t =
        TestApp::start_with_secrets(&[("SECRETS_REFRESH_SECONDS", "60")], &[("API_KEYS", &old)])
            .await;
    let status = |key: &'static str| {
        let t = &t;
        async move {
            t.send(t.http.get(t.url("/approvals/nope")).bearer_auth(key))
                .await
                .status
        }
    };
    assert_eq!(status("old-key-0123456789abcdef").await, 404);
    t.rotate_secret("API_KEYS", &new).await;
    assert_eq!(
        status("old-key-0123456789abcdef").await,
        404,
        "in force until the refresh"
    );
    t.secret_calls.take();
    t.clock.advance(60);
    // The request that finds the refresh due starts it, and is answered with what is in force.
    status("old-key-0123456789abcdef").await;
    // Watched from inside: a refused key would itself start an early read.
    eventually("the rotated keys in force", || async {
        t.function(countersign::Function::Read)
            .secrets()
            .api_keys
            .as_ref()
            .is_some_and(|keys| keys.caller_for("new-key-0123456789abcdef").is_some())
    })
    .await;
    assert_eq!(
        t.secret_calls.take(),
        ["BatchGetSecretValue"],
        "one read per refresh"
    );
    assert_eq!(
        status("new-key-0123456789abcdef").await,
        404,
        "the added key"
    );
    assert_eq!(
        status("old-key-0123456789abcdef").await,
        401,
        "the removed key"
    );
}

#[tokio::test]
async fn a_signature_failing_under_every_secret_refreshes_early_at_most_every_30_seconds() {
    let rotated = "whsec_cm90YXRlZC13ZWJob29rLXNlY3JldC0wMTIzNDU2Nzg5YWI=";
    let again = "whsec_YWdhaW4tcm90YXRlZC1zZWNyZXQtMDEyMzQ1Njc4OWFiY2Q=";
    let t = TestApp::start_with_secrets(&[], &[("WEBHOOK_SOURCES", &sources(ACME_SECRET))]).await;
    t.secret_calls.take();
    t.rotate_secret("WEBHOOK_SOURCES", &sources(rotated)).await;
    assert_eq!(
        deliver(&t, rotated).await,
        401,
        "not read yet: refused, and read early"
    );
    eventually("the rotated secret in force", || async {
        deliver(&t, rotated).await == 200
    })
    .await;
    assert_eq!(
        deliver(&t, ACME_SECRET).await,
        401,
        "the old secret is gone"
    );
    assert_eq!(
        t.secret_calls.take(),
        ["BatchGetSecretValue"],
        "one early read"
    );

    // Within 30 s of that read, failures read nothing more.
    t.rotate_secret("WEBHOOK_SOURCES", &sources(again)).await;
    for _ in 0..5 {
        assert_eq!(deliver(&t, again).await, 401);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        t.secret_calls.take().is_empty(),
        "at most one early read per 30 s"
    );
    t.clock.advance(30);
    assert_eq!(deliver(&t, again).await, 401);
    eventually("the second rotation in force", || async {
        deliver(&t, again).await == 200
    })
    .await;
}

/// Once the refresh is due: it fails, is counted once, and the last good value still verifies.
async fn kept_after_a_failed_refresh(t: &TestApp) {
    t.clock.advance(60);
    assert_eq!(deliver(t, ACME_SECRET).await, 200);
    eventually("the failed refresh counted", || async {
        refresh_failures(t) == 1
    })
    .await;
    assert_eq!(
        deliver(t, ACME_SECRET).await,
        200,
        "still the last good value"
    );
}

#[tokio::test]
async fn a_failed_refresh_keeps_the_last_good_values() {
    let t = TestApp::start_with_secrets(
        &[("SECRETS_REFRESH_SECONDS", "60")],
        &[("WEBHOOK_SOURCES", &sources(ACME_SECRET))],
    )
    .await;
    t.metrics.take();
    // A value that no longer parses: refused whole, the last good one stays.
    t.rotate_secret(
        "WEBHOOK_SOURCES",
        r#"{"acme": {"tenant": "a#b", "secrets": []}}"#,
    )
    .await;
    kept_after_a_failed_refresh(&t).await;

    // A secret deleted under the running stack: the same.
    t.secretsmanager()
        .delete_secret()
        .secret_id(&t.secret_arns["WEBHOOK_SOURCES"])
        .force_delete_without_recovery(true)
        .send()
        .await
        .expect("delete the secret");
    kept_after_a_failed_refresh(&t).await;
    for line in t.metrics.take() {
        assert!(!line.contains(ACME_SECRET), "{line}");
    }
}

#[tokio::test]
async fn a_hundred_slack_tenants_fit_in_one_secret() {
    let tenants: serde_json::Map<String, serde_json::Value> = (0..100)
        .map(|i| {
            (
                format!("tenant-{i}"),
                json!({
                    "bot_token": format!("xoxb-{i:04}-0123456789-abcdefghij"),
                    "signing_secret": format!("signing-secret-{i:04}-0123456789abcdef"),
                    "channel": format!("C{i:08}"),
                    "users": {format!("U{i:08}"): format!("person{i}@example.com")},
                    "api_base_url": "http://127.0.0.1:9/api",
                }),
            )
        })
        .collect();
    let slack = serde_json::Value::Object(tenants).to_string();
    println!(
        "secrets: SLACK for 100 tenants is {} bytes (a secret holds 65,536)",
        slack.len()
    );
    let t = TestApp::start_with_secrets(&[], &[("SLACK", &slack)]).await;
    assert_eq!(t.app.secrets().slack.len(), 100);
    let body = "payload=%7B%7D";
    let signed = slack_headers("signing-secret-0057-0123456789abcdef", t.clock.now(), body);
    assert_eq!(
        t.slack_interaction("tenant-57", &signed, body).await.status,
        200
    );
    let other = slack_headers("signing-secret-0058-0123456789abcdef", t.clock.now(), body);
    assert_eq!(
        t.slack_interaction("tenant-57", &other, body).await.status,
        401
    );
}

#[tokio::test]
async fn both_forms_of_a_variable_fail_the_start_naming_it() {
    let error = countersign::config::secrets::load(
        [
            ("SLACK".to_owned(), "{}".to_owned()),
            (
                "SLACK_SECRET_ARN".to_owned(),
                "arn:aws:secretsmanager:x".to_owned(),
            ),
        ]
        .into(),
        aws_sdk_secretsmanager::Client::new(&countersign_tests::sdk_config().await),
    )
    .await
    .unwrap_err();
    assert_eq!(error.variable, "SLACK");
    let unknown = countersign::config::secrets::load(
        [(
            "SLACK_SECRET_ARN".to_owned(),
            "never-created-secret".to_owned(),
        )]
        .into(),
        aws_sdk_secretsmanager::Client::new(&countersign_tests::sdk_config().await),
    )
    .await
    .unwrap_err();
    assert_eq!(unknown.variable, "SLACK");
    assert!(
        unknown.problem.contains("ResourceNotFoundException"),
        "{}",
        unknown.problem
    );
}

/// A Slack app's signing secret rotated without a cutover: while `signing_secret` lists the new
/// and the old one, a request signed with either verifies; any other is 401.
#[tokio::test]
async fn during_a_rotation_slack_requests_verify_under_either_signing_secret() {
    let slack = json!({TENANT_A: {
        "bot_token": "xoxb-0001-0123456789-abcdefghij",
        "signing_secret": ["new-signing-secret-0123456789abcdef", "old-signing-secret-0123456789abcdef"],
        "channel": "C00000001",
        "users": {"U00000001": ALICE},
        "api_base_url": "http://127.0.0.1:9/api",
    }})
    .to_string();
    let t = TestApp::start_with(&[("SLACK", &slack)]).await;
    let body = "payload=%7B%7D";
    for (secret, status) in [
        ("new-signing-secret-0123456789abcdef", 200),
        ("old-signing-secret-0123456789abcdef", 200),
        ("another-signing-secret-0123456789ab", 401),
    ] {
        let headers = slack_headers(secret, t.clock.now(), body);
        assert_eq!(
            t.slack_interaction(TENANT_A, &headers, body).await.status,
            status,
            "{secret}"
        );
    }
    let stale = slack_headers(
        "old-signing-secret-0123456789abcdef",
        t.clock.now() - 301,
        body,
    );
    assert_eq!(
        t.slack_interaction(TENANT_A, &stale, body).await.status,
        401,
        "stale"
    );
}

/// `DECISION_TOKEN_SECRET` rotated without a cutover: while it lists the new key and the old,
/// review links of either verify; a link of a key this function has not read yet is refused
/// once and read early, then verifies.
#[tokio::test]
async fn review_links_of_the_old_and_the_new_token_key_verify_during_a_rotation() {
    let new = "a-new-review-token-secret-0123456789";
    let t = TestApp::start_with_secrets(&[], &[("DECISION_TOKEN_SECRET", TOKEN_SECRET)]).await;
    let id = t
        .create_ok(KEY_A, "token-rotation", &deploy_body(3, &[ALICE]))
        .await;
    t.rotate_secret(
        "DECISION_TOKEN_SECRET",
        &serde_json::to_string(&[new, TOKEN_SECRET]).unwrap(),
    )
    .await;
    let approval = countersign::domain::ApprovalId::parse(&id).unwrap();
    let token = countersign::review_token::TokenSecret::parse(new)
        .unwrap()
        .mint(
            &countersign::domain::TenantId::parse(TENANT_A).unwrap(),
            &approval,
            &countersign::domain::Approver::parse(ALICE).unwrap(),
            t.clock.now() + 3600,
        );
    let new_link = t.url(&format!("/approvals/{id}/review?token={token}"));
    let first = t.send(t.http.get(&new_link)).await;
    assert_eq!(first.status, 403, "not read yet");
    eventually("the new key read early", || async {
        t.send(t.http.get(&new_link)).await.status == 200
    })
    .await;
    let old_link = t.send(t.http.get(t.review_link(&id, ALICE))).await;
    assert_eq!(
        old_link.status, 200,
        "the old key's link during the rotation"
    );
}

/// The webhook function answers the internet: it holds what verifies Slack's and GitHub's
/// requests, never a bot token or an App's key. Those are `SLACK_BOT_TOKENS` and
/// `GITHUB_PRIVATE_KEYS`, secrets of their own that only the executor (and, for GitHub's
/// redelivery sweep, the sweeper) is given — and may read.
#[tokio::test]
async fn the_webhook_function_holds_no_bot_token_and_no_app_key() {
    let slack = FakeSlack::start().await;
    let github = countersign_tests::github::FakeGithub::start().await;
    let split = [slack.split_env(), github.split_env()].concat();
    let secrets: Vec<(&str, &str)> = split.iter().map(|(k, v)| (*k, v.as_str())).collect();
    // A queue and a notifier named, so that every function's start check applies.
    let jobs = [
        ("JOBS_QUEUE_URL", "http://127.0.0.1:9/123456789012/jobs"),
        ("NOTIFIER_URL", "http://127.0.0.1:9/notify"),
        ("PUBLIC_BASE_URL", "https://approvals.example.com"),
    ];
    let t = TestApp::start_with_secrets(&jobs, &secrets).await;
    let holds = |function| {
        let secrets = t.function(function).secrets();
        assert_eq!((secrets.slack.len(), secrets.github.len()), (1, 1));
        (
            secrets.slack.values().all(|app| app.bot_token.is_some()),
            secrets.github.values().all(|app| app.private_key.is_some()),
        )
    };
    use countersign::Function::{Executor, Webhook};
    assert_eq!(holds(Webhook), (false, false), "the webhook function");
    assert_eq!(holds(Executor), (true, true), "the executor");
    let sweeper = t.function(countersign::Function::Sweeper).secrets();
    assert!(sweeper.github.values().all(|app| app.private_key.is_some()));
    assert!(sweeper.slack.is_empty(), "the sweeper is given no Slack");
    // Starts as each is deployed: the executor and the sweeper have what they act with; the
    // webhook function warns of nothing (the decide function only that, without OIDC, its
    // review links are bearer credentials).
    for function in countersign::Function::ALL {
        let config = &t.function(function).config;
        assert!(config.check_for(function).is_ok(), "{function:?}");
        let warnings = config.start_warnings(function);
        match function {
            countersign::Function::Decide => assert!(
                !warnings.is_empty() && warnings.iter().all(|w| w.contains("bearer credentials")),
                "{warnings:?}"
            ),
            _ => assert!(warnings.is_empty(), "{function:?}: {warnings:?}"),
        }
    }
    // Inline, as before v6: it still works, and the webhook function says what it holds.
    let inline = TestApp::start_with_secrets(&[], &[("SLACK", &slack.config())]).await;
    let warnings = inline.function(Webhook).config.start_warnings(Webhook);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("SLACK_BOT_TOKENS") && !warnings[0].contains("xoxb"));
}

/// Review of v5, finding 3 ("webhook and subscription secrets can reach the log"): serde's
/// message quotes a string it did not expect, so a wrongly shaped `WEBHOOK_SOURCES` logged its
/// `whsec_…` secret at start (and on every refresh, which parses alike). Each secret-bearing
/// variable, wrongly shaped around a secret, stops the webhook function's start with an error
/// naming the variable and the field — and the secret appears nowhere in its output.
#[test]
fn a_wrongly_shaped_secret_never_appears_in_any_output() {
    const MARKER: &str = "whsec_MARKER0123456789";
    let binary = countersign_tests::runtime_api::function_binary("webhook", "debug");
    for (variable, value, field) in [
        (
            "WEBHOOK_SOURCES",
            format!(r#"{{"acme": {{"tenant": "{TENANT_A}", "secrets": "{MARKER}"}}}}"#),
            "acme.secrets",
        ),
        (
            "EVENT_SUBSCRIPTIONS",
            format!(
                r#"{{"{TENANT_A}": {{"url": "https://x.example", "secret": {{"v": "{MARKER}"}}}}}}"#
            ),
            "secret",
        ),
        (
            "ACTION_TARGETS",
            format!(r#"{{"deploy": {{"url": ["https://u:{MARKER}@x.example"]}}}}"#),
            "deploy.url",
        ),
        (
            "SLACK",
            format!(r#"{{"{TENANT_A}": {{"bot_token": ["{MARKER}"]}}}}"#),
            "bot_token",
        ),
        (
            "GITHUB",
            format!(r#"{{"{TENANT_A}": {{"app_id": "{MARKER}"}}}}"#),
            "app_id",
        ),
        (
            "API_KEYS",
            format!(
                r#"[{{"tenant": "{TENANT_A}", "principal": "p", "key": {{"k": "{MARKER}"}}}}]"#
            ),
            "[0].key",
        ),
        (
            "SLACK_BOT_TOKENS",
            format!(r#"{{"{TENANT_A}": ["{MARKER}"]}}"#),
            TENANT_A,
        ),
        (
            "GITHUB_PRIVATE_KEYS",
            format!(r#"{{"{TENANT_A}": {{"pem": "{MARKER}"}}}}"#),
            TENANT_A,
        ),
    ] {
        let output = std::process::Command::new(&binary)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("AWS_LAMBDA_RUNTIME_API", "127.0.0.1:9")
            .env("AWS_LAMBDA_FUNCTION_NAME", "secrets")
            .env("AWS_REGION", "us-east-1")
            .env("RUST_LOG", "debug")
            .env(variable, &value)
            .output()
            .expect("run the webhook function");
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(!output.status.success(), "{variable}: started: {all}");
        assert!(
            all.contains(variable) && all.contains(field),
            "{variable}: the error names the variable and {field}: {all}"
        );
        assert!(
            !all.contains("MARKER"),
            "{variable}: its secret shown: {all}"
        );
    }
}

/// Review of v5, finding 12: `ACTION_TARGETS` and `NOTIFIER_URL` carry credentials in their URLs
/// as often as not, so they are secret-bearing like the others: read from the secrets their
/// `_SECRET_ARN` names, and a rotation reaches the running stack at the next refresh (here a
/// new action type becomes creatable, and the executor's target for it is the rotated URL).
#[tokio::test]
async fn action_targets_and_the_notifier_url_come_from_secrets_and_rotate() {
    let targets = json!({"deploy": {"url": "https://user:tok3n@deploy.example/hook"}}).to_string();
    let notifier = "https://notify.example/hook?token=s3cret";
    let t = TestApp::start_with_secrets(
        &[("SECRETS_REFRESH_SECONDS", "60")],
        &[("ACTION_TARGETS", &targets), ("NOTIFIER_URL", notifier)],
    )
    .await;
    let executor = t.function(countersign::Function::Executor).secrets();
    assert_eq!(executor.notifier_url.as_deref(), Some(notifier));
    assert!(executor.is_action_type("deploy"));
    assert_eq!(
        t.create(KEY_A, "before-rotation", &deploy_body(2, &[ALICE]))
            .await
            .status,
        201
    );
    let refund = countersign_tests::CreateBody::new("refund", &[ALICE]).to_string();
    t.create(KEY_A, "refund-early", &refund)
        .await
        .assert_problem(400, "unknown_action_type");

    let rotated = json!({
        "deploy": {"url": "https://user:tok3n@deploy.example/hook"},
        "refund": {"url": "https://user:n3w@refund.example/hook"},
    })
    .to_string();
    t.rotate_secret("ACTION_TARGETS", &rotated).await;
    t.clock.advance(60);
    // The request that finds the refresh due starts it.
    t.create(KEY_A, "refund-due", &refund).await;
    eventually("the rotated targets in force", || async {
        t.function(countersign::Function::Executor)
            .secrets()
            .action_targets
            .get("refund")
            .is_some_and(|target| target.url == "https://user:n3w@refund.example/hook")
    })
    .await;
    eventually("a refund is creatable", || async {
        t.create(KEY_A, &format!("refund-{}", ulid::Ulid::new()), &refund)
            .await
            .status
            == 201
    })
    .await;
}

/// Review of v5, finding 8: a refresh was all or nothing, so one broken secret held back every
/// other rotation. Each variable stands alone now: in the webhook function, `WEBHOOK_SOURCES`
/// rotated to a value that no longer parses keeps its last good value (the failure counted),
/// while `SLACK`, rotated in the same period to a new signing secret, is in force.
#[tokio::test]
async fn one_broken_secret_does_not_hold_back_the_others_rotation() {
    let slack = FakeSlack::start().await;
    let first = slack.config();
    let mut rotated: serde_json::Value = serde_json::from_str(&first).expect("SLACK JSON");
    for app in rotated.as_object_mut().expect("tenants").values_mut() {
        app["signing_secret"] = json!("rotated-signing-secret-0123456789");
    }
    let t = TestApp::start_with_secrets(
        &[("SECRETS_REFRESH_SECONDS", "60")],
        &[
            ("SLACK", &first),
            ("WEBHOOK_SOURCES", &sources(ACME_SECRET)),
        ],
    )
    .await;
    t.metrics.take();
    t.rotate_secret(
        "WEBHOOK_SOURCES",
        r#"{"acme": {"tenant": "a#b", "secrets": []}}"#,
    )
    .await;
    t.rotate_secret("SLACK", &rotated.to_string()).await;
    t.clock.advance(60);
    assert_eq!(deliver(&t, ACME_SECRET).await, 200, "starts the refresh");
    eventually("the rotated Slack app in force", || async {
        t.function(countersign::Function::Webhook)
            .secrets()
            .slack
            .values()
            .any(|app| {
                app.signing_secrets
                    .iter()
                    .any(|secret| secret.expose() == "rotated-signing-secret-0123456789")
            })
    })
    .await;
    assert!(refresh_failures(&t) >= 1, "the broken one is counted");
    assert_eq!(
        deliver(&t, ACME_SECRET).await,
        200,
        "the last good sources still verify"
    );
}

/// Review of v5, finding 8: a page cursor is signed with a key derived from
/// `DECISION_TOKEN_SECRET`; one that fails verification may come from a function that has read a
/// rotation this one has not, so it refreshes early, as a failed signature does (at most once
/// every 30 s).
#[tokio::test]
async fn a_cursor_that_fails_verification_refreshes_early() {
    let t = TestApp::start_with_secrets(&[], &[("DECISION_TOKEN_SECRET", TOKEN_SECRET)]).await;
    t.secret_calls.take();
    for path in [
        "/approvals?cursor=bm90LWEtY3Vyc29y",
        "/approvals?cursor=c2Vjb25k",
    ] {
        t.get_path(KEY_A, path)
            .await
            .assert_problem(400, "invalid_cursor");
    }
    eventually("one early read", || async {
        !t.secret_calls.take().is_empty()
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        t.secret_calls.take().is_empty(),
        "at most one early read per 30 s"
    );
}
