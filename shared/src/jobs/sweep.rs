//! The scheduled functions: the expiry sweeper (pending approvals past their expiry become
//! `expired` in the table, which emits `approval.expired` and its callback) and the
//! stuck-execution reconciler (an approved approval whose execution sat queued or running past
//! the job's whole retry budget, its job lost, has the job re-queued — nothing was sent, or the
//! executor's ledger decides what a repeat may do — and, re-queued as often as allowed, ends
//! `failed` or `needs_reconciliation`, where an operator's retry picks it up).

use std::sync::Arc;

use super::job::execute_job;
use crate::App;
use crate::domain::{Approval, TenantId};
use crate::store::{Completion, LedgerStatus, Requeue, StoreError};

/// How often one execution generation is re-queued before the reconciler ends it.
pub const REQUEUE_LIMIT: u32 = 3;

/// What one run did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SweepReport {
    pub expired: usize,
    pub requeued: usize,
    pub ended: usize,
}

pub struct Sweeper {
    app: Arc<App>,
}

impl Sweeper {
    pub fn new(app: Arc<App>) -> Self {
        Self { app }
    }

    /// Moves every pending approval past its expiry to `expired`.
    pub async fn expire(&self) -> Result<usize, StoreError> {
        let now = self.app.clock.now();
        let mut expired = 0;
        for (tenant, id) in self.app.store.expired_candidates(now).await? {
            if self.app.store.expire(&tenant, &id, now).await? {
                tracing::info!(tenant = %tenant, approval_id = %id, "approval expired");
                expired += 1;
            }
        }
        Ok(expired)
    }

    /// Re-queues, or ends, every execution stuck past `STUCK_EXECUTION_SECONDS`.
    pub async fn reconcile(&self) -> Result<SweepReport, StoreError> {
        let now = self.app.clock.now();
        let cutoff = now - self.app.config.stuck_execution_seconds;
        let store = &self.app.store;
        let mut report = SweepReport::default();
        for (tenant, id) in store.stuck_candidates(cutoff).await? {
            match store
                .requeue_execution(&tenant, &id, cutoff, REQUEUE_LIMIT, now)
                .await?
            {
                Requeue::Requeued => {
                    tracing::warn!(tenant = %tenant, approval_id = %id, "stuck execution re-queued");
                    report.requeued += 1;
                }
                Requeue::Exhausted(approval) => {
                    if self.end(&tenant, &approval, cutoff).await? {
                        report.ended += 1;
                    }
                }
                Requeue::NotStuck => {}
            }
        }
        Ok(report)
    }

    /// Both, as one scheduled run (the local runner's).
    pub async fn run(&self) -> Result<SweepReport, StoreError> {
        let expired = self.expire().await?;
        let mut report = self.reconcile().await?;
        report.expired = expired;
        Ok(report)
    }

    /// Ends an execution re-queued as often as allowed, from what its ledger says.
    async fn end(
        &self,
        tenant: &TenantId,
        approval: &Approval,
        cutoff: i64,
    ) -> Result<bool, StoreError> {
        let store = &self.app.store;
        let now = self.app.clock.now();
        let job = execute_job(approval);
        let tries = approval.execution.requeues;
        let entry = store.ledger_entry(&job).await?;
        let ended = match entry {
            None => {
                let reason = format!(
                    "never attempted: its job was lost and re-queued {tries} times without an attempt beginning"
                );
                store.fail_unbegun_job(&job, &reason, now).await?
            }
            Some(e) if e.generation < job.generation() => {
                let reason = format!(
                    "never attempted: its job was lost and re-queued {tries} times without an attempt beginning"
                );
                store.fail_unbegun_job(&job, &reason, now).await?
            }
            Some(e) if e.generation > job.generation() => false,
            Some(e) => {
                let completion = match e.status {
                    LedgerStatus::RetryWait => Completion::Failed(format!(
                        "gave up: the job was lost after attempt {} ({}) and re-queued {tries} times",
                        e.attempts,
                        e.last_error.as_deref().unwrap_or("unknown error")
                    )),
                    LedgerStatus::Unknown => Completion::NeedsReconciliation(format!(
                        "the outcome of attempt {} is unknown ({}) and its job was lost (re-queued {tries} times)",
                        e.attempts,
                        e.last_error.as_deref().unwrap_or("no answer")
                    )),
                    LedgerStatus::InProgress if e.lease_until_ms <= self.app.clock.now_millis() => {
                        Completion::NeedsReconciliation(format!(
                            "the worker of attempt {} stopped and its job was lost (re-queued {tries} times): outcome unknown",
                            e.attempts
                        ))
                    }
                    _ => return Ok(false),
                };
                store
                    .end_stuck_attempt(&job, &e.token, &completion, cutoff, now)
                    .await?
            }
        };
        if ended {
            tracing::error!(tenant = %tenant, approval_id = %approval.id, "stuck execution ended by the reconciler");
        }
        Ok(ended)
    }
}
