//! The executor: performs jobs exactly once in effect. For each job: begin (a conditional
//! ledger write, before any downstream call) → the downstream call with the job's business
//! `Idempotency-Key`, the same on every attempt → complete (ledger and approval in one
//! transaction). Outcomes it cannot know are never reported as success.
//!
//! In parts: the orchestration of one receive (here: dispatching the job to its path, and the
//! begin, lease and end every attempt shares), the queue's side ([`message`]), the pure
//! decisions ([`policy`]), the calls ([`downstream`]) and what a receive does when it finds an
//! attempt it did not begin, or the job out of attempts ([`recovery`]). Each kind of job has its
//! path: an execution's call, which a GitHub answer takes too ([`execute`]), GitHub's own side
//! ([`github`]), notifications ([`notify`]), Slack's messages ([`slack`]). Callbacks, delivered
//! at least once with their outcome recorded once, take no ledger item ([`callback`]).

mod callback;
mod downstream;
mod email;
mod execute;
mod github;
mod message;
mod notify;
mod policy;
mod recovery;
mod resume;
mod slack;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::domain::trail::TrailEvent;
use crate::domain::{Completion, rfc3339};
use crate::jobs::job::Job;
use crate::observe::{self, Metric};
use crate::store::{AttemptEnd, Begin, LedgerKey, StoreError};
use crate::{App, ConfigError, Function};
use downstream::{Downstream, Target};
use message::{Disposition, JobQueue};
use policy::{
    ANSWER_MARGIN, END_WRITE_FIRST_PAUSE, END_WRITE_LONGEST_PAUSE, SHORTEST_END_WRITE, call_budget,
};

pub use message::JobMessage;
pub use resume::Workflows;

pub struct Executor {
    app: Arc<App>,
    queue: JobQueue,
    downstream: Downstream,
    /// How long an attempt's lease lasts, in milliseconds: a little under the visibility
    /// timeout, so that a message that comes back because its worker died (its receive came
    /// before the begin) most likely finds the lease ended; if not, it comes back once more.
    lease_ms: i64,
    /// A downstream call's longest time: a third of the lease.
    call_timeout: Duration,
    /// Slack's Web API, for the tenants with Slack.
    slack_api: crate::slack::api::SlackApi,
    /// Step Functions and Lambda, for the workflows waiting on approvals.
    workflows: Workflows,
    /// SES, for the tenants whose approvers are emailed.
    ses: crate::email::ses::Ses,
}

/// One receive of a job: its message, the job, how the ledger knows it, where its call goes,
/// and when the invocation ends (Lambda's deadline, if any).
struct Receipt<'a> {
    message: &'a JobMessage,
    job: Job,
    ledger: LedgerKey,
    target: Target,
    deadline: Option<Instant>,
}

/// The attempt this worker began: the token it owns it by, and when its lease ends (measured
/// before the begin, so about the lease the begin writes: an estimate, as safety never depends
/// on it — every end write is conditioned on the token).
struct Attempt {
    token: String,
    lease_end: Instant,
}

impl Receipt<'_> {
    /// How much of the invocation is left.
    fn remaining(&self) -> Option<Duration> {
        self.deadline
            .map(|d| d.saturating_duration_since(Instant::now()))
    }
}

impl Executor {
    /// Builds the executor once per process (the HTTP client pools connections across jobs);
    /// `sdk`: its AWS configuration (its role, the SDK's endpoints), for the workflows' calls.
    pub fn new(app: Arc<App>, sdk: &aws_config::SdkConfig) -> Result<Self, ConfigError> {
        let jobs = app.config.jobs()?;
        let visibility = app.config.job_visibility_timeout_seconds;
        // The call must end well inside the lease, so that a target that never answers cannot
        // hold a job past it.
        let call_timeout = Duration::from_millis((visibility as u64 * 1000 / 3).max(500));
        let downstream = Downstream::new(app.clone(), call_timeout, jobs.public_base_url)?;
        let slack_api =
            crate::slack::api::SlackApi::new(call_timeout).map_err(|e| ConfigError {
                variable: "SLACK",
                problem: format!("cannot build the HTTP client: {e}"),
            })?;
        Ok(Self {
            slack_api,
            workflows: Workflows::new(sdk),
            ses: crate::email::ses::Ses::new(sdk),
            queue: JobQueue {
                sqs: app.sqs.clone(),
                url: jobs.queue_url.to_owned(),
            },
            lease_ms: visibility * 1000 - (visibility * 250).min(1000),
            call_timeout,
            downstream,
            app,
        })
    }

    /// Handles a batch as Lambda delivers it; returns the ids of the messages to report as
    /// batch item failures. Messages are handled concurrently: one slow target does not delay
    /// the others.
    /// `deadline`: when the invocation ends (Lambda's), if it does.
    pub async fn handle_batch(
        &self,
        messages: &[JobMessage],
        deadline: Option<Instant>,
    ) -> Vec<String> {
        self.app
            .metrics
            .invocation(
                Function::Executor.as_str(),
                self.handle_all(messages, deadline),
            )
            .await
    }

    /// One message, as a batch handles each of its messages (at once, with the others): true
    /// when it is done with, false when it comes back. What a batch's invocation adds (its
    /// metrics) is not here.
    pub async fn handle_message(&self, message: &JobMessage, deadline: Option<Instant>) -> bool {
        matches!(
            self.handle_observed(message, deadline).await,
            Ok(Disposition::Ack)
        )
    }

    async fn handle_all(&self, messages: &[JobMessage], deadline: Option<Instant>) -> Vec<String> {
        let results =
            futures::future::join_all(messages.iter().map(|m| self.handle_observed(m, deadline)))
                .await;
        messages
            .iter()
            .zip(results)
            .filter_map(|(message, result)| match result {
                Ok(Disposition::Ack) => None,
                Ok(Disposition::Retry) => Some(message.message_id.clone()),
                Err(err) => {
                    tracing::error!(message_id = message.message_id, error = %err, "job failed; it will come back");
                    Some(message.message_id.clone())
                }
            })
            .collect()
    }

    /// One message, in a span naming its approval, tenant and trace, with its metrics counted
    /// for its tenant.
    async fn handle_observed(
        &self,
        message: &JobMessage,
        deadline: Option<Instant>,
    ) -> Result<Disposition, StoreError> {
        let job: Job = match serde_json::from_str::<Job>(&message.body) {
            Ok(job) => job.traced(),
            Err(e) => {
                // Left to come back until the redrive policy moves it to the DLQ, where it is
                // seen; deleting it would lose it silently.
                tracing::error!(message_id = message.message_id, error = %e, "not a job");
                return Ok(Disposition::Retry);
            }
        };
        let span = tracing::info_span!(
            "job",
            approval_id = job.approval_id().as_str(),
            tenant = job.tenant().as_str(),
            trace_id = job.trace().trace_id(),
            kind = job.kind(),
        );
        let tenant = job.tenant().clone();
        // Boxed: one job's handling (a call, a GitHub answer, the ledger's writes) is a deep
        // future; a batch's futures live on the heap, not on the stack of the one polling them.
        let handled = Box::pin(self.handle(message, job, deadline));
        let result = observe::for_tenant(tenant.as_str(), async {
            let result = handled.await;
            if result.is_err() {
                observe::count(Metric::JobRetried, &[]);
            }
            result
        });
        tracing::Instrument::instrument(result, span).await
    }

    async fn handle(
        &self,
        message: &JobMessage,
        job: Job,
        deadline: Option<Instant>,
    ) -> Result<Disposition, StoreError> {
        if let Job::Slack(slack) = &job {
            return self.draw_slack(message, slack, deadline).await;
        }
        let receipt = Receipt {
            message,
            ledger: job.ledger(),
            target: Target::of(&job, &self.app.secrets()),
            job,
            deadline,
        };
        if let Job::Callback(_) = &receipt.job {
            return self.deliver_callback(&receipt).await;
        }
        if message.receive_count > self.app.config.job_max_attempts {
            return self.give_up(&receipt).await;
        }
        self.attempt(&receipt).await
    }

    /// Whether this receive is the job's last allowed attempt.
    fn last_attempt(&self, receipt: &Receipt<'_>) -> bool {
        receipt.message.receive_count >= self.app.config.job_max_attempts
    }

    /// Begins an attempt, then hands it to its path (`notify.rs` for a notify job, `execute.rs`
    /// for a call), which calls the target and records what the call told.
    async fn attempt(&self, r: &Receipt<'_>) -> Result<Disposition, StoreError> {
        if let Job::Execute(_) = r.job {
            fail::fail_point!("execute::before_begin");
        }
        let lease = Duration::from_millis(self.lease_ms as u64);
        if call_budget(self.call_timeout, r.remaining(), lease).is_none() {
            // Not begun, nothing sent: the message comes back to an invocation with time.
            tracing::warn!(
                job = r.job.id(),
                "too little of the invocation left to call; later"
            );
            return Ok(Disposition::Retry);
        }
        let attempt = Attempt {
            token: ulid::Ulid::new().to_string(),
            lease_end: Instant::now() + lease,
        };
        let (now, now_ms) = (self.app.clock.now(), self.app.clock.now_millis());
        let begun = self
            .app
            .store
            .begin_job(
                &r.ledger,
                &attempt.token,
                now,
                now_ms,
                now_ms + self.lease_ms,
                // A target that can say what became of a key is asked instead of called again.
                r.target.idempotent && r.target.status.is_none(),
                r.job
                    .github_call()
                    .map(|call| call.round(r.job.tenant()))
                    .as_ref(),
            )
            .await?;
        let left = match begun {
            Begin::Started(left) => left,
            Begin::Refused(entry) => return self.refused(r, entry).await,
            Begin::Superseded => return self.superseded(r).await,
        };

        // Again after the begin, which a throttled store can make slow: the call must still end
        // before the invocation and the lease do, or the attempt's end could not be written.
        let until_lease_end = attempt.lease_end.saturating_duration_since(Instant::now());
        let budget = call_budget(self.call_timeout, r.remaining(), until_lease_end);
        if let Job::Notify(job) = &r.job {
            return self.notify(r, job, &attempt, left.as_ref(), budget).await;
        }
        if let Job::Resume(job) = &r.job {
            return self.resume(r, job, &attempt, left.as_ref(), budget).await;
        }
        self.call_target(r, &attempt, budget).await
    }

    /// Records the end of this worker's attempt, then makes the message come back in `back`
    /// seconds (if set). When the attempt was taken over first, what it learnt is kept as a
    /// late report and the message comes back as it would (the other attempt completes the job).
    async fn finish(
        &self,
        r: &Receipt<'_>,
        attempt: &Attempt,
        end: AttemptEnd<'_>,
        disposition: Disposition,
        back: Option<i32>,
    ) -> Result<Disposition, StoreError> {
        if !self.complete(r, attempt, end).await? {
            // Our lease ended and another worker took the job over (or ended it): it completes
            // it. What we learnt is still worth keeping: if the other attempt ends unknown, this
            // may be the only word on whether the action ran.
            let report = format!(
                "an attempt whose lease was taken over learnt, at {}: {}",
                rfc3339(self.app.clock.now()),
                end.completion.describe()
            );
            tracing::warn!(
                job = r.job.id(),
                report,
                "attempt taken over before it completed"
            );
            match self.app.store.record_late_report(&r.ledger, &report).await {
                Ok(true) => {}
                Ok(false) => tracing::warn!(
                    job = r.job.id(),
                    "late report not kept: the execution holds the most it keeps"
                ),
                Err(e) => tracing::warn!(job = r.job.id(), error = %e, "late report not recorded"),
            }
            return Ok(Disposition::Retry);
        }
        // A job done is in the trail; the log keeps what needs attention.
        if matches!(end.completion, Completion::Succeeded) {
            tracing::debug!(job = r.job.id(), attempt_outcome = ?end.completion, "job attempt completed");
        } else {
            tracing::info!(job = r.job.id(), attempt_outcome = ?end.completion, "job attempt completed");
        }
        count_retry(end.completion, disposition);
        if let Some(seconds) = back {
            self.queue.come_back_in(r.message, seconds).await;
        }
        Ok(disposition)
    }

    /// Records the attempt's end. After a call, what the target answered exists only in this
    /// worker until it is written: a write the store refuses for now (throttled, unavailable,
    /// contended) is sent again, with backoff, while the lease and the invocation last —
    /// otherwise the job would come back and call the target again (a refusal could turn into
    /// a success; at a target that does not dedupe, an operator would have to reconcile).
    /// Each try is conditioned on this attempt's token, so one that lands after a takeover
    /// changes nothing.
    ///
    /// In Lambda each try is also cut off shortly before the invocation's deadline (and a new
    /// one is only started with time for it left): a write the deadline kills would lose the
    /// whole batch's answer. A try cut off may still apply; the token condition makes that safe.
    async fn complete(
        &self,
        r: &Receipt<'_>,
        attempt: &Attempt,
        end: AttemptEnd<'_>,
    ) -> Result<bool, StoreError> {
        self.persist(r, attempt.lease_end, || {
            self.write_end(r, &attempt.token, end)
        })
        .await
    }

    /// Sends `write` until the store takes it: a refusal for now (throttled, unavailable,
    /// contended) is tried again with backoff while there is time before `until` and the
    /// invocation's deadline; each try is cut off shortly before that deadline. What the target
    /// answered is only in this worker until a write records it (see [`Executor::complete`]).
    async fn persist<T, W>(
        &self,
        r: &Receipt<'_>,
        until: Instant,
        write: impl Fn() -> W,
    ) -> Result<T, StoreError>
    where
        W: Future<Output = Result<T, StoreError>>,
    {
        let hard_end = r
            .deadline
            .map(|d| d.checked_sub(ANSWER_MARGIN).unwrap_or(d));
        let mut pause = END_WRITE_FIRST_PAUSE;
        loop {
            let result = match hard_end {
                None => write().await,
                Some(end) => {
                    let left = end.saturating_duration_since(Instant::now());
                    tokio::time::timeout(left, write())
                        .await
                        .unwrap_or_else(|_| {
                            Err(StoreError::Unavailable {
                                operation: "a write after the call",
                                message: "cut off before the invocation's deadline".to_owned(),
                            })
                        })
                }
            };
            let next_try = Instant::now() + pause;
            let time_for_another =
                next_try < until && hard_end.is_none_or(|end| next_try + SHORTEST_END_WRITE < end);
            match result {
                Err(e) if e.is_transient() && time_for_another => {
                    tracing::warn!(job = r.job.id(), error = %e, "what the call told not written yet; again");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(END_WRITE_LONGEST_PAUSE);
                }
                result => return result,
            }
        }
    }

    /// Writes an end of the attempt `owner` (this worker's, or one it found and settles), with
    /// the trail event the end makes: every end the executor writes comes through here.
    async fn write_end(
        &self,
        r: &Receipt<'_>,
        owner: &str,
        end: AttemptEnd<'_>,
    ) -> Result<bool, StoreError> {
        let now = self.app.clock.now();
        // A notify job's end brings its own events, as does a resume attempt (what it sent);
        // the others' come from the completion.
        let event: Vec<TrailEvent> = match &r.job {
            Job::Notify(_) => Vec::new(),
            Job::Resume(_) if !end.events.is_empty() => Vec::new(),
            _ => r.job.ended_event(end.completion, now).into_iter().collect(),
        };
        let end = AttemptEnd {
            events: if event.is_empty() { end.events } else { &event },
            ..end
        };
        let written = self
            .app
            .store
            .end_attempt(&r.ledger, owner, &end, now)
            .await?;
        if written {
            match &r.job {
                Job::Execute(job) => self.count_execution_end(job, end.completion),
                // GitHub's rejection answer ends as an execution does (a GitHub job left
                // waiting is an action not done).
                Job::Github(_) => {
                    count_outcome(end.completion);
                }
                Job::Notify(_)
                | Job::Callback(_)
                | Job::Slack(_)
                | Job::SlackReply(_)
                | Job::Resume(_)
                | Job::Email(_) => {}
            }
        }
        Ok(written)
    }
}

/// `ExecutionEnded` by outcome for an end (true), or nothing for an attempt that did not end it.
fn count_outcome(completion: &Completion) -> bool {
    let outcome = match completion {
        Completion::Succeeded => "succeeded",
        // A GitHub answer nothing waits for any more: a harmless race, not a failure to page.
        Completion::Failed(why) if crate::github::api::nothing_waits(why) => "nothing_waits",
        Completion::Failed(_) => "failed",
        Completion::NeedsReconciliation(_) => "needs_reconciliation",
        Completion::RetryWait(_) | Completion::Unknown(_) => return false,
    };
    observe::count(Metric::ExecutionEnded, &[outcome]);
    true
}

/// `JobRetried` for an attempt left to come back and be tried again (not for a message on its
/// way to the DLQ, nor one whose job is done).
fn count_retry(completion: &Completion, disposition: Disposition) {
    if disposition == Disposition::Retry
        && matches!(
            completion,
            Completion::RetryWait(_) | Completion::Unknown(_)
        )
    {
        observe::count(Metric::JobRetried, &[]);
    }
}
