//! The expirer (the sweeper Lambda, run on a schedule): pending approvals past their expiry
//! become `expired` in the table, which emits `approval.expired` and its callback. Candidates
//! come from the `due` index, never a scan.

use std::sync::Arc;

use super::report::SweepReport;
use crate::App;
use crate::store::StoreError;

pub struct Expirer {
    app: Arc<App>,
}

impl Expirer {
    pub fn new(app: Arc<App>) -> Self {
        Self { app }
    }

    /// Moves every pending approval past its expiry to `expired`. Each candidate on its own:
    /// one that cannot be expired (an item this version cannot read, a refused write) is logged
    /// and counted, and the others are expired all the same. Only finding the candidates (one
    /// index query) fails the run.
    pub async fn run(&self) -> Result<SweepReport, StoreError> {
        super::report::counted_run(&self.app, crate::Function::Sweeper, self.expire_all()).await
    }

    async fn expire_all(&self) -> Result<SweepReport, StoreError> {
        let now = self.app.clock.now();
        let mut report = SweepReport::default();
        for (tenant, id) in self.app.store.expired_candidates(now).await? {
            match self.app.store.expire(&tenant, &id, now).await {
                Ok(Some(approval)) => {
                    tracing::info!(
                        tenant = %tenant,
                        approval_id = %id,
                        trace_id = crate::observe::TraceContext::id_of_stored(approval.trace.as_deref()),
                        "approval expired"
                    );
                    report.expired += 1;
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::error!(tenant = %tenant, approval_id = %id, error = %e, "approval not expired; the others go on");
                    report.failures += 1;
                }
            }
        }
        Ok(report)
    }
}
