//! The webhook inbox: one item per `{source}#{webhook-id}`, written in the same transaction as
//! the transition the event causes, so an event is applied at most once however often it is
//! delivered.

use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::types::{
    Put, ReturnValuesOnConditionCheckFailure, TransactWriteItem, Update,
};

use super::attr::{Item, epoch, get_s, s};
use super::client::{Store, Transaction, condition_failed_item};
use super::codec::approval_from_item;
use super::conditions::ONLY_IF_NEW;
use super::error::{StoreError, is_transient};
use super::expr::names;
use super::keys::{approval_key, inbox_key};
use super::votes;
use crate::domain::approval_policy::GroupName;
use crate::domain::{
    ApprovalId, DecideRequest, Decision, EpochSeconds, TenantId, WebhookOutcome, classify_refusal,
};

/// What the inbox keeps of a delivery: enough to explain, later, why a workflow resumed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboxRecord {
    pub source: String,
    pub event_id: String,
    pub event_type: String,
    pub approval_id: Option<String>,
    pub received_at: EpochSeconds,
    /// The `webhook-timestamp` header of the first delivery.
    pub webhook_timestamp: EpochSeconds,
    pub request_id: String,
    pub body_sha256: String,
    /// Kept until then (the table's TTL attribute): longer than any provider redelivers.
    pub expires_at: EpochSeconds,
    /// What makes the event one of a kind beside its id, when the id is not signed (GitHub's
    /// `X-GitHub-Delivery`): a second delivery of it under another id is a replay.
    pub replay_key: Option<String>,
}

/// How a delivery was handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ingested {
    /// The first delivery of this event: recorded now, with this outcome.
    Processed(WebhookOutcome),
    /// A redelivery: nothing changed; the outcome is the first delivery's.
    Duplicate(WebhookOutcome),
}

impl InboxRecord {
    fn to_item(&self, outcome: WebhookOutcome) -> Item {
        let mut item = Item::from([
            ("pk".to_owned(), s(inbox_key(&self.source, &self.event_id))),
            ("source".to_owned(), s(&self.source)),
            ("event_id".to_owned(), s(&self.event_id)),
            ("event_type".to_owned(), s(&self.event_type)),
            ("outcome".to_owned(), s(outcome.as_str())),
            ("received_at".to_owned(), epoch(self.received_at)),
            (
                "webhook_timestamp".to_owned(),
                epoch(self.webhook_timestamp),
            ),
            ("request_id".to_owned(), s(&self.request_id)),
            ("body_sha256".to_owned(), s(&self.body_sha256)),
            ("expires_at".to_owned(), epoch(self.expires_at)),
        ]);
        if let Some(id) = &self.approval_id {
            item.insert("approval_id".to_owned(), s(id));
        }
        item
    }

    /// The guard against a replay under another event id, for the end of the delivery's
    /// transaction: an item keyed by [`InboxRecord::replay_key`], written once. `None` without
    /// a replay key.
    pub(crate) fn replay_guard(&self, table: &str) -> Result<Option<Put>, StoreError> {
        let Some(key) = &self.replay_key else {
            return Ok(None);
        };
        Put::builder()
            .table_name(table)
            .item("pk", s(inbox_key(&self.source, key)))
            .item("event_id", s(&self.event_id))
            .item("expires_at", epoch(self.expires_at))
            .condition_expression(ONLY_IF_NEW)
            .set_expression_attribute_names(Some(names(&[ONLY_IF_NEW])))
            .build()
            .map(Some)
            .map_err(|e| StoreError::dynamo("TransactWriteItems", e))
    }

    /// Whether a refused transaction that ends with [`InboxRecord::replay_guard`] was refused
    /// by it: the event was seen before under another id.
    pub(crate) fn replayed(&self, reasons: &[aws_sdk_dynamodb::types::CancellationReason]) -> bool {
        self.replay_key.is_some()
            && reasons.last().and_then(|r| r.code()) == Some("ConditionalCheckFailed")
    }

    /// only_if_first_delivery: the inbox item is written once per event id.
    pub(crate) fn put(&self, table: &str, outcome: WebhookOutcome) -> Result<Put, StoreError> {
        Put::builder()
            .table_name(table)
            .set_item(Some(self.to_item(outcome)))
            .condition_expression(ONLY_IF_NEW)
            .set_expression_attribute_names(Some(names(&[ONLY_IF_NEW])))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(|e| StoreError::dynamo("TransactWriteItems", e))
    }
}

pub(crate) fn recorded_outcome(item: &Item) -> Result<WebhookOutcome, StoreError> {
    WebhookOutcome::parse(get_s(item, "outcome")?).ok_or(StoreError::corrupt("outcome"))
}

impl Store {
    /// A decision event: the inbox item and the approval's decision in one transaction. When
    /// the approval cannot take the decision, the event is recorded alone with the reason.
    pub async fn ingest_decision(
        &self,
        tenant: &TenantId,
        approval_id: &ApprovalId,
        record: &InboxRecord,
        decision: &Decision,
        place_groups: &[GroupName],
        now: EpochSeconds,
    ) -> Result<Ingested, StoreError> {
        let by = votes::VoteBy {
            sent_by: None,
            groups: place_groups,
        };
        let mut write = votes::first(approval_id, decision, by, (now, self.retention));
        // Each write of the vote (the counted one, then the completing one) is another request:
        // DynamoDB refuses a client token sent with two different transactions.
        let mut writes = 0;
        let old = loop {
            writes += 1;
            let inbox = record.put(&self.tables.webhook_inbox, WebhookOutcome::Applied)?;
            let vote = Update::builder()
                .table_name(&self.tables.approvals)
                .key("pk", approval_key(tenant, approval_id))
                .update_expression(&write.update)
                .condition_expression(&write.condition)
                .set_expression_attribute_names(Some(write.names))
                .set_expression_attribute_values(Some(write.values))
                .return_values_on_condition_check_failure(
                    ReturnValuesOnConditionCheckFailure::AllOld,
                )
                .build()
                .map_err(|e| StoreError::dynamo("TransactWriteItems", e))?;
            let items = vec![
                TransactWriteItem::builder().put(inbox).build(),
                TransactWriteItem::builder().update(vote).build(),
            ];
            let token = format!("{}.{writes}", record.request_id);
            let reasons = match self.transact(items, &token).await? {
                Transaction::Committed => {
                    return Ok(Ingested::Processed(WebhookOutcome::Applied));
                }
                Transaction::Cancelled(reasons) => reasons,
            };
            if let Some(first) = condition_failed_item(&reasons, 0) {
                return Ok(Ingested::Duplicate(recorded_outcome(first)?));
            }
            let old = condition_failed_item(&reasons, 1)
                .map(approval_from_item)
                .transpose()?;
            // The approve that completes a quorum is written again, as the completing vote.
            match votes::next(
                (write.kind, write.executes),
                old.as_ref(),
                decision,
                by,
                (now, self.retention),
            ) {
                Some(next) => write = next,
                None => break old,
            }
        };
        // Only the approval refused: tell why from the item as it was, and record that.
        let request = DecideRequest {
            outcome: decision.outcome,
            approver: decision.approver.clone(),
            comment: decision.comment.clone(),
            sent_by: None,
            by: None,
            place_groups: place_groups.to_vec(),
            passkey: false,
        };
        let outcome = WebhookOutcome::from_refusal(&classify_refusal(old, &request, now)).ok_or(
            StoreError::Corrupt("the decision condition refused a decidable approval"),
        )?;
        self.record_event(record, outcome).await
    }

    /// Records an event that changes nothing else (ignored, or refused by the approval).
    pub async fn record_event(
        &self,
        record: &InboxRecord,
        outcome: WebhookOutcome,
    ) -> Result<Ingested, StoreError> {
        let result = self
            .client
            .put_item()
            .table_name(&self.tables.webhook_inbox)
            .set_item(Some(record.to_item(outcome)))
            .condition_expression(ONLY_IF_NEW)
            .set_expression_attribute_names(Some(names(&[ONLY_IF_NEW])))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        let result = match result {
            Err(e) if is_transient(&e) => return Err(StoreError::from_sdk("PutItem", e)),
            other => other.map_err(|e| e.into_service_error()),
        };
        match result {
            Ok(_) => Ok(Ingested::Processed(outcome)),
            Err(PutItemError::ConditionalCheckFailedException(failed)) => {
                let first = failed
                    .item()
                    .ok_or(StoreError::corrupt("ALL_OLD inbox item"))?;
                Ok(Ingested::Duplicate(recorded_outcome(first)?))
            }
            Err(err) => Err(StoreError::dynamo("PutItem", err)),
        }
    }
}
