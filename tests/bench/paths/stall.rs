//! The sweeper's reminder step (issue 48): one due approval's reminder sent, as the sweep sends
//! it (`store.remind`, after working out which reminder is due), beside the one conditional
//! `UpdateItem` it is made of, built by hand. No HTTP route serves it: no loopback row.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::{ReturnValue, ReturnValuesOnConditionCheckFailure};
use countersign::domain::Approval;
use countersign::domain::stall::Next;
use countersign_tests::{ALICE, BOB};
use serde_json::json;

use super::Bench;
use super::raw::{n, s};

/// A reminder after a minute, once: after it, the approval is due at its expiry.
const REMIND_AFTER: i64 = 60;

impl Bench<'_> {
    /// Pending approvals with one reminder each, read as the sweep reads them.
    pub(super) async fn pending_reminded(&self, count: usize) -> (Vec<String>, Vec<Approval>) {
        let body = json!({
            "action": {"type": "deploy", "payload": {"service": "api", "build": 1}},
            "approvers": [ALICE, BOB],
            "context": {"summary": "Deploy api build 1 to prod"},
            "expires_in_seconds": 86_400,
            "reminders": {"after_seconds": REMIND_AFTER, "every_seconds": 300, "max": 1}
        });
        let ids = self
            .pending_with(count, "bench-remind", &body.to_string())
            .await;
        let store = &self.t.app.store;
        let tenant =
            countersign::domain::TenantId::parse(countersign_tests::TENANT_A).expect("a tenant");
        let mut approvals = Vec::with_capacity(count);
        for id in &ids {
            let id = countersign::domain::ApprovalId::parse(id).expect("an id");
            let read = store.get_approval(&tenant, &id).await.expect("a read");
            approvals.push(read.expect("the approval"));
        }
        self.t.calls.take();
        (ids, approvals)
    }

    /// The sweep's step for one approval read, at its reminder's time (from its own create:
    /// the clock runs on while a cell's approvals are made): which reminder, then its write.
    pub(super) async fn remind(&self, read: &Approval) {
        let at = read.created_at + REMIND_AFTER;
        let due = read.stall.due_at(read.created_at, read.expires_at, at);
        let Some(Next::Reminder(number)) = due else {
            panic!("a reminder is due: {due:?}");
        };
        let sweeper = self.t.function(countersign::Function::Sweeper);
        let sent = sweeper.store.remind(read, number, at).await;
        assert!(sent.expect("the write").is_some(), "the reminder is sent");
    }

    /// The same write by hand: reminder 1 recorded, the approval due next at its expiry, while
    /// it is pending, unexpired and neither reminded nor escalated yet.
    pub(super) async fn raw_remind(&self, read: &Approval) {
        let at = read.created_at + REMIND_AFTER;
        let names: HashMap<String, String> = [
            "pk",
            "status",
            "expires_at",
            "reminded",
            "escalated",
            "due_kind",
            "due_at",
            "retain_until",
        ]
        .iter()
        .map(|name| (format!("#{name}"), (*name).to_owned()))
        .collect();
        let result = self
            .raw
            .update_item()
            .table_name(&self.t.app.config.tables.approvals)
            .key("pk", s(format!("tenant-a#{}", read.id)))
            .update_expression(
                "SET #reminded = :reminded, #due_kind = :index_due_kind, \
                 #due_at = :index_due_at REMOVE #retain_until",
            )
            .condition_expression(
                "attribute_exists(#pk) AND #status = :pending AND #expires_at > :now \
                 AND attribute_not_exists(#reminded) AND attribute_not_exists(#escalated)",
            )
            .set_expression_attribute_names(Some(names))
            .expression_attribute_values(":reminded", n(1))
            .expression_attribute_values(":index_due_kind", s("expiry"))
            .expression_attribute_values(":index_due_at", n(read.expires_at))
            .expression_attribute_values(":pending", s("pending"))
            .expression_attribute_values(":now", n(at))
            .return_values(ReturnValue::AllNew)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        assert!(result.is_ok(), "raw reminder: {result:?}");
    }
}
