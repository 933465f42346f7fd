//! A callback: delivered at least once to the subscriber (which dedupes by `webhook-id`, the
//! event id, the same on every delivery), its outcome recorded exactly once. It needs no ledger
//! item: its trail event is its record. Delivered and failed share one id, so the conditional
//! put that records one makes the other impossible; a receive first reads it (one read, a
//! fraction of a ledger begin's write), so a delivered callback is not sent again and one that
//! failed for good goes on to the DLQ. Two receives of the same callback at once may both send
//! it (the subscriber dedupes); the first outcome written is kept, unless it is a failure and
//! the other copy delivered it. The outcome's write is tried again while there is time, as an
//! attempt's end is: until it is written, the delivery is known only to this worker.

use std::time::{Duration, Instant};

use super::message::Disposition;
use super::policy::{CallOutcome, after_call, call_budget, comes_back};
use super::{Executor, Receipt};
use crate::domain::Completion;
use crate::domain::trail::EventType;
use crate::store::StoreError;

impl Executor {
    pub(super) async fn deliver_callback(
        &self,
        r: &Receipt<'_>,
    ) -> Result<Disposition, StoreError> {
        // Where its outcome is stored, delivered or failed alike.
        let Some(outcome) = r.job.ended_event(&Completion::Succeeded, 0) else {
            return Ok(Disposition::Retry);
        };
        let recorded = self.app.store.recorded_event(&outcome).await?;
        match recorded {
            Some(EventType::CallbackFailed) => {
                // Failed for good: on to the DLQ (its alarm), however many copies come back.
                self.queue.come_back_in(r.message, 0).await;
                return Ok(Disposition::Retry);
            }
            Some(_) => return Ok(Disposition::Ack),
            None => {}
        }
        if r.message.receive_count > self.app.config.job_max_attempts {
            let reason = format!(
                "not delivered within its attempts: received {} times",
                r.message.receive_count
            );
            return self
                .record_callback(r, &Completion::Failed(reason), Disposition::Retry)
                .await;
        }
        let window = Duration::from_millis(self.lease_ms as u64);
        let outcome = match (
            &r.target.url,
            call_budget(self.call_timeout, r.remaining(), window),
        ) {
            (Some(url), Some(budget)) => self.downstream.send(&r.job, url, true, budget).await,
            (Some(_), None) => {
                // Nothing sent: the message comes back to an invocation with time.
                return Ok(Disposition::Retry);
            }
            (None, _) => CallOutcome::Refused("the subscription has no URL".to_owned()),
        };
        if !matches!(outcome, CallOutcome::Succeeded) {
            crate::observe::count(crate::observe::Metric::CallbackFailed, &[]);
        }
        let (completion, disposition) = after_call(outcome, true, true, self.last_attempt(r));
        self.record_callback(r, &completion, disposition).await
    }

    /// Records a delivery's outcome, when it has one (delivered, or failed for good), then
    /// makes the message come back when the policy says.
    async fn record_callback(
        &self,
        r: &Receipt<'_>,
        completion: &Completion,
        disposition: Disposition,
    ) -> Result<Disposition, StoreError> {
        if let Some(event) = r.job.ended_event(completion, self.app.clock.now()) {
            // A delivery outdoes a failure another copy of the job recorded first: the
            // subscriber has it.
            let replaces =
                (event.kind == EventType::CallbackDelivered).then_some(EventType::CallbackFailed);
            let until = Instant::now() + Duration::from_millis(self.lease_ms as u64);
            let stored = self
                .persist(r, until, || {
                    self.app
                        .store
                        .put_event_once(&event, replaces, r.job.expires_at())
                })
                .await?;
            if event.kind == EventType::CallbackDelivered {
                tracing::debug!(
                    job = r.job.id(),
                    stored,
                    outcome = event.kind.as_str(),
                    "callback outcome"
                );
            } else {
                tracing::info!(
                    job = r.job.id(),
                    stored,
                    outcome = event.kind.as_str(),
                    "callback outcome"
                );
            }
        }
        super::count_retry(completion, disposition);
        if let Some(seconds) = comes_back(completion, disposition, r.message.receive_count) {
            self.queue.come_back_in(r.message, seconds).await;
        }
        Ok(disposition)
    }
}
