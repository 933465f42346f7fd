//! What is due: pending approvals past their expiry (the sweeper) and executions that sat
//! queued or running past their bound (the reconciler), found through the sparse `due` index —
//! only items with something due carry its key, so a query reads candidates, never the table.
//! Each action is a conditional write on the approval that holds only while it is still due.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

use super::expr::names;
use super::items::{DUE_EXECUTION, DUE_EXPIRY, epoch, get_s, n, s, status_id};
use super::{Store, StoreError};
use crate::domain::{Approval, ApprovalId, EpochSeconds, ExecutionStatus, Status, TenantId};

/// How many candidates one run takes on; the rest wait for the next run.
const RUN_LIMIT: usize = 500;

/// only_if_pending_and_past_expiry: a decision or cancel that won first keeps its outcome.
const ONLY_IF_EXPIRED: &str = "#status = :pending AND #expires_at <= :now";
const EXPIRE: &str = "SET #status = :expired, #status_id = :status_id REMOVE #due_kind, #due_at";

/// only_if_stuck: approved, the execution queued or running, unchanged since the cut-off.
const ONLY_IF_STUCK: &str = "#status = :approved AND #execution.#status IN (:queued, :running) \
     AND #due_kind = :execution_due AND #due_at <= :cutoff";
/// ... and not re-queued too often already.
const ONLY_IF_REQUEUES_LEFT: &str =
    "(attribute_not_exists(#execution.#requeues) OR #execution.#requeues < :limit)";
const REQUEUE: &str =
    "SET #execution.#requeues = if_not_exists(#execution.#requeues, :zero) + :one, #due_at = :now";

/// How a stuck execution was handled.
#[derive(Debug, Clone, PartialEq)]
pub enum Requeue {
    /// Its execute job will be sent again (the dispatcher sees the change).
    Requeued,
    /// Re-queued as often as allowed: the approval as it is, for the caller to end it.
    Exhausted(Box<Approval>),
    /// No longer stuck (it moved on since it was found).
    NotStuck,
}

fn key_of(item: &HashMap<String, AttributeValue>) -> Option<(TenantId, ApprovalId)> {
    let pk = get_s(item, "pk").ok()?;
    let (tenant, id) = pk.split_once('#')?;
    Some((TenantId::parse(tenant).ok()?, ApprovalId::parse(id).ok()?))
}

impl Store {
    /// The approvals with something of `kind` due at or before `until`, oldest first.
    async fn due(
        &self,
        kind: &str,
        until: EpochSeconds,
    ) -> Result<Vec<(TenantId, ApprovalId)>, StoreError> {
        let mut found = Vec::new();
        let mut start = None;
        loop {
            let output = self
                .client
                .query()
                .table_name(&self.tables.approvals)
                .index_name("due")
                .key_condition_expression("#due_kind = :kind AND #due_at <= :until")
                .expression_attribute_names("#due_kind", "due_kind")
                .expression_attribute_names("#due_at", "due_at")
                .expression_attribute_values(":kind", s(kind))
                .expression_attribute_values(":until", n(until))
                .set_exclusive_start_key(start)
                .limit(100)
                .send()
                .await
                .map_err(|e| StoreError::from_sdk("Query", e))?;
            found.extend(output.items().iter().filter_map(key_of));
            start = output.last_evaluated_key().cloned();
            if start.is_none() || found.len() >= RUN_LIMIT {
                found.truncate(RUN_LIMIT);
                return Ok(found);
            }
        }
    }

    /// Pending approvals past their expiry.
    pub async fn expired_candidates(
        &self,
        now: EpochSeconds,
    ) -> Result<Vec<(TenantId, ApprovalId)>, StoreError> {
        self.due(DUE_EXPIRY, now).await
    }

    /// Executions queued or running, unchanged since `cutoff`.
    pub async fn stuck_candidates(
        &self,
        cutoff: EpochSeconds,
    ) -> Result<Vec<(TenantId, ApprovalId)>, StoreError> {
        self.due(DUE_EXECUTION, cutoff).await
    }

    /// Moves a pending approval past its expiry to `expired`; false when it was not (decided,
    /// cancelled or expired meanwhile).
    pub async fn expire(
        &self,
        tenant: &TenantId,
        id: &ApprovalId,
        now: EpochSeconds,
    ) -> Result<bool, StoreError> {
        let values = HashMap::from([
            (":pending".to_owned(), s(Status::Pending.as_str())),
            (":expired".to_owned(), s(Status::Expired.as_str())),
            (":status_id".to_owned(), status_id(Status::Expired, id)),
            (":now".to_owned(), epoch(now)),
        ]);
        let condition = format!("attribute_exists(#pk) AND {ONLY_IF_EXPIRED}");
        let outcome = self
            .update_approval(
                tenant,
                id,
                EXPIRE,
                &condition,
                names(&[EXPIRE, &condition]),
                values,
            )
            .await?;
        Ok(outcome.is_ok())
    }

    /// Re-queues a stuck execution's job (at most `limit` times per generation).
    pub async fn requeue_execution(
        &self,
        tenant: &TenantId,
        id: &ApprovalId,
        cutoff: EpochSeconds,
        limit: u32,
        now: EpochSeconds,
    ) -> Result<Requeue, StoreError> {
        let values = HashMap::from([
            (":approved".to_owned(), s(Status::Approved.as_str())),
            (":queued".to_owned(), s(ExecutionStatus::Queued.as_str())),
            (":running".to_owned(), s(ExecutionStatus::Running.as_str())),
            (":execution_due".to_owned(), s(DUE_EXECUTION)),
            (":cutoff".to_owned(), epoch(cutoff)),
            (":limit".to_owned(), n(limit)),
            (":zero".to_owned(), n(0)),
            (":one".to_owned(), n(1)),
            (":now".to_owned(), epoch(now)),
        ]);
        let condition =
            format!("attribute_exists(#pk) AND {ONLY_IF_STUCK} AND {ONLY_IF_REQUEUES_LEFT}");
        let outcome = self
            .update_approval(
                tenant,
                id,
                REQUEUE,
                &condition,
                names(&[REQUEUE, &condition]),
                values,
            )
            .await?;
        Ok(match outcome {
            Ok(_) => Requeue::Requeued,
            Err(Some(old))
                if old.status == Status::Approved
                    && matches!(
                        old.execution.status,
                        ExecutionStatus::Queued | ExecutionStatus::Running
                    )
                    && old.execution.requeues >= limit =>
            {
                Requeue::Exhausted(Box::new(old))
            }
            Err(_) => Requeue::NotStuck,
        })
    }
}
