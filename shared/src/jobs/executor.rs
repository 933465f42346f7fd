//! The executor: performs jobs exactly once in effect. For each job: begin (a conditional
//! ledger write, before any downstream call) → the downstream call with the job's business
//! `Idempotency-Key`, the same on every attempt → complete (ledger and approval in one
//! transaction). Outcomes it cannot know are never reported as success.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use super::job::{CallbackJob, Job};
use crate::config::KEY_PLACEHOLDER;
use crate::domain::{ApprovalId, Approver, StatusCheck, TenantId, rfc3339};
use crate::review_token::TokenSecret;
use crate::store::{AttemptEnd, Begin, Completion, LedgerEntry, LedgerStatus, StoreError};
use crate::{App, ConfigError};

/// An SQS message, from Lambda's event or from the local runner's `ReceiveMessage`.
#[derive(Debug, Clone)]
pub struct JobMessage {
    pub message_id: String,
    pub receipt_handle: String,
    pub body: String,
    /// `ApproximateReceiveCount`: the same count the queue's redrive policy uses.
    pub receive_count: u32,
}

impl JobMessage {
    pub fn from_lambda(message: &aws_lambda_events::event::sqs::SqsMessage) -> Self {
        Self {
            message_id: message.message_id.clone().unwrap_or_default(),
            receipt_handle: message.receipt_handle.clone().unwrap_or_default(),
            body: message.body.clone().unwrap_or_default(),
            receive_count: message
                .attributes
                .get("ApproximateReceiveCount")
                .and_then(|c| c.parse().ok())
                .unwrap_or(1),
        }
    }

    pub fn from_sdk(message: &aws_sdk_sqs::types::Message) -> Self {
        Self {
            message_id: message.message_id().unwrap_or_default().to_owned(),
            receipt_handle: message.receipt_handle().unwrap_or_default().to_owned(),
            body: message.body().unwrap_or_default().to_owned(),
            receive_count: message
                .attributes()
                .and_then(|a| {
                    a.get(&aws_sdk_sqs::types::MessageSystemAttributeName::ApproximateReceiveCount)
                })
                .and_then(|c| c.parse().ok())
                .unwrap_or(1),
        }
    }
}

/// How long a review link outlives its approval's expiry: long enough to show the approver
/// what became of it (deciding is refused by the decision's own condition from the expiry on).
const REVIEW_LINK_GRACE_SECONDS: i64 = 7 * 86_400;

/// What becomes of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Disposition {
    /// Done (succeeded, failed for good, handed to an operator, or nothing left to do): delete.
    Ack,
    /// Report a batch item failure: the message comes back after its visibility timeout.
    Retry,
}

/// What a downstream call told us.
#[derive(Debug, Clone, PartialEq, Eq)]
enum CallOutcome {
    Succeeded,
    /// The target refused the request (4xx): retrying the same request cannot help.
    Refused(String),
    /// Failed before anything was sent, or the target answered that it failed (5xx, 408,
    /// 429): safe to try again.
    Retryable(String),
    /// The request may have been received and acted on (timeout, connection lost).
    Unknown(String),
}

/// What a target's status URL said about a business key.
#[derive(Debug, Clone, PartialEq, Eq)]
enum StatusAnswer {
    Succeeded,
    /// It failed, in the target's words.
    Failed(Option<String>),
    /// It never took the request: calling again is safe.
    NotFound,
    Pending,
    /// No usable answer (down, timeout, another status code, another body).
    CouldNotTell(String),
}

impl StatusAnswer {
    /// From the body of a 200: `{"status": "succeeded" | "failed" | "not_found" | "pending"}`,
    /// with the target's reason for a failure (`reason` or `error`) if it gives one.
    fn parse(body: &serde_json::Value) -> Self {
        let reason = ["reason", "error"]
            .iter()
            .find_map(|k| body[*k].as_str())
            .map(|r| r.chars().take(500).collect());
        match body["status"].as_str() {
            Some("succeeded") => Self::Succeeded,
            Some("failed") => Self::Failed(reason),
            Some("not_found") => Self::NotFound,
            Some("pending") => Self::Pending,
            _ => Self::CouldNotTell("status answer names no known status".to_owned()),
        }
    }

    /// The question and its answer, as the execution records them.
    fn check(&self, at: i64) -> StatusCheck {
        let (answer, detail) = match self {
            Self::Succeeded => ("succeeded", None),
            Self::Failed(reason) => ("failed", reason.clone()),
            Self::NotFound => ("not_found", None),
            Self::Pending => ("pending", None),
            Self::CouldNotTell(why) => ("unknown", Some(why.clone())),
        };
        StatusCheck {
            at,
            answer: answer.to_owned(),
            detail,
        }
    }
}

/// What follows from the target's answer about an attempt whose outcome was unknown (`error`
/// says why): the attempt's end, and what becomes of the message. `not_found_believed`: asked at
/// least the target's status delay after the call ended — before that, a `not_found` may only
/// mean the target has not recorded the key yet, and it counts as `pending`.
fn after_status(
    answer: &StatusAnswer,
    error: &str,
    idempotent: bool,
    last_attempt: bool,
    not_found_believed: bool,
) -> (Completion, Disposition) {
    if *answer == StatusAnswer::NotFound && !not_found_believed {
        return after_status(
            &StatusAnswer::CouldNotTell(
                "not_found, asked before the target's status delay had passed".to_owned(),
            ),
            error,
            idempotent,
            last_attempt,
            true,
        );
    }
    match answer {
        StatusAnswer::Succeeded => (Completion::Succeeded, Disposition::Ack),
        StatusAnswer::Failed(reason) => (
            Completion::Failed(format!(
                "{error}; the target says it failed: {}",
                reason.as_deref().unwrap_or("no reason given")
            )),
            Disposition::Ack,
        ),
        StatusAnswer::NotFound if last_attempt => (
            Completion::Failed(format!(
                "{error}; the target says it never took the request (not_found) and the attempts are used up (retry is safe)"
            )),
            Disposition::Retry,
        ),
        StatusAnswer::NotFound => (
            Completion::RetryWait(format!(
                "{error}; the target says it never took the request (not_found): calling again"
            )),
            Disposition::Retry,
        ),
        StatusAnswer::Pending | StatusAnswer::CouldNotTell(_) => {
            let said = match answer {
                StatusAnswer::CouldNotTell(why) => why.clone(),
                _ => "the target says it is pending".to_owned(),
            };
            match (last_attempt, idempotent) {
                (false, _) => (
                    Completion::Unknown(format!(
                        "outcome unknown ({error}); {said}: asking again later"
                    )),
                    Disposition::Retry,
                ),
                (true, false) => (
                    Completion::NeedsReconciliation(format!(
                        "outcome unknown ({error}); {said}, and the attempts are used up; the target is not idempotent"
                    )),
                    Disposition::Ack,
                ),
                (true, true) => (
                    Completion::Failed(format!(
                        "outcome unknown ({error}); {said}, and the attempts are used up (retry is safe: same key)"
                    )),
                    Disposition::Retry,
                ),
            }
        }
    }
}

/// The longest a status query may take.
const STATUS_TIMEOUT: Duration = Duration::from_secs(5);

/// Where a job's call goes.
struct Target {
    /// `None`: the action type is not configured (the job fails without a call).
    url: Option<String>,
    idempotent: bool,
    status: Option<StatusQuery>,
}

/// A target's status URL and how long after a doubtful call it is asked.
struct StatusQuery {
    url: String,
    delay_ms: i64,
}

/// When a message whose attempt ended with `completion` comes back (seconds from now): after a
/// backoff for a retry or a status query, at once for one going on to the DLQ; `None` leaves it
/// to the queue.
fn comes_back(
    completion: &Completion,
    disposition: Disposition,
    receive_count: u32,
) -> Option<i32> {
    match completion {
        Completion::RetryWait(_) | Completion::Unknown(_) => Some(backoff_seconds(receive_count)),
        Completion::Failed(_) if disposition == Disposition::Retry => Some(0),
        _ => None,
    }
}

/// Whole seconds, rounded up, for a visibility timeout (at most SQS's 12 hours).
fn seconds_from_ms(ms: i64) -> i32 {
    ((ms.max(0) + 999) / 1000).min(43_200) as i32
}

pub struct Executor {
    app: Arc<App>,
    sqs: aws_sdk_sqs::Client,
    http: reqwest::Client,
    queue_url: String,
    notifier_url: String,
    public_base_url: String,
    token_secret: TokenSecret,
    /// How long an attempt's lease lasts, in milliseconds: a little under the visibility
    /// timeout, so that a message that comes back because its worker died (its receive came
    /// before the begin) most likely finds the lease ended; if not, it comes back once more.
    lease_ms: i64,
    /// A downstream call's longest time: a third of the lease.
    call_timeout: Duration,
}

/// Time kept, at the end of an invocation, for the ledger write that records an attempt's end.
const LEDGER_MARGIN: Duration = Duration::from_secs(3);
/// The pauses between tries of an attempt's end write: doubling from the first to the longest.
const END_WRITE_FIRST_PAUSE: Duration = Duration::from_millis(50);
const END_WRITE_LONGEST_PAUSE: Duration = Duration::from_secs(1);
/// A try of the end write is not started with less than this left before the cut-off.
const SHORTEST_END_WRITE: Duration = Duration::from_secs(1);
/// Kept at the very end of an invocation to answer Lambda (the batch item failures).
const ANSWER_MARGIN: Duration = Duration::from_millis(200);
/// Below this, a call is not worth starting: the message comes back to a fresh invocation.
const SHORTEST_CALL: Duration = Duration::from_secs(1);

/// How long a downstream call may take: at most `call_timeout` (a third of the lease), and it
/// must end with time left to write the attempt's end both before the invocation's deadline
/// (Lambda kills an invocation at its deadline, so a call it cut off would leave the attempt
/// unrecorded) and before the attempt's lease ends (after it, another worker may take the job
/// over and call the target again, or hand it to an operator). `None`: too little time is left
/// to start one.
fn call_budget(
    call_timeout: Duration,
    until_deadline: Option<Duration>,
    until_lease_end: Duration,
) -> Option<Duration> {
    let in_lease = until_lease_end.checked_sub(LEDGER_MARGIN.min(call_timeout / 2))?;
    let usable = match until_deadline {
        Some(left) => left.checked_sub(LEDGER_MARGIN)?.min(in_lease),
        None => in_lease,
    };
    (usable >= SHORTEST_CALL.min(call_timeout / 4)).then(|| usable.min(call_timeout))
}

impl Executor {
    /// Builds the executor once per process (the HTTP client pools connections across jobs).
    pub fn new(app: Arc<App>) -> Result<Self, ConfigError> {
        let jobs = app.config.jobs()?;
        let visibility = app.config.job_visibility_timeout_seconds;
        // The call must end well inside the lease, so that a target that never answers cannot
        // hold a job past it.
        let call_timeout = Duration::from_millis((visibility as u64 * 1000 / 3).max(500));
        let http = reqwest::Client::builder()
            .connect_timeout(call_timeout.min(Duration::from_secs(2)))
            .timeout(call_timeout)
            // Only configured URLs are ever called: a redirect is an answer, not an instruction.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| ConfigError {
                variable: "ACTION_TARGETS",
                problem: format!("cannot build the HTTP client: {e}"),
            })?;
        Ok(Self {
            queue_url: jobs.queue_url.to_owned(),
            notifier_url: jobs.notifier_url.to_owned(),
            public_base_url: jobs.public_base_url.to_owned(),
            token_secret: jobs.token_secret.clone(),
            lease_ms: visibility * 1000 - (visibility * 250).min(1000),
            call_timeout,
            sqs: app.sqs.clone(),
            app,
            http,
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
        let results =
            futures::future::join_all(messages.iter().map(|m| self.handle(m, deadline))).await;
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

    /// Where the job's call goes, and how a doubt about it is settled.
    fn target_of(&self, job: &Job) -> Target {
        match job {
            Job::Notify(_) => Target {
                url: Some(self.notifier_url.clone()),
                idempotent: true,
                status: None,
            },
            // Receivers dedupe by `webhook-id` (the event id), as Standard Webhooks asks.
            Job::Callback(j) => Target {
                url: TenantId::parse(&j.tenant)
                    .ok()
                    .and_then(|t| self.app.config.event_subscriptions.get(&t))
                    .map(|s| s.url.clone()),
                idempotent: true,
                status: None,
            },
            Job::Execute(j) => {
                let kind = j.action["type"].as_str().unwrap_or_default();
                match self.app.config.action_targets.get(kind) {
                    Some(target) => Target {
                        url: Some(target.url.clone()),
                        idempotent: target.idempotent,
                        status: target.status_url.clone().map(|url| StatusQuery {
                            url,
                            delay_ms: target.status_delay_seconds * 1000,
                        }),
                    },
                    None => Target {
                        url: None,
                        idempotent: true,
                        status: None,
                    },
                }
            }
        }
    }

    async fn handle(
        &self,
        message: &JobMessage,
        deadline: Option<Instant>,
    ) -> Result<Disposition, StoreError> {
        let job: Job = match serde_json::from_str(&message.body) {
            Ok(job) => job,
            Err(e) => {
                // Left to come back until the redrive policy moves it to the DLQ, where it is
                // seen; deleting it would lose it silently.
                tracing::error!(message_id = message.message_id, error = %e, "not a job");
                return Ok(Disposition::Retry);
            }
        };
        let target = self.target_of(&job);
        if message.receive_count > self.app.config.job_max_attempts {
            return self.give_up(&job, message, &target, deadline).await;
        }

        if let Job::Execute(_) = job {
            fail::fail_point!("execute::before_begin");
        }
        let lease = Duration::from_millis(self.lease_ms as u64);
        let remaining = || deadline.map(|d| d.saturating_duration_since(Instant::now()));
        if call_budget(self.call_timeout, remaining(), lease).is_none() {
            // Not begun, nothing sent: the message comes back to an invocation with time.
            tracing::warn!(
                job = job.id(),
                "too little of the invocation left to call; later"
            );
            return Ok(Disposition::Retry);
        }
        let store = &self.app.store;
        let token = ulid::Ulid::new().to_string();
        // Measured before the begin, so about the lease the begin writes (an estimate: safety
        // never depends on it, every end write is conditioned on this attempt's token).
        let lease_end = Instant::now() + lease;
        let (now, now_ms) = (self.app.clock.now(), self.app.clock.now_millis());
        match store
            .begin_job(
                &job,
                &token,
                now,
                now_ms,
                now_ms + self.lease_ms,
                // A target that can say what became of a key is asked instead of called again.
                target.idempotent && target.status.is_none(),
            )
            .await?
        {
            Begin::Started => {}
            Begin::Refused(entry) => {
                return self.refused(&job, entry, &target, message, deadline).await;
            }
        }

        // Again after the begin, which a throttled store can make slow: the call must still end
        // before the invocation and the lease do, or the attempt's end could not be written.
        let until_lease_end = lease_end.saturating_duration_since(Instant::now());
        let budget = call_budget(self.call_timeout, remaining(), until_lease_end);
        let outcome = match (&target.url, budget) {
            (Some(_), None) => CallOutcome::Retryable(
                "not sent: too little of the invocation or the lease was left after the begin"
                    .to_owned(),
            ),
            (Some(url), Some(budget)) => self.call(&job, url, target.idempotent, budget).await,
            (None, _) => CallOutcome::Refused(format!(
                "action type {:?} is not configured",
                job_action_type(&job)
            )),
        };
        match &job {
            Job::Execute(_) => {
                if let Some(ms) = stall_after_downstream() {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                }
            }
            Job::Notify(_) => fail::fail_point!("notify::after_downstream"),
            Job::Callback(_) => {}
        }

        let last_attempt = message.receive_count >= self.app.config.job_max_attempts;
        // Whether it acted is not known, and the target can say: ask it — not now, but once it
        // has had its status delay to record the key (a gateway's 504 can come while the target
        // still works on the request, and its `not_found` would then be wrong). The message
        // comes back after the delay; other jobs go on meanwhile.
        if let (CallOutcome::Unknown(error), Some(status)) = (&outcome, &target.status) {
            let completion = Completion::Unknown(format!(
                "outcome unknown ({error}); the target's status URL is asked from {} s after the call",
                status.delay_ms / 1000
            ));
            let end = AttemptEnd {
                call_ended_ms: Some(self.app.clock.now_millis()),
                due_at: Some(self.app.clock.now() + status.delay_ms / 1000),
                ..AttemptEnd::by_owner(&completion, &token)
            };
            let back = Some(seconds_from_ms(status.delay_ms));
            return self
                .finish(
                    &job,
                    message,
                    &token,
                    &end,
                    Disposition::Retry,
                    back,
                    lease_end,
                    deadline,
                )
                .await;
        }
        let notice = matches!(job, Job::Notify(_) | Job::Callback(_));
        let (completion, disposition) = match outcome {
            CallOutcome::Succeeded => (Completion::Succeeded, Disposition::Ack),
            // A notification or callback its receiver refuses is lost to its reader: recorded
            // (`notification.failed` / `callback.failed`) and sent on to the DLQ, whose alarm
            // someone watches.
            CallOutcome::Refused(error) if notice => {
                (Completion::Failed(error), Disposition::Retry)
            }
            CallOutcome::Refused(error) => (Completion::Failed(error), Disposition::Ack),
            CallOutcome::Unknown(error) if !target.idempotent => (
                Completion::NeedsReconciliation(format!(
                    "outcome unknown ({error}); the target is not idempotent"
                )),
                Disposition::Ack,
            ),
            // Out of attempts: failed, and the message goes on to the DLQ.
            CallOutcome::Retryable(error) if last_attempt => {
                (Completion::Failed(error), Disposition::Retry)
            }
            CallOutcome::Unknown(error) if last_attempt => (
                Completion::Failed(format!(
                    "{error}; the last attempt's outcome is unknown (retry is safe: same key)"
                )),
                Disposition::Retry,
            ),
            CallOutcome::Retryable(error) | CallOutcome::Unknown(error) => {
                (Completion::RetryWait(error), Disposition::Retry)
            }
        };
        let end = AttemptEnd::by_owner(&completion, &token);
        let back = comes_back(&completion, disposition, message.receive_count);
        self.finish(
            &job,
            message,
            &token,
            &end,
            disposition,
            back,
            lease_end,
            deadline,
        )
        .await
    }

    /// Records the end of this worker's attempt `token`, then makes the message come back in
    /// `back` seconds (if set). When the attempt was taken over first, what it learnt is kept
    /// as a late report and the message comes back as it would (the other attempt completes the
    /// job).
    #[allow(clippy::too_many_arguments)]
    async fn finish(
        &self,
        job: &Job,
        message: &JobMessage,
        token: &str,
        end: &AttemptEnd<'_>,
        disposition: Disposition,
        back: Option<i32>,
        lease_end: Instant,
        deadline: Option<Instant>,
    ) -> Result<Disposition, StoreError> {
        let store = &self.app.store;
        if !self.complete(job, token, end, lease_end, deadline).await? {
            // Our lease ended and another worker took the job over (or ended it): it completes
            // it. What we learnt is still worth keeping: if the other attempt ends unknown, this
            // may be the only word on whether the action ran.
            let report = format!(
                "an attempt whose lease was taken over learnt, at {}: {}",
                rfc3339(self.app.clock.now()),
                end.completion.describe()
            );
            tracing::warn!(
                job = job.id(),
                report,
                "attempt taken over before it completed"
            );
            match store.record_late_report(job, &report).await {
                Ok(true) => {}
                Ok(false) => tracing::warn!(
                    job = job.id(),
                    "late report not kept: the execution holds the most it keeps"
                ),
                Err(e) => tracing::warn!(job = job.id(), error = %e, "late report not recorded"),
            }
            return Ok(Disposition::Retry);
        }
        tracing::info!(job = job.id(), attempt_outcome = ?end.completion, "job attempt completed");
        if let Some(seconds) = back {
            self.set_visibility(message, seconds).await;
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
        job: &Job,
        token: &str,
        end: &AttemptEnd<'_>,
        lease_end: Instant,
        deadline: Option<Instant>,
    ) -> Result<bool, StoreError> {
        let hard_end = deadline.map(|d| d.checked_sub(ANSWER_MARGIN).unwrap_or(d));
        let mut pause = END_WRITE_FIRST_PAUSE;
        loop {
            let write = self
                .app
                .store
                .end_attempt(job, token, end, self.app.clock.now());
            let result = match hard_end {
                None => write.await,
                Some(end) => {
                    let left = end.saturating_duration_since(Instant::now());
                    tokio::time::timeout(left, write).await.unwrap_or_else(|_| {
                        Err(StoreError::Unavailable {
                            operation: "TransactWriteItems",
                            message: "cut off before the invocation's deadline".to_owned(),
                        })
                    })
                }
            };
            let next_try = Instant::now() + pause;
            let time_for_another = next_try < lease_end
                && hard_end.is_none_or(|end| next_try + SHORTEST_END_WRITE < end);
            match result {
                Err(e) if e.is_transient() && time_for_another => {
                    tracing::warn!(job = job.id(), error = %e, "attempt's end not written yet; again");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(END_WRITE_LONGEST_PAUSE);
                }
                result => return result,
            }
        }
    }

    /// A begin that did not start an attempt: tell from the ledger what to do with the message.
    async fn refused(
        &self,
        job: &Job,
        entry: Option<LedgerEntry>,
        target: &Target,
        message: &JobMessage,
        deadline: Option<Instant>,
    ) -> Result<Disposition, StoreError> {
        let Some(entry) = entry else {
            // The approval moved on to a newer execution generation: this job is stale.
            return Ok(Disposition::Ack);
        };
        if entry.generation > job.generation() {
            return Ok(Disposition::Ack);
        }
        let (now, now_ms) = (self.app.clock.now(), self.app.clock.now_millis());
        match entry.status {
            // A notification or callback that failed for good goes on to the DLQ (its alarm),
            // however many copies of its job come back.
            LedgerStatus::Failed if matches!(job, Job::Notify(_) | Job::Callback(_)) => {
                self.set_visibility(message, 0).await;
                Ok(Disposition::Retry)
            }
            LedgerStatus::Succeeded | LedgerStatus::Failed | LedgerStatus::NeedsReconciliation => {
                Ok(Disposition::Ack)
            }
            LedgerStatus::InProgress if entry.lease_until_ms > now_ms => Ok(Disposition::Retry),
            // An attempt whose outcome nobody knows yet (its call ended in doubt, or its last
            // answer was "pending", or its worker stopped after it may have called the target):
            // ask the target.
            LedgerStatus::Unknown | LedgerStatus::InProgress if target.status.is_some() => {
                let error = match entry.status {
                    LedgerStatus::Unknown => entry
                        .last_error
                        .clone()
                        .unwrap_or_else(|| "outcome unknown".to_owned()),
                    _ => "the worker stopped after calling the target".to_owned(),
                };
                let last_attempt = message.receive_count >= self.app.config.job_max_attempts;
                self.settle(job, &entry, &error, target, last_attempt, message, deadline)
                    .await
            }
            LedgerStatus::InProgress if !target.idempotent => {
                // Its worker stopped after it may have called a target that does not dedupe:
                // calling again could do the action twice. Hand it to an operator.
                let completion = Completion::NeedsReconciliation(
                    "the worker stopped after calling the target, which is not idempotent: outcome unknown"
                        .to_owned(),
                );
                let ender = ulid::Ulid::new().to_string();
                let end = AttemptEnd::by_owner(&completion, &ender);
                self.app
                    .store
                    .end_attempt(job, &entry.token, &end, now)
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
    #[allow(clippy::too_many_arguments)]
    async fn settle(
        &self,
        job: &Job,
        entry: &LedgerEntry,
        error: &str,
        target: &Target,
        last_attempt: bool,
        message: &JobMessage,
        deadline: Option<Instant>,
    ) -> Result<Disposition, StoreError> {
        let Some(status) = &target.status else {
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
            self.set_visibility(message, seconds_from_ms(ask_from_ms - now_ms))
                .await;
            return Ok(Disposition::Retry);
        }
        let lease = Duration::from_millis(self.lease_ms as u64);
        let remaining = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        let budget = call_budget(self.call_timeout, remaining, lease);
        let answer = self.ask(job, &status.url, budget).await;
        // A `not_found` asked too soon proves nothing (the clock of another worker may differ).
        let believed = self.app.clock.now_millis() >= ask_from_ms;
        let (completion, disposition) =
            after_status(&answer, error, target.idempotent, last_attempt, believed);
        let check = answer.check(self.app.clock.now());
        let ender = ulid::Ulid::new().to_string();
        let end = AttemptEnd {
            check: Some(&check),
            // Still the call that ended in doubt, if the target is asked again.
            call_ended_ms: entry.call_ended_ms.or(Some(call_ended_ms)),
            ..AttemptEnd::by_owner(&completion, &ender)
        };
        let ended = self
            .app
            .store
            .end_attempt(job, &entry.token, &end, self.app.clock.now())
            .await?;
        if !ended {
            // Someone else settled it meanwhile: the next receive reads what they wrote.
            return Ok(Disposition::Retry);
        }
        tracing::info!(job = job.id(), answer = ?answer, attempt_outcome = ?completion, "unknown outcome settled by the target's status");
        let back = match completion {
            // Safe to call again (the target never took it): a new attempt, now.
            Completion::RetryWait(_) => Some(0),
            _ => comes_back(&completion, disposition, message.receive_count),
        };
        if let Some(seconds) = back {
            self.set_visibility(message, seconds).await;
        }
        Ok(disposition)
    }

    /// Asks the target's status URL what became of the job's business key. Never a call of the
    /// action: a GET with its own short timeout.
    async fn ask(&self, job: &Job, status_url: &str, budget: Option<Duration>) -> StatusAnswer {
        let Some(budget) = budget else {
            return StatusAnswer::CouldNotTell(
                "not asked: too little of the invocation or the lease was left".to_owned(),
            );
        };
        let key = job.business_key();
        let encoded =
            percent_encoding::utf8_percent_encode(&key, percent_encoding::NON_ALPHANUMERIC)
                .to_string();
        let url = status_url.replace(KEY_PLACEHOLDER, &encoded);
        let request = self
            .http
            .get(url)
            .timeout(budget.min(STATUS_TIMEOUT))
            .header("Idempotency-Key", &key);
        let response = match request.send().await {
            Ok(response) => response,
            Err(e) => {
                return StatusAnswer::CouldNotTell(format!(
                    "status query failed: {}",
                    error_kind(&e)
                ));
            }
        };
        let code = response.status().as_u16();
        if code != 200 {
            return StatusAnswer::CouldNotTell(format!("status query answered HTTP {code}"));
        }
        let body: serde_json::Value = match response.json().await {
            Ok(body) => body,
            Err(_) => return StatusAnswer::CouldNotTell("status answer is not JSON".to_owned()),
        };
        StatusAnswer::parse(&body)
    }

    /// A message received more often than `JOB_MAX_ATTEMPTS` (the queue's redrive policy allows
    /// a few more receives, for this): make no attempt, but make sure the execution does not
    /// stay `running` or `queued` — an attempt whose worker died during the last allowed
    /// receive is recorded as failed (or unknown, for a target that is not idempotent) — then
    /// let the message go on to the DLQ.
    async fn give_up(
        &self,
        job: &Job,
        message: &JobMessage,
        target: &Target,
        deadline: Option<Instant>,
    ) -> Result<Disposition, StoreError> {
        let store = &self.app.store;
        let entry = store.ledger_entry(job).await?;
        if entry
            .as_ref()
            .is_none_or(|e| e.generation < job.generation())
        {
            // No attempt of this job ever began (the executor could not start, or kept
            // crashing before its begin): nothing was sent, so the execution is `failed` —
            // which an operator's retry resumes — instead of `queued` for ever.
            let reason = format!(
                "never attempted: the job was received {} times without an attempt beginning",
                message.receive_count
            );
            let recorded = store
                .fail_unbegun_job(job, &reason, self.app.clock.now())
                .await?;
            tracing::error!(
                job = job.id(),
                recorded,
                "job never began within its attempts; recorded as failed, on to the DLQ"
            );
            self.set_visibility(message, 0).await;
            return Ok(Disposition::Retry);
        }
        let Some(entry) = entry else {
            return Ok(Disposition::Retry);
        };
        if entry.generation > job.generation() || entry.status == LedgerStatus::Succeeded {
            return Ok(Disposition::Ack);
        }
        let abandoned = entry.status == LedgerStatus::InProgress
            && entry.lease_until_ms <= self.app.clock.now_millis();
        // The last chance to learn what became of an unknown outcome: ask the target.
        if target.status.is_some() && (entry.status == LedgerStatus::Unknown || abandoned) {
            let error = entry
                .last_error
                .clone()
                .filter(|_| entry.status == LedgerStatus::Unknown)
                .unwrap_or_else(|| "the worker stopped during the last allowed attempt".to_owned());
            return self
                .settle(job, &entry, &error, target, true, message, deadline)
                .await;
        }
        let completion = match entry.status {
            LedgerStatus::InProgress if !abandoned => return Ok(Disposition::Retry),
            LedgerStatus::InProgress if !target.idempotent => Some(Completion::NeedsReconciliation(
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
            store
                .end_attempt(
                    job,
                    &entry.token,
                    &AttemptEnd::by_owner(&completion, &ender),
                    self.app.clock.now(),
                )
                .await?;
            tracing::warn!(job = job.id(), attempt_outcome = ?completion, "job out of attempts");
        }
        self.set_visibility(message, 0).await;
        Ok(Disposition::Retry)
    }

    async fn call(&self, job: &Job, url: &str, idempotent: bool, budget: Duration) -> CallOutcome {
        if let Job::Callback(j) = job {
            return self.deliver(j, url, budget).await;
        }
        let body = match job {
            Job::Callback(_) => return CallOutcome::Refused("not a call".to_owned()),
            Job::Execute(j) => json!({
                "approval_id": j.approval_id,
                "tenant": j.tenant,
                "action": j.action,
                "context": j.context,
                "decision": j.decision,
            }),
            Job::Notify(j) => {
                let (Ok(tenant), Ok(id), Ok(approver)) = (
                    TenantId::parse(&j.tenant),
                    ApprovalId::parse(&j.approval_id),
                    Approver::parse(&j.approver),
                ) else {
                    return CallOutcome::Refused(
                        "the job names no valid approval or approver".to_owned(),
                    );
                };
                let token = self.token_secret.mint(
                    &tenant,
                    &id,
                    &approver,
                    j.expires_at + REVIEW_LINK_GRACE_SECONDS,
                );
                json!({
                    "approval_id": j.approval_id,
                    "approver": j.approver,
                    "review_url": format!("{}/approvals/{}/review?token={token}", self.public_base_url, j.approval_id),
                    "action": j.action,
                    "context": j.context,
                    "expires_at": rfc3339(j.expires_at),
                })
            }
        };
        let request = self
            .http
            .post(url)
            .timeout(budget)
            .header("Idempotency-Key", job.business_key())
            .json(&body);
        match request.send().await {
            Ok(response) => classify(response.status().as_u16(), idempotent),
            // Nothing reached the target.
            Err(e) if e.is_connect() => {
                CallOutcome::Retryable(format!("connection failed: {}", error_kind(&e)))
            }
            Err(e) if e.is_timeout() => {
                CallOutcome::Unknown("no answer within the timeout".to_owned())
            }
            Err(e) => CallOutcome::Unknown(format!("request failed: {}", error_kind(&e))),
        }
    }

    /// POSTs one event to its tenant's subscription, signed per Standard Webhooks: the same
    /// `webhook-id` (the event id) and body on every attempt, a fresh timestamp and signature.
    async fn deliver(&self, job: &CallbackJob, url: &str, budget: Duration) -> CallOutcome {
        let secret = TenantId::parse(&job.tenant)
            .ok()
            .and_then(|t| self.app.config.event_subscriptions.get(&t))
            .map(|s| s.secret.clone());
        let Some(secret) = secret else {
            return CallOutcome::Refused("the tenant has no subscription".to_owned());
        };
        let body = job.body.to_string();
        let timestamp = self.app.clock.now();
        let request = self
            .http
            .post(url)
            .timeout(budget)
            .header("content-type", "application/json")
            .header("webhook-id", &job.event_id)
            .header("webhook-timestamp", timestamp.to_string())
            .header(
                "webhook-signature",
                secret.sign(&job.event_id, timestamp, body.as_bytes()),
            )
            .body(body);
        match request.send().await {
            Ok(response) => classify(response.status().as_u16(), true),
            Err(e) if e.is_connect() => {
                CallOutcome::Retryable(format!("connection failed: {}", error_kind(&e)))
            }
            Err(e) if e.is_timeout() => {
                CallOutcome::Unknown("no answer within the timeout".to_owned())
            }
            Err(e) => CallOutcome::Unknown(format!("request failed: {}", error_kind(&e))),
        }
    }

    /// Sets when the message comes back (0: now).
    async fn set_visibility(&self, message: &JobMessage, seconds: i32) {
        let result = self
            .sqs
            .change_message_visibility()
            .queue_url(&self.queue_url)
            .receipt_handle(&message.receipt_handle)
            .visibility_timeout(seconds)
            .send()
            .await;
        if let Err(e) = result {
            // The message still comes back, after the queue's own visibility timeout.
            tracing::warn!(error = %aws_sdk_sqs::error::DisplayErrorContext(&e), "visibility not changed");
        }
    }
}

/// The `execute::after_downstream` failpoint: `panic` crashes the worker; `return(ms)` stalls
/// it for `ms` without blocking its thread (a slow worker, a long pause).
fn stall_after_downstream() -> Option<u64> {
    fail::fail_point!("execute::after_downstream", |ms: Option<String>| ms
        .and_then(|ms| ms.parse().ok()));
    None
}

/// What a target's answer says about the action.
fn classify(status: u16, idempotent: bool) -> CallOutcome {
    let answer = format!("HTTP {status}");
    match status {
        200..=299 => CallOutcome::Succeeded,
        // The target says it did not take the request on.
        408 | 429 => CallOutcome::Retryable(answer),
        400..=499 => CallOutcome::Refused(answer),
        // Retrying with the same key is safe at a target that dedupes.
        500..=599 if idempotent => CallOutcome::Retryable(answer),
        // A redirect is not followed (only configured URLs are called), and a target that does
        // post-redirect-get answers 303 after acting.
        300..=399 if idempotent => CallOutcome::Refused(answer),
        // Anything else from a target that does not dedupe — a gateway's 502/504, a redirect,
        // a status outside the classes — says nothing about whether the action ran.
        _ => CallOutcome::Unknown(answer),
    }
}

/// The delay before a retry: 1, 2, 4 … seconds by receive, at most a minute.
fn backoff_seconds(receive_count: u32) -> i32 {
    (1i32 << receive_count.saturating_sub(1).min(6)).min(60)
}

fn job_action_type(job: &Job) -> String {
    match job {
        Job::Execute(j) => j.action["type"].as_str().unwrap_or_default().to_owned(),
        Job::Notify(_) => "notify".to_owned(),
        Job::Callback(_) => "callback".to_owned(),
    }
}

/// The error's kind without its URL (a review link's token must not reach the logs).
fn error_kind(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    if let Some(url) = error.url() {
        text = text.replace(url.as_str(), "<url>");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_non_idempotent_target_that_answers_neither_2xx_nor_4xx_may_have_acted() {
        for status in [301, 302, 303, 307, 500, 502, 503, 504, 599, 100, 600] {
            assert!(
                matches!(classify(status, false), CallOutcome::Unknown(_)),
                "{status}"
            );
        }
        for status in [408, 429] {
            assert!(matches!(classify(status, false), CallOutcome::Retryable(_)));
        }
        assert!(matches!(classify(400, false), CallOutcome::Refused(_)));
        assert_eq!(classify(204, false), CallOutcome::Succeeded);
    }

    #[test]
    fn a_call_ends_before_the_invocation_does() {
        let (third, lease) = (Duration::from_secs(20), Duration::from_secs(59));
        assert_eq!(
            call_budget(third, None, lease),
            Some(third),
            "no deadline: the lease bounds it"
        );
        assert_eq!(
            call_budget(third, Some(Duration::from_secs(60)), lease),
            Some(third)
        );
        assert_eq!(
            call_budget(third, Some(Duration::from_secs(10)), lease),
            Some(Duration::from_secs(7)),
            "the deadline less the ledger write's margin"
        );
        assert_eq!(
            call_budget(third, Some(Duration::from_millis(3_500)), lease),
            None
        );
        assert_eq!(call_budget(third, Some(Duration::ZERO), lease), None);
    }

    #[test]
    fn a_call_ends_before_the_lease_does() {
        let third = Duration::from_secs(20);
        assert_eq!(
            call_budget(third, None, Duration::from_secs(12)),
            Some(Duration::from_secs(9)),
            "the lease less the ledger write's margin"
        );
        assert_eq!(
            call_budget(
                third,
                Some(Duration::from_secs(60)),
                Duration::from_secs(12)
            ),
            Some(Duration::from_secs(9))
        );
        assert_eq!(call_budget(third, None, Duration::from_millis(3_500)), None);
        // A short lease (a test's): the margin and the shortest call scale with the call.
        let short = Duration::from_millis(600);
        assert_eq!(
            call_budget(short, None, Duration::from_millis(1_500)),
            Some(short)
        );
        assert_eq!(
            call_budget(short, None, Duration::from_millis(700)),
            Some(Duration::from_millis(400))
        );
        assert_eq!(call_budget(short, None, Duration::from_millis(400)), None);
    }

    #[test]
    fn a_status_answer_is_one_of_four_or_could_not_tell() {
        use serde_json::json;
        assert_eq!(
            StatusAnswer::parse(&json!({"status": "succeeded"})),
            StatusAnswer::Succeeded
        );
        assert_eq!(
            StatusAnswer::parse(&json!({"status": "failed", "reason": "card declined"})),
            StatusAnswer::Failed(Some("card declined".into()))
        );
        assert_eq!(
            StatusAnswer::parse(&json!({"status": "not_found"})),
            StatusAnswer::NotFound
        );
        assert_eq!(
            StatusAnswer::parse(&json!({"status": "pending"})),
            StatusAnswer::Pending
        );
        for other in [
            json!({"status": "done"}),
            json!({}),
            json!([1]),
            json!("succeeded"),
        ] {
            assert!(matches!(
                StatusAnswer::parse(&other),
                StatusAnswer::CouldNotTell(_)
            ));
        }
        assert_eq!(StatusAnswer::NotFound.check(5).answer, "not_found");
        assert_eq!(
            StatusAnswer::CouldNotTell("HTTP 503".into())
                .check(5)
                .answer,
            "unknown"
        );
    }

    #[test]
    fn an_unknown_outcome_follows_the_targets_answer_never_a_blind_call() {
        let after =
            |answer, idempotent, last| after_status(&answer, "HTTP 502", idempotent, last, true);
        assert_eq!(
            after(StatusAnswer::Succeeded, false, false),
            (Completion::Succeeded, Disposition::Ack)
        );
        assert!(matches!(
            after(StatusAnswer::NotFound, false, false),
            (Completion::RetryWait(_), Disposition::Retry)
        ));
        assert!(matches!(
            after(StatusAnswer::NotFound, false, true),
            (Completion::Failed(_), Disposition::Retry)
        ));
        assert!(matches!(
            after(StatusAnswer::Failed(None), false, false),
            (Completion::Failed(_), Disposition::Ack)
        ));
        for answer in [
            StatusAnswer::Pending,
            StatusAnswer::CouldNotTell("down".into()),
        ] {
            assert!(matches!(
                after(answer.clone(), false, false),
                (Completion::Unknown(_), Disposition::Retry)
            ));
            assert!(matches!(
                after(answer.clone(), false, true),
                (Completion::NeedsReconciliation(_), Disposition::Ack)
            ));
            assert!(matches!(
                after(answer, true, true),
                (Completion::Failed(_), Disposition::Retry)
            ));
        }
    }

    #[test]
    fn a_not_found_asked_too_soon_is_not_believed() {
        let early = |last| after_status(&StatusAnswer::NotFound, "HTTP 504", false, last, false);
        assert!(matches!(
            early(false),
            (Completion::Unknown(_), Disposition::Retry)
        ));
        assert!(matches!(
            early(true),
            (Completion::NeedsReconciliation(_), Disposition::Ack)
        ));
        // What the target says it did is believed whenever it comes.
        assert_eq!(
            after_status(&StatusAnswer::Succeeded, "HTTP 504", false, false, false),
            (Completion::Succeeded, Disposition::Ack)
        );
        assert!(matches!(
            after_status(&StatusAnswer::Failed(None), "HTTP 504", false, false, false),
            (Completion::Failed(_), Disposition::Ack)
        ));
    }

    #[test]
    fn an_idempotent_target_is_retried_after_a_5xx() {
        assert!(matches!(classify(502, true), CallOutcome::Retryable(_)));
        assert!(matches!(classify(303, true), CallOutcome::Refused(_)));
        assert!(matches!(classify(404, true), CallOutcome::Refused(_)));
    }
}
