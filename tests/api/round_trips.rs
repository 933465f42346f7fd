//! DynamoDB round trips per operation, counted by an SDK interceptor: correctness costs one
//! conditional write or transaction, and a refusal is answered from what that write returned.

use countersign_tests::{
    ALICE, BOB, DECIDER_A, KEY_A, TENANT_A, TestApp, decision_body, deploy_body, execute_key,
    table_key,
};
use serde_json::json;

#[tokio::test]
async fn each_operation_is_one_round_trip() {
    let t = TestApp::start().await;
    let body = deploy_body(1, &[ALICE, BOB]);

    // A function's first create of a tenant reads the tenant's approval policy and groups
    // (one BatchGetItem), kept for KEY_CACHE_SECONDS as keys are; every create after is one.
    t.create_ok(KEY_A, "rt-cold", &deploy_body(9, &[ALICE]))
        .await;
    assert_eq!(
        t.calls.take(),
        ["BatchGetItem", "TransactWriteItems"],
        "create, on a cold policy cache"
    );
    let id = t.create_ok(KEY_A, "rt", &body).await;
    assert_eq!(t.calls.take(), ["TransactWriteItems"], "create, first");

    assert!(t.create(KEY_A, "rt", &body).await.replayed());
    assert_eq!(t.calls.take(), ["TransactWriteItems"], "create, replay");

    assert_eq!(
        t.create(KEY_A, "rt", &deploy_body(2, &[ALICE]))
            .await
            .status,
        409
    );
    assert_eq!(t.calls.take(), ["TransactWriteItems"], "create, conflict");

    let approve = decision_body("approve", ALICE);
    assert_eq!(t.decide(DECIDER_A, &id, approve.clone()).await.status, 200);
    assert_eq!(t.calls.take(), ["UpdateItem"], "decide, winner");

    assert_eq!(
        t.decide(DECIDER_A, &id, decision_body("reject", BOB))
            .await
            .status,
        409
    );
    assert_eq!(t.calls.take(), ["UpdateItem"], "decide, loser");

    assert!(t.decide(DECIDER_A, &id, approve).await.replayed());
    assert_eq!(t.calls.take(), ["UpdateItem"], "decide, repeat");

    assert_eq!(t.get(KEY_A, &id).await.status, 200);
    assert_eq!(t.calls.take(), ["GetItem"], "read");
}

#[tokio::test]
async fn refusals_cost_one_round_trip_too() {
    let t = TestApp::start().await;
    let body =
        json!({"action": {"type": "deploy"}, "approvers": [ALICE], "expires_in_seconds": 60});
    let id = t.create_ok(KEY_A, "refusals", &body.to_string()).await;
    t.calls.take();

    assert_eq!(
        t.decide(DECIDER_A, &id, decision_body("approve", "eve@example.com"))
            .await
            .status,
        403
    );
    assert_eq!(t.calls.take(), ["UpdateItem"], "not an approver");

    // An id whose hint says nothing of a deployment's groups (one that does reads them, once
    // per KEY_CACHE_SECONDS, from the cache).
    let unknown = countersign::domain::ApprovalId::generate().to_string();
    assert_eq!(
        t.decide(DECIDER_A, &unknown, decision_body("approve", ALICE))
            .await
            .status,
        404
    );
    assert_eq!(t.calls.take(), ["UpdateItem"], "unknown approval");

    t.clock.advance(60);
    assert_eq!(
        t.decide(DECIDER_A, &id, decision_body("approve", ALICE))
            .await
            .status,
        410
    );
    assert_eq!(t.calls.take(), ["UpdateItem"], "expired");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_executor_job_is_a_begin_and_a_complete() {
    let subscription = serde_json::json!({"tenant-a": {"url": "{downstream}/callback",
        "secret": crate::helpers::CALLBACK_SECRET, "types": ["approval.created"]}})
    .to_string();
    let t = TestApp::start_jobs(&[("EVENT_SUBSCRIPTIONS", &subscription)]).await;
    t.stop_runner().await;
    let id = t
        .create_ok(KEY_A, "rt-exec", &deploy_body(1, &[ALICE]))
        .await;
    let tenant = countersign::domain::TenantId::parse("tenant-a").unwrap();
    let approval_id = countersign::domain::ApprovalId::parse(&id).unwrap();
    let pending = t
        .app
        .store
        .get_approval(&tenant, &approval_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        t.decide(DECIDER_A, &id, decision_body("approve", ALICE))
            .await
            .status,
        200
    );
    let approved = t
        .app
        .store
        .get_approval(&tenant, &approval_id)
        .await
        .unwrap()
        .unwrap();
    let executor = t.executor();

    let notify = &countersign::jobs::jobs_for_change(None, Some(&pending), "")[0];
    let execute = &countersign::jobs::jobs_for_change(Some(&pending), Some(&approved), "")[0];
    let created = countersign::domain::trail::events_for_change(None, Some(&pending), "p");
    let callback = &countersign::jobs::callback_jobs(
        &pending,
        &created,
        t.app.secrets().event_subscriptions.get(&tenant),
    )[0];
    // A notification's begin is one item alone (a conditional update: a transaction of one
    // item costs twice as much), its complete a transaction with its events; an execution's
    // ledger is on its approval, so its begin and its complete are one update each; a callback
    // keeps no ledger item: it reads its outcome and puts it once.
    for (name, job, writes) in [
        ("notify", notify, ["UpdateItem", "TransactWriteItems"]),
        ("execute", execute, ["UpdateItem", "UpdateItem"]),
        ("callback", callback, ["GetItem", "PutItem"]),
    ] {
        let message = countersign::jobs::JobMessage {
            message_id: format!("m-{name}"),
            receipt_handle: "unused".to_owned(),
            body: serde_json::to_string(job).unwrap(),
            receive_count: 1,
        };
        t.calls.take();
        assert!(
            executor.handle_batch(&[message], None).await.is_empty(),
            "{name}: acknowledged"
        );
        assert_eq!(t.calls.take(), writes, "{name}: begin + complete");
    }
    assert_eq!(t.downstream().calls(&execute_key("rt-exec", &id)), 1);
    assert_eq!(
        t.get(KEY_A, &id).await.json()["execution"]["status"],
        "succeeded"
    );
}

/// A click in Slack is a vote like any other: one conditional `UpdateItem` (two for the approve
/// that completes a quorum, written again as the completing write), refused or not; its
/// signature, its user's mapping and anything not ours cost none.
#[tokio::test]
async fn a_slack_click_is_one_round_trip() {
    use countersign_tests::CreateBody;
    use countersign_tests::slack::{FakeSlack, U_ALICE, U_BOB, U_NOBODY};

    let slack = FakeSlack::start().await;
    let t = TestApp::start_with(&[("SLACK", &slack.config())]).await;
    let quorum = CreateBody::new("deploy", &[ALICE, BOB])
        .policy(json!({"rules": [{"name": "both", "approvers": [ALICE, BOB], "min_approvals": 2}]}))
        .to_string();
    let id = t.create_ok(KEY_A, "rt-slack", &quorum).await;
    t.calls.take();

    let approve = "countersign.approve";
    assert_eq!(
        t.click(&slack, U_ALICE, approve, &id, false).await.status,
        200
    );
    assert_eq!(t.calls.take(), ["UpdateItem"], "a counted vote");
    assert_eq!(
        t.click(&slack, U_ALICE, approve, &id, false).await.status,
        200
    );
    assert_eq!(t.calls.take(), ["UpdateItem"], "a repeat, refused");
    assert_eq!(
        t.click(&slack, U_NOBODY, approve, &id, false).await.status,
        200
    );
    assert!(t.calls.take().is_empty(), "an unmapped user: no write");
    assert_eq!(
        t.click(&slack, U_BOB, approve, &id, false).await.status,
        200
    );
    assert_eq!(
        t.calls.take(),
        ["UpdateItem", "UpdateItem"],
        "the vote that completes the quorum"
    );
    assert_eq!(t.get(KEY_A, &id).await.json()["status"], "approved");
}

/// An approval-only type: its approving vote, a claim (won, replayed, refused) and a report are
/// one `UpdateItem` each.
#[tokio::test]
async fn an_approval_only_approval_is_approved_claimed_and_reported_in_one_round_trip_each() {
    let t = TestApp::start().await;
    let body = json!({"action": {"type": "agent", "payload": {"tool_name": "Bash"}}, "approvers": [ALICE]});
    let id = t.create_ok(KEY_A, "rt-agent", &body.to_string()).await;
    t.calls.take();
    assert_eq!(
        t.decide(DECIDER_A, &id, decision_body("approve", ALICE))
            .await
            .status,
        200
    );
    assert_eq!(
        t.calls.take(),
        ["UpdateItem"],
        "the approving vote, hinted by the id"
    );
    let claim = |key: &'static str| {
        t.http
            .post(t.url(&format!("/approvals/{id}/execution/claim")))
            .bearer_auth(KEY_A)
            .header("idempotency-key", key)
    };
    for (key, status) in [("c1", 200), ("c1", 200), ("c2", 409)] {
        assert_eq!(t.send(claim(key)).await.status, status);
        assert_eq!(t.calls.take(), ["UpdateItem"], "claim {key}");
    }
    let report = t
        .http
        .post(t.url(&format!("/approvals/{id}/execution/report")))
        .bearer_auth(KEY_A)
        .header("idempotency-key", "c1")
        .json(&json!({"outcome": "succeeded"}));
    assert_eq!(t.send(report).await.status, 200);
    assert_eq!(t.calls.take(), ["UpdateItem"], "report");
}

/// Table keys change no request's round trips once warm: create, vote, claim and report are
/// what they are with `API_KEYS` keys; a cold key adds its one `GetItem` (and its hourly
/// `last_used_at` write, after the answer).
#[tokio::test]
async fn a_warm_table_key_adds_no_round_trip() {
    let t = TestApp::start().await;
    let store = &t.app.store;
    let requester = table_key(
        store,
        TENANT_A,
        "ci@tenant-a",
        &["requester", "reader"],
        None,
    )
    .await;
    let decider = table_key(store, TENANT_A, "portal@tenant-a", &["decider"], None).await;
    // Each function keeps its own cache, as each Lambda does: the requester's key is warmed
    // in the read and the API functions, the decider's in the decide function (an id that is
    // no approval id reads nothing else).
    let warm = [
        (&requester, t.http.get(t.url("/approvals/nope"))),
        (&requester, t.http.get(t.url("/approvals/nope/events"))),
        (
            &decider,
            t.http
                .post(t.url("/approvals/nope/decision"))
                .json(&json!({})),
        ),
    ];
    for (key, request) in warm {
        t.send(request.bearer_auth(key.expose())).await;
    }
    // ... and the API function's tenant policy, by a first create.
    let first = json!({"action": {"type": "agent", "payload": {"tool_name": "Warm"}}, "approvers": [ALICE]});
    t.create_ok(requester.expose(), "rt-warm", &first.to_string())
        .await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let warming = t.calls.take();
    assert_eq!(
        warming.iter().filter(|c| *c == "GetItem").count(),
        3,
        "one GetItem per cold key and function: {warming:?}"
    );

    let body = json!({"action": {"type": "agent", "payload": {"tool_name": "Bash"}}, "approvers": [ALICE, BOB]});
    let id = t
        .create_ok(requester.expose(), "rt-table", &body.to_string())
        .await;
    assert_eq!(t.calls.take(), ["TransactWriteItems"], "create");
    let vote = t
        .decide(decider.expose(), &id, decision_body("approve", ALICE))
        .await;
    assert_eq!(vote.status, 200, "{}", vote.text());
    assert_eq!(t.calls.take(), ["UpdateItem"], "vote");
    let claim = t
        .http
        .post(t.url(&format!("/approvals/{id}/execution/claim")))
        .bearer_auth(requester.expose())
        .header("idempotency-key", "c1");
    assert_eq!(t.send(claim).await.status, 200);
    assert_eq!(t.calls.take(), ["UpdateItem"], "claim");
    assert_eq!(t.get(requester.expose(), &id).await.status, 200);
    assert_eq!(t.calls.take(), ["GetItem"], "read: the approval's alone");
}
