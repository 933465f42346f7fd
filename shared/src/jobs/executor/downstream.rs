//! The calls the executor makes: the action targets, the notifier and the tenants' callback
//! receivers (one `send` per job, answered as a [`CallOutcome`]), a target's status URL
//! (`ask`, answered as a [`StatusAnswer`]), and GitHub (`answer_github`). Only configured URLs
//! are ever called (GitHub's: the tenant's `api_url`).

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::policy::{CallOutcome, StatusAnswer, classify};
use crate::config::{KEY_PLACEHOLDER, Secrets};
use crate::domain::{Approver, rfc3339};
pub(super) use crate::github::api::Answered;
use crate::github::api::GithubApi;
use crate::jobs::job::{CallbackJob, ExecuteJob, GithubCall, GithubJob, Job, NotifyJob};
use crate::observe::trace::TRACEPARENT;
use crate::{App, ConfigError};

/// How long a review link outlives its approval's expiry: long enough to show the approver
/// what became of it (deciding is refused by the decision's own condition from the expiry on).
const REVIEW_LINK_GRACE_SECONDS: i64 = 7 * 86_400;

/// The longest a status query may take.
const STATUS_TIMEOUT: Duration = Duration::from_secs(5);

/// Where a job's call goes, resolved from the configuration.
pub(super) struct Target {
    /// `None`: nowhere (the action type is not configured, the tenant has no subscription): the
    /// job fails without a call.
    pub url: Option<String>,
    /// Whether the receiver dedupes by the job's business key.
    pub idempotent: bool,
    /// How a doubt about whether it acted is settled, if the target can say.
    pub status: Option<StatusQuery>,
}

/// A target's status URL and how long after a doubtful call it is asked.
pub(super) struct StatusQuery {
    pub url: String,
    pub delay_ms: i64,
}

impl Target {
    /// Where `job`'s call goes under the configuration in force (`ACTION_TARGETS` and
    /// `NOTIFIER_URL` are secret-bearing: a rotation reaches the next job).
    pub fn of(job: &Job, secrets: &Secrets) -> Self {
        match job {
            Job::Notify(_) => Self {
                url: secrets.notifier_url.clone(),
                idempotent: true,
                status: None,
            },
            // Receivers dedupe by `webhook-id` (the event id), as Standard Webhooks asks.
            Job::Callback(j) => Self {
                url: secrets
                    .event_subscriptions
                    .get(&j.tenant)
                    .map(|s| s.url.clone()),
                idempotent: true,
                status: None,
            },
            // AWS's API through the SDK (`resume.rs`): a second answer is refused by AWS.
            Job::Resume(_) => Self {
                url: Some("aws".to_owned()),
                idempotent: true,
                status: None,
            },
            // SES, through the SDK (`email.rs`); it takes no key: at most once.
            Job::Email(_) => Self {
                url: Some("ses".to_owned()),
                idempotent: false,
                status: None,
            },
            // Drawn by the Slack path, never called here.
            Job::Slack(_) => Self {
                url: None,
                idempotent: true,
                status: None,
            },
            // Slack's Web API, for a tenant with a bot token; it takes no key: at most once.
            Job::SlackReply(j) => Self {
                url: secrets
                    .slack
                    .get(&j.tenant)
                    .filter(|app| app.bot_token.is_some())
                    .map(|app| app.api_base_url.clone()),
                idempotent: false,
                status: None,
            },
            // GitHub's answer goes to the event's callback URL on the tenant's `api_url`
            // (checked before it is sent). A second send is refused by GitHub itself (422), and
            // the round's fence keeps it from a newer round, so it may be sent again.
            Job::Execute(ExecuteJob {
                github: Some(call), ..
            })
            | Job::Github(GithubJob { call, .. }) => Self {
                url: Some(call.callback_url.clone()),
                idempotent: true,
                status: None,
            },
            Job::Execute(j) => match secrets.action_targets.get(&j.action_type) {
                Some(target) if target.executes => Self {
                    url: Some(target.url.clone()),
                    idempotent: target.idempotent,
                    status: target.status_url.clone().map(|url| StatusQuery {
                        url,
                        delay_ms: target.status_delay_seconds * 1000,
                    }),
                },
                // No target (or an approval-only type: never dispatched, never called).
                _ => Self {
                    url: None,
                    idempotent: true,
                    status: None,
                },
            },
        }
    }
}

/// The HTTP side of the executor, built once per process (its client pools connections).
pub(super) struct Downstream {
    app: Arc<App>,
    http: reqwest::Client,
    public_base_url: String,
    github: GithubApi,
}

impl Downstream {
    /// `call_timeout`: a call's longest time (a third of an attempt's lease).
    pub fn new(
        app: Arc<App>,
        call_timeout: Duration,
        public_base_url: &str,
    ) -> Result<Self, ConfigError> {
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
        let github = GithubApi::new(call_timeout).map_err(|e| ConfigError {
            variable: "GITHUB",
            problem: format!("cannot build the HTTP client: {e}"),
        })?;
        Ok(Self {
            app,
            http,
            public_base_url: public_base_url.to_owned(),
            github,
        })
    }

    /// Sends `job` to `url` with the job's business key as `Idempotency-Key`, within `budget`.
    pub async fn send(
        &self,
        job: &Job,
        url: &str,
        idempotent: bool,
        budget: Duration,
    ) -> CallOutcome {
        let request = match job {
            // Its receiver dedupes by `webhook-id`.
            Job::Callback(j) => match self.signed_delivery(j, url) {
                Some(request) => request,
                None => return CallOutcome::Refused("the tenant has no subscription".to_owned()),
            },
            Job::Execute(j) => {
                let mut body = json!({
                    "approval_id": j.approval_id,
                    "tenant": j.tenant,
                    "action": {"type": j.action_type, "payload": j.payload},
                    "context": j.context,
                    "decision": j.decision,
                });
                if let (Some(certificate), Some(fields)) = (&j.certificate, body.as_object_mut()) {
                    fields.insert(
                        "certificate".to_owned(),
                        serde_json::Value::clone(certificate),
                    );
                }
                self.http.post(url).json(&body)
            }
            // Each approver's call is its own ([`Downstream::notify`]).
            Job::Notify(_) => {
                return CallOutcome::Refused("a notify job calls each approver".into());
            }
            Job::Slack(_) | Job::SlackReply(_) => {
                return CallOutcome::Refused("a Slack job has no target URL".into());
            }
            Job::Github(_) => {
                return CallOutcome::Refused("a GitHub answer has no target URL".into());
            }
            Job::Resume(_) => {
                return CallOutcome::Refused("a workflow's answer has no target URL".into());
            }
            Job::Email(_) => {
                return CallOutcome::Refused("an email has no target URL".into());
            }
        };
        let request = match job {
            Job::Callback(_) => request,
            Job::Execute(_)
            | Job::Notify(_)
            | Job::Slack(_)
            | Job::SlackReply(_)
            | Job::Github(_)
            | Job::Resume(_)
            | Job::Email(_) => request.header("Idempotency-Key", job.business_key()),
        };
        call(request, job, idempotent, budget).await
    }

    /// Sends `approver`'s notification of `job` to the notifier at `url`, with the approver's
    /// own `Idempotency-Key` ([`NotifyJob::key_for`]), within `budget`.
    pub async fn notify(
        &self,
        job: &Job,
        notify: &NotifyJob,
        approver: &Approver,
        url: &str,
        budget: Duration,
    ) -> CallOutcome {
        // Required at start (`Config::jobs`), and a refresh that no longer parses keeps the
        // last values: never absent in practice.
        let Some(body) = self.notification(notify, approver) else {
            return CallOutcome::Refused("no DECISION_TOKEN_SECRET".to_owned());
        };
        let request = self
            .http
            .post(url)
            .json(&body)
            .header("Idempotency-Key", notify.key_for(approver));
        // The notifier dedupes by the key.
        call(request, job, true, budget).await
    }

    /// Tells GitHub a deployment's answer (`call`), within `budget`; what GitHub answered.
    pub async fn answer_github(&self, job: &Job, call: &GithubCall, budget: Duration) -> Answered {
        let secrets = self.app.secrets();
        let Some(app) = secrets.github.get(job.tenant()) else {
            return Answered::Refused(format!(
                "the tenant {} has no GitHub App in GITHUB",
                job.tenant()
            ));
        };
        let answered = tokio::time::timeout(
            budget,
            self.github.answer(
                app,
                (
                    call.installation_id,
                    call.repository.as_str(),
                    call.callback_url.as_str(),
                ),
                &call.environment,
                call.approved,
                &call.comment,
            ),
        )
        .await;
        answered.unwrap_or_else(|_| Answered::Unknown("no answer within the timeout".to_owned()))
    }

    /// `approver`'s review link of the approval (minted here, never stored): a delegate's
    /// (`in_place_of`) opens the page in the place they may fill. `None` without
    /// `DECISION_TOKEN_SECRET` (required at start: never in practice).
    pub fn review_link(
        &self,
        (tenant, approval_id): (&crate::domain::TenantId, &crate::domain::ApprovalId),
        approver: &Approver,
        expires_at: crate::domain::EpochSeconds,
        in_place_of: Option<&Approver>,
    ) -> Option<String> {
        let secrets = self.app.secrets();
        let token = secrets.decision_token_secret.as_ref()?.mint(
            tenant,
            approval_id,
            approver,
            expires_at + REVIEW_LINK_GRACE_SECONDS,
        );
        let place = in_place_of.map_or_else(String::new, |place| {
            let pair = url::form_urlencoded::Serializer::new(String::new())
                .append_pair("place", place.as_str())
                .finish();
            format!("&{pair}")
        });
        Some(format!(
            "{}/approvals/{approval_id}/review?token={token}{place}",
            self.public_base_url
        ))
    }

    /// A notification: the approver's review link, and what to review.
    fn notification(&self, job: &NotifyJob, approver: &Approver) -> Option<serde_json::Value> {
        let review_url = self.review_link(
            (&job.tenant, &job.approval_id),
            approver,
            job.expires_at,
            job.in_place_of.as_ref(),
        )?;
        let mut body = json!({
            "approval_id": job.approval_id,
            "approver": approver,
            "review_url": review_url,
            "action": job.action,
            "context": job.context,
            "expires_at": rfc3339(job.expires_at),
        });
        // A reminder or an escalation step says so, with its number; a delegate's copy names
        // whose place it is.
        if let (Some(reason), Some(fields)) = (job.reason, body.as_object_mut()) {
            fields.insert("reason".to_owned(), json!(reason.as_str()));
            fields.insert("number".to_owned(), json!(reason.number()));
        }
        if let (Some(place), Some(fields)) = (&job.in_place_of, body.as_object_mut()) {
            fields.insert("in_place_of".to_owned(), json!(place));
        }
        Some(body)
    }

    /// One event for its tenant's subscription, signed per Standard Webhooks: the same
    /// `webhook-id` (the event id) and body on every attempt, a fresh timestamp and signature.
    /// `None` when the tenant has no subscription.
    fn signed_delivery(&self, job: &CallbackJob, url: &str) -> Option<reqwest::RequestBuilder> {
        let secrets = self.app.secrets();
        let signers = &secrets.event_subscriptions.get(&job.tenant)?.secrets;
        let body = job.body.to_string();
        let timestamp = self.app.clock.now();
        Some(
            self.http
                .post(url)
                .header("content-type", "application/json")
                .header("webhook-id", &job.event_id)
                .header("webhook-timestamp", timestamp.to_string())
                .header(
                    "webhook-signature",
                    // During a rotation, one signature per secret: a receiver that knows either
                    // verifies (Standard Webhooks' space-separated signatures).
                    signers
                        .iter()
                        .map(|secret| secret.sign(&job.event_id, timestamp, body.as_bytes()))
                        .collect::<Vec<_>>()
                        .join(" "),
                )
                .body(body),
        )
    }

    /// Asks the target's status URL what became of the job's business key. Never a call of the
    /// action: a GET with its own short timeout.
    pub async fn ask(&self, job: &Job, status_url: &str, budget: Option<Duration>) -> StatusAnswer {
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
            .header("Idempotency-Key", &key)
            .header(TRACEPARENT, job.trace().traceparent());
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
        match response.json().await {
            Ok(body) => StatusAnswer::parse(&body),
            Err(_) => StatusAnswer::CouldNotTell("status answer is not JSON".to_owned()),
        }
    }
}

/// Sends `request` (the job's call) within `budget`, continuing the approval's trace: what the
/// answer, or its absence, tells.
async fn call(
    request: reqwest::RequestBuilder,
    job: &Job,
    idempotent: bool,
    budget: Duration,
) -> CallOutcome {
    // The approval's trace, continued: the same trace id, a new parent span.
    let request = request.header(TRACEPARENT, job.trace().traceparent());
    match request.timeout(budget).send().await {
        Ok(response) => classify(response.status().as_u16(), idempotent),
        // Nothing reached the target.
        Err(e) if e.is_connect() => {
            CallOutcome::Retryable(format!("connection failed: {}", error_kind(&e)))
        }
        Err(e) if e.is_timeout() => CallOutcome::Unknown("no answer within the timeout".to_owned()),
        Err(e) => CallOutcome::Unknown(format!("request failed: {}", error_kind(&e))),
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
