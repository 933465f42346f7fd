//! What the executor decides, as pure functions: what an answer says about the action, what
//! follows from a target's word about an unknown outcome, how long a call may take, and when a
//! message comes back.

use std::time::Duration;

use super::message::Disposition;
use crate::domain::{Completion, StatusCheck};

/// What a downstream call told us.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum CallOutcome {
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
pub(super) enum StatusAnswer {
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
    pub(super) fn parse(body: &serde_json::Value) -> Self {
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
    pub(super) fn check(&self, at: i64) -> StatusCheck {
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
pub(super) fn after_status(
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

/// What follows from a call's `outcome`, when the target cannot be asked about a doubt: the
/// attempt's end, and what becomes of the message. `notice`: a notification or a callback,
/// whose refusal is lost to its reader; `last_attempt`: the job's attempts are used up.
pub(super) fn after_call(
    outcome: CallOutcome,
    notice: bool,
    idempotent: bool,
    last_attempt: bool,
) -> (Completion, Disposition) {
    match outcome {
        CallOutcome::Succeeded => (Completion::Succeeded, Disposition::Ack),
        // A notification or callback its receiver refuses is lost to its reader: recorded
        // (`notification.failed` / `callback.failed`) and sent on to the DLQ, whose alarm
        // someone watches.
        CallOutcome::Refused(error) if notice => (Completion::Failed(error), Disposition::Retry),
        CallOutcome::Refused(error) => (Completion::Failed(error), Disposition::Ack),
        CallOutcome::Unknown(error) if !idempotent => (
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
    }
}

/// When a message whose attempt ended with `completion` comes back (seconds from now): after a
/// backoff for a retry or a status query, at once for one going on to the DLQ; `None` leaves it
/// to the queue.
pub(super) fn comes_back(
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
pub(super) fn seconds_from_ms(ms: i64) -> i32 {
    ((ms.max(0) + 999) / 1000).min(43_200) as i32
}

/// Time kept, at the end of an invocation, for the ledger write that records an attempt's end.
const LEDGER_MARGIN: Duration = Duration::from_secs(3);
/// The pauses between tries of an attempt's end write: doubling from the first to the longest.
pub(super) const END_WRITE_FIRST_PAUSE: Duration = Duration::from_millis(50);
pub(super) const END_WRITE_LONGEST_PAUSE: Duration = Duration::from_secs(1);
/// A try of the end write is not started with less than this left before the cut-off.
pub(super) const SHORTEST_END_WRITE: Duration = Duration::from_secs(1);
/// Kept at the very end of an invocation to answer Lambda (the batch item failures).
pub(super) const ANSWER_MARGIN: Duration = Duration::from_millis(200);
/// Below this, a call is not worth starting: the message comes back to a fresh invocation.
const SHORTEST_CALL: Duration = Duration::from_secs(1);

/// How long a downstream call may take: at most `call_timeout` (a third of the lease), and it
/// must end with time left to write the attempt's end both before the invocation's deadline
/// (Lambda kills an invocation at its deadline, so a call it cut off would leave the attempt
/// unrecorded) and before the attempt's lease ends (after it, another worker may take the job
/// over and call the target again, or hand it to an operator). `None`: too little time is left
/// to start one.
pub(super) fn call_budget(
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

/// What a target's answer says about the action.
pub(super) fn classify(status: u16, idempotent: bool) -> CallOutcome {
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

    #[test]
    fn a_call_whose_outcome_is_unknown_is_never_a_success() {
        let unknown = || CallOutcome::Unknown("HTTP 504".into());
        assert!(matches!(
            after_call(unknown(), false, false, false),
            (Completion::NeedsReconciliation(_), Disposition::Ack)
        ));
        assert!(matches!(
            after_call(unknown(), false, true, false),
            (Completion::RetryWait(_), Disposition::Retry)
        ));
        assert!(matches!(
            after_call(unknown(), false, true, true),
            (Completion::Failed(_), Disposition::Retry)
        ));
        assert!(matches!(
            after_call(CallOutcome::Refused("HTTP 400".into()), true, true, false),
            (Completion::Failed(_), Disposition::Retry)
        ));
        assert!(matches!(
            after_call(CallOutcome::Refused("HTTP 400".into()), false, true, false),
            (Completion::Failed(_), Disposition::Ack)
        ));
        assert_eq!(
            after_call(CallOutcome::Succeeded, false, false, true),
            (Completion::Succeeded, Disposition::Ack)
        );
    }
}
