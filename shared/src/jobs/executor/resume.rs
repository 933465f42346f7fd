//! A resume job's call: Step Functions' `SendTaskSuccess` / `SendTaskFailure`, or Lambda's
//! `SendDurableExecutionCallbackSuccess` / `…Failure`, through the AWS SDK (its endpoints:
//! `AWS_ENDPOINT_URL_SFN`, `AWS_ENDPOINT_URL_LAMBDA`, or `AWS_ENDPOINT_URL`).
//!
//! A token answers once: AWS refuses a second answer (`TaskDoesNotExist`, or
//! `CallbackTimeoutException` for a closed callback). So the call may be sent again after an
//! outcome it could not learn, and such a refusal after an earlier attempt that may have landed
//! is that attempt's success; before any, the workflow no longer waits (it timed out, or was
//! stopped): the job ends `failed`, not retried.

use std::time::Duration;

use aws_sdk_lambda::error::{ProvideErrorMetadata, SdkError};
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;

use super::message::Disposition;
use super::policy::{CallOutcome, comes_back};
use super::{Attempt, Executor, Receipt, policy};
use crate::domain::Completion;
use crate::domain::resume::{Resume, ResumeAnswer, ResumeKind};
use crate::jobs::job::{Job, ResumeJob};
use crate::store::{AttemptEnd, LedgerEntry, StoreError};

/// The error codes that say the workflow no longer waits for this token: not retried.
const NOTHING_WAITS: [&str; 4] = [
    "TaskDoesNotExist",
    "TaskTimedOut",
    "InvalidToken",
    "CallbackTimeoutException",
];

/// The error codes that say "later" (with 5xx): retried for `RESUME_RETRY_SECONDS`.
const THROTTLED: [&str; 5] = [
    "ThrottlingException",
    "TooManyRequestsException",
    "KmsThrottlingException",
    "RequestLimitExceeded",
    "ServiceUnavailable",
];

/// The AWS clients a resume job calls, built once per process from the executor's SDK
/// configuration (its role's credentials, the SDK's endpoints).
#[derive(Debug, Clone)]
pub struct Workflows {
    sfn: aws_sdk_sfn::Client,
    lambda: aws_sdk_lambda::Client,
}

impl Workflows {
    /// The SDK's own retries are off: each answer is one call, and the job's attempts (with
    /// the ledger's record of each) are what retries it.
    pub fn new(sdk: &aws_config::SdkConfig) -> Self {
        let once = aws_config::retry::RetryConfig::disabled();
        Self {
            sfn: aws_sdk_sfn::Client::from_conf(
                aws_sdk_sfn::config::Builder::from(sdk)
                    .retry_config(once.clone())
                    .build(),
            ),
            lambda: aws_sdk_lambda::Client::from_conf(
                aws_sdk_lambda::config::Builder::from(sdk)
                    .retry_config(once)
                    .build(),
            ),
        }
    }
}

impl Executor {
    /// Answers the workflow of the attempt this worker began (`left`: the ledger as the begin
    /// left it), and records what the answer told. The token and the decision document are
    /// read from the approval (one strongly consistent read), never carried by the job.
    pub(super) async fn resume(
        &self,
        r: &Receipt<'_>,
        job: &ResumeJob,
        attempt: &Attempt,
        left: Option<&LedgerEntry>,
        budget: Option<Duration>,
    ) -> Result<Disposition, StoreError> {
        let approval = self
            .app
            .store
            .get_approval(&job.tenant, &job.approval_id)
            .await?;
        let waiting = approval.as_ref().and_then(|a| {
            let resume = a.resume.as_ref().filter(|r| r.holds_token())?;
            Some((resume, ResumeAnswer::of(a)?))
        });
        let sent = waiting
            .as_ref()
            .map(|(resume, answer)| (answer.error().unwrap_or("success"), resume.token.name()));
        let outcome = match (&waiting, budget) {
            _ if !self.app.config.resume_types.enables(job.kind) => CallOutcome::Refused(format!(
                "resume type {:?} is not enabled any more (RESUME_TYPES)",
                job.kind.as_str()
            )),
            (None, _) => CallOutcome::Refused(
                "the approval holds no token to answer with (answered already, or gone)".to_owned(),
            ),
            (Some(_), None) => CallOutcome::Retryable(
                "not sent: too little of the invocation or the lease was left after the begin"
                    .to_owned(),
            ),
            (Some((resume, answer)), Some(budget)) => {
                match tokio::time::timeout(budget, self.answer(resume, answer)).await {
                    Ok(outcome) => outcome,
                    Err(_) => CallOutcome::Unknown(format!("no answer within {budget:?}")),
                }
            }
        };
        // The answer may have landed, and nothing is written yet: a crash here comes back to a
        // token that answers no more.
        fail::fail_point!("resume::after_answer");
        let mut confirmed = true;
        let outcome = match outcome {
            // A second answer of ours is refused as one after the workflow's end is: an earlier
            // attempt that may have landed makes it ours — recorded as not confirmed.
            // (Never an invalid token: no answer of ours makes one.)
            CallOutcome::Refused(why)
                if nothing_waits(&why)
                    && !why.contains("InvalidToken")
                    && left.is_some_and(may_have_landed) =>
            {
                tracing::info!(
                    job = r.job.id(),
                    why,
                    "the workflow no longer waits after an earlier answer that may have landed: taken as that answer's, not confirmed"
                );
                confirmed = false;
                CallOutcome::Succeeded
            }
            outcome => outcome,
        };
        // Retried through throttling and 5xx for `RESUME_RETRY_SECONDS` (a brownout), not for
        // the job's attempts: each retry is a new message sent with backoff, so neither the
        // queue's redrive nor its visibility bound it (review of v6, finding 7).
        let now = self.app.clock.now();
        let since = job.since.unwrap_or(now);
        let spent = now - since >= self.app.config.resume_retry_seconds;
        let (completion, disposition) = policy::after_call(outcome, false, true, spent);
        let completion = match completion {
            Completion::Failed(why) if spent => Completion::Failed(format!(
                "{why}; given up after {} s of retries (RESUME_RETRY_SECONDS)",
                now - since
            )),
            completion => completion,
        };
        let name = sent
            .as_ref()
            .map(|(answer, token)| (*answer, token.as_str()));
        let events: Vec<_> = job
            .ended_event(&completion, name, confirmed, now)
            .into_iter()
            .collect();
        let end = AttemptEnd {
            events: &events,
            ..AttemptEnd::by_owner(&completion, &attempt.token)
        };
        if matches!(completion, Completion::RetryWait(_)) {
            // Recorded, then sent again with its first try's time, the backoff doubling with
            // each resend (at most SQS's 15 minutes).
            let again = Job::Resume(ResumeJob {
                since: Some(since),
                resends: job.resends + 1,
                ..job.clone()
            });
            let written = self.finish(r, attempt, end, Disposition::Ack, None).await?;
            if written == Disposition::Retry {
                return Ok(Disposition::Retry);
            }
            let delay = resume_backoff(job.resends + 1);
            return Ok(self.queue.send_job_again(r.message, &again, delay).await);
        }
        let back = comes_back(&completion, disposition, r.message.receive_count);
        self.finish(r, attempt, end, disposition, back).await
    }

    /// One answer call; its error names the token only by its hash.
    async fn answer(&self, resume: &Resume, answer: &ResumeAnswer) -> CallOutcome {
        let token = resume.token.expose();
        let workflows = &self.workflows;
        let result = match (resume.kind, answer) {
            (ResumeKind::StepFunctions, ResumeAnswer::Success { document }) => workflows
                .sfn
                .send_task_success()
                .task_token(token)
                .output(document)
                .send()
                .await
                .map(drop)
                .map_err(classify),
            (ResumeKind::StepFunctions, ResumeAnswer::Failure { error, document }) => workflows
                .sfn
                .send_task_failure()
                .task_token(token)
                .error(error)
                .cause(document)
                .send()
                .await
                .map(drop)
                .map_err(classify),
            (ResumeKind::LambdaDurable, ResumeAnswer::Success { document }) => workflows
                .lambda
                .send_durable_execution_callback_success()
                .callback_id(token)
                .result(aws_sdk_lambda::primitives::Blob::new(document.as_bytes()))
                .send()
                .await
                .map(drop)
                .map_err(classify),
            (ResumeKind::LambdaDurable, ResumeAnswer::Failure { error, document }) => {
                let object = aws_sdk_lambda::types::ErrorObject::builder()
                    .error_type(error)
                    .error_message(format!(
                        "Countersign approval {} ended {}",
                        document_id(document),
                        error.trim_start_matches("Countersign.").to_lowercase()
                    ))
                    .error_data(document)
                    .build();
                workflows
                    .lambda
                    .send_durable_execution_callback_failure()
                    .callback_id(token)
                    .error(object)
                    .send()
                    .await
                    .map(drop)
                    .map_err(classify)
            }
        };
        match result {
            Ok(()) => CallOutcome::Succeeded,
            Err(outcome) => redacted(outcome, token, &resume.token.name()),
        }
    }
}

/// The approval id a decision document names.
fn document_id(document: &str) -> String {
    serde_json::from_str::<serde_json::Value>(document)
        .ok()
        .and_then(|d| d["approval_id"].as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// The pause before a workflow's answer is tried again: 1, 2, 4 … seconds by resend, at most
/// SQS's longest delay (15 minutes).
fn resume_backoff(resends: u32) -> i32 {
    (1i64 << resends.saturating_sub(1).min(10)).min(900) as i32
}

/// What an SDK error means for the job.
fn classify<E: ProvideErrorMetadata + std::error::Error + 'static>(
    error: SdkError<E, HttpResponse>,
) -> CallOutcome {
    match &error {
        SdkError::ServiceError(context) => {
            let status = context.raw().status().as_u16();
            let code = context.err().code().unwrap_or("").to_owned();
            let why = format!(
                "{} (HTTP {status}): {}",
                if code.is_empty() { "error" } else { &code },
                context.err().message().unwrap_or("no message")
            );
            if NOTHING_WAITS.contains(&code.as_str()) {
                CallOutcome::Refused(format!("{NO_LONGER_WAITS}: {why}"))
            } else if THROTTLED.contains(&code.as_str()) || status == 429 {
                // Refused before it was taken: this answer never reached the workflow.
                CallOutcome::Retryable(format!("not sent: {why}"))
            } else if status >= 500 {
                // AWS failed it: it may or may not have been applied.
                CallOutcome::Retryable(why)
            } else {
                CallOutcome::Refused(why)
            }
        }
        // Built, never sent.
        SdkError::ConstructionFailure(_) => CallOutcome::Refused(format!(
            "not sent: {}",
            aws_sdk_lambda::error::DisplayErrorContext(&error)
        )),
        // Sent, or perhaps sent: whether it landed is not known (a second send is refused if
        // it did, see the module's notes).
        _ => CallOutcome::Unknown(format!(
            "{}",
            aws_sdk_lambda::error::DisplayErrorContext(&error)
        )),
    }
}

/// The words that open a refusal saying the workflow no longer waits.
const NO_LONGER_WAITS: &str = "the workflow no longer waits";

fn nothing_waits(why: &str) -> bool {
    why.starts_with(NO_LONGER_WAITS)
}

/// Whether an attempt before this one may have reached AWS: one that did not end `not sent`
/// (never sent, or throttled), counting this one's begin.
fn may_have_landed(entry: &LedgerEntry) -> bool {
    entry.attempts > 1 + entry.unsent
}

/// The outcome with the token (should AWS's message quote it, as it is or percent-encoded as
/// in a URL's path) replaced by its name.
fn redacted(outcome: CallOutcome, token: &str, name: &str) -> CallOutcome {
    let encoded = percent_encoding::utf8_percent_encode(token, percent_encoding::NON_ALPHANUMERIC)
        .to_string();
    let clean = |why: String| why.replace(token, name).replace(&encoded, name);
    match outcome {
        CallOutcome::Succeeded => CallOutcome::Succeeded,
        CallOutcome::Refused(why) => CallOutcome::Refused(clean(why)),
        CallOutcome::Retryable(why) => CallOutcome::Retryable(clean(why)),
        CallOutcome::Unknown(why) => CallOutcome::Unknown(clean(why)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retry_waits_longer_each_attempt_up_to_sqs_longest_delay() {
        let waits: Vec<i32> = (1..=12).map(resume_backoff).collect();
        assert_eq!(&waits[..5], [1, 2, 4, 8, 16]);
        assert!(waits.iter().all(|w| *w <= 900));
        assert_eq!(waits[11], 900);
    }

    #[test]
    fn a_refusal_after_an_answer_that_may_have_landed_is_that_answer() {
        let entry = |attempts, unsent| LedgerEntry {
            status: crate::domain::LedgerStatus::InProgress,
            generation: 0,
            token: String::new(),
            lease_until_ms: 0,
            attempts,
            unsent,
            last_error: None,
            call_ended_ms: None,
            updated_at: 0,
            notified: Vec::new(),
            not_notified: Vec::new(),
        };
        assert!(!may_have_landed(&entry(1, 0)));
        assert!(!may_have_landed(&entry(2, 1)));
        assert!(may_have_landed(&entry(2, 0)));
        assert!(nothing_waits(&format!("{NO_LONGER_WAITS}: TaskTimedOut")));
        assert!(!nothing_waits("ThrottlingException"));
    }

    #[test]
    fn the_token_never_survives_in_an_error() {
        let token = "AAAAKgAAAAIAAAAAAAAAAS3cret";
        let outcome = redacted(
            CallOutcome::Refused(format!("InvalidToken: Invalid token '{token}'")),
            token,
            "sha256:abc",
        );
        let CallOutcome::Refused(why) = outcome else {
            panic!("{outcome:?}")
        };
        assert_eq!(why, "InvalidToken: Invalid token 'sha256:abc'");
        let id = "Y2Fs+bGJh/Y2s=";
        let outcome = redacted(
            CallOutcome::Unknown("POST /2025-12-01/durable-execution-callbacks/Y2Fs%2BbGJh%2FY2s%3D/succeed: timed out".to_owned()),
            id,
            "sha256:def",
        );
        let CallOutcome::Unknown(why) = outcome else {
            panic!("{outcome:?}")
        };
        assert!(why.contains("callbacks/sha256:def/succeed"), "{why}");
    }
}
