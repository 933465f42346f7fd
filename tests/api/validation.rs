//! Bad input gets a clear 4xx problem+json with a stable code, never a 5xx or a partial write.

use axum::body::Body;
use axum::http::Request;
use countersign_tests::{ALICE, DECIDER_A, KEY_A, Reply, TestApp, decision_body, deploy_body};
use serde_json::{Value, json};
use tower::ServiceExt;

/// Sends each case `(name, request, status, code)`: each must be answered `status` with a problem
/// of `code`. Returns each case's problem.
async fn refused_as_said<'a>(
    t: &TestApp,
    cases: impl IntoIterator<Item = (&'a str, reqwest::RequestBuilder, u16, &'a str)>,
) -> Vec<(&'a str, Value)> {
    let mut problems = Vec::new();
    for (name, request, status, code) in cases {
        let reply = t.send(request).await;
        assert_eq!(reply.status, status, "{name}: {}", reply.text());
        assert_eq!(reply.code(), code, "{name}");
        problems.push((name, reply.json()));
    }
    problems
}

/// The `field` of each of a problem's errors, in order.
fn error_fields(reply: &Reply) -> Vec<String> {
    reply.json()["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn malformed_create_requests_get_their_codes_and_write_nothing() {
    let t = TestApp::start().await;
    let valid = deploy_body(1, &[ALICE]);
    let post = || t.http.post(t.url("/approvals")).bearer_auth(KEY_A);
    let cases = [
        (
            "not JSON",
            post()
                .header("content-type", "application/json")
                .header("idempotency-key", "a")
                .body("{nope"),
            400,
            "invalid_request",
        ),
        (
            "schema",
            post()
                .header("content-type", "application/json")
                .header("idempotency-key", "b")
                .body(r#"{"action": {}, "approvers": "alice"}"#),
            400,
            "invalid_request",
        ),
        (
            "unknown type",
            post()
                .header("content-type", "application/json")
                .header("idempotency-key", "c")
                .body(r#"{"action": {"type": "launch"}, "approvers": ["alice"]}"#),
            400,
            "unknown_action_type",
        ),
        (
            "no key",
            post()
                .header("content-type", "application/json")
                .body(valid.clone()),
            400,
            "idempotency_key_missing",
        ),
        (
            "long key",
            post()
                .header("content-type", "application/json")
                .header("idempotency-key", "k".repeat(256))
                .body(valid.clone()),
            400,
            "idempotency_key_invalid",
        ),
        (
            "non-ASCII key",
            post()
                .header("content-type", "application/json")
                .header("idempotency-key", "clé")
                .body(valid.clone()),
            400,
            "idempotency_key_invalid",
        ),
        (
            "text/plain",
            post()
                .header("content-type", "text/plain")
                .header("idempotency-key", "d")
                .body(valid.clone()),
            415,
            "unsupported_media_type",
        ),
        (
            "no content type",
            post().header("idempotency-key", "e").body(valid.clone()),
            415,
            "unsupported_media_type",
        ),
        (
            "65 KiB",
            post()
                .header("content-type", "application/json")
                .header("idempotency-key", "f")
                .body(oversized_body()),
            413,
            "payload_too_large",
        ),
    ];
    for (name, problem) in refused_as_said(&t, cases).await {
        for field in ["type", "title", "status", "detail", "code"] {
            assert!(
                problem.get(field).is_some(),
                "{name}: problem lacks {field}"
            );
        }
    }
    assert_eq!(t.approval_count().await, 0);
    assert_eq!(
        t.count_items(&t.app.config.tables.idempotency_keys).await,
        0
    );
    assert!(
        t.calls.take().is_empty(),
        "bad input costs no DynamoDB call"
    );
}

#[tokio::test]
async fn schema_errors_name_the_offending_fields() {
    let t = TestApp::start().await;
    let body = json!({"action": {"type": "deploy", "payload": []}, "approvers": ["a", "a"], "expires_in_seconds": 5});
    let reply = t.create(KEY_A, "fields", &body.to_string()).await;
    assert_eq!(reply.status, 400);
    let fields = error_fields(&reply);
    assert_eq!(
        fields,
        ["action.payload", "approvers[1]", "expires_in_seconds"]
    );
}

#[tokio::test]
async fn a_body_without_declared_length_stops_at_the_limit() {
    let t = TestApp::start().await;
    // Through the router directly: no Content-Length header, so the limit is enforced while reading.
    let request = Request::post("/approvals")
        .header("authorization", format!("Bearer {KEY_A}"))
        .header("content-type", "application/json")
        .header("idempotency-key", "streamed")
        .body(Body::from(oversized_body()))
        .unwrap();
    let response = countersign::http::local_router(|f| t.function(f))
        .oneshot(request)
        .await
        .unwrap();
    assert_eq!(response.status(), 413);
    let body = axum::body::to_bytes(response.into_body(), 4096)
        .await
        .unwrap();
    let problem: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(problem["code"], "payload_too_large");
    assert_eq!(t.approval_count().await, 0);
}

#[tokio::test]
async fn malformed_decisions_get_their_codes_and_change_nothing() {
    let t = TestApp::start().await;
    let id = t.create_ok(KEY_A, "d", &deploy_body(1, &[ALICE])).await;
    let post = || {
        t.http
            .post(t.url(&format!("/approvals/{id}/decision")))
            .bearer_auth(DECIDER_A)
    };
    let cases = [
        (
            "bad decision",
            post().json(&decision_body("maybe", ALICE)),
            400,
            "invalid_request",
        ),
        (
            "no approver",
            post().json(&json!({"decision": "approve"})),
            400,
            "invalid_request",
        ),
        (
            "not JSON",
            post()
                .header("content-type", "application/json")
                .body("approve"),
            400,
            "invalid_request",
        ),
        (
            "array",
            post().json(&json!(["approve"])),
            400,
            "invalid_request",
        ),
        (
            "text/plain",
            post().header("content-type", "text/plain").body("approve"),
            415,
            "unsupported_media_type",
        ),
        (
            "65 KiB",
            post()
                .header("content-type", "application/json")
                .body(oversized_body()),
            413,
            "payload_too_large",
        ),
    ];
    refused_as_said(&t, cases).await;
    assert_eq!(t.get(KEY_A, &id).await.json()["status"], "pending");
}

#[tokio::test]
async fn unknown_routes_and_methods_are_problems_too() {
    let t = TestApp::start().await;
    let reply = t.send(t.http.get(t.url("/nowhere"))).await;
    reply.assert_problem(404, "not_found");
    let reply = t.send(t.http.delete(t.url("/approvals"))).await;
    reply.assert_problem(405, "method_not_allowed");
}

fn oversized_body() -> String {
    json!({"action": {"type": "deploy", "payload": {"blob": "x".repeat(65 * 1024)}}, "approvers": ["alice"]}).to_string()
}

/// Numbers are never rounded silently: a literal a double cannot hold is refused with its
/// field, and nothing is written; one whose form changes but whose value does not is accepted.
#[tokio::test]
async fn numbers_that_would_change_are_refused_with_their_field() {
    let t = TestApp::start().await;
    let body = r#"{"action": {"type": "deploy", "payload": {"amount": 9007199254740993.0,
        "ids": [1, 18446744073709551616], "pi": 3.14159265358979323846, "big": 1e15}},
        "approvers": ["alice@example.com"]}"#;
    let refused = t.create(KEY_A, "numbers-1", body).await;
    refused.assert_problem(400, "invalid_request");
    let fields = error_fields(&refused);
    assert_eq!(
        fields,
        [
            "action.payload.amount",
            "action.payload.ids[1]",
            "action.payload.pi"
        ]
    );
    assert_eq!(t.approval_count().await, 0, "nothing written");

    let exact = r#"{"action": {"type": "deploy", "payload": {"big": 1e15, "small": 0.1}},
        "approvers": ["alice@example.com"]}"#;
    let created = t.create(KEY_A, "numbers-2", exact).await;
    assert_eq!(created.status, 201, "{}", created.text());
    assert_eq!(
        created.json()["action"]["payload"],
        json!({"big": 1e15, "small": 0.1})
    );
}

/// A body within the 64 KiB limit that is written out far longer (every job carries payload
/// and context) is refused before anything is written, so that every accepted approval's jobs
/// fit the queue.
#[tokio::test]
async fn a_payload_too_long_once_written_out_is_refused() {
    let t = TestApp::start().await;
    let numbers = vec!["1e15"; 12_000].join(",");
    let body = format!(
        r#"{{"action": {{"type": "deploy", "payload": {{"v": [{numbers}]}}}}, "approvers": ["alice@example.com"]}}"#
    );
    assert!(body.len() < 64 * 1024);
    let refused = t.create(KEY_A, "long-written", &body).await;
    refused.assert_problem(400, "invalid_request");
    assert!(refused.text().contains("once written out"));
    assert_eq!(t.approval_count().await, 0);
}

/// An approval grows after its create (every approver's vote with a comment of up to 2,000
/// characters, the decision, a cancel, what an execution records), and DynamoDB refuses any write
/// past 400 KB per item: a create that could outgrow it is refused now, with the field and the
/// figures, rather than become an approval whose votes some day fail.
#[tokio::test]
async fn a_create_that_could_outgrow_an_item_is_refused_and_writes_nothing() {
    let t = TestApp::start().await;
    // 20 approvers with long names of 4-byte characters, and numbers written out much longer
    // than sent (`1e15` is stored as `1000000000000000.0`): the body is well within 64 KiB, the
    // approval at create well within 400 KB — but not once every approver has voted.
    let approvers: Vec<String> = (0..20)
        .map(|i| format!("{i:02}{}", "\u{1F600}".repeat(300)))
        .collect();
    let numbers = format!("[{}]", vec!["1e15"; 4_000].join(","));
    let body = |approvers: &[String]| {
        format!(
            r#"{{"action": {{"type": "deploy", "payload": {{"n": {numbers}}}}}, "approvers": {}}}"#,
            serde_json::json!(approvers)
        )
    };
    let all = body(&approvers);
    assert!(all.len() < 64 * 1024, "{} bytes", all.len());
    let refused = t.create(KEY_A, "too-big-to-grow", &all).await;
    assert_eq!(refused.status, 400, "a create that could outgrow an item");
    assert_eq!(refused.code(), "invalid_request");
    let detail = refused.text();
    assert!(
        detail.contains("action.payload") && detail.contains("could grow to"),
        "{}",
        &detail[..detail.len().min(600)]
    );
    assert_eq!(t.approval_count().await, 0);
    // Three of them, with the same payload, have room to grow.
    let created = t
        .create(KEY_A, "room-to-grow", &body(&approvers[..3]))
        .await;
    assert_eq!(created.status, 201, "three approvers have room");
}
