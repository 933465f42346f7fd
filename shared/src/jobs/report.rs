//! What one run of a scheduled function (the expirer, the reconciler) did.

/// What one run did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SweepReport {
    pub expired: usize,
    pub requeued: usize,
    pub ended: usize,
    /// GitHub deliveries asked for again.
    pub redelivered: usize,
    /// Run ends the clocks could not place, placed by GitHub: rounds closed (their pending
    /// approvals cancelled) as the ended attempt's.
    pub run_ends_closed: usize,
    /// Reminders sent and escalation steps applied (each one write).
    pub reminded: usize,
    pub escalated: usize,
    /// Candidates whose handling failed (logged with their id): the others were handled all
    /// the same, and a failed one is a candidate again next run.
    pub failures: usize,
}

/// Runs one scheduled run as one invocation of `function`, its report counted.
pub(super) async fn counted_run(
    app: &crate::App,
    function: crate::Function,
    run: impl Future<Output = Result<SweepReport, crate::store::StoreError>>,
) -> Result<SweepReport, crate::store::StoreError> {
    // Boxed: the run's future is deep enough to pass the compiler's layout limit.
    let run = Box::pin(async {
        let report = run.await;
        if let Ok(report) = &report {
            report.count();
        }
        report
    });
    app.metrics.invocation(function.as_str(), run).await
}

impl SweepReport {
    /// `SweepItems` (what the run acted on) and `SweepFailures`.
    pub fn count(&self) {
        use crate::observe::{Metric, count_n};
        count_n(
            Metric::SweepItems,
            &[],
            self.expired
                + self.requeued
                + self.ended
                + self.redelivered
                + self.reminded
                + self.escalated,
        );
        count_n(Metric::SweepFailures, &[], self.failures);
    }

    /// The scheduled function's answer: an error when any candidate failed, so the function's
    /// `Errors` metric (and its alarm) sees it, after every other candidate was handled.
    pub fn into_result(self) -> Result<Self, SweepFailed> {
        if self.failures == 0 {
            Ok(self)
        } else {
            Err(SweepFailed(self))
        }
    }
}

/// A run in which some candidates failed (see [`SweepReport::into_result`]).
#[derive(Debug, thiserror::Error)]
#[error("{} candidates failed ({} expired, {} re-queued, {} ended)", .0.failures, .0.expired, .0.requeued, .0.ended)]
pub struct SweepFailed(pub SweepReport);
