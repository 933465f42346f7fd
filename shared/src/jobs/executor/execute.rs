//! An attempt's call, once begun: an execution's call to its action target, or GitHub's answer
//! to a deployment's review (which takes the same way: one call, its end recorded once). An
//! operator's retry asks the target first, and an outcome the target can later tell is left to
//! its status URL rather than called again.

use std::time::{Duration, Instant};

use super::message::Disposition;
use super::policy::{CallOutcome, StatusAnswer, call_budget, comes_back, seconds_from_ms};
use super::{Attempt, Executor, Receipt, count_outcome, policy};
use crate::domain::Completion;
use crate::jobs::job::{ExecuteJob, Job};
use crate::observe::{self, Metric};
use crate::store::{AttemptEnd, StoreError};

impl Executor {
    /// Calls the target of the attempt this worker began (`budget`: the call's time, if any is
    /// left after the begin), and records what the call told.
    pub(super) async fn call_target(
        &self,
        r: &Receipt<'_>,
        attempt: &Attempt,
        budget: Option<Duration>,
    ) -> Result<Disposition, StoreError> {
        // An operator's retry (a generation after the first) follows an execution whose
        // outcome may be unknown: a target that can say what became of the key is asked before
        // it is called again, as every automatic retry does. A target that says it acted records
        // `succeeded` and nothing is sent; one that says it never took the key (`not_found`) or
        // that it failed (it did not act: what the operator asks to do again) is called; one
        // that cannot tell yet is asked again later, never called blind.
        if let (Job::Execute(j), Some(status), Some(_), Some(budget)) =
            (&r.job, &r.target.status, &r.target.url, budget)
            && j.generation > 0
        {
            let answer = self.downstream.ask(&r.job, &status.url, Some(budget)).await;
            let check = answer.check(self.app.clock.now());
            observe::count(Metric::StatusQuery, &[check.answer.as_str()]);
            if !matches!(answer, StatusAnswer::NotFound | StatusAnswer::Failed(_)) {
                let (completion, disposition) = policy::after_status(
                    &answer,
                    "an operator's retry asked the target before calling it again",
                    r.target.idempotent,
                    self.last_attempt(r),
                    true,
                );
                tracing::info!(job = r.job.id(), answer = ?answer, attempt_outcome = ?completion, "operator retry settled by the target's status, not called");
                let end = AttemptEnd {
                    check: Some(&check),
                    ..AttemptEnd::by_owner(&completion, &attempt.token)
                };
                let back = comes_back(&completion, disposition, r.message.receive_count);
                return self.finish(r, attempt, end, disposition, back).await;
            }
        }
        // How long GitHub asked to wait before the answer is sent again (429, a rate limit).
        let mut github_wait: Option<u64> = None;
        // The budget left after the status query, if one was asked.
        let until_lease_end = attempt.lease_end.saturating_duration_since(Instant::now());
        let budget =
            budget.and_then(|_| call_budget(self.call_timeout, r.remaining(), until_lease_end));
        let outcome = match (&r.target.url, budget) {
            (Some(_), None) => CallOutcome::Retryable(
                "not sent: too little of the invocation or the lease was left after the begin"
                    .to_owned(),
            ),
            (Some(url), Some(budget)) => {
                if let Job::Execute(j) = &r.job {
                    observe::count(Metric::ExecutionAttempt, &[j.action_type.as_str()]);
                }
                match (r.job.github_call(), &r.job) {
                    (Some(call), _) => {
                        let answered = self.downstream.answer_github(&r.job, call, budget).await;
                        self.github_outcome(r, answered, &mut github_wait).await?
                    }
                    (None, Job::SlackReply(reply)) => self.reply_in_slack(reply, budget).await,
                    (None, Job::Email(email)) => self.send_email(email, budget).await,
                    (None, _) => {
                        self.downstream
                            .send(&r.job, url, r.target.idempotent, budget)
                            .await
                    }
                }
            }
            (None, _) => {
                let kind = match &r.job {
                    Job::Execute(j) => j.action_type.as_str(),
                    Job::Notify(_)
                    | Job::Callback(_)
                    | Job::Slack(_)
                    | Job::SlackReply(_)
                    | Job::Github(_)
                    | Job::Resume(_)
                    | Job::Email(_) => r.job.kind(),
                };
                CallOutcome::Refused(format!("action type {kind:?} is not configured"))
            }
        };
        match &r.job {
            Job::Execute(_) => {
                if let Some(ms) = stall_after_downstream() {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                }
            }
            Job::Notify(_)
            | Job::Callback(_)
            | Job::Slack(_)
            | Job::SlackReply(_)
            | Job::Github(_)
            | Job::Resume(_)
            | Job::Email(_) => {}
        }

        // Whether it acted is not known, and the target can say: ask it — not now, but once it
        // has had its status delay to record the key (a gateway's 504 can come while the target
        // still works on the request, and its `not_found` would then be wrong). The message
        // comes back after the delay; other jobs go on meanwhile.
        if let (CallOutcome::Unknown(error), Some(status)) = (&outcome, &r.target.status) {
            let completion = Completion::Unknown(format!(
                "outcome unknown ({error}); the target's status URL is asked from {} s after the call",
                status.delay_ms / 1000
            ));
            let end = AttemptEnd {
                call_ended_ms: Some(self.app.clock.now_millis()),
                due_at: Some(self.app.clock.now() + status.delay_ms / 1000),
                ..AttemptEnd::by_owner(&completion, &attempt.token)
            };
            let back = Some(seconds_from_ms(status.delay_ms));
            return self.finish(r, attempt, end, Disposition::Retry, back).await;
        }
        let (completion, disposition) =
            policy::after_call(outcome, false, r.target.idempotent, self.last_attempt(r));
        let end = AttemptEnd::by_owner(&completion, &attempt.token);
        let back = comes_back(&completion, disposition, r.message.receive_count);
        // GitHub's Retry-After (or rate limit reset) is never shortened by the backoff.
        let back = match (back, github_wait) {
            (Some(back), Some(wait)) => Some(back.max(i32::try_from(wait).unwrap_or(i32::MAX))),
            (back, _) => back,
        };
        self.finish(r, attempt, end, disposition, back).await
    }

    /// `ExecutionEnded` by outcome once an execution's end is written, and `DecisionToEffect`
    /// for an end the target's answer made (the decision is kept to the second).
    pub(super) fn count_execution_end(&self, job: &ExecuteJob, completion: &Completion) {
        if !count_outcome(completion) {
            return;
        }
        let decided_at = job.decision["decided_at"].as_str().and_then(|at| {
            time::OffsetDateTime::parse(at, &time::format_description::well_known::Rfc3339).ok()
        });
        if let (Some(decided_at), Completion::Succeeded | Completion::Failed(_)) =
            (decided_at, completion)
        {
            let decided_ms = decided_at.unix_timestamp().saturating_mul(1000);
            observe::milliseconds(
                Metric::DecisionToEffect,
                &[job.action_type.as_str()],
                self.app.clock.now_millis() - decided_ms,
            );
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
