//! A waiting workflow's answer (issue 49): the executor's resume job, as it handles one job
//! message (begin on the ledger, the approval's read — the token and the decision document are
//! on it, not in the job — `SendDurableExecutionCallbackSuccess`, the end with the approval's
//! `resume` and the trail event in one transaction), beside the same four calls made by hand,
//! as the executor's role. No HTTP route serves it: no loopback row. Each
//! operation answers a callback of its own (a callback answers once), made on the local AWS
//! before the timed part.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem, Update};
use countersign::domain::Approval;
use countersign::domain::resume::ResumeKind;
use countersign::jobs::{Job, JobMessage, ResumeJob};
use countersign_tests::workflows::DurableCallback;
use countersign_tests::{ALICE, BOB};
use serde_json::json;

use super::raw::{n, s};
use super::{Bench, Fixture};

/// What the resume row calls with: the executor as deployed, and the Lambda client of its role.
pub(super) struct Workflows {
    executor: countersign::jobs::Executor,
    lambda: aws_sdk_lambda::Client,
}

impl Bench<'_> {
    /// Pending approvals, each waited on by a durable callback of its own: (the callbacks'
    /// ids, the approvals as read).
    pub(super) async fn pending_resumed(&self, count: usize) -> Fixture {
        let mut callbacks = Vec::with_capacity(count);
        for chunk in (0..count).collect::<Vec<_>>().chunks(16) {
            let made =
                futures::future::join_all(chunk.iter().map(|_| DurableCallback::create(None)))
                    .await;
            callbacks.extend(made.into_iter().map(|c| c.id));
        }
        let store = &self.t.app.store;
        let tenant =
            countersign::domain::TenantId::parse(countersign_tests::TENANT_A).expect("a tenant");
        let mut approvals = Vec::with_capacity(count);
        for (i, callback) in callbacks.iter().enumerate() {
            let body = json!({
                "action": {"type": "deploy", "payload": {"service": "api", "build": 1}},
                "approvers": [ALICE, BOB],
                "resume": {"type": "lambda_durable", "callback_id": callback},
            });
            let id = self
                .pending_with(1, &format!("bench-resume-{i}"), &body.to_string())
                .await
                .remove(0);
            let id = countersign::domain::ApprovalId::parse(&id).expect("an id");
            // Approved (by the store alone: nothing dispatches here), so its answer is due.
            let vote = countersign::domain::Decision {
                outcome: countersign::domain::Outcome::Approved,
                approver: countersign::domain::Approver::parse(ALICE).expect("alice"),
                decided_at: self.t.clock.now(),
                channel: countersign::domain::Channel::Api,
                comment: None,
                webhook_event_id: None,
                key_id: None,
                signed_in: None,
                by: None,
                delegation_set_by: None,
                passkey: None,
            };
            let decided = store
                .decide(
                    &tenant,
                    &id,
                    &vote,
                    countersign::store::VoteBy::default(),
                    self.t.clock.now(),
                )
                .await
                .expect("a vote");
            let countersign::store::DecideOutcome::Won(read) = decided else {
                panic!("the vote decides");
            };
            approvals.push(*read);
        }
        self.t.calls.take();
        let sdk = self.t.functions.sdk(countersign::Function::Executor);
        Fixture {
            ids: callbacks,
            approvals,
            workflows: Some(Workflows {
                executor: self.t.executor(),
                lambda: aws_sdk_lambda::Client::new(sdk),
            }),
        }
    }

    /// The job message the dispatcher would queue for the approval, approved.
    fn resume_message(read: &Approval, i: usize) -> JobMessage {
        let job = Job::Resume(ResumeJob {
            approval_id: read.id.clone(),
            tenant: read.tenant.clone(),
            kind: ResumeKind::LambdaDurable,
            generation: 0,
            after: String::new(),
            trace: None,
            expires_at: Some(read.expires_at),
            since: None,
            resends: 0,
        });
        JobMessage {
            message_id: format!("bench-resume-{i}"),
            receipt_handle: String::new(),
            body: serde_json::to_string(&job).expect("a job's body"),
            receive_count: 1,
        }
    }

    /// The executor's handling of the approval's resume job.
    pub(super) async fn resume(&self, fixture: &Fixture, i: usize) {
        let workflows = fixture
            .workflows
            .as_ref()
            .expect("the resume row's fixture");
        let message = Self::resume_message(&fixture.approvals[i], i);
        assert!(
            workflows.executor.handle_message(&message, None).await,
            "answered"
        );
    }

    /// The same by hand: the ledger's begin, the answer, the end (ledger, the approval's
    /// `resume`, the trail event) in one transaction.
    pub(super) async fn raw_resume(&self, fixture: &Fixture, i: usize, now: i64) {
        let lambda = &fixture
            .workflows
            .as_ref()
            .expect("the resume row's fixture")
            .lambda;
        let read = &fixture.approvals[i];
        let tables = &self.t.app.config.tables;
        let pk = format!("{}#resume", read.id);
        let token = ulid::Ulid::new().to_string();
        let names = |names: &[&str]| -> HashMap<String, String> {
            names
                .iter()
                .map(|name| (format!("#{name}"), (*name).to_owned()))
                .collect()
        };
        self.raw
            .update_item()
            .table_name(&tables.execution_ledger)
            .key("pk", s(&pk))
            .update_expression(
                "SET #status = :in_progress, #attempts = if_not_exists(#attempts, :zero) + :one, \
                 #generation = :zero, #token = :token, #lease_until = :lease, #kind = :kind, \
                 #approval_id = :id, #tenant = :tenant, #updated_at = :now, #retain_until = :retain",
            )
            // The store's own condition: a job no one began, one waiting for its retry, or one
            // whose worker stopped (its lease ended).
            .condition_expression(
                "attribute_not_exists(#pk) \
                 OR (#status = :retry_wait AND #generation = :zero) \
                 OR (#status IN (:failed, :needs_reconciliation) AND #generation < :zero) \
                 OR (#status = :in_progress AND #lease_until <= :now_ms AND #generation = :zero)",
            )
            .set_expression_attribute_names(Some(names(&[
                "pk", "status", "attempts", "generation", "token", "lease_until", "kind",
                "approval_id", "tenant", "updated_at", "retain_until",
            ])))
            .expression_attribute_values(":retry_wait", s("retry_wait"))
            .expression_attribute_values(":failed", s("failed"))
            .expression_attribute_values(":needs_reconciliation", s("needs_reconciliation"))
            .expression_attribute_values(":now_ms", n(now * 1000))
            .return_values_on_condition_check_failure(
                aws_sdk_dynamodb::types::ReturnValuesOnConditionCheckFailure::AllOld,
            )
            .expression_attribute_values(":in_progress", s("in_progress"))
            .expression_attribute_values(":zero", n(0))
            .expression_attribute_values(":one", n(1))
            .expression_attribute_values(":token", s(&token))
            .expression_attribute_values(":lease", n(now * 1000 + 29_000))
            .expression_attribute_values(":kind", s("resume"))
            .expression_attribute_values(":id", s(read.id.as_str()))
            .expression_attribute_values(":tenant", s(read.tenant.as_str()))
            .expression_attribute_values(":now", n(now))
            .expression_attribute_values(":retain", n(now + 400 * 86_400))
            .return_values(aws_sdk_dynamodb::types::ReturnValue::AllNew)
            .send()
            .await
            .expect("the begin");
        // The approval read for its token and its decision document, as the executor reads it.
        self.raw
            .get_item()
            .table_name(&tables.approvals)
            .key("pk", s(format!("{}#{}", read.tenant, read.id)))
            .consistent_read(true)
            .send()
            .await
            .expect("the approval's read");
        let document =
            countersign::domain::resume::decision_document(read).expect("a decision document");
        let callback = read
            .resume
            .as_ref()
            .expect("a workflow waits")
            .token
            .expose();
        lambda
            .send_durable_execution_callback_success()
            .callback_id(callback)
            .result(aws_sdk_lambda::primitives::Blob::new(document.to_string()))
            .send()
            .await
            .expect("the answer");
        let ledger = Update::builder()
            .table_name(&tables.execution_ledger)
            .key("pk", s(&pk))
            .update_expression(
                "SET #status = :succeeded, #updated_at = :now, #ended_by = :token \
                 REMOVE #lease_until, #last_error",
            )
            .condition_expression(
                "#token = :token AND #status IN (:in_progress, :retry_wait, :unknown)",
            )
            .set_expression_attribute_names(Some(names(&[
                "status",
                "updated_at",
                "ended_by",
                "lease_until",
                "last_error",
                "token",
            ])))
            .expression_attribute_values(":succeeded", s("succeeded"))
            .expression_attribute_values(":now", n(now))
            .expression_attribute_values(":token", s(&token))
            .expression_attribute_values(":in_progress", s("in_progress"))
            .expression_attribute_values(":retry_wait", s("retry_wait"))
            .expression_attribute_values(":unknown", s("unknown"))
            .return_values_on_condition_check_failure(
                aws_sdk_dynamodb::types::ReturnValuesOnConditionCheckFailure::AllOld,
            )
            .build()
            .expect("the ledger's end");
        let approval = Update::builder()
            .table_name(&tables.approvals)
            .key("pk", s(format!("{}#{}", read.tenant, read.id)))
            .update_expression(
                "SET #resume.#status = :succeeded, #resume.#attempts = if_not_exists(#resume.#attempts, :zero) + :one, \
                 #resume.#updated_at = :now REMOVE #resume.#last_error, #resume.#token",
            )
            .condition_expression("attribute_exists(#resume)")
            .set_expression_attribute_names(Some(names(&[
                "resume", "status", "attempts", "updated_at", "last_error", "token",
            ])))
            .expression_attribute_values(":succeeded", s("succeeded"))
            .expression_attribute_values(":zero", n(0))
            .expression_attribute_values(":one", n(1))
            .expression_attribute_values(":now", n(now))
            .build()
            .expect("the approval's resume");
        let entry = AttributeValue::M(HashMap::from([
            ("i".to_owned(), s(format!("evt_{token}"))),
            ("t".to_owned(), s("resume.succeeded")),
            ("a".to_owned(), n(now)),
            ("c".to_owned(), s(r#"{"channel":"resume"}"#)),
            (
                "d".to_owned(),
                s(json!({"type": "lambda_durable", "answer": "success",
                                        "token": "sha256:0123456789ab"})
                .to_string()),
            ),
        ]));
        let event = Put::builder()
            .table_name(&tables.events)
            .item("pk", s(format!("{}#{}", read.tenant, read.id)))
            .item("id", s(format!("0~00r#{token}")))
            .item("events", AttributeValue::L(vec![entry]))
            .item("retain_until", n(now + 400 * 86_400))
            .build()
            .expect("the event");
        // As the store sends a transaction: with a token of its own (an SDK retry of a commit
        // whose answer was lost comes back committed).
        self.raw
            .transact_write_items()
            .client_request_token(ulid::Ulid::new().to_string())
            .transact_items(TransactWriteItem::builder().update(ledger).build())
            .transact_items(TransactWriteItem::builder().update(approval).build())
            .transact_items(TransactWriteItem::builder().put(event).build())
            .send()
            .await
            .expect("the end");
    }
}
