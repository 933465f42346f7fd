//! A Slack job: draws the approval's message as one change left it. One worker at a time draws
//! a message, never a state older than one shown (the message's ledger item, see
//! `store/ledger/slack.rs`); the first draw posts, the others update. A post whose outcome is
//! unknown is settled by looking for the message in the channel before posting again — "ask
//! before you retry", applied to Slack, which has no idempotency key. Every call to Slack starts
//! only with a whole call's time left in the lease, so that no call of a worker whose lease
//! ended can land after the next holder's.

use std::time::{Duration, Instant};

use super::message::Disposition;
use super::policy::call_budget;
use super::{Executor, JobMessage};
use crate::domain::SlackMessage;
use crate::jobs::job::SlackJob;
use crate::slack::SlackApp;
use crate::slack::api::{Found, Sent};
use crate::store::{Guarded, LedgerKey, SlackClaim, SlackRelease, StoreError};

/// How soon a job that found another worker drawing the message comes back: the draw takes a
/// call or two. (As a new message: waiting for another worker is no failed attempt.)
const BUSY_COMES_BACK_SECONDS: i32 = 1;

/// Until when a draw may start a call to Slack: a whole call must end inside the lease and the
/// invocation.
struct Window {
    lease_end: Instant,
    deadline: Option<Instant>,
    call_timeout: Duration,
}

impl Window {
    fn allows_a_call(&self) -> bool {
        let now = Instant::now();
        let budget = call_budget(
            self.call_timeout,
            self.deadline.map(|d| d.saturating_duration_since(now)),
            self.lease_end.saturating_duration_since(now),
        );
        budget == Some(self.call_timeout)
    }
}

/// What a draw did.
#[derive(Debug)]
enum Drawn {
    /// Shown; `learnt`: where the message is, when this draw posted or found it.
    Shown { learnt: Option<SlackMessage> },
    /// Not shown; why, whether a post may have reached Slack unseen, where the message is if a
    /// lookup found it, and when to come back (`None`: the queue's visibility timeout).
    NotShown {
        why: String,
        posted_in_doubt: bool,
        learnt: Option<SlackMessage>,
        back: Option<i32>,
        /// The call's outcome is unknown: Slack may still apply it, so nobody draws the message
        /// until it has settled.
        in_flight: bool,
    },
}

impl Drawn {
    /// What a post or an update means. `in_doubt`: a post may have reached Slack before this
    /// call, unseen (the doubt stays unless this call settles it).
    fn from(sent: Sent, was_post: bool, in_doubt: bool, learnt: Option<SlackMessage>) -> Self {
        let (why, unknown, back) = match sent {
            Sent::Done(message) => {
                return Self::Shown {
                    learnt: learnt.or(was_post.then_some(message)),
                };
            }
            Sent::RateLimited(seconds) => (
                format!("Slack answered ratelimited: again in {seconds} s"),
                false,
                Some(i32::try_from(seconds).unwrap_or(i32::MAX).clamp(1, 43_200)),
            ),
            Sent::NotSent(e) => (format!("not sent: {e}"), false, None),
            Sent::Refused(e) => (format!("Slack refused it: {e}"), false, None),
            // An update may be sent again as it is; a post is looked for first. Either may
            // still land: see `in_flight`.
            Sent::Unknown(e) => (format!("outcome unknown: {e}"), true, None),
        };
        Self::NotShown {
            why,
            posted_in_doubt: (in_doubt || (unknown && was_post)) && learnt.is_none(),
            learnt,
            back,
            in_flight: unknown,
        }
    }

    /// Out of time before a call: nothing settled.
    fn no_time(in_doubt: bool, learnt: Option<SlackMessage>) -> Self {
        Self::NotShown {
            why: "too little of the lease left for another call to Slack".to_owned(),
            posted_in_doubt: in_doubt && learnt.is_none(),
            learnt,
            back: None,
            in_flight: false,
        }
    }
}

impl Executor {
    pub(super) async fn draw_slack(
        &self,
        message: &JobMessage,
        job: &SlackJob,
        deadline: Option<Instant>,
    ) -> Result<Disposition, StoreError> {
        let state = &job.message;
        let secrets = self.app.secrets();
        let Some(slack) = secrets.slack.get(&state.tenant) else {
            tracing::warn!(tenant = %state.tenant, "the tenant has no Slack app any more: message not drawn");
            return Ok(Disposition::Ack);
        };
        if message.receive_count > self.app.config.job_max_attempts {
            tracing::error!(approval_id = %state.approval_id, "Slack message not drawn within its attempts: on to the DLQ");
            self.queue.come_back_in(message, 0).await;
            return Ok(Disposition::Retry);
        }
        let window = Window {
            lease_end: Instant::now() + Duration::from_millis(self.lease_ms as u64),
            deadline,
            call_timeout: self.call_timeout,
        };
        if !window.allows_a_call() {
            return Ok(Disposition::Retry);
        }
        let key = LedgerKey {
            tenant: state.tenant.clone(),
            approval_id: state.approval_id.clone(),
            guards: Guarded::SlackMessage,
            generation: 0,
            expires_at: Some(state.expires_at),
        };
        let token = ulid::Ulid::new().to_string();
        let (now, now_ms) = (self.app.clock.now(), self.app.clock.now_millis());
        let claim = self
            .app
            .store
            .claim_slack_message(
                &key,
                &job.version,
                &token,
                (now, now_ms),
                now_ms + self.lease_ms,
                self.settle_ms(),
            )
            .await?;
        let drawn = match claim {
            SlackClaim::Stale => return Ok(Disposition::Ack),
            SlackClaim::Busy { not_before_ms } => {
                let back = not_before_ms.map_or(BUSY_COMES_BACK_SECONDS, |at| {
                    seconds_until(at - self.app.clock.now_millis())
                });
                return Ok(self.queue.send_again(message, back).await);
            }
            // A claim slowed down (the store retrying) may leave too little for a call.
            SlackClaim::Claimed { message: _, doubt } if !window.allows_a_call() => {
                Drawn::no_time(doubt, None)
            }
            SlackClaim::Claimed {
                message: posted,
                doubt,
            } => self.draw(slack, job, posted, doubt, &window).await,
        };
        let now = self.app.clock.now();
        let store = &self.app.store;
        match drawn {
            Drawn::Shown { learnt } => {
                if !store
                    .slack_message_shown(&key, &token, &job.version, learnt.as_ref(), now)
                    .await?
                {
                    tracing::warn!(approval_id = %state.approval_id, "Slack message drawn after the lease was lost");
                }
                tracing::debug!(approval_id = %state.approval_id, version = job.version, "Slack message drawn");
                Ok(Disposition::Ack)
            }
            Drawn::NotShown {
                why,
                posted_in_doubt,
                learnt,
                back,
                in_flight,
            } => {
                tracing::warn!(approval_id = %state.approval_id, reason = why, "Slack message not drawn yet");
                // Slack's Retry-After holds every worker back from this message, not only this one.
                // A call that may still land holds them back until it has settled.
                let now_ms = self.app.clock.now_millis();
                let not_before_ms = back
                    .map(|seconds| now_ms + i64::from(seconds) * 1000)
                    .or(in_flight.then(|| now_ms + self.settle_ms()));
                let release = SlackRelease {
                    error: &why,
                    posted_in_doubt,
                    learnt: learnt.as_ref(),
                    not_before_ms,
                };
                store
                    .release_slack_message(&key, &token, release, now)
                    .await?;
                match back {
                    // Waiting out Slack's limit is no failed attempt either.
                    Some(seconds) => Ok(self.queue.send_again(message, seconds).await),
                    None => Ok(Disposition::Retry),
                }
            }
        }
    }

    /// Posts a reminder's or a step's reply in the approval's Slack thread, within `budget`.
    pub(super) async fn reply_in_slack(
        &self,
        job: &crate::jobs::job::SlackReplyJob,
        budget: Duration,
    ) -> super::policy::CallOutcome {
        use super::policy::CallOutcome;
        let secrets = self.app.secrets();
        let Some(app) = secrets.slack.get(&job.tenant) else {
            return CallOutcome::Refused("the tenant has no Slack app any more".to_owned());
        };
        let text = job.text(|approver| app.mention(approver));
        let sent = tokio::time::timeout(budget, self.slack_api.reply(app, &job.thread, &text))
            .await
            .unwrap_or_else(|_| Sent::Unknown("no answer within the timeout".to_owned()));
        match sent {
            Sent::Done(_) => CallOutcome::Succeeded,
            Sent::RateLimited(seconds) => {
                CallOutcome::Retryable(format!("Slack rate-limited the reply ({seconds} s)"))
            }
            Sent::NotSent(error) => CallOutcome::Retryable(error),
            Sent::Refused(error) => CallOutcome::Refused(error),
            Sent::Unknown(error) => CallOutcome::Unknown(error),
        }
    }

    /// How long a call to Slack whose answer never came may still land: as long as the call
    /// could last.
    fn settle_ms(&self) -> i64 {
        i64::try_from(self.call_timeout.as_millis()).unwrap_or(i64::MAX)
    }

    /// Posts the message, or updates it where it is; a post in doubt is looked for first.
    async fn draw(
        &self,
        slack: &SlackApp,
        job: &SlackJob,
        posted: Option<SlackMessage>,
        doubt: bool,
        window: &Window,
    ) -> Drawn {
        let state = &job.message;
        let api = &self.slack_api;
        if let Some(message) = posted {
            return Drawn::from(api.update(slack, &message, state).await, false, false, None);
        }
        if doubt {
            let may_call = || window.allows_a_call();
            match api
                .find_posted(slack, state, job.created_at, &may_call)
                .await
            {
                // Posted before, perhaps showing an older state: draw this one over it.
                Found::Posted(message) if window.allows_a_call() => {
                    let sent = api.update(slack, &message, state).await;
                    return Drawn::from(sent, false, false, Some(message));
                }
                Found::Posted(message) => return Drawn::no_time(false, Some(message)),
                Found::NotPosted => {}
                Found::RateLimited(seconds) => {
                    return Drawn::from(Sent::RateLimited(seconds), false, true, None);
                }
                Found::CouldNotTell(why) => {
                    return Drawn::NotShown {
                        why: format!(
                            "a post may have reached Slack and the lookup could not tell: {why}"
                        ),
                        posted_in_doubt: true,
                        learnt: None,
                        back: None,
                        in_flight: false,
                    };
                }
            }
            // Not posted, as the channel says: a post now is the first.
            if !window.allows_a_call() {
                return Drawn::no_time(false, None);
            }
        }
        Drawn::from(api.post(slack, state).await, true, false, None)
    }
}

/// Whole seconds covering `ms` (at least one, at most SQS's 12 hours).
fn seconds_until(ms: i64) -> i32 {
    i32::try_from((ms + 999) / 1000)
        .unwrap_or(43_200)
        .clamp(1, 43_200)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doubt_after(sent: Sent, was_post: bool, in_doubt: bool) -> bool {
        match Drawn::from(sent, was_post, in_doubt, None) {
            Drawn::NotShown {
                posted_in_doubt, ..
            } => posted_in_doubt,
            Drawn::Shown { .. } => panic!("shown"),
        }
    }

    #[test]
    fn a_post_in_doubt_is_looked_for_and_the_doubt_is_kept_until_settled() {
        assert!(doubt_after(Sent::Unknown("HTTP 502".into()), true, false));
        assert!(!doubt_after(Sent::Unknown("HTTP 502".into()), false, false));
        match Drawn::from(Sent::Unknown("timeout".into()), false, false, None) {
            Drawn::NotShown { in_flight, .. } => assert!(in_flight, "an update may still land"),
            Drawn::Shown { .. } => panic!("shown"),
        }
        assert!(!doubt_after(Sent::NotSent("refused".into()), true, false));
        assert!(!doubt_after(
            Sent::Refused("channel_not_found".into()),
            true,
            false
        ));
        // A doubt nothing settled is kept, whatever this call was.
        assert!(doubt_after(Sent::RateLimited(3), false, true));
        assert!(doubt_after(Sent::NotSent("refused".into()), false, true));
        match Drawn::from(Sent::RateLimited(30), true, false, None) {
            Drawn::NotShown {
                back,
                posted_in_doubt,
                ..
            } => assert_eq!((back, posted_in_doubt), (Some(30), false)),
            Drawn::Shown { .. } => panic!("shown"),
        }
        // A message found is no longer in doubt.
        let found = SlackMessage {
            channel: "C1".into(),
            ts: "1.2".into(),
        };
        match Drawn::no_time(true, Some(found.clone())) {
            Drawn::NotShown {
                posted_in_doubt,
                learnt,
                ..
            } => assert_eq!((posted_in_doubt, learnt), (false, Some(found))),
            Drawn::Shown { .. } => panic!("shown"),
        }
        assert_eq!(seconds_until(1), 1);
        assert_eq!(seconds_until(2_001), 3);
        assert_eq!(seconds_until(-5), 1);
    }
}
