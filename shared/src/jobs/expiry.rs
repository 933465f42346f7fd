//! The expirer (the sweeper Lambda, run on a schedule): pending approvals past their expiry
//! become `expired` in the table, which emits `approval.expired` and its callback. Candidates
//! come from the `due` index, never a scan. The same run asks GitHub again for the App
//! deliveries that never arrived (`redelivery.rs`), every `GITHUB_REDELIVERY_SECONDS`.

use std::sync::Arc;

use std::time::Duration;

use super::report::SweepReport;
use crate::App;
use crate::github::api::GithubApi;
use crate::store::StoreError;

pub struct Expirer {
    app: Arc<App>,
    github: GithubApi,
}

/// A call to GitHub's API while sweeping its deliveries.
const GITHUB_CALL_TIMEOUT: Duration = Duration::from_secs(10);

impl Expirer {
    pub fn new(app: Arc<App>) -> Self {
        // A client without TLS roots or a proxy it cannot build is no client for GitHub either:
        // the sweep of its deliveries then fails (counted), expiry goes on.
        let github =
            GithubApi::new(GITHUB_CALL_TIMEOUT).unwrap_or_else(|_| GithubApi::unconfigured());
        Self { app, github }
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
                    tracing::debug!(
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
        // Reminders and escalation steps (after expiry: one due now expires instead).
        if let Err(e) = super::stall::sweep(&self.app, &mut report).await {
            tracing::error!(error = %e, "reminders and escalation not swept; again next period");
            report.failures += 1;
        }
        if !self.app.secrets().github.is_empty() {
            // Boxed: GitHub's calls make a deep future, kept off the stack of the caller's.
            match Box::pin(super::redelivery::sweep(&self.app, &self.github)).await {
                Ok(done) => {
                    report.redelivered += done.asked;
                    report.failures += done.failures;
                }
                Err(e) => {
                    tracing::error!(error = %e, "GitHub deliveries not swept; expiry was done");
                    report.failures += 1;
                }
            }
            match Box::pin(super::run_ends::settle(&self.app, &self.github)).await {
                Ok(settled) => {
                    report.run_ends_closed += settled.closed;
                    report.failures += settled.failures;
                }
                Err(e) => {
                    tracing::error!(error = %e, "unclear run ends not settled; again next period");
                    report.failures += 1;
                }
            }
        }
        Ok(report)
    }
}
