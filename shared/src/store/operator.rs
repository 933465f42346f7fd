//! An operator's changes to an execution: resume a failed or unreconciled one without a
//! second approval, or record what really became of an unknown one. One conditional update each.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

use super::attr::{epoch, n, s};
use super::client::Store;
use super::conditions::ONLY_IF_EXISTS;
use super::error::StoreError;
use super::expr::{UpdateExpr, names};
use super::indexes::Indexed;
use crate::domain::{Approval, ApprovalId, EpochSeconds, ExecutionStatus, Status, TenantId};

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
/// ... and never an approval-only type's: Countersign has nothing to execute (its claim was
/// single-use; the outcome is resolved instead).
const ONLY_IF_RETRYABLE: &str = "#status = :approved AND #execution.#status IN (:failed, :needs_reconciliation) \
     AND attribute_not_exists(#approval_only) \
     AND (attribute_not_exists(#execution.#retry_key) OR #execution.#retry_key <> :retry_key) \
     AND NOT contains(#execution.#retry_keys, :retry_key) AND #execution.#generation < :max_retries";
/// A resumed generation starts afresh: the reconciler's re-queue budget and the status queries
/// are its own (the trail keeps the earlier ones).
fn resume() -> UpdateExpr {
    UpdateExpr::default()
        .set("#execution.#status = :queued")
        .set("#execution.#generation = #execution.#generation + :one")
        .set("#execution.#updated_at = :now")
        .set("#execution.#retry_key = :retry_key")
        .set("#execution.#retry_keys = list_append(if_not_exists(#execution.#retry_keys, :no_keys), :retry_key_list)")
        .set("#execution.#requeues = :zero")
        .remove("#execution.#note")
        .remove("#execution.#status_checks")
}

/// How many times an operator may resume one approval's execution.
pub const MAX_RETRIES: u32 = 20;

/// only_if_unreconciled: an operator records the real outcome of an unknown one, once.
const ONLY_IF_UNRECONCILED: &str = "#execution.#status = :needs_reconciliation";
fn resolve() -> UpdateExpr {
    UpdateExpr::default()
        .set("#execution.#status = :outcome")
        .set("#execution.#note = :note")
        .set("#execution.#updated_at = :now")
}

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
        ]);
        let resumed = Indexed::after(id, Status::Approved, false, ExecutionStatus::Queued, now);
        self.operator_update(tenant, id, resume(), resumed, ONLY_IF_RETRYABLE, values)
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
        let resolved = Indexed::after(id, Status::Approved, false, outcome, now);
        self.operator_update(
            tenant,
            id,
            resolve(),
            resolved,
            ONLY_IF_UNRECONCILED,
            values,
        )
        .await
    }

    /// `update` with the index attributes of the state it leaves (`after`), while `condition`
    /// holds on an existing approval.
    async fn operator_update(
        &self,
        tenant: &TenantId,
        id: &ApprovalId,
        update: UpdateExpr,
        after: Indexed,
        condition: &str,
        mut values: HashMap<String, AttributeValue>,
    ) -> Result<Result<Approval, OperatorRefusal>, StoreError> {
        let update = after.apply(update, &mut values, self.retention).build();
        let condition = format!("{ONLY_IF_EXISTS} AND ({condition})");
        let names = names(&[&update, &condition]);
        let outcome = self
            .update_approval(tenant, id, &update, &condition, names, values)
            .await?;
        Ok(outcome.map_err(|old| match old {
            None => OperatorRefusal::NotFound,
            Some(approval) => OperatorRefusal::WrongState(Box::new(approval)),
        }))
    }
}

/// only_if_resume_failed: an operator has a `failed` answer to the waiting workflow sent again
/// (the approval's outcome stays as it is: only the resume moves), while its token is kept
/// and at most [`crate::domain::resume::Resume::MAX_RETRIES`] times; each retry is a new
/// generation, which the dispatcher turns into one resume job.
const ONLY_IF_RESUME_FAILED: &str = "#resume.#status = :failed AND attribute_exists(#resume.#token) \
     AND (attribute_not_exists(#resume.#generation) OR #resume.#generation < :max_retries)";

impl Store {
    /// Sends a failed workflow answer again (`POST /approvals/{id}/resume/retry`): one
    /// conditional update of the approval's `resume`, by `by`.
    pub async fn retry_resume(
        &self,
        tenant: &TenantId,
        id: &ApprovalId,
        by: &crate::domain::Approver,
        now: EpochSeconds,
    ) -> Result<Result<Approval, OperatorRefusal>, StoreError> {
        let values = HashMap::from([
            (":failed".to_owned(), s("failed")),
            (":pending".to_owned(), s("pending")),
            (":zero".to_owned(), n(0)),
            (":one".to_owned(), n(1)),
            (
                ":max_retries".to_owned(),
                n(crate::domain::resume::Resume::MAX_RETRIES),
            ),
            (":by".to_owned(), s(by.as_str())),
            (":now".to_owned(), epoch(now)),
        ]);
        let update = UpdateExpr::default()
            .set("#resume.#status = :pending")
            .set("#resume.#generation = if_not_exists(#resume.#generation, :zero) + :one")
            .set("#resume.#retried_by = :by")
            .set("#resume.#retried_at = :now")
            .build();
        let condition = format!("{ONLY_IF_EXISTS} AND {ONLY_IF_RESUME_FAILED}");
        let outcome = self
            .update_approval(
                tenant,
                id,
                &update,
                &condition,
                names(&[&update, &condition]),
                values,
            )
            .await?;
        Ok(match outcome {
            Ok(approval) => Ok(approval),
            Err(None) => Err(OperatorRefusal::NotFound),
            Err(Some(approval)) => Err(OperatorRefusal::WrongState(Box::new(approval))),
        })
    }
}
