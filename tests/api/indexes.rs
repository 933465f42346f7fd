//! The approvals table's indexes follow every write (`shared/src/store/indexes.rs`: one place
//! makes them): after each kind of write that changes an approval's status or its execution's,
//! the approval is listed under its status in `by_status_keys` and sits in the `due` partition its
//! state calls for — `expiry` while pending, `execution` while approved and queued or running,
//! none otherwise — read back from the indexes themselves, against the local AWS.

use std::collections::BTreeSet;

use aws_sdk_dynamodb::types::AttributeValue;
use countersign::domain::{ApprovalId, Completion, ExecutionStatus, Status, TenantId};
use countersign::jobs::execute_job;
use countersign::store::{AttemptEnd, Begin, LedgerKey, Requeue};
use countersign_tests::{
    ACME_SECRET, ALICE, BOB, CreateBody, DECIDER_A, KEY_A, TENANT_A, TestApp, attr_s,
    decided_event, decision_body, deploy_body,
};
use serde_json::json;

/// Where the approval `id` is listed: its `by_status_keys` entries (by status prefix) and its `due`
/// partitions, each read through its index.
async fn indexed(t: &TestApp, id: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let table = &t.app.config.tables.approvals;
    let mut statuses = BTreeSet::new();
    for status in ["pending", "approved", "rejected", "expired", "cancelled"] {
        let page = t
            .dynamodb
            .query()
            .table_name(table)
            .index_name("by_status_keys")
            .key_condition_expression("#tenant = :tenant AND begins_with(#status_id, :status)")
            .expression_attribute_names("#tenant", "tenant")
            .expression_attribute_names("#status_id", "status_id")
            .expression_attribute_values(":tenant", AttributeValue::S(TENANT_A.into()))
            .expression_attribute_values(":status", AttributeValue::S(format!("{status}#")))
            .send()
            .await
            .expect("query by_status_keys");
        if page
            .items()
            .iter()
            .any(|item| attr_s(item, "status_id") == format!("{status}#{id}"))
        {
            statuses.insert(status.to_owned());
        }
    }
    let mut due = BTreeSet::new();
    for kind in ["expiry", "execution"] {
        let page = t
            .dynamodb
            .query()
            .table_name(table)
            .index_name("due")
            .key_condition_expression("#due_kind = :kind AND #due_at <= :until")
            .expression_attribute_names("#due_kind", "due_kind")
            .expression_attribute_names("#due_at", "due_at")
            .expression_attribute_values(":kind", AttributeValue::S(kind.into()))
            .expression_attribute_values(":until", AttributeValue::N(i64::MAX.to_string()))
            .send()
            .await
            .expect("query due");
        if page
            .items()
            .iter()
            .any(|item| attr_s(item, "pk") == format!("{TENANT_A}#{id}"))
        {
            due.insert(kind.to_owned());
        }
    }
    (statuses, due)
}

/// Checks that the indexes hold approval `id` where its state (read from its item) says — the
/// indexes' rule (store/indexes.rs's notes), written out here apart from the code that keeps it — and names the write.
async fn assert_indexes_follow(t: &TestApp, id: &str, after: &str) {
    let item = t.approval_item(id).await;
    let approval = countersign::store::items_to_approval(&item).expect("an approval");
    let status = approval.status.as_str();
    let want_due = match (approval.status, approval.execution.status) {
        (Status::Pending, _) => Some("expiry"),
        (Status::Approved, ExecutionStatus::Queued | ExecutionStatus::Running) => Some("execution"),
        _ => None,
    };
    let (statuses, due) = indexed(t, id).await;
    assert_eq!(
        statuses,
        BTreeSet::from([status.to_owned()]),
        "after {after}: listed under its status only"
    );
    assert_eq!(
        due,
        want_due.into_iter().map(str::to_owned).collect(),
        "after {after}: in the due partition its state calls for ({status}, execution {})",
        approval.execution.status.as_str()
    );
    // And the attributes themselves: the expiry is due at the expiry; an execution from no
    // earlier than its last change.
    let number = |name: &str| -> Option<i64> { item.get(name)?.as_n().ok()?.parse().ok() };
    match want_due {
        Some("expiry") => assert_eq!(number("due_at"), Some(approval.expires_at), "after {after}"),
        Some(_) => assert!(
            number("due_at") >= Some(approval.execution.updated_at),
            "after {after}: due from its last change or later"
        ),
        None => assert!(number("due_at").is_none(), "after {after}"),
    }
}

fn quorum_body(build: u64) -> String {
    CreateBody::new("deploy", &[ALICE, BOB])
        .payload(json!({"build": build}))
        .policy(json!({"rules": [{"name": "both", "approvers": [ALICE, BOB], "min_approvals": 2}]}))
        .to_string()
}

async fn vote(t: &TestApp, id: &str, decision: &str, approver: &str) {
    let reply = t
        .decide(DECIDER_A, id, decision_body(decision, approver))
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
}

/// The execute job's ledger key of approval `id` as it is now.
async fn ledger_key(t: &TestApp, id: &str) -> LedgerKey {
    execute_job(&t.stored_approval(id).await).ledger()
}

/// Ends the attempt `token` with `completion`, due again from `due_at` if it waits.
async fn end(
    t: &TestApp,
    key: &LedgerKey,
    token: &str,
    completion: Completion,
    due_at: Option<i64>,
) {
    let end = AttemptEnd {
        due_at,
        ..AttemptEnd::by_owner(&completion, token)
    };
    assert!(
        t.app
            .store
            .end_attempt(key, token, &end, t.clock.now())
            .await
            .expect("end"),
        "the attempt ended"
    );
}

async fn begin(t: &TestApp, key: &LedgerKey, token: &str) {
    let (now, now_ms) = (t.clock.now(), t.clock.now_millis());
    let began = t
        .app
        .store
        .begin_job(key, token, now, now_ms, now_ms + 60_000, false, None)
        .await
        .expect("begin");
    assert!(matches!(began, Begin::Started(_)), "{began:?}");
}

#[tokio::test]
async fn every_write_keeps_the_indexes_consistent_with_the_item() {
    let t = TestApp::start().await;
    let store = &t.app.store;
    let tenant = TenantId::parse(TENANT_A).expect("tenant");

    // create → pending; a single approve → approved, queued.
    let single = t
        .create_ok(KEY_A, "idx-single", &deploy_body(1, &[ALICE]))
        .await;
    assert_indexes_follow(&t, &single, "create").await;
    vote(&t, &single, "approve", ALICE).await;
    assert_indexes_follow(&t, &single, "a single approve").await;

    // The execution's writes: begin → running; a retry wait → queued; an unknown outcome
    // waiting for a status query → running, due from the query; success → nothing due.
    let key = ledger_key(&t, &single).await;
    begin(&t, &key, "a1").await;
    assert_indexes_follow(&t, &single, "a begin").await;
    end(
        &t,
        &key,
        "a1",
        Completion::RetryWait("HTTP 503".into()),
        None,
    )
    .await;
    assert_indexes_follow(&t, &single, "a retry wait").await;
    begin(&t, &key, "a2").await;
    let later = t.clock.now() + 30;
    end(
        &t,
        &key,
        "a2",
        Completion::Unknown("HTTP 504".into()),
        Some(later),
    )
    .await;
    assert_indexes_follow(&t, &single, "an unknown end").await;
    let item = t.approval_item(&single).await;
    assert_eq!(
        item["due_at"].as_n().expect("due_at"),
        &later.to_string(),
        "due from the status query it waits for"
    );
    let settle = AttemptEnd::by_owner(&Completion::Succeeded, "settler");
    assert!(
        store
            .end_attempt(&key, "a2", &settle, t.clock.now())
            .await
            .expect("end")
    );
    assert_indexes_follow(&t, &single, "a success").await;

    // A failure, an operator's retry (queued again), an end nobody knows, and its resolve.
    let failing = t
        .create_ok(KEY_A, "idx-failing", &deploy_body(2, &[ALICE]))
        .await;
    vote(&t, &failing, "approve", ALICE).await;
    let key = ledger_key(&t, &failing).await;
    begin(&t, &key, "b1").await;
    end(&t, &key, "b1", Completion::Failed("HTTP 400".into()), None).await;
    assert_indexes_follow(&t, &failing, "a failure").await;
    let retried = t
        .retry_request(&failing, Some("idx-retry-1"))
        .send()
        .await
        .expect("retry");
    assert_eq!(retried.status(), 202);
    assert_indexes_follow(&t, &failing, "an operator's retry").await;
    let key = ledger_key(&t, &failing).await;
    begin(&t, &key, "b2").await;
    end(
        &t,
        &key,
        "b2",
        Completion::NeedsReconciliation("unknown".into()),
        None,
    )
    .await;
    assert_indexes_follow(&t, &failing, "an end for an operator").await;
    let resolved = t
        .post_path(
            KEY_A,
            &format!("/approvals/{failing}/execution/resolve"),
            json!({"outcome": "succeeded", "note": "done by hand"}),
        )
        .await;
    assert_eq!(resolved.status, 200, "{}", resolved.text());
    assert_indexes_follow(&t, &failing, "a resolve").await;

    // A job that never began is failed; a stuck one is re-queued (still due).
    let lost = t
        .create_ok(KEY_A, "idx-lost", &deploy_body(3, &[ALICE]))
        .await;
    vote(&t, &lost, "approve", ALICE).await;
    let now = t.clock.now();
    let requeued = store
        .requeue_execution(
            &tenant,
            &ApprovalId::parse(&lost).expect("id"),
            now + 1,
            3,
            now,
        )
        .await
        .expect("requeue");
    assert!(matches!(requeued, Requeue::Requeued(_)), "{requeued:?}");
    assert_indexes_follow(&t, &lost, "a re-queue").await;
    let key = ledger_key(&t, &lost).await;
    assert!(
        store
            .fail_unbegun_job(&key, "never attempted", &[], t.clock.now())
            .await
            .expect("fail")
    );
    assert_indexes_follow(&t, &lost, "a job failed before it began").await;

    // A veto; a counted vote (still pending) and the completing one; a webhook's vote.
    let vetoed = t
        .create_ok(KEY_A, "idx-veto", &deploy_body(4, &[ALICE]))
        .await;
    vote(&t, &vetoed, "reject", ALICE).await;
    assert_indexes_follow(&t, &vetoed, "a veto").await;
    let quorum = t.create_ok(KEY_A, "idx-quorum", &quorum_body(5)).await;
    vote(&t, &quorum, "approve", ALICE).await;
    assert_indexes_follow(&t, &quorum, "a counted vote").await;
    vote(&t, &quorum, "approve", BOB).await;
    assert_indexes_follow(&t, &quorum, "the completing vote").await;
    let hooked = t
        .create_ok(KEY_A, "idx-webhook", &deploy_body(6, &[ALICE]))
        .await;
    let delivered = t
        .deliver(
            "acme",
            ACME_SECRET,
            "msg_idx_1",
            &decided_event(&hooked, "approve", ALICE),
        )
        .await;
    assert_eq!(
        delivered.json()["outcome"],
        "applied",
        "{}",
        delivered.text()
    );
    assert_indexes_follow(&t, &hooked, "a webhook's vote").await;

    // A cancel, and an expiry.
    let cancelled = t
        .create_ok(KEY_A, "idx-cancel", &deploy_body(7, &[ALICE]))
        .await;
    let reply = t.cancel(KEY_A, &cancelled, "wrong build").await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_indexes_follow(&t, &cancelled, "a cancel").await;
    let expiring = t
        .create_ok(KEY_A, "idx-expire", &deploy_body(8, &[ALICE]))
        .await;
    let expired = store
        .expire(
            &tenant,
            &ApprovalId::parse(&expiring).expect("id"),
            t.clock.now() + 86_400 + 1,
        )
        .await
        .expect("expire");
    assert!(expired.is_some());
    assert_indexes_follow(&t, &expiring, "an expiry").await;

    assert_eq!(
        t.get(KEY_A, &single).await.json()["execution"]["status"],
        "succeeded"
    );
}
