//! The stuck-execution reconciler (a Lambda run on a schedule): an approved approval whose
//! execution sat queued or running past the job's whole retry budget, its job lost, has the job
//! re-queued — nothing was sent, or the executor's ledger decides what a repeat may do — and,
//! re-queued as often as allowed, ends `failed` or `needs_reconciliation`, where an operator's
//! retry picks it up. Candidates come from the `due` index, never a scan.

use std::sync::Arc;

use super::dispatch_policy::execute_job;
use super::report::SweepReport;
use crate::App;
use crate::domain::{Approval, Completion, LedgerStatus, TenantId};
use crate::observe::{Metric, count_for};
use crate::store::{AttemptEnd, Requeue, StoreError};

/// How often one execution generation is re-queued before the reconciler ends it.
pub const REQUEUE_LIMIT: u32 = 3;

pub struct Reconciler {
    app: Arc<App>,
}

impl Reconciler {
    pub fn new(app: Arc<App>) -> Self {
        Self { app }
    }

    /// Re-queues, or ends, every execution stuck past `STUCK_EXECUTION_SECONDS`, each on its own
    /// (as [`super::Expirer::run`]): one that fails is logged and counted, the others are handled.
    pub async fn run(&self) -> Result<SweepReport, StoreError> {
        super::report::counted_run(&self.app, crate::Function::Reconciler, self.reconcile_all())
            .await
    }

    async fn reconcile_all(&self) -> Result<SweepReport, StoreError> {
        let now = self.app.clock.now();
        let cutoff = now - self.app.config.stuck_execution_seconds;
        let store = &self.app.store;
        let mut report = SweepReport::default();
        for (tenant, id) in store.stuck_candidates(cutoff).await? {
            // An approval-only type's claim, never reported: nothing to send again.
            if !id.executes_hint() {
                match store.end_unreported_claim(&tenant, &id, cutoff, now).await {
                    Ok(Ok(approval)) => {
                        tracing::error!(tenant = %tenant, approval_id = %id, trace_id = crate::observe::TraceContext::id_of_stored(approval.trace.as_deref()), "claimed execution never reported: needs reconciliation");
                        count_for(
                            tenant.as_str(),
                            Metric::ExecutionEnded,
                            &["needs_reconciliation"],
                        );
                        report.ended += 1;
                        continue;
                    }
                    // Executed by Countersign after all (an id whose hint is wrong): below.
                    Ok(Err(Some(old))) if old.executes => {}
                    Ok(Err(_)) => continue,
                    Err(e) => {
                        tracing::error!(tenant = %tenant, approval_id = %id, error = %e, "unreported claim not handled; the others go on");
                        report.failures += 1;
                        continue;
                    }
                }
            }
            let handled = match store
                .requeue_execution(&tenant, &id, cutoff, REQUEUE_LIMIT, now)
                .await
            {
                Ok(Requeue::Requeued(approval)) => {
                    tracing::warn!(tenant = %tenant, approval_id = %id, trace_id = crate::observe::TraceContext::id_of_stored(approval.trace.as_deref()), "stuck execution re-queued");
                    report.requeued += 1;
                    Ok(())
                }
                Ok(Requeue::Exhausted(approval)) => {
                    self.end(&tenant, &approval, cutoff).await.map(|ended| {
                        report.ended += usize::from(ended);
                    })
                }
                Ok(Requeue::NotStuck) => Ok(()),
                Err(e) => Err(e),
            };
            if let Err(e) = handled {
                tracing::error!(tenant = %tenant, approval_id = %id, error = %e, "stuck execution not handled; the others go on");
                report.failures += 1;
            }
        }
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
        // An execution's end makes no trail event of its own (the approval's change does).
        let key = execute_job(approval).ledger();
        let tries = approval.execution.requeues;
        // An attempt of an older generation is none of this one's.
        let entry = store
            .ledger_entry(&key)
            .await?
            .filter(|e| e.generation >= key.generation);
        let (ended, outcome) = match entry {
            None => {
                let reason = format!(
                    "never attempted: its job was lost and re-queued {tries} times without an attempt beginning"
                );
                let ended = store.fail_unbegun_job(&key, &reason, &[], now).await?;
                (ended, "failed")
            }
            Some(e) if e.generation > key.generation => (false, ""),
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
                let ender = ulid::Ulid::new().to_string();
                let ended = store
                    .end_stuck_attempt(
                        &key,
                        &e.token,
                        &AttemptEnd::by_owner(&completion, &ender),
                        cutoff,
                        now,
                    )
                    .await?;
                let outcome = match completion {
                    Completion::Failed(_) => "failed",
                    _ => "needs_reconciliation",
                };
                (ended, outcome)
            }
        };
        if ended {
            count_for(tenant.as_str(), Metric::ExecutionEnded, &[outcome]);
            tracing::error!(tenant = %tenant, approval_id = %approval.id, trace_id = crate::observe::TraceContext::id_of_stored(approval.trace.as_deref()), "stuck execution ended by the reconciler");
        }
        Ok(ended)
    }
}
