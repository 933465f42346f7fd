//! Authentication and tenant scoping: every record belongs to one tenant, and another tenant's
//! approval does not exist as far as the caller can tell.

use countersign_tests::{ALICE, DECIDER_B, KEY_A, KEY_B, TestApp, decision_body, deploy_body};

#[tokio::test]
async fn same_key_from_two_tenants_makes_two_approvals() {
    let t = TestApp::start().await;
    let body = deploy_body(1042, &[ALICE]);
    let a = t.create(KEY_A, "shared-key", &body).await;
    let b = t.create(KEY_B, "shared-key", &body).await;
    assert_eq!((a.status, b.status), (201, 201));
    assert!(!a.replayed() && !b.replayed());
    assert_ne!(a.json()["id"], b.json()["id"]);
    assert_eq!(t.approval_count().await, 2);
}

#[tokio::test]
async fn another_tenants_approval_is_not_found() {
    let t = TestApp::start().await;
    let id = t.create_ok(KEY_A, "mine", &deploy_body(1, &[ALICE])).await;

    let read = t.get(KEY_B, &id).await;
    assert_eq!(read.status, 404);
    assert_eq!(read.code(), "not_found");

    let decide = t
        .decide(DECIDER_B, &id, decision_body("approve", ALICE))
        .await;
    assert_eq!(decide.status, 404);
    assert_eq!(decide.code(), "not_found");
    assert_eq!(
        t.get(KEY_A, &id).await.json()["status"],
        "pending",
        "B's decision changed nothing"
    );
}

#[tokio::test]
async fn missing_or_wrong_api_key_is_unauthorized() {
    let t = TestApp::start().await;
    let id = t.create_ok(KEY_A, "k", &deploy_body(1, &[ALICE])).await;
    let body = deploy_body(2, &[ALICE]);

    let requests = [
        t.http
            .post(t.url("/approvals"))
            .header("idempotency-key", "k2")
            .header("content-type", "application/json")
            .body(body.clone()),
        t.http
            .post(t.url("/approvals"))
            .bearer_auth("key-c-0123456789abcdef")
            .header("idempotency-key", "k2")
            .header("content-type", "application/json")
            .body(body.clone()),
        t.http
            .post(t.url("/approvals"))
            .basic_auth("tenant-a", Some(KEY_A))
            .header("idempotency-key", "k2")
            .header("content-type", "application/json")
            .body(body.clone()),
        t.http
            .post(t.url("/approvals"))
            .header("authorization", format!("Bearer {KEY_A}x"))
            .header("idempotency-key", "k2")
            .header("content-type", "application/json")
            .body(body),
        t.http.get(t.url(&format!("/approvals/{id}"))),
        t.http
            .get(t.url(&format!("/approvals/{id}")))
            .bearer_auth(""),
        t.http
            .post(t.url(&format!("/approvals/{id}/decision")))
            .json(&decision_body("approve", ALICE)),
    ];
    for request in requests {
        let reply = t.send(request).await;
        assert_eq!(reply.status, 401);
        assert_eq!(reply.code(), "unauthorized");
        assert_eq!(reply.headers["www-authenticate"], "Bearer");
    }
    assert_eq!(
        t.approval_count().await,
        1,
        "nothing written without a valid key"
    );
    assert_eq!(t.get(KEY_A, &id).await.json()["status"], "pending");
}
