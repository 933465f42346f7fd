//! What a receive does when it cannot simply begin an attempt: the ledger refused its begin
//! (another worker holds the job, it already ended, or an attempt's outcome is unknown), or the
//! job is out of attempts. An unknown outcome is never settled by calling again blindly: the
//! target is asked first, if it can say, or the execution goes to an operator.

use std::time::Duration;

use super::message::Disposition;
use super::policy::{after_status, call_budget, comes_back, seconds_from_ms};
use super::{Executor, Receipt};
use crate::domain::trail::TrailEvent;
use crate::domain::{Approver, Completion, LedgerStatus};
use crate::jobs::job::Job;
use crate::store::{AttemptEnd, LedgerEntry, StoreError};

impl Executor {
    /// A begin that did not start an attempt: tell from the ledger what to do with the message.
    pub(super) async fn refused(
        &self,
        r: &Receipt<'_>,
        entry: Option<LedgerEntry>,
    ) -> Result<Disposition, StoreError> {
        let Some(entry) = entry else {
            // The approval moved on to a newer execution generation: this job is stale.
            return Ok(Disposition::Ack);
        };
        if entry.generation > r.ledger.generation {
            return Ok(Disposition::Ack);
        }
        let now_ms = self.app.clock.now_millis();
        match entry.status {
            // A notification, or a workflow's answer, that failed for good goes on to the DLQ
            // (its alarm), however many copies of its job come back. (A callback has no ledger
            // item: `callback.rs`.) A workflow that gave up is answered `failed` and its message
            // deleted there and then: none comes back to page.
            LedgerStatus::Failed if matches!(r.job, Job::Notify(_) | Job::Resume(_)) => {
                self.queue.come_back_in(r.message, 0).await;
                Ok(Disposition::Retry)
            }
            LedgerStatus::Succeeded | LedgerStatus::Failed | LedgerStatus::NeedsReconciliation => {
                Ok(Disposition::Ack)
            }
            LedgerStatus::InProgress if entry.lease_until_ms > now_ms => Ok(Disposition::Retry),
            // An attempt whose outcome nobody knows yet (its call ended in doubt, or its last
            // answer was "pending", or its worker stopped after it may have called the target):
            // ask the target.
            LedgerStatus::Unknown | LedgerStatus::InProgress if r.target.status.is_some() => {
                let error = match entry.status {
                    LedgerStatus::Unknown => entry
                        .last_error
                        .clone()
                        .unwrap_or_else(|| "outcome unknown".to_owned()),
                    _ => "the worker stopped after calling the target".to_owned(),
                };
                self.settle(r, &entry, &error, self.last_attempt(r)).await
            }
            LedgerStatus::InProgress if !r.target.idempotent => {
                // Its worker stopped after it may have called a target that does not dedupe:
                // calling again could do the action twice. Hand it to an operator.
                let completion = Completion::NeedsReconciliation(
                    "the worker stopped after calling the target, which is not idempotent: outcome unknown"
                        .to_owned(),
                );
                let ender = ulid::Ulid::new().to_string();
                self.write_end(r, &entry.token, AttemptEnd::by_owner(&completion, &ender))
                    .await?;
                Ok(Disposition::Ack)
            }
            // A takeover raced another worker's, or a retry is not due yet: come back later.
            LedgerStatus::InProgress | LedgerStatus::RetryWait | LedgerStatus::Unknown => {
                Ok(Disposition::Retry)
            }
        }
    }

    /// Settles an attempt whose outcome is unknown, found in the ledger (`entry`), by asking the
    /// target's status URL; records the question, its answer and what follows in one write.
    /// Not before the target's status delay has passed since the call ended (for an attempt
    /// whose worker stopped, since its lease ended, before which the call had to end): until
    /// then the message comes back when it has, and nothing is asked.
    async fn settle(
        &self,
        r: &Receipt<'_>,
        entry: &LedgerEntry,
        error: &str,
        last_attempt: bool,
    ) -> Result<Disposition, StoreError> {
        let Some(status) = &r.target.status else {
            return Ok(Disposition::Retry);
        };
        // An attempt left `unknown` by a version that kept no call end: its last write, which
        // came after the call ended.
        let call_ended_ms = match entry.status {
            LedgerStatus::InProgress => entry.lease_until_ms,
            _ => entry
                .call_ended_ms
                .unwrap_or(entry.updated_at.saturating_mul(1000)),
        };
        let ask_from_ms = call_ended_ms + status.delay_ms;
        let now_ms = self.app.clock.now_millis();
        if now_ms < ask_from_ms {
            self.queue
                .come_back_in(r.message, seconds_from_ms(ask_from_ms - now_ms))
                .await;
            return Ok(Disposition::Retry);
        }
        let lease = Duration::from_millis(self.lease_ms as u64);
        let budget = call_budget(self.call_timeout, r.remaining(), lease);
        let answer = self.downstream.ask(&r.job, &status.url, budget).await;
        // A `not_found` asked too soon proves nothing (the clock of another worker may differ).
        let believed = self.app.clock.now_millis() >= ask_from_ms;
        let (completion, disposition) =
            after_status(&answer, error, r.target.idempotent, last_attempt, believed);
        let check = answer.check(self.app.clock.now());
        if budget.is_some() {
            crate::observe::count(
                crate::observe::Metric::StatusQuery,
                &[check.answer.as_str()],
            );
        }
        let ender = ulid::Ulid::new().to_string();
        let end = AttemptEnd {
            check: Some(&check),
            // Still the call that ended in doubt, if the target is asked again.
            call_ended_ms: entry.call_ended_ms.or(Some(call_ended_ms)),
            ..AttemptEnd::by_owner(&completion, &ender)
        };
        if !self.write_end(r, &entry.token, end).await? {
            // Someone else settled it meanwhile: the next receive reads what they wrote.
            return Ok(Disposition::Retry);
        }
        tracing::info!(job = r.job.id(), answer = ?answer, attempt_outcome = ?completion, "unknown outcome settled by the target's status");
        let back = match completion {
            // Safe to call again (the target never took it): a new attempt, now.
            Completion::RetryWait(_) => Some(0),
            _ => comes_back(&completion, disposition, r.message.receive_count),
        };
        if let Some(seconds) = back {
            self.queue.come_back_in(r.message, seconds).await;
        }
        Ok(disposition)
    }

    /// The events of a job given up (`entry`: its ledger, if an attempt began): a notify job's
    /// approvers not done yet, each failed, in one item after the last attempt's; any other
    /// job's failure as its completion makes it.
    fn failed_events(
        &self,
        r: &Receipt<'_>,
        entry: Option<&LedgerEntry>,
        reason: &str,
    ) -> Vec<TrailEvent> {
        let now = self.app.clock.now();
        let Job::Notify(job) = &r.job else {
            return r
                .job
                .ended_event(&Completion::Failed(reason.to_owned()), now)
                .into_iter()
                .collect();
        };
        let done = |approver: &Approver| {
            entry.is_some_and(|e| e.notified.iter().any(|d| d == approver.as_str()))
        };
        let failed: Vec<(&Approver, Result<(), String>)> = job
            .approvers
            .iter()
            .filter(|a| !done(a))
            .map(|a| (a, Err(reason.to_owned())))
            .collect();
        // After the last attempt's own end (each attempt ends once).
        job.events(&failed, entry.map_or(0, |e| e.attempts) + 1, now)
    }

    /// A message received more often than `JOB_MAX_ATTEMPTS` (the queue's redrive policy allows
    /// a few more receives, for this): make no attempt, but make sure the execution does not
    /// stay `running` or `queued` — an attempt whose worker died during the last allowed
    /// receive is recorded as failed (or unknown, for a target that is not idempotent) — then
    /// let the message go on to the DLQ.
    pub(super) async fn give_up(&self, r: &Receipt<'_>) -> Result<Disposition, StoreError> {
        let store = &self.app.store;
        let entry = store.ledger_entry(&r.ledger).await?;
        let Some(entry) = entry.filter(|e| e.generation >= r.ledger.generation) else {
            // No attempt of this job ever began (the executor could not start, or kept
            // crashing before its begin): nothing was sent, so the execution is `failed` —
            // which an operator's retry resumes — instead of `queued` for ever.
            let reason = format!(
                "never attempted: the job was received {} times without an attempt beginning",
                r.message.receive_count
            );
            let now = self.app.clock.now();
            let events = self.failed_events(r, None, &reason);
            let recorded = store
                .fail_unbegun_job(&r.ledger, &reason, &events, now)
                .await?;
            tracing::error!(
                job = r.job.id(),
                recorded,
                "job never began within its attempts; recorded as failed, on to the DLQ"
            );
            self.queue.come_back_in(r.message, 0).await;
            return Ok(Disposition::Retry);
        };
        if entry.generation > r.ledger.generation || entry.status == LedgerStatus::Succeeded {
            return Ok(Disposition::Ack);
        }
        let abandoned = entry.status == LedgerStatus::InProgress
            && entry.lease_until_ms <= self.app.clock.now_millis();
        // The last chance to learn what became of an unknown outcome: ask the target.
        if r.target.status.is_some() && (entry.status == LedgerStatus::Unknown || abandoned) {
            let error = entry
                .last_error
                .clone()
                .filter(|_| entry.status == LedgerStatus::Unknown)
                .unwrap_or_else(|| "the worker stopped during the last allowed attempt".to_owned());
            return self.settle(r, &entry, &error, true).await;
        }
        let completion = match entry.status {
            LedgerStatus::InProgress if !abandoned => return Ok(Disposition::Retry),
            LedgerStatus::InProgress if !r.target.idempotent => Some(Completion::NeedsReconciliation(
                "the worker stopped during the last allowed attempt, after it may have called the target, which is not idempotent: outcome unknown".to_owned(),
            )),
            LedgerStatus::InProgress => Some(Completion::Failed(
                "the worker stopped during the last allowed attempt; its outcome is unknown (retry is safe: same key)".to_owned(),
            )),
            LedgerStatus::Unknown => Some(Completion::NeedsReconciliation(format!(
                "outcome unknown after the last allowed attempt: {}",
                entry.last_error.as_deref().unwrap_or("unknown error")
            ))),
            LedgerStatus::RetryWait => Some(Completion::Failed(format!(
                "gave up after {} attempts: {}",
                entry.attempts,
                entry.last_error.as_deref().unwrap_or("unknown error")
            ))),
            LedgerStatus::Succeeded | LedgerStatus::Failed | LedgerStatus::NeedsReconciliation => None,
        };
        if let Some(completion) = completion {
            let ender = ulid::Ulid::new().to_string();
            let events = match &completion {
                Completion::Failed(reason) => self.failed_events(r, Some(&entry), reason),
                _ => Vec::new(),
            };
            let end = AttemptEnd {
                events: &events,
                // Its events name whom the entry as read had not notified.
                found: Some(entry.status),
                ..AttemptEnd::by_owner(&completion, &ender)
            };
            self.write_end(r, &entry.token, end).await?;
            tracing::warn!(job = r.job.id(), attempt_outcome = ?completion, "job out of attempts");
        }
        self.queue.come_back_in(r.message, 0).await;
        Ok(Disposition::Retry)
    }
}
