//! What is due: pending approvals past their expiry (the expirer) and executions that sat
//! queued or running past their bound (the reconciler), found through the sparse `due` index —
//! only items with something due carry its key (see [`super::indexes`]), so a query reads
//! candidates, never the table. Each action is a conditional write on the approval that holds
//! only while it is still due.

use std::collections::HashMap;

use super::attr::{epoch, get_s, n, s};
use super::client::Store;
use super::conditions::ONLY_IF_EXISTS;
use super::error::StoreError;
use super::expr::{UpdateExpr, names};
use super::indexes::{DUE_EXECUTION, DUE_EXPIRY, Indexed};
use super::keys::parse_approval_key;
use crate::domain::{Approval, ApprovalId, EpochSeconds, ExecutionStatus, Status, TenantId};

/// How many candidates one run takes on; the rest wait for the next run.
const RUN_LIMIT: usize = 500;

/// only_if_pending_and_past_expiry: a decision or cancel that won first keeps its outcome.
const ONLY_IF_EXPIRED: &str = "#status = :pending AND #expires_at <= :now";

/// only_if_stuck: approved, the execution queued or running, unchanged since the cut-off; and
/// executed by Countersign (an approval-only type's claim has no job to send again).
const ONLY_IF_STUCK: &str = "#status = :approved AND #execution.#status IN (:queued, :running) \
     AND #due_kind = :execution_due AND #due_at <= :cutoff AND attribute_not_exists(#approval_only)";
/// ... and not re-queued too often already.
const ONLY_IF_REQUEUES_LEFT: &str =
    "(attribute_not_exists(#execution.#requeues) OR #execution.#requeues < :limit)";
const REQUEUE: &str = "#execution.#requeues = if_not_exists(#execution.#requeues, :zero) + :one";

/// How a stuck execution was handled.
#[derive(Debug, Clone, PartialEq)]
pub enum Requeue {
    /// Its execute job will be sent again (the dispatcher sees the change): the approval now.
    Requeued(Box<Approval>),
    /// Re-queued as often as allowed: the approval as it is, for the caller to end it.
    Exhausted(Box<Approval>),
    /// No longer stuck (it moved on since it was found).
    NotStuck,
}

impl Store {
    /// The approvals with something of `kind` due at or before `until`, oldest first.
    pub(super) async fn due(
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
            found.extend(
                output
                    .items()
                    .iter()
                    .filter_map(|item| parse_approval_key(get_s(item, "pk").ok()?)),
            );
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
    ) -> Result<Option<Approval>, StoreError> {
        let mut values = HashMap::from([
            (":pending".to_owned(), s(Status::Pending.as_str())),
            (":expired".to_owned(), s(Status::Expired.as_str())),
            (":now".to_owned(), epoch(now)),
        ]);
        let expired = Indexed::after(id, Status::Expired, true, ExecutionStatus::NotStarted, now);
        let update = expired
            .apply(
                UpdateExpr::default().set("#status = :expired"),
                &mut values,
                self.retention,
            )
            .build();
        let condition = format!("{ONLY_IF_EXISTS} AND {ONLY_IF_EXPIRED}");
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
        Ok(outcome.ok())
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
        let mut values = HashMap::from([
            (":approved".to_owned(), s(Status::Approved.as_str())),
            (":queued".to_owned(), s(ExecutionStatus::Queued.as_str())),
            (":running".to_owned(), s(ExecutionStatus::Running.as_str())),
            (":execution_due".to_owned(), s(DUE_EXECUTION)),
            (":cutoff".to_owned(), epoch(cutoff)),
            (":limit".to_owned(), n(limit)),
            (":zero".to_owned(), n(0)),
            (":one".to_owned(), n(1)),
        ]);
        // Still queued or running (its condition says so): due again from now, when the job
        // it sends again is expected.
        let requeued = Indexed::after(id, Status::Approved, false, ExecutionStatus::Queued, now);
        let update = requeued
            .apply(
                UpdateExpr::default().set(REQUEUE),
                &mut values,
                self.retention,
            )
            .build();
        let condition = format!("{ONLY_IF_EXISTS} AND {ONLY_IF_STUCK} AND {ONLY_IF_REQUEUES_LEFT}");
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
            Ok(new) => Requeue::Requeued(Box::new(new)),
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
