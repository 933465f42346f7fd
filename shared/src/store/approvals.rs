//! Creating, reading and deciding approvals. Each operation is one DynamoDB round trip; a refused
//! condition returns the item as it was (`ALL_OLD`), which is all the handler needs to answer.

use std::collections::HashMap;

use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{
    AttributeValue, Put, ReturnValue, ReturnValuesOnConditionCheckFailure, TransactWriteItem,
};

use super::expr::names;
use super::items::{
    DUE_EXECUTION, approval_from_item, approval_key, approval_to_item, b, cancellation_to_attr,
    epoch, get_b, get_n, get_s, idempotency_key, n, s, status_id,
};
use super::{Store, StoreError, Transaction, condition_failed_item, votes};
use crate::domain::{
    Approval, ApprovalId, Approver, Cancellation, Decision, EpochSeconds, ExecutionStatus,
    IdempotencyKey, Status, TenantId,
};

/// What the first response to an `Idempotency-Key` was, kept to answer its replays byte for byte.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyRecord {
    pub key: IdempotencyKey,
    /// SHA-256 of the canonical request body.
    pub fingerprint: String,
    pub approval_id: ApprovalId,
    pub response_status: u16,
    pub response_body: Vec<u8>,
    pub created_at: EpochSeconds,
    /// Once this moment has passed the record no longer blocks its key (also the table's TTL
    /// attribute).
    pub expires_at: EpochSeconds,
}

/// A response saved by an earlier request with the same key and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedResponse {
    pub approval_id: String,
    pub status: u16,
    pub body: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CreateOutcome {
    Created,
    /// Same tenant, key and fingerprint: the first response, to be replayed.
    Replayed(SavedResponse),
    /// Same tenant and key, another body.
    KeyReused,
}

#[derive(Debug, Clone, PartialEq)]
pub enum DecideOutcome {
    /// This request's update applied: the approval as it is now.
    Won(Box<Approval>),
    /// The condition refused it: the approval as it was (`None`: no such approval for the tenant).
    Refused(Option<Box<Approval>>),
}

/// only_if_pending_unexpired_listed_and_not_the_requester: the one condition that makes a
/// decision terminal, whatever channel it comes through. A missing item fails it too (it has no
/// status), so a decision can never create an approval. Separation of duties is part of it, so
/// no channel can skip it: the approval's requester never decides it, neither as the approver
/// named nor as the principal whose key sent the vote (`:sender_id`, the approver's own
/// identity on channels without a key) — an approval from before `requested_by` existed has
/// none to compare.
pub(crate) const ONLY_IF_DECIDABLE: &str = "#status = :pending AND #expires_at > :now AND contains(#approvers, :approver) \
     AND (attribute_not_exists(#requested_by_id) \
          OR (#requested_by_id <> :approver_id AND #requested_by_id <> :sender_id))";

/// only_if_cancellable: pending and not past its expiry — the same bound as a decision's, so a
/// cancel and a decision racing each other cannot both apply.
const ONLY_IF_CANCELLABLE: &str = "#status = :pending AND #expires_at > :now";
/// ... and by the principal that requested it (an approval from before `requested_by` existed
/// is an operator's to cancel).
const ONLY_IF_CANCELLABLE_BY_ITS_REQUESTER: &str =
    "#status = :pending AND #expires_at > :now AND #requested_by = :by";
const CANCEL: &str = "SET #status = :cancelled, #status_id = :status_id, #cancellation = :cancellation \
     REMOVE #due_kind, #due_at";

/// only_if_key_unused_or_expired: a record whose expiry has passed no longer blocks the key,
/// even while DynamoDB's TTL (which deletes late) has not removed it yet.
const ONLY_IF_KEY_UNUSED_OR_EXPIRED: &str = "attribute_not_exists(#pk) OR #expires_at < :now";

/// only_if_new: an item is created once and never overwritten by a put.
pub(crate) const ONLY_IF_NEW: &str = "attribute_not_exists(#pk)";

impl Store {
    /// Writes the idempotency record and the approval in one transaction, so that a key is never
    /// taken without its approval nor an approval created twice for one key.
    pub async fn create_approval(
        &self,
        approval: &Approval,
        record: &IdempotencyRecord,
        now: EpochSeconds,
    ) -> Result<CreateOutcome, StoreError> {
        let claim_key = Put::builder()
            .table_name(&self.tables.idempotency_keys)
            .item("pk", idempotency_key(&approval.tenant, &record.key))
            .item("fingerprint", s(&record.fingerprint))
            .item("approval_id", s(record.approval_id.as_str()))
            .item("response_status", n(record.response_status))
            .item("response_body", b(&record.response_body))
            .item("created_at", epoch(record.created_at))
            .item("expires_at", epoch(record.expires_at))
            .condition_expression(ONLY_IF_KEY_UNUSED_OR_EXPIRED)
            .set_expression_attribute_names(Some(names(&[ONLY_IF_KEY_UNUSED_OR_EXPIRED])))
            .expression_attribute_values(":now", epoch(now))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(|e| StoreError::dynamo("TransactWriteItems", e))?;
        // only_if_new_approval: ids are fresh ULIDs; the condition makes an overwrite impossible.
        let put_approval = Put::builder()
            .table_name(&self.tables.approvals)
            .set_item(Some(approval_to_item(approval)))
            .condition_expression(ONLY_IF_NEW)
            .set_expression_attribute_names(Some(names(&[ONLY_IF_NEW])))
            .build()
            .map_err(|e| StoreError::dynamo("TransactWriteItems", e))?;

        let items = vec![
            TransactWriteItem::builder().put(claim_key).build(),
            TransactWriteItem::builder().put(put_approval).build(),
        ];
        let reasons = match self.transact(items, approval.id.as_str()).await? {
            Transaction::Committed => return Ok(CreateOutcome::Created),
            Transaction::Cancelled(reasons) => reasons,
        };
        let Some(old) = condition_failed_item(&reasons, 0) else {
            // Only the approval's condition failed: a ULID collided, which a retry would fix.
            return Err(StoreError::Corrupt("approval id already taken"));
        };
        if get_s(old, "fingerprint")? != record.fingerprint {
            return Ok(CreateOutcome::KeyReused);
        }
        Ok(CreateOutcome::Replayed(SavedResponse {
            approval_id: get_s(old, "approval_id")?.to_owned(),
            status: get_n(old, "response_status")?,
            body: get_b(old, "response_body")?.to_vec(),
        }))
    }

    /// The approval, if it exists for this tenant. Strongly consistent: a client reading right
    /// after a write sees it.
    pub async fn get_approval(
        &self,
        tenant: &TenantId,
        id: &ApprovalId,
    ) -> Result<Option<Approval>, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.tables.approvals)
            .key("pk", approval_key(tenant, id))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| StoreError::from_sdk("GetItem", e))?;
        output.item().map(approval_from_item).transpose()
    }

    /// Records a vote (see [`super::votes`]): one conditional update, and a second only for
    /// the approve that completes a quorum (or after an id's wrong hint). Every vote that is not
    /// counted gets the item as it was.
    /// `sent_by`: the principal of the key that sent the vote, when it is not the approver's.
    pub async fn decide(
        &self,
        tenant: &TenantId,
        id: &ApprovalId,
        vote: &Decision,
        sent_by: Option<&Approver>,
        now: EpochSeconds,
    ) -> Result<DecideOutcome, StoreError> {
        let mut write = votes::first(id, vote, sent_by, now);
        loop {
            let outcome = self
                .update_approval(
                    tenant,
                    id,
                    &write.update,
                    &write.condition,
                    write.names,
                    write.values,
                )
                .await?;
            let old = match outcome {
                Ok(approval) => return Ok(DecideOutcome::Won(Box::new(approval))),
                Err(old) => old,
            };
            // The vote that completes a quorum is written again as the completing write (and a
            // wrong hint gets the right kind); each kind once, so this ends.
            match votes::next(write.kind, old.as_ref(), vote, sent_by, now) {
                Some(next) => write = next,
                None => return Ok(DecideOutcome::Refused(old.map(Box::new))),
            }
        }
    }

    /// Withdraws a pending approval: one conditional update. `by_anyone` (an operator) may
    /// cancel any; otherwise only the approval's requester. A cancelled approval is terminal:
    /// no decision's condition (`#status = :pending`) holds on it any more, and the dispatcher
    /// makes no job of the change.
    pub async fn cancel(
        &self,
        tenant: &TenantId,
        id: &ApprovalId,
        cancellation: &Cancellation,
        by_anyone: bool,
        now: EpochSeconds,
    ) -> Result<DecideOutcome, StoreError> {
        let condition = if by_anyone {
            ONLY_IF_CANCELLABLE
        } else {
            ONLY_IF_CANCELLABLE_BY_ITS_REQUESTER
        };
        let mut values = HashMap::from([
            (":pending".to_owned(), s(Status::Pending.as_str())),
            (":cancelled".to_owned(), s(Status::Cancelled.as_str())),
            (
                ":cancellation".to_owned(),
                cancellation_to_attr(cancellation),
            ),
            (":now".to_owned(), epoch(now)),
            (":status_id".to_owned(), status_id(Status::Cancelled, id)),
        ]);
        if !by_anyone {
            values.insert(":by".to_owned(), s(cancellation.by.as_str()));
        }
        let outcome = self
            .update_approval(
                tenant,
                id,
                CANCEL,
                condition,
                names(&[CANCEL, condition]),
                values,
            )
            .await?;
        Ok(match outcome {
            Ok(approval) => DecideOutcome::Won(Box::new(approval)),
            Err(old) => DecideOutcome::Refused(old.map(Box::new)),
        })
    }

    /// One conditional `UpdateItem` on an approval: the approval as it is now when the
    /// condition held (`ALL_NEW`), or as it was when it did not (`ALL_OLD`; `None` when there
    /// is no such approval) — either way in the same round trip.
    pub(crate) async fn update_approval(
        &self,
        tenant: &TenantId,
        id: &ApprovalId,
        update: &str,
        condition: &str,
        names: HashMap<String, String>,
        values: HashMap<String, AttributeValue>,
    ) -> Result<Result<Approval, Option<Approval>>, StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.tables.approvals)
            .key("pk", approval_key(tenant, id))
            .update_expression(update)
            .condition_expression(condition)
            .set_expression_attribute_names(Some(names))
            .set_expression_attribute_values(Some(values))
            .return_values(ReturnValue::AllNew)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        let result = match result {
            Err(e) if super::is_transient(&e) => return Err(StoreError::from_sdk("UpdateItem", e)),
            other => other.map_err(|e| e.into_service_error()),
        };
        match result {
            Ok(output) => {
                let item = output
                    .attributes()
                    .ok_or(StoreError::corrupt("ALL_NEW attributes"))?;
                Ok(Ok(approval_from_item(item)?))
            }
            Err(UpdateItemError::ConditionalCheckFailedException(failed)) => {
                Ok(Err(failed.item().map(approval_from_item).transpose()?))
            }
            Err(err) => Err(StoreError::dynamo("UpdateItem", err)),
        }
    }
}

/// Why an operator's change to an execution was refused.
#[derive(Debug, Clone, PartialEq)]
pub enum OperatorRefusal {
    /// No such approval for this tenant.
    NotFound,
    /// The execution is not in a state the operation applies to: the approval as it is.
    WrongState(Box<Approval>),
}

/// only_if_retryable: only a failed or unreconciled execution resumes, and only on an approved
/// approval; each resume is a new generation, which the dispatcher turns into one execute job.
/// ... and not by a request that resumed it before: a repeat of a retry — the latest, or a late
/// duplicate of an older one — must not resume an execution that has since failed again (it is
/// answered as a replay). Every retry key is kept (`retry_keys`; `retry_key` is the latest, as
/// items from before the list hold it).
/// ... and at most [`MAX_RETRIES`] times: what an approval item keeps per resume stays bounded.
const ONLY_IF_RETRYABLE: &str = "#status = :approved AND #execution.#status IN (:failed, :needs_reconciliation) \
     AND (attribute_not_exists(#execution.#retry_key) OR #execution.#retry_key <> :retry_key) \
     AND NOT contains(#execution.#retry_keys, :retry_key) AND #execution.#generation < :max_retries";
/// A resumed generation starts afresh: the reconciler's re-queue budget and the status queries
/// are its own (the trail keeps the earlier ones).
const RESUME: &str = "SET #execution.#status = :queued, #execution.#generation = #execution.#generation + :one, \
     #execution.#updated_at = :now, #execution.#retry_key = :retry_key, \
     #execution.#retry_keys = list_append(if_not_exists(#execution.#retry_keys, :no_keys), :retry_key_list), \
     #execution.#requeues = :zero, #due_kind = :execution_due, #due_at = :now \
     REMOVE #execution.#note, #execution.#status_checks";

/// How many times an operator may resume one approval's execution.
pub const MAX_RETRIES: u32 = 20;

/// only_if_unreconciled: an operator records the real outcome of an unknown one, once.
const ONLY_IF_UNRECONCILED: &str = "#execution.#status = :needs_reconciliation";
const RESOLVE: &str = "SET #execution.#status = :outcome, #execution.#note = :note, \
     #execution.#updated_at = :now REMOVE #due_kind, #due_at";

impl Store {
    /// Resumes a failed or unreconciled execution without a second approval. `retry_key`
    /// identifies the request: a repeat finds it on the refused item's `execution.retry_key`.
    pub async fn retry_execution(
        &self,
        tenant: &TenantId,
        id: &ApprovalId,
        retry_key: &str,
        now: EpochSeconds,
    ) -> Result<Result<Approval, OperatorRefusal>, StoreError> {
        let values = HashMap::from([
            (":approved".to_owned(), s(Status::Approved.as_str())),
            (":failed".to_owned(), s(ExecutionStatus::Failed.as_str())),
            (
                ":needs_reconciliation".to_owned(),
                s(ExecutionStatus::NeedsReconciliation.as_str()),
            ),
            (":queued".to_owned(), s(ExecutionStatus::Queued.as_str())),
            (":one".to_owned(), n(1)),
            (":now".to_owned(), epoch(now)),
            (":retry_key".to_owned(), s(retry_key)),
            (":no_keys".to_owned(), AttributeValue::L(Vec::new())),
            (
                ":retry_key_list".to_owned(),
                AttributeValue::L(vec![s(retry_key)]),
            ),
            (":zero".to_owned(), n(0)),
            (":max_retries".to_owned(), n(MAX_RETRIES)),
            (":execution_due".to_owned(), s(DUE_EXECUTION)),
        ]);
        self.operator_update(tenant, id, RESUME, ONLY_IF_RETRYABLE, values)
            .await
    }

    /// Records what really happened to an execution whose outcome was unknown.
    pub async fn resolve_execution(
        &self,
        tenant: &TenantId,
        id: &ApprovalId,
        outcome: ExecutionStatus,
        note: &str,
        now: EpochSeconds,
    ) -> Result<Result<Approval, OperatorRefusal>, StoreError> {
        let values = HashMap::from([
            (
                ":needs_reconciliation".to_owned(),
                s(ExecutionStatus::NeedsReconciliation.as_str()),
            ),
            (":outcome".to_owned(), s(outcome.as_str())),
            (":note".to_owned(), s(note)),
            (":now".to_owned(), epoch(now)),
        ]);
        self.operator_update(tenant, id, RESOLVE, ONLY_IF_UNRECONCILED, values)
            .await
    }

    async fn operator_update(
        &self,
        tenant: &TenantId,
        id: &ApprovalId,
        update: &str,
        condition: &str,
        values: HashMap<String, AttributeValue>,
    ) -> Result<Result<Approval, OperatorRefusal>, StoreError> {
        let condition = format!("attribute_exists(#pk) AND ({condition})");
        let names = names(&[update, &condition]);
        let outcome = self
            .update_approval(tenant, id, update, &condition, names, values)
            .await?;
        Ok(outcome.map_err(|old| match old {
            None => OperatorRefusal::NotFound,
            Some(approval) => OperatorRefusal::WrongState(Box::new(approval)),
        }))
    }
}
