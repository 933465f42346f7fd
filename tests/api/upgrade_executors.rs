//! No second execution while an upgrade from before v5 rolls out (review of v5, finding 5).
//! CloudFormation updates the functions one by one while invocations run on, so an executor
//! from before v5 can still take a job that today's executor has begun — or ended — on the
//! approval. That executor checks only its own ledger item (`{id}#execute`) and the approval's
//! generation, so it would call a non-idempotent target again. During the first deploy
//! (`ApprovalsIndexesStep` 1, `GUARD_V4_EXECUTORS=true`) each begin also writes that item.
//!
//! The executor from before v5 is played here as its code (commit f77f7ae,
//! `store/ledger/mod.rs`'s `begin_job`) wrote its begin: one transaction of its ledger item and
//! the approval, then the call to the target with the execution's key.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem, Update};
use countersign::jobs::{JobMessage, jobs_for_change};
use countersign::runner::Deployment;
use countersign_tests::{ALICE, KEY_A, TestApp, execute_key};

/// The begin of an executor from before v5, for a target that does not dedupe (no takeover):
/// its ledger item's and the approval's conditions as that code wrote them. Whether it began.
async fn v4_begin(t: &TestApp, id: &str, generation: u32) -> bool {
    let tables = t.app.store.tables();
    let value = |v: &str| AttributeValue::S(v.to_owned());
    let number = |v: i64| AttributeValue::N(v.to_string());
    let now = t.clock.now();
    let ledger = Update::builder()
        .table_name(&tables.execution_ledger)
        .key("pk", value(&format!("{id}#execute")))
        .update_expression(
            "SET #status = :in_progress, #attempts = if_not_exists(#attempts, :zero) + :one, \
             #generation = :generation, #token = :token, #lease_until = :lease_until, \
             #kind = :kind, #approval_id = :approval_id, #tenant = :tenant, #updated_at = :now \
             REMOVE #ended_by, #call_ended_at",
        )
        .condition_expression(
            "attribute_not_exists(#pk) \
             OR (#status = :retry_wait AND #generation = :generation) \
             OR (#status IN (:failed, :needs_reconciliation) AND #generation < :generation)",
        )
        .set_expression_attribute_names(Some(HashMap::from(
            [
                "pk",
                "status",
                "attempts",
                "generation",
                "token",
                "lease_until",
                "kind",
                "approval_id",
                "tenant",
                "updated_at",
                "ended_by",
                "call_ended_at",
            ]
            .map(|n| (format!("#{n}"), n.to_owned())),
        )))
        .set_expression_attribute_values(Some(HashMap::from([
            (":in_progress".to_owned(), value("in_progress")),
            (":retry_wait".to_owned(), value("retry_wait")),
            (":failed".to_owned(), value("failed")),
            (
                ":needs_reconciliation".to_owned(),
                value("needs_reconciliation"),
            ),
            (":generation".to_owned(), number(generation.into())),
            (":zero".to_owned(), number(0)),
            (":one".to_owned(), number(1)),
            (":token".to_owned(), value(&ulid::Ulid::new().to_string())),
            (":lease_until".to_owned(), number(now * 1000 + 30_000)),
            (":kind".to_owned(), value("execute")),
            (":approval_id".to_owned(), value(id)),
            (":tenant".to_owned(), value(countersign_tests::TENANT_A)),
            (":now".to_owned(), number(now)),
        ])))
        .build()
        .expect("the ledger's update");
    let approval = Update::builder()
        .table_name(&tables.approvals)
        .key("pk", value(&format!("{}#{id}", countersign_tests::TENANT_A)))
        .update_expression(
            "SET #execution.#status = :running, #execution.#attempts = #execution.#attempts + :one, \
             #execution.#updated_at = :now",
        )
        .condition_expression("#status = :approved AND #execution.#generation = :generation")
        .set_expression_attribute_names(Some(HashMap::from(
            ["execution", "status", "attempts", "updated_at", "generation"]
                .map(|n| (format!("#{n}"), n.to_owned())),
        )))
        .set_expression_attribute_values(Some(HashMap::from([
            (":running".to_owned(), value("running")),
            (":one".to_owned(), number(1)),
            (":now".to_owned(), number(now)),
            (":approved".to_owned(), value("approved")),
            (":generation".to_owned(), number(generation.into())),
        ])))
        .build()
        .expect("the approval's update");
    let begun = t
        .dynamodb
        .transact_write_items()
        .transact_items(TransactWriteItem::builder().update(ledger).build())
        .transact_items(TransactWriteItem::builder().update(approval).build())
        .send()
        .await;
    match begun {
        Ok(_) => true,
        Err(e) => {
            let text = format!("{e:?}");
            assert!(text.contains("ConditionalCheckFailed"), "{text}");
            false
        }
    }
}

/// The old executor's whole job: its begin, then (if it began) its call of the target. Whether
/// it began.
async fn v4_executor(t: &TestApp, id: &str, create_key: &str) -> bool {
    let began = v4_begin(t, id, 0).await;
    if began {
        let reply = t
            .http
            .post(t.downstream_url("/ok"))
            .header("idempotency-key", execute_key(create_key, id))
            .json(&serde_json::json!({"n": 1}))
            .send()
            .await
            .expect("the target");
        assert!(reply.status().is_success());
    }
    began
}

/// Approves a non-idempotent action and returns its id and today's execute job.
async fn approved(t: &TestApp, create_key: &str) -> (String, JobMessage) {
    let body = countersign_tests::CreateBody::new("unsafe", &[ALICE])
        .payload(serde_json::json!({"n": 1}))
        .to_string();
    let id = t.create_ok(KEY_A, create_key, &body).await;
    let read = || async {
        t.app
            .store
            .get_approval(
                &countersign::domain::TenantId::parse(countersign_tests::TENANT_A).unwrap(),
                &countersign::domain::ApprovalId::parse(&id).unwrap(),
            )
            .await
            .expect("read")
            .expect("the approval")
    };
    let pending = read().await;
    t.approve(&id, ALICE).await;
    let approved = read().await;
    let job = jobs_for_change(Some(&pending), Some(&approved), "")
        .into_iter()
        .next()
        .expect("the execute job");
    let message = JobMessage {
        message_id: format!("m-{create_key}"),
        receipt_handle: "unused".to_owned(),
        body: serde_json::to_string(&job).expect("JSON"),
        receive_count: 1,
    };
    (id, message)
}

/// Today's executor and one from before v5 on the same jobs, on a stack deployed as an
/// upgrade's first step: 10 jobs where today's ends before the old one takes it, 10 where they
/// race. Each target is called once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_v4_executor_and_a_v5_executor_on_one_job_call_the_target_once() {
    let first_deploy = Deployment {
        parameters: &[("ApprovalsIndexesStep", "1")],
        ..Default::default()
    };
    let t = TestApp::jobs_deployed(&[("GUARD_V4_EXECUTORS", "true")], None, first_deploy).await;
    let executor = t.executor();
    let mut keys = Vec::new();
    let mut old_won = 0;
    for i in 0..20 {
        let create_key = format!("rollout-{i}");
        let (id, message) = approved(&t, &create_key).await;
        if i < 10 {
            assert!(executor.handle_message(&message, None).await, "done");
            assert!(
                !v4_executor(&t, &id, &create_key).await,
                "the old one refused"
            );
        } else {
            // Whichever begins first calls; the other is refused (today's then leaves the job
            // to come back, as the old executor's attempt is in progress).
            let (_, began) = tokio::join!(
                executor.handle_message(&message, None),
                v4_executor(&t, &id, &create_key)
            );
            old_won += usize::from(began);
        }
        keys.push((id, create_key));
    }
    println!("racing: the old executor began {old_won} of 10");
    let calls: Vec<usize> = keys
        .iter()
        .map(|(id, key)| t.downstream().calls(&execute_key(key, id)))
        .collect();
    println!("target calls per job, first 10 in turn, last 10 racing: {calls:?}");
    assert!(calls.iter().all(|c| *c == 1), "{calls:?}");
    for (id, _) in &keys {
        let execution = &t.get(KEY_A, id).await.json()["execution"];
        assert!(
            ["succeeded", "running"].contains(&execution["status"].as_str().unwrap_or_default()),
            "{execution}"
        );
    }
}

/// Without the guard (any deploy but the upgrade's first), an executor from before v5 that
/// takes a job today's executor has done calls the target again: what the guard is for.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_the_guard_a_v4_executor_calls_again() {
    let t = TestApp::jobs_deployed(&[], None, Deployment::default()).await;
    let executor = t.executor();
    let (id, message) = approved(&t, "unguarded").await;
    assert!(executor.handle_message(&message, None).await);
    assert!(v4_executor(&t, &id, "unguarded").await, "it began again");
    assert_eq!(t.downstream().calls(&execute_key("unguarded", &id)), 2);
}
