//! A GitHub job's own side: what GitHub's answer to a deployment's review means for the job
//! (GitHub's API names no round, so its refusal of a second answer is read against the ledger),
//! and an answer whose round closed before it was sent. Its call goes the execute path's way
//! (`execute.rs`).

use super::message::Disposition;
use super::policy::CallOutcome;
use super::{Executor, Receipt, count_outcome, downstream};
use crate::domain::trail::TrailEvent;
use crate::domain::{Completion, LedgerStatus};
use crate::store::{AttemptEnd, StoreError};

impl Executor {
    /// What GitHub's answer to a deployment's review means for its job. GitHub's API names no
    /// round, so its own refusal of a second answer (422, nothing waits for a review) is what
    /// keeps an answer from landing twice: after an earlier attempt that may have landed (the
    /// ledger holds one before this that did not end `not sent`; or an operator's retry), a
    /// 422 is that attempt's success; when none may have (the first, or only attempts that never
    /// sent), the run no longer waits (cancelled, or reviewed in GitHub itself).
    pub(super) async fn github_outcome(
        &self,
        r: &Receipt<'_>,
        answered: downstream::Answered,
        wait: &mut Option<u64>,
    ) -> Result<CallOutcome, StoreError> {
        use downstream::Answered;
        Ok(match answered {
            Answered::Taken => CallOutcome::Succeeded,
            Answered::NothingPending(why) => {
                let earlier = r.job.generation() > 0
                    || self
                        .app
                        .store
                        .ledger_entry(&r.ledger)
                        .await?
                        .is_some_and(|e| e.attempts > 1 + e.unsent);
                if earlier {
                    CallOutcome::Succeeded
                } else {
                    CallOutcome::Refused(why)
                }
            }
            Answered::Refused(why) => CallOutcome::Refused(why),
            Answered::Retryable { why, retry_after } => {
                *wait = retry_after;
                CallOutcome::Retryable(why)
            }
            Answered::Unknown(why) => CallOutcome::Unknown(why),
        })
    }

    /// A GitHub answer whose round is closed to it: a newer round opened (a re-run, or a later
    /// job of the run, after this answer began), which its own approval answers; or the run
    /// ended (nothing waits). Nothing is sent; the job ends `failed` with the reason, never sent
    /// blindly (GitHub's API names no round: a late answer would decide the newer one).
    pub(super) async fn superseded(&self, r: &Receipt<'_>) -> Result<Disposition, StoreError> {
        let reason = format!(
            "{} — a newer round of this run and environment opened (a re-run, or a later job \
             after this answer began), which its own approval answers, or the run ended and \
             nothing waits",
            crate::github::api::ROUND_CLOSED
        );
        let reason = reason.as_str();
        let entry = self.app.store.ledger_entry(&r.ledger).await?;
        let begun = entry
            .as_ref()
            .filter(|e| e.generation == r.ledger.generation);
        match begun {
            None => {
                let completion = Completion::Failed(reason.to_owned());
                let now = self.app.clock.now();
                let event: Vec<TrailEvent> =
                    r.job.ended_event(&completion, now).into_iter().collect();
                let written = self
                    .app
                    .store
                    .fail_unbegun_job(&r.ledger, reason, &event, now)
                    .await?;
                tracing::warn!(job = r.job.id(), written, "{reason}");
                if written {
                    count_outcome(&completion);
                }
                Ok(Disposition::Ack)
            }
            // Its worker holds it still: it ends it.
            Some(e)
                if e.status == LedgerStatus::InProgress
                    && e.lease_until_ms > self.app.clock.now_millis() =>
            {
                Ok(Disposition::Retry)
            }
            // An earlier attempt began and did not end (its worker stopped, or a retry was
            // due): ended by its token, its outcome not reported as success.
            Some(e)
                if matches!(
                    e.status,
                    LedgerStatus::InProgress | LedgerStatus::RetryWait | LedgerStatus::Unknown
                ) =>
            {
                let completion = Completion::Failed(format!(
                    "{reason} (whether an earlier attempt reached GitHub is not known)"
                ));
                let ender = ulid::Ulid::new().to_string();
                self.write_end(r, &e.token, AttemptEnd::by_owner(&completion, &ender))
                    .await?;
                tracing::warn!(job = r.job.id(), "{reason}");
                Ok(Disposition::Ack)
            }
            Some(_) => Ok(Disposition::Ack),
        }
    }
}
