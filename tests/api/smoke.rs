//! Each function's real binary (built for the host) under a minimal Lambda Runtime API on
//! loopback, answering one invocation against the local AWS: proves each `main` wires its
//! configuration and its clients, with only the variables the SAM template gives it.

use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use base64::Engine;
use countersign_tests::runtime_api::{RuntimeApi, function_binary, start_function};
use countersign_tests::{
    ACME_SECRET, ALICE, BOB, DECIDER_A, KEY_A, TOKEN_SECRET, TestApp, decision_body, deploy_body,
    test_api_keys,
};
use serde_json::{Map, Value, json};

const WAIT: Duration = Duration::from_secs(30);

/// What the Lambda service and the template give every function here.
fn base_env(t: &TestApp) -> Vec<(String, String)> {
    let mut env = vec![
        ("AWS_REGION".to_owned(), "us-east-1".to_owned()),
        (
            "APPROVALS_TABLE".to_owned(),
            t.app.config.tables.approvals.clone(),
        ),
        (
            "EVENTS_TABLE".to_owned(),
            t.app.config.tables.events.clone(),
        ),
        (
            "APPROVAL_INDEX_TABLE".to_owned(),
            t.app.config.tables.approval_index.clone(),
        ),
        // Where every function reads the tenant's approval policy and groups.
        (
            "KEYS_TABLE".to_owned(),
            t.app.config.tables.api_keys.clone(),
        ),
    ];
    match countersign_tests::aws_endpoint() {
        Some(endpoint) => env.extend([
            ("AWS_ENDPOINT_URL".to_owned(), endpoint),
            ("AWS_ACCESS_KEY_ID".to_owned(), "test".to_owned()),
            ("AWS_SECRET_ACCESS_KEY".to_owned(), "test".to_owned()),
        ]),
        None => env.extend(
            [
                "AWS_ENDPOINT_URL",
                "AWS_ACCESS_KEY_ID",
                "AWS_SECRET_ACCESS_KEY",
                "AWS_SESSION_TOKEN",
                "AWS_PROFILE",
            ]
            .into_iter()
            .filter_map(|name| {
                std::env::var(name)
                    .ok()
                    .map(|value| (name.to_owned(), value))
            }),
        ),
    }
    env
}

fn with(mut env: Vec<(String, String)>, more: &[(&str, &str)]) -> Vec<(String, String)> {
    env.extend(more.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
    env
}

/// The first job the approval `id` (tenant A) makes as it now stands.
async fn first_job(t: &TestApp, id: &str) -> countersign::jobs::Job {
    let approval = t
        .app
        .store
        .get_approval(
            &countersign::domain::TenantId::parse("tenant-a").unwrap(),
            &countersign::domain::ApprovalId::parse(id).unwrap(),
        )
        .await
        .unwrap()
        .unwrap();
    countersign::jobs::jobs_for_change(None, Some(&approval), "").remove(0)
}

/// An SQS event (as Lambda delivers it) holding `job` as message `m-1`, first receive.
fn sqs_event(job: &countersign::jobs::Job) -> Value {
    json!({"Records": [{
        "messageId": "m-1", "receiptHandle": "rh-1", "body": serde_json::to_string(job).unwrap(),
        "attributes": {"ApproximateReceiveCount": "1"}, "messageAttributes": {},
        "md5OfBody": "", "eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:us-east-1:000000000000:jobs",
        "awsRegion": "us-east-1"
    }]})
}

/// An API Gateway HTTP API (payload 2.0) event.
fn http_event(method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Value {
    let headers: Map<String, Value> = headers
        .iter()
        .map(|(k, v)| ((*k).to_owned(), json!(v)))
        .collect();
    json!({
        "version": "2.0",
        "routeKey": format!("{method} {path}"),
        "rawPath": path,
        "rawQueryString": "",
        "headers": headers,
        "requestContext": {
            "accountId": "000000000000", "apiId": "api", "domainName": "api.example.com", "domainPrefix": "api",
            "http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1", "userAgent": "smoke"},
            "requestId": "smoke", "routeKey": format!("{method} {path}"), "stage": "$default",
            "time": "30/Nov/2026:10:00:00 +0000", "timeEpoch": 1_796_032_800_000u64
        },
        "body": body,
        "isBase64Encoded": false
    })
}

async fn invoke(binary: &str, env: Vec<(String, String)>, event: Value) -> Value {
    let api = RuntimeApi::start(vec![event]).await;
    let mut child = start_function(&function_binary(binary, "debug"), &api, &env);
    let result = api.result(0, &mut child, WAIT).await;
    let _ = child.kill();
    let _ = child.wait();
    result.unwrap_or_else(|e| panic!("{binary} reported an error: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_serves_its_routes() {
    let t = TestApp::start_jobs(&[]).await;
    t.stop_runner().await;
    let env = with(
        base_env(&t),
        &[
            ("IDEMPOTENCY_TABLE", &t.app.config.tables.idempotency_keys),
            ("JOBS_QUEUE_URL", &t.queues().queue_url),
            ("DECISION_TOKEN_SECRET", TOKEN_SECRET),
            ("API_KEYS", &test_api_keys()),
            (
                "ACTION_TARGETS",
                r#"{"deploy": {"url": "http://127.0.0.1:9/deploy"}}"#,
            ),
        ],
    );
    let event = http_event(
        "POST",
        "/approvals",
        &[
            ("authorization", &format!("Bearer {KEY_A}")),
            ("content-type", "application/json"),
            ("idempotency-key", "smoke-1"),
        ],
        &deploy_body(1, &[ALICE]),
    );
    let response = invoke("api", env, event).await;
    assert_eq!(response["statusCode"], 201, "{response}");
    let approval: Value = serde_json::from_str(response["body"].as_str().unwrap()).unwrap();
    assert_eq!(
        t.get(KEY_A, approval["id"].as_str().unwrap()).await.status,
        200,
        "written to DynamoDB"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decide_serves_its_routes() {
    let t = TestApp::start().await;
    let id = t
        .create_ok(KEY_A, "smoke-decide", &deploy_body(1, &[ALICE]))
        .await;
    let env = with(
        base_env(&t),
        &[
            ("API_KEYS", &test_api_keys()),
            ("DECISION_TOKEN_SECRET", TOKEN_SECRET),
        ],
    );
    let event = http_event(
        "POST",
        &format!("/approvals/{id}/decision"),
        &[
            ("authorization", &format!("Bearer {DECIDER_A}")),
            ("content-type", "application/json"),
        ],
        r#"{"decision": "approve", "approver": "alice@example.com"}"#,
    );
    let response = invoke("decide", env, event).await;
    assert_eq!(response["statusCode"], 200, "{response}");
    assert_eq!(t.get(KEY_A, &id).await.json()["status"], "approved");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_serves_its_route() {
    let t = TestApp::start().await;
    let sources = json!({"acme": {"tenant": "tenant-a", "secrets": [ACME_SECRET]}}).to_string();
    let env = with(
        base_env(&t),
        &[
            ("INBOX_TABLE", &t.app.config.tables.webhook_inbox),
            ("WEBHOOK_SOURCES", &sources),
        ],
    );
    let body = r#"{"type": "ping"}"#;
    let now = t.clock.now();
    let signature = countersign::webhook::WebhookSecret::parse(ACME_SECRET)
        .unwrap()
        .sign("msg_smoke", now, body.as_bytes());
    let event = http_event(
        "POST",
        "/webhooks/acme",
        &[
            ("webhook-id", "msg_smoke"),
            ("webhook-timestamp", &now.to_string()),
            ("webhook-signature", &signature),
        ],
        body,
    );
    let response = invoke("webhook", env, event).await;
    assert_eq!(response["statusCode"], 200, "{response}");
    assert!(
        t.inbox_item("acme", "msg_smoke").await.is_some(),
        "recorded in the inbox"
    );
}

/// DynamoDB JSON, as stream events carry images.
fn dynamo_json(value: &AttributeValue) -> Value {
    match value {
        AttributeValue::S(s) => json!({"S": s}),
        AttributeValue::N(n) => json!({"N": n}),
        AttributeValue::Bool(b) => json!({"BOOL": b}),
        AttributeValue::Null(_) => json!({"NULL": true}),
        AttributeValue::B(b) => {
            json!({"B": base64::engine::general_purpose::STANDARD.encode(b.as_ref())})
        }
        AttributeValue::L(items) => json!({"L": items.iter().map(dynamo_json).collect::<Vec<_>>()}),
        AttributeValue::M(map) => {
            json!({"M": map.iter().map(|(k, v)| (k.clone(), dynamo_json(v))).collect::<Map<String, Value>>()})
        }
        other => panic!("unexpected attribute {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dispatch_turns_a_stream_record_into_jobs() {
    let t = TestApp::start_jobs(&[]).await;
    t.stop_runner().await;
    let id = t
        .create_ok(KEY_A, "smoke-dispatch", &deploy_body(1, &[ALICE, BOB]))
        .await;
    let item = t.approval_item(&id).await;
    let image: Map<String, Value> = item
        .iter()
        .map(|(k, v)| (k.clone(), dynamo_json(v)))
        .collect();
    let event = json!({"Records": [{
        "eventID": "1", "eventName": "INSERT", "eventVersion": "1.1", "eventSource": "aws:dynamodb",
        "awsRegion": "us-east-1",
        "eventSourceARN": "arn:aws:dynamodb:us-east-1:000000000000:table/approvals/stream/2026-11-30T00:00:00.000",
        "dynamodb": {
            "ApproximateCreationDateTime": 1_796_032_800.0,
            "Keys": {"pk": image["pk"].clone()},
            "NewImage": image,
            "SequenceNumber": "100", "SizeBytes": 100, "StreamViewType": "NEW_AND_OLD_IMAGES"
        }
    }]});
    // The dispatcher makes notify jobs only where there is a notifier (as the template gives it
    // NOTIFIER_URL's secret only then).
    let notifier = t.downstream_url("/notify");
    let certificate_key = t
        .app
        .config
        .certificate_key_arn
        .clone()
        .expect("the stack's certificate key");
    let env = with(
        base_env(&t),
        &[
            ("JOBS_QUEUE_URL", &t.queues().queue_url),
            ("NOTIFIER_URL", &notifier),
            // Where the approvers' delegations are (a delegate gets a copy), as the template
            // gives it.
            ("KEYS_TABLE", &t.app.config.tables.api_keys),
            // The key it signs certificates with (the stack's own).
            ("CERTIFICATE_KEY_ARN", &certificate_key),
        ],
    );
    invoke("dispatch", env, event).await;
    assert_eq!(
        t.queue_depth(&t.queues().queue_url).await,
        1,
        "one notify job for the approvers"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn executor_performs_a_job_and_reports_no_failure() {
    let t = TestApp::start_jobs(&[]).await;
    t.stop_runner().await;
    let id = t
        .create_ok(KEY_A, "smoke-exec", &deploy_body(1, &[ALICE]))
        .await;
    let job = &first_job(&t, &id).await;
    let event = sqs_event(job);
    let targets = r#"{"deploy": {"url": "http://127.0.0.1:9/deploy"}}"#;
    let notifier = t.downstream_url("/notify");
    let env = with(
        base_env(&t),
        &[
            ("LEDGER_TABLE", &t.app.config.tables.execution_ledger),
            ("JOBS_QUEUE_URL", &t.queues().queue_url),
            ("ACTION_TARGETS", targets),
            ("NOTIFIER_URL", &notifier),
            ("DECISION_TOKEN_SECRET", TOKEN_SECRET),
            ("PUBLIC_BASE_URL", "https://approvals.example.com"),
        ],
    );
    let response = invoke("executor", env, event).await;
    assert_eq!(response, json!({"batchItemFailures": []}));
    assert_eq!(
        t.downstream()
            .calls(&format!("{id}:notify:alice@example.com")),
        1,
        "the notifier was called"
    );
}

/// A target that never answers, at an executor whose invocations end after 6 s while a call may
/// take a third of the 30 s lease (10 s): the call is cut before the invocation's end, with time
/// left to record the attempt, instead of Lambda killing the invocation mid-call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn executor_ends_a_slow_call_before_the_invocation_does() {
    let t = TestApp::start_jobs(&[("JOB_VISIBILITY_TIMEOUT_SECONDS", "30")]).await;
    t.stop_runner().await;
    let body = json!({"action": {"type": "hang_once", "payload": {}}, "approvers": [ALICE]});
    let id = t
        .create_ok(KEY_A, "smoke-deadline", &body.to_string())
        .await;
    let approve = decision_body("approve", ALICE);
    assert_eq!(t.decide(DECIDER_A, &id, approve).await.status, 200);
    let job = &first_job(&t, &id).await;
    assert_eq!(job.kind(), "execute");
    let event = sqs_event(job);
    let targets = json!({"hang_once": {"url": t.downstream_url("/hang-once"), "idempotent": true}})
        .to_string();
    let notifier = t.downstream_url("/notify");
    let env = with(
        base_env(&t),
        &[
            ("LEDGER_TABLE", &t.app.config.tables.execution_ledger),
            ("JOBS_QUEUE_URL", &t.queues().queue_url),
            ("ACTION_TARGETS", &targets),
            ("NOTIFIER_URL", &notifier),
            ("DECISION_TOKEN_SECRET", TOKEN_SECRET),
            ("PUBLIC_BASE_URL", "https://approvals.example.com"),
            ("JOB_VISIBILITY_TIMEOUT_SECONDS", "30"),
        ],
    );
    let timeout = Duration::from_secs(6);
    let api = RuntimeApi::start_with_timeout(vec![event], timeout).await;
    let mut child = start_function(&function_binary("executor", "debug"), &api, &env);
    let result = api.result(0, &mut child, WAIT).await;
    let answered = std::time::Instant::now();
    let _ = child.kill();
    let handed_out = api.first_next().expect("the function asked for work");
    let took = answered.duration_since(handed_out);
    println!("the invocation answered after {} ms", took.as_millis());
    assert!(
        took < timeout,
        "answered after {took:?}, past the invocation's end"
    );
    assert_eq!(
        result.expect("a response"),
        json!({"batchItemFailures": [{"itemIdentifier": "m-1"}]}),
        "the message comes back for another attempt"
    );
    // The execution's ledger is on its approval.
    let approval = t.approval_item(&id).await;
    let execution = approval["execution"].as_m().expect("an execution");
    assert_eq!(
        countersign_tests::attr_s(execution, "lg_status"),
        "retry_wait",
        "the attempt's end is recorded"
    );
}

/// Sign-in through the decide function's binary as API Gateway (payload 2.0) carries cookies:
/// a request's in the event's `cookies`, a response's `Set-Cookie` in the result's `cookies`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decide_signs_in_with_cookies_as_api_gateway_carries_them() {
    use countersign_tests::oidc::TestProvider;
    let provider = TestProvider::start(json!({
        "clients": [{"client_id": "countersign", "client_secret": "countersign-client-secret-0123",
                     "redirect_uris": ["https://api.example.com/auth/tenant-a/callback"]}],
        "accounts": [{"sub": "alice-1", "email": ALICE, "email_verified": true}],
    }))
    .await;
    let t = TestApp::start().await;
    let id = t
        .create_ok(KEY_A, "smoke-sign-in", &deploy_body(1, &[ALICE, BOB]))
        .await;
    let oidc = json!({"tenant-a": {"issuer": provider.issuer, "client_id": "countersign",
                                   "client_secret": "countersign-client-secret-0123"}})
    .to_string();
    let env = with(
        base_env(&t),
        &[
            ("API_KEYS", &test_api_keys()),
            ("DECISION_TOKEN_SECRET", TOKEN_SECRET),
            ("OIDC", &oidc),
            ("PUBLIC_BASE_URL", "https://api.example.com"),
        ],
    );
    // The login: 302 to the provider, its sign-in cookie in the result's `cookies`.
    let mut event = http_event("GET", "/auth/tenant-a/login", &[], "");
    event["rawQueryString"] = json!("return_to=%2Finbox%2Ftenant-a");
    let response = invoke("decide", env.clone(), event).await;
    assert_eq!(response["statusCode"], 302, "{response}");
    let location = response["headers"]["location"].as_str().unwrap_or_default();
    assert!(location.starts_with(&provider.issuer), "{response}");
    let cookies = response["cookies"].as_array().cloned().unwrap_or_default();
    assert!(
        cookies.iter().any(|c| c
            .as_str()
            .is_some_and(|c| c.starts_with("__Host-countersign-sign-in-") && c.contains("Secure"))),
        "{response}"
    );
    // The review page, the session in the event's `cookies`: it decides for her.
    let secret = countersign::review_token::TokenSecret::parse(TOKEN_SECRET).unwrap();
    let session = countersign::session::SessionKeys::new(&secret).seal_session(
        &countersign::session::Session {
            tenant: countersign::domain::TenantId::parse("tenant-a").unwrap(),
            identity: countersign::domain::Approver::parse(ALICE).unwrap(),
            issuer: provider.issuer.clone(),
            sub: "alice-1".to_owned(),
            auth_time: Some(t.clock.now()),
            expires_at: t.clock.now() + 600,
            nonce: "smoke".to_owned(),
        },
    );
    let token = t.review_token("tenant-a", &id, ALICE);
    let path = format!("/approvals/{id}/review");
    let mut event = http_event("GET", &path, &[], "");
    event["rawQueryString"] = json!(format!("token={token}"));
    event["cookies"] = json!(["other=1", format!("__Host-countersign-session={session}")]);
    let response = invoke("decide", env, event).await;
    assert_eq!(response["statusCode"], 200, "{response}");
    let body = response["body"].as_str().unwrap_or_default();
    assert!(body.contains(&format!("As {ALICE}")), "{body}");
    assert!(body.contains(r#"name="csrf""#), "{body}");
}
