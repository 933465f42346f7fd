//! An email job's call, once begun: the email composed (its review link minted here, never
//! stored) and sent through SES once. SES takes no idempotency key, so the job's target is not
//! idempotent: an attempt whose outcome is unknown (a timeout, a 5xx, a worker that died after
//! the call) ends `needs_reconciliation` and is recorded, never sent again.

use std::time::Duration;

use super::Executor;
use super::policy::CallOutcome;
use crate::email::ses::Sent;
use crate::email::{LinkUse, compose, recipient};
use crate::jobs::EmailJob;

impl Executor {
    pub(super) async fn send_email(&self, job: &EmailJob, budget: Duration) -> CallOutcome {
        let Some(sender) = self.app.config.email.get(job.tenant()) else {
            return CallOutcome::Refused("the tenant has no sender in EMAIL any more".to_owned());
        };
        let Some(to) = recipient(&job.to) else {
            return CallOutcome::Refused("the approver's identity is not an email address".into());
        };
        let Some(link) = self.downstream.review_link(
            (job.tenant(), job.approval_id()),
            &job.to,
            job.message.expires_at,
            job.in_place_of.as_ref(),
        ) else {
            return CallOutcome::Refused("no DECISION_TOKEN_SECRET".to_owned());
        };
        let link_use = if self.app.secrets().oidc.contains_key(job.tenant()) {
            LinkUse::SignIn
        } else {
            LinkUse::Bearer
        };
        let email = compose(job, &link, link_use);
        let sent = self.ses.send(sender, &to, &email, budget).await;
        // A worker that dies here has sent the email, and nothing says so yet.
        fail::fail_point!("email::after_send");
        match sent {
            Sent::Sent => CallOutcome::Succeeded,
            Sent::NotSent(why) => CallOutcome::Retryable(why),
            Sent::Refused(why) => CallOutcome::Refused(why),
            Sent::Unknown(why) => CallOutcome::Unknown(why),
        }
    }
}
