//! POST /approvals/{id}/decision: exactly one terminal decision, told apart from repeats,
//! conflicts, expiry and strangers in the same round trip.

use countersign_tests::{
    ALICE, BOB, DECIDER_A, KEY_A, MALLORY, TestApp, decision_body, deploy_body,
};
use futures::future::join_all;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn approve_and_reject_race_has_one_winner() {
    let t = TestApp::start().await;
    let id = t
        .create_ok(KEY_A, "race", &deploy_body(1, &[ALICE, BOB]))
        .await;

    let requests = (0..40).map(|i| {
        let body = if i % 2 == 0 {
            decision_body("approve", ALICE)
        } else {
            decision_body("reject", BOB)
        };
        t.decide(DECIDER_A, &id, body)
    });
    let replies = join_all(requests).await;

    let winners: Vec<_> = replies
        .iter()
        .filter(|r| r.status == 200 && !r.replayed())
        .collect();
    assert_eq!(winners.len(), 1, "exactly one request wins");
    let outcome = winners[0].json()["status"].as_str().unwrap().to_owned();
    let approver = winners[0].json()["decision"]["approver"]
        .as_str()
        .unwrap()
        .to_owned();
    for reply in &replies {
        match reply.status {
            200 => assert_eq!(reply.json()["status"], outcome.as_str()),
            409 => {
                assert_eq!(reply.code(), "already_decided");
                assert_eq!(reply.json()["approval"]["status"], outcome.as_str());
                assert_eq!(
                    reply.json()["approval"]["decision"]["approver"],
                    approver.as_str()
                );
            }
            other => panic!("unexpected status {other}: {}", reply.text()),
        }
    }
    // The winner's 19 teammates repeat its decision; the other side's 20 conflict.
    assert_eq!(
        replies
            .iter()
            .filter(|r| r.status == 200 && r.replayed())
            .count(),
        19
    );
    assert_eq!(replies.iter().filter(|r| r.status == 409).count(), 20);

    let stored = t.get(KEY_A, &id).await.json();
    assert_eq!(stored["status"], outcome.as_str());
    assert_eq!(stored["decision"]["approver"], approver.as_str());
    assert_eq!(stored["decision"]["channel"], "api");
    assert_eq!(
        stored,
        winners[0].json(),
        "the item holds the winner's decision"
    );
}

#[tokio::test]
async fn repeat_of_the_winning_decision_is_replayed() {
    let t = TestApp::start().await;
    let id = t
        .create_ok(KEY_A, "repeat", &deploy_body(1, &[ALICE]))
        .await;
    let body = json!({"decision": "approve", "approver": ALICE, "comment": "ship it"});
    let won = t.decide(DECIDER_A, &id, body.clone()).await;
    assert_eq!(won.status, 200);
    assert!(!won.replayed());
    assert_eq!(won.json()["decision"]["comment"], "ship it");

    let repeat = t.decide(DECIDER_A, &id, body).await;
    assert_eq!(repeat.status, 200);
    assert!(repeat.replayed());
    assert_eq!(repeat.json(), won.json());

    let reversed = t
        .decide(DECIDER_A, &id, decision_body("reject", ALICE))
        .await;
    assert_eq!(reversed.status, 409);
    assert_eq!(reversed.code(), "already_decided");
}

#[tokio::test]
async fn unlisted_approver_is_forbidden_and_changes_nothing() {
    let t = TestApp::start().await;
    let id = t
        .create_ok(KEY_A, "stranger", &deploy_body(1, &[ALICE]))
        .await;
    let reply = t
        .decide(DECIDER_A, &id, decision_body("approve", MALLORY))
        .await;
    assert_eq!(reply.status, 403);
    assert_eq!(reply.code(), "not_an_approver");
    assert_eq!(t.get(KEY_A, &id).await.json()["status"], "pending");
}

#[tokio::test]
async fn expired_approval_cannot_be_decided() {
    let t = TestApp::start().await;
    let body =
        json!({"action": {"type": "deploy"}, "approvers": [ALICE], "expires_in_seconds": 60});
    let id = t.create_ok(KEY_A, "expiring", &body.to_string()).await;
    t.clock.advance(60);

    assert_eq!(t.get(KEY_A, &id).await.json()["status"], "expired");
    let reply = t
        .decide(DECIDER_A, &id, decision_body("approve", ALICE))
        .await;
    assert_eq!(reply.status, 410);
    assert_eq!(reply.code(), "approval_expired");
    let stored = t.get(KEY_A, &id).await.json();
    assert_eq!(stored["decision"], serde_json::Value::Null);
}

#[tokio::test]
async fn decision_made_in_time_stands_after_expiry() {
    let t = TestApp::start().await;
    let body =
        json!({"action": {"type": "deploy"}, "approvers": [ALICE], "expires_in_seconds": 60});
    let id = t.create_ok(KEY_A, "in-time", &body.to_string()).await;
    let decision = decision_body("reject", ALICE);
    assert_eq!(t.decide(DECIDER_A, &id, decision.clone()).await.status, 200);
    t.clock.advance(3_600);
    assert_eq!(t.get(KEY_A, &id).await.json()["status"], "rejected");
    let repeat = t.decide(DECIDER_A, &id, decision).await;
    assert_eq!(repeat.status, 200);
    assert!(repeat.replayed());
}

#[tokio::test]
async fn unknown_and_malformed_ids_are_not_found() {
    let t = TestApp::start().await;
    let decision = decision_body("approve", ALICE);
    for id in [
        "apr_01JD3ZZZZZZZZZZZZZZZZZZZZZ",
        "apr_nope",
        "42",
        "%FF",
        "apr_%00",
    ] {
        let reply = t.decide(DECIDER_A, id, decision.clone()).await;
        assert_eq!(reply.status, 404, "{id}");
        assert_eq!(reply.code(), "not_found");
        let reply = t.get(KEY_A, id).await;
        assert_eq!(reply.status, 404, "{id}");
        assert_eq!(reply.code(), "not_found");
    }
}
