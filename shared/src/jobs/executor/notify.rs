//! A notify job: an approval's notifications to its approvers, each by a call of its own, in one
//! attempt whose end records the approvers done so that the next attempt calls only the others.

use std::time::Duration;

use super::message::Disposition;
use super::policy::{CallOutcome, comes_back};
use super::{Attempt, Executor, Receipt, policy};
use crate::domain::{Approver, Completion};
use crate::jobs::job::NotifyJob;
use crate::observe::{self, Metric};
use crate::store::{AttemptEnd, LedgerEntry, StoreError};

impl Executor {
    /// An approval's notifications, in the attempt this worker began (`left`: the ledger as
    /// the begin left it): every approver not done yet is called at once, each by a call of its
    /// own with its own key (the notifier dedupes by it). The end records, with their events in
    /// one item, the approvers done — sent, or refused for good — and leaves the others to the
    /// next attempt, which calls only them.
    pub(super) async fn notify(
        &self,
        r: &Receipt<'_>,
        job: &NotifyJob,
        attempt: &Attempt,
        left: Option<&LedgerEntry>,
        budget: Option<Duration>,
    ) -> Result<Disposition, StoreError> {
        let done = |approver: &&Approver| {
            left.is_some_and(|e| e.notified.iter().any(|d| d == approver.as_str()))
        };
        let remaining: Vec<&Approver> = job.approvers.iter().filter(|a| !done(a)).collect();
        let outcomes: Vec<CallOutcome> = match (&r.target.url, budget) {
            (Some(url), Some(budget)) => {
                let calls = remaining
                    .iter()
                    .map(|approver| self.downstream.notify(&r.job, job, approver, url, budget));
                futures::future::join_all(calls).await
            }
            (Some(_), None) => remaining
                .iter()
                .map(|_| {
                    CallOutcome::Retryable(
                        "not sent: too little of the invocation or the lease was left after the begin"
                            .to_owned(),
                    )
                })
                .collect(),
            (None, _) => remaining
                .iter()
                .map(|_| CallOutcome::Refused("no notifier URL".to_owned()))
                .collect(),
        };
        fail::fail_point!("notify::after_downstream");
        let last = self.last_attempt(r);
        let mut finished: Vec<(&Approver, Result<(), String>)> = Vec::new();
        let mut waiting: Option<String> = None;
        for (approver, outcome) in remaining.iter().zip(outcomes) {
            if !matches!(outcome, CallOutcome::Succeeded) {
                observe::count(Metric::NotificationFailed, &[]);
            }
            match policy::after_call(outcome, true, true, last).0 {
                Completion::Succeeded => finished.push((approver, Ok(()))),
                Completion::Failed(error) => finished.push((approver, Err(error))),
                Completion::RetryWait(error)
                | Completion::Unknown(error)
                | Completion::NeedsReconciliation(error) => {
                    waiting.get_or_insert(error);
                }
            }
        }
        let not_notified: Vec<String> = finished
            .iter()
            .filter(|(_, outcome)| outcome.is_err())
            .map(|(approver, _)| approver.as_str().to_owned())
            .collect();
        let failed_before = left.is_some_and(|e| !e.not_notified.is_empty());
        // A refused notification is lost to its approver: the job ends failed, its message on
        // to the DLQ, once every approver is done.
        let (completion, disposition) = match waiting {
            Some(error) => (Completion::RetryWait(error), Disposition::Retry),
            None if !not_notified.is_empty() || failed_before => (
                Completion::Failed(format!(
                    "not every approver was notified: {}",
                    finished
                        .iter()
                        .find_map(|(_, outcome)| outcome.as_ref().err())
                        .map_or("refused in an earlier attempt", String::as_str)
                )),
                Disposition::Retry,
            ),
            None => (Completion::Succeeded, Disposition::Ack),
        };
        let number = left.map_or(1, |e| e.attempts);
        let events = job.events(&finished, number, self.app.clock.now());
        let notified: Vec<String> = finished
            .iter()
            .map(|(approver, _)| approver.as_str().to_owned())
            .collect();
        let end = AttemptEnd {
            events: &events,
            notified: &notified,
            not_notified: &not_notified,
            ..AttemptEnd::by_owner(&completion, &attempt.token)
        };
        let back = comes_back(&completion, disposition, r.message.receive_count);
        self.finish(r, attempt, end, disposition, back).await
    }
}
