//! DynamoDB round trips per operation, counted by an SDK interceptor: correctness costs one
//! conditional write or transaction, and a refusal is answered from what that write returned.

use countersign_tests::{KEY_A, TestApp, deploy_body};
use serde_json::json;

#[tokio::test]
async fn each_operation_is_one_round_trip() {
    let t = TestApp::start().await;
    let body = deploy_body(1, &["alice@example.com", "bob@example.com"]);

    let id = t.create_ok(KEY_A, "rt", &body).await;
    assert_eq!(t.calls.take(), ["TransactWriteItems"], "create, first");

    assert!(t.create(KEY_A, "rt", &body).await.replayed());
    assert_eq!(t.calls.take(), ["TransactWriteItems"], "create, replay");

    assert_eq!(
        t.create(KEY_A, "rt", &deploy_body(2, &["alice@example.com"]))
            .await
            .status,
        409
    );
    assert_eq!(t.calls.take(), ["TransactWriteItems"], "create, conflict");

    let approve = json!({"decision": "approve", "approver": "alice@example.com"});
    assert_eq!(t.decide(KEY_A, &id, approve.clone()).await.status, 200);
    assert_eq!(t.calls.take(), ["UpdateItem"], "decide, winner");

    assert_eq!(
        t.decide(
            KEY_A,
            &id,
            json!({"decision": "reject", "approver": "bob@example.com"})
        )
        .await
        .status,
        409
    );
    assert_eq!(t.calls.take(), ["UpdateItem"], "decide, loser");

    assert!(t.decide(KEY_A, &id, approve).await.replayed());
    assert_eq!(t.calls.take(), ["UpdateItem"], "decide, repeat");

    assert_eq!(t.get(KEY_A, &id).await.status, 200);
    assert_eq!(t.calls.take(), ["GetItem"], "read");
}

#[tokio::test]
async fn refusals_cost_one_round_trip_too() {
    let t = TestApp::start().await;
    let body = json!({"action": {"type": "deploy"}, "approvers": ["alice@example.com"], "expires_in_seconds": 60});
    let id = t.create_ok(KEY_A, "refusals", &body.to_string()).await;
    t.calls.take();

    assert_eq!(
        t.decide(
            KEY_A,
            &id,
            json!({"decision": "approve", "approver": "eve@example.com"})
        )
        .await
        .status,
        403
    );
    assert_eq!(t.calls.take(), ["UpdateItem"], "not an approver");

    assert_eq!(
        t.decide(
            KEY_A,
            "apr_01JD3ZZZZZZZZZZZZZZZZZZZZZ",
            json!({"decision": "approve", "approver": "alice@example.com"})
        )
        .await
        .status,
        404
    );
    assert_eq!(t.calls.take(), ["UpdateItem"], "unknown approval");

    t.clock.advance(60);
    assert_eq!(
        t.decide(
            KEY_A,
            &id,
            json!({"decision": "approve", "approver": "alice@example.com"})
        )
        .await
        .status,
        410
    );
    assert_eq!(t.calls.take(), ["UpdateItem"], "expired");
}
