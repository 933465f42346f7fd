//! The local runner: every route of every Lambda on one port, against the local AWS (moto, or
//! whatever `AWS_ENDPOINT_URL` names). With no configuration it runs a demo and prints how to
//! use it. Lambda-only concerns (API Gateway events) are the only thing it does not exercise.
//!
//! `countersign-local sign-webhook [--source NAME] BODY` prints a signed curl for a webhook
//! delivery instead of serving; `countersign-local openapi` prints the API's OpenAPI document
//! (`docs/openapi.json` is its output).

use std::collections::HashMap;
use std::net::SocketAddr;

mod clock;
mod demo;
mod demo_policy;

use countersign::runner::{Clients, Deployment, Functions, LocalRoles, Pollers, ensure_queues};
use countersign::{App, Clock, Config, Function};

/// Demo values for what the environment leaves unset. Printed at start: none of them is secret.
/// The demo's requester (principal `ci@demo`; it also operates, but never decides).
const DEMO_API_KEY: &str = "cs_demo_key_0123456789";
/// alice's and bob's own keys: each decides as itself only.
const DEMO_ALICE_KEY: &str = "cs_demo_alice_0123456789";
const DEMO_BOB_KEY: &str = "cs_demo_bob_0123456789";
const DEMO_WEBHOOK_SECRET: &str = "whsec_Y291bnRlcnNpZ24tZGVtby13ZWJob29rLXNlY3JldCE=";
const DEMO_TOKEN_SECRET: &str = "countersign-demo-review-token-secret";
const DEMO_CALLBACK_SECRET: &str = "whsec_Y291bnRlcnNpZ24tZGVtby1jYWxsYmFjay1zZWNyZXQh";
/// The local jobs queue (and `…-dlq`), created when `JOBS_QUEUE_URL` is not set.
const LOCAL_QUEUE: &str = "countersign-jobs";

fn demo_default(name: &str, port: u16) -> Option<String> {
    match name {
        "API_KEYS" => Some(format!(
            r#"[{{"tenant": "demo", "principal": "ci@demo", "roles": ["requester", "operator"], "key": "{DEMO_API_KEY}"}},
                {{"tenant": "demo", "principal": "alice@example.com", "roles": ["approver"], "key": "{DEMO_ALICE_KEY}"}},
                {{"tenant": "demo", "principal": "bob@example.com", "roles": ["approver"], "key": "{DEMO_BOB_KEY}"}}]"#
        )),
        "ACTION_TARGETS" => Some(format!(
            r#"{{"echo": {{"url": "http://127.0.0.1:{port}/_demo/echo", "idempotent": true,
                          "status_url": "http://127.0.0.1:{port}/_demo/echo/status/{{idempotency_key}}",
                          "status_delay_seconds": 2}},
                "agent": {{"executes": false}}}}"#
        )),
        "WEBHOOK_SOURCES" => Some(format!(
            r#"{{"demo": {{"tenant": "demo", "secrets": ["{DEMO_WEBHOOK_SECRET}"]}}}}"#
        )),
        "NOTIFIER_URL" => Some(format!("http://127.0.0.1:{port}/_demo/notify")),
        "PUBLIC_BASE_URL" => Some(format!("http://127.0.0.1:{port}")),
        "DECISION_TOKEN_SECRET" => Some(DEMO_TOKEN_SECRET.to_owned()),
        "EVENT_SUBSCRIPTIONS" => Some(format!(
            r#"{{"demo": {{"url": "http://127.0.0.1:{port}/_demo/callback", "secret": "{DEMO_CALLBACK_SECRET}"}}}}"#
        )),
        // The local AWS runs state machines and stands in for durable callbacks: both resume.
        "RESUME_TYPES" => Some("stepfunctions,lambda_durable".to_owned()),
        // The demo's approvers are emailed through the local SES (their emails are printed).
        "EMAIL" => Some(r#"{"demo": {"from": "approvals@demo.example"}}"#.to_owned()),
        "EMAIL_SENDERS" => Some("*@demo.example".to_owned()),
        _ => None,
    }
}

fn port() -> Result<u16, String> {
    match std::env::var("PORT") {
        Ok(raw) => raw
            .parse()
            .map_err(|_| "configuration: PORT: must be a port number".to_owned()),
        Err(_) => Ok(3000),
    }
}

/// Without `API_KEYS` (or `API_KEYS_SECRET_ARN`) the runner is a demo.
fn is_demo() -> bool {
    std::env::var("API_KEYS").is_err() && std::env::var("API_KEYS_SECRET_ARN").is_err()
}

/// The variables: the environment, and in a demo the demo's values for what it leaves out
/// (not for a variable whose secret is named instead); with `API_KEYS` the configuration is the
/// user's alone, and what is missing fails the start.
fn variables(port: u16) -> HashMap<String, String> {
    let mut variables: HashMap<String, String> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    if is_demo() {
        for name in DEMO_VARIABLES {
            let unset = !variables.contains_key(name)
                && !variables.contains_key(&format!("{name}_SECRET_ARN"));
            if unset && let Some(value) = demo_default(name, port) {
                variables.insert(name.to_owned(), value);
            }
        }
    }
    variables
}

const DEMO_VARIABLES: [&str; 10] = [
    "API_KEYS",
    "ACTION_TARGETS",
    "WEBHOOK_SOURCES",
    "NOTIFIER_URL",
    "PUBLIC_BASE_URL",
    "DECISION_TOKEN_SECRET",
    "EVENT_SUBSCRIPTIONS",
    "RESUME_TYPES",
    "EMAIL",
    "EMAIL_SENDERS",
];

fn config(port: u16) -> Result<Config, countersign::ConfigError> {
    let variables = variables(port);
    Config::from_lookup(|name| variables.get(name).cloned())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("sign-webhook") => return sign_webhook(&args[1..]),
        Some("openapi") => {
            println!(
                "{}",
                serde_json::to_string_pretty(&countersign::http::openapi_document())?
            );
            return Ok(());
        }
        _ => {}
    }

    countersign::telemetry::init()?;
    let _failpoints = countersign::failpoints();
    let port = port()?;
    let advanceable = clock::advanceable()?;
    let demo = is_demo();
    // The deployer's credentials (the environment's): tables, queues, the event source
    // mapping's bookkeeping. Each function calls as its own role (below).
    let aws = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .load()
        .await;
    let mut variables = variables(port);
    // Secrets named by `<NAME>_SECRET_ARN` come from the local AWS's Secrets Manager (moto).
    let (mut config, secret_source) = countersign::config::secrets::load(
        variables.clone(),
        aws_sdk_secretsmanager::Client::new(&aws),
    )
    .await?;
    // The certificate key, as the template creates one.
    if config.certificate_key_arn.is_none() {
        let key = countersign::runner::create_certificate_key(&aws).await?;
        variables.insert("CERTIFICATE_KEY_ARN".to_owned(), key.clone());
        config.certificate_key_arn = Some(key);
    }
    let sqs = aws_sdk_sqs::Client::new(&aws);
    if config.jobs_queue_url.is_none() {
        let queues = ensure_queues(
            &sqs,
            LOCAL_QUEUE,
            config.job_visibility_timeout_seconds,
            config.job_max_attempts,
        )
        .await?;
        variables.insert("JOBS_QUEUE_URL".to_owned(), queues.queue_url.clone());
        config.jobs_queue_url = Some(queues.queue_url);
    }
    let deployer = App::with_secret_source(
        config,
        secret_source,
        aws_sdk_dynamodb::Client::new(&aws),
        sqs,
        Clock::system(),
        countersign::observe::Sink::Stdout,
    );
    deployer.store.ensure_tables().await?;
    // The senders of EMAIL, verified on the local SES as the deployer verifies them on AWS.
    countersign::runner::verify_senders(&aws, &deployer.config.email).await?;
    // The demo tenant's approval policy and group, as an administrator would push them.
    let demo_policy = match demo {
        true => Some(demo_policy::ensure(&deployer.store, deployer.clock.now()).await?),
        false => None,
    };
    // The tables by name, as each function's environment names them (defaults included).
    for (variable, table) in deployer.config.tables.variables() {
        variables.insert(variable.to_owned(), table.to_owned());
    }
    let roles = local_roles(&aws, &deployer, &variables).await?;
    let functions = Functions::build(
        &variables,
        roles,
        &aws,
        &deployer.clock,
        &countersign::observe::Sink::Stdout,
        Clients::of,
    )
    .await?;
    // The runner hosts every function, so it needs everything each of them does.
    functions.check(&Function::ALL)?;
    let _pollers = Pollers::start(&functions, deployer.store.clone())?;

    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr} (PORT): {e}"))?;
    print_banner(port, demo, &deployer, &functions);
    if let Some((version, pushed)) = demo_policy {
        print_demo_policy(port, version, pushed);
    }
    // What the local SES sends, printed as it goes out.
    if !deployer.config.email.is_empty()
        && let Ok(endpoint) = std::env::var("AWS_ENDPOINT_URL")
    {
        demo::print_emails(endpoint);
    }
    let mut router =
        countersign::http::local_router(|f| functions.app(f).clone()).merge(demo::router(
            demo.then(|| countersign::webhook::WebhookSecret::parse(DEMO_CALLBACK_SECRET).ok())
                .flatten(),
            deployer.clock.clone(),
        ));
    if advanceable {
        // Every function's app shares this clock's offset (clones of one clock).
        println!(
            "LOCAL_CLOCK=advanceable: POST /_local/clock {{\"advance_seconds\": n}} moves this runner's clock"
        );
        router = router.merge(clock::router(deployer.clock.clone()));
    }
    axum::serve(listener, router)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}

/// Each function's role, from the local AWS that `AWS_ENDPOINT_URL` names (see
/// `countersign::runner::LocalRoles`); `None`, said at start, when that endpoint does not
/// check roles or no endpoint is named.
async fn local_roles(
    aws: &aws_config::SdkConfig,
    deployer: &App,
    variables: &HashMap<String, String>,
) -> Result<Option<LocalRoles>, String> {
    let Some(endpoint) = std::env::var("AWS_ENDPOINT_URL")
        .ok()
        .filter(|v| !v.is_empty())
    else {
        return Ok(None);
    };
    let region = aws.region().map_or("us-east-1", |r| r.as_ref());
    let roles = LocalRoles::register(
        &endpoint,
        &deployer.config.tables.approvals,
        region,
        variables,
        Deployment::default(),
    )
    .await?;
    match &roles {
        None => eprintln!(
            "IAM: {endpoint} is not the local stack's moto; each function calls with this \
             process's credentials, and only that endpoint's own checks apply"
        ),
        Some(roles) if !roles.enforced => eprintln!(
            "IAM: MOTO_IAM=off: the local AWS allows every call, whatever the function's role"
        ),
        Some(_) => {}
    }
    Ok(roles)
}

/// Prints a ready-to-run curl that delivers `BODY` to a configured source, signed now with the
/// source's first secret, as a Standard Webhooks sender would.
fn sign_webhook(args: &[String]) -> Result<(), Box<dyn std::error::Error>> {
    let (source_name, body) = match args {
        [flag, source, body] if flag == "--source" => (source.clone(), body.clone()),
        [body] => ("demo".to_owned(), body.clone()),
        _ => return Err("usage: countersign-local sign-webhook [--source NAME] BODY".into()),
    };
    let port = port()?;
    let config = config(port)?;
    let source = config
        .secrets
        .webhook_sources
        .get(&source_name)
        .ok_or_else(|| format!("no webhook source {source_name:?} in WEBHOOK_SOURCES"))?;
    let secret = source.secrets.first().ok_or("the source has no secret")?;
    let id = format!("msg_{}", ulid::Ulid::new());
    let timestamp = Clock::system().now();
    let signature = secret.sign(&id, timestamp, body.as_bytes());
    let quoted = body.replace('\'', r"'\''");
    println!(
        "curl -s -X POST http://127.0.0.1:{port}/webhooks/{source_name} -H 'Content-Type: application/json' \
         -H 'webhook-id: {id}' -H 'webhook-timestamp: {timestamp}' -H 'webhook-signature: {signature}' \
         -d '{quoted}'"
    );
    Ok(())
}

/// The demo's approval policy, and a create it decides.
fn print_demo_policy(port: u16, version: u32, pushed: bool) {
    let base = format!("http://127.0.0.1:{port}");
    let how = if pushed {
        "pushed now"
    } else {
        "already in force"
    };
    println!(
        r#"The demo tenant's approval policy (version {version}, {how}; group owners = {owners}):
{policy}
The policy decides who must approve: a create may name nobody, and what it names only adds.
  curl -s -X POST {base}/approvals     -H 'Authorization: Bearer {DEMO_API_KEY}' -H 'Content-Type: application/json'     -H 'Idempotency-Key: demo-policy-1'     -d '{{"action": {{"type": "echo", "payload": {{"say": "the policy chose"}}}}}}'
  → "approvers": {owners_json}, "policy": {{"rules": [{{"name": "owners", "group": "owners", …}}],
    "source": {{"version": {version}, "policies": ["echo-needs-an-owner"], …}}}}
Change it with `countersign policy push --tenant demo FILE.cedar` (docs/POLICY.md).
"#,
        owners = demo_policy::DEMO_OWNERS.join(", "),
        owners_json = serde_json::json!(demo_policy::DEMO_OWNERS),
        policy = demo_policy::DEMO_POLICY
            .lines()
            .map(|l| format!("  {l}"))
            .collect::<Vec<_>>()
            .join("\n"),
    );
}

fn print_banner(port: u16, demo: bool, app: &App, functions: &Functions) {
    let base = format!("http://127.0.0.1:{port}");
    println!("\nCountersign is listening on {base}");
    if let Some(roles) = functions.roles.as_ref().filter(|r| r.enforced) {
        println!(
            "IAM: each function calls as its role in infra/template.yaml ({}, ...); a call its \
             role does not allow is refused (AccessDeniedException)",
            roles.role_name(Function::Api)
        );
    }
    println!("tables: {:?}", app.config.tables);
    println!(
        "action types: {:?}; webhook sources: {:?}",
        app.config.secrets.action_targets.keys().collect::<Vec<_>>(),
        app.secrets().webhook_sources.keys().collect::<Vec<_>>()
    );
    for (tenant, slack) in &app.secrets().slack {
        println!(
            "Slack: tenant {tenant} posts to channel {} ({} mapped users); its app's interactivity \
             request URL is {base}/slack/interactions/{tenant} (behind a public HTTPS tunnel)",
            slack.channel,
            slack.users.len()
        );
    }
    if demo {
        println!(
            r#"
Demo configuration (set API_KEYS, ACTION_TARGETS and WEBHOOK_SOURCES to use your own):
  tenant: demo    API keys: {DEMO_API_KEY} (ci@demo: requester, operator)
                  {DEMO_ALICE_KEY} (alice@example.com: approver)
                  {DEMO_BOB_KEY} (bob@example.com: approver)
  webhook source: demo (tenant demo)    secret: {DEMO_WEBHOOK_SECRET}

Try it:
  curl -s -X POST {base}/approvals \
    -H 'Authorization: Bearer {DEMO_API_KEY}' -H 'Content-Type: application/json' \
    -H 'Idempotency-Key: demo-1' \
    -d '{{"action": {{"type": "echo", "payload": {{"say": "hello"}}}}, "approvers": ["alice@example.com"]}}'

  curl -s -X POST {base}/approvals/<id>/decision \
    -H 'Authorization: Bearer {DEMO_ALICE_KEY}' -H 'Content-Type: application/json' \
    -d '{{"decision": "approve"}}'

  curl -s {base}/approvals/<id> -H 'Authorization: Bearer {DEMO_API_KEY}'

A quorum: alice AND bob must approve (each with their own key; the first vote leaves it pending):
  curl -s -X POST {base}/approvals \
    -H 'Authorization: Bearer {DEMO_API_KEY}' -H 'Content-Type: application/json' \
    -H 'Idempotency-Key: demo-3' \
    -d '{{"action": {{"type": "echo", "payload": {{"say": "both of us"}}}}, "approvers": ["alice@example.com", "bob@example.com"], "policy": {{"rules": [{{"name": "owners", "approvers": ["alice@example.com", "bob@example.com"], "min_approvals": 2}}]}}}}'
  curl -s -X POST {base}/approvals/<id>/decision -H 'Authorization: Bearer {DEMO_ALICE_KEY}' \
    -H 'Content-Type: application/json' -d '{{"decision": "approve"}}'
  curl -s -X POST {base}/approvals/<id>/decision -H 'Authorization: Bearer {DEMO_BOB_KEY}' \
    -H 'Content-Type: application/json' -d '{{"decision": "approve"}}'

Notifications print each approver's review link: open it in a browser to approve or reject.
Lifecycle callbacks (signed per Standard Webhooks) print as the demo receiver verifies them;
the audit trail: curl -s {base}/approvals/<id>/events -H 'Authorization: Bearer {DEMO_API_KEY}'
Approved actions of type echo are performed by a local recorder that prints them (once per
Idempotency-Key). Type agent is approval-only: its caller claims the approved execution
(POST /approvals/<id>/execution/claim) and acts itself, e.g. `countersign mcp` for an AI agent.

Decide through a signed webhook instead (prints a curl signed now; pipe it to sh to send it):
  target/debug/countersign-local sign-webhook \
    '{{"type": "approval.decided", "data": {{"approval_id": "<id>", "decision": "approve", "approver": "alice@example.com"}}}}' | sh
"#
        );
    }
}
