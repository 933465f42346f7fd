//! `POST /slack/interactions/{tenant}`: the clicks on the tenant's Slack messages. Verified on
//! the raw body first (401 and nothing recorded otherwise); a click on Approve or Reject is a
//! vote through the store's one conditional write, as on every channel, answered 200 once it is
//! committed. A refused click records nothing and is told to the clicking user alone; anything
//! else verified is acknowledged and ignored.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};

use super::ApiError;
use super::extract::read_body;
use crate::App;
use crate::domain::{
    ApprovalId, Channel, DecideRefusal, DecideRequest, Decision, Outcome, TenantId,
    classify_refusal,
};
use crate::slack::api::SlackApi;
use crate::slack::signature::{SIGNATURE_HEADER, SignatureError, TIMESTAMP_HEADER, verify};
use crate::slack::{Click, SlackApp, parse_click};
use crate::store::{DecideOutcome, StoreError};

/// An interaction's largest body: a click carries the message it was made on.
pub const SLACK_BODY_LIMIT: usize = 256 * 1024;

/// Slack gives a click 3 s; the answer to a refused one must fit in what the vote leaves.
const TELL_TIMEOUT: Duration = Duration::from_millis(1_500);

/// Slack sends it when it delivers an interaction again.
const RETRY_HEADER: &str = "x-slack-retry-num";

/// Whether `url` is one Slack answers clicks at: `https://hooks.slack.com/…`, or the origin of
/// the tenant's own API base (a Slack of its own, or the tests' fake). The body is signed, so
/// this is a second fence, not the first.
fn is_slacks(url: &str, api_base_url: &str) -> bool {
    let Ok(parsed) = url::Url::parse(url) else {
        return false;
    };
    let hooks = parsed.scheme() == "https" && parsed.host_str() == Some("hooks.slack.com");
    let own = url::Url::parse(api_base_url).is_ok_and(|base| base.origin() == parsed.origin());
    hooks || own
}

fn slack_api() -> Option<&'static SlackApi> {
    static API: OnceLock<Option<SlackApi>> = OnceLock::new();
    API.get_or_init(|| SlackApi::new(TELL_TIMEOUT).ok())
        .as_ref()
}

pub async fn interactions(
    State(app): State<Arc<App>>,
    tenant: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    // A tenant without Slack has no secret to verify with: as unverified as a forged request.
    let tenant = tenant
        .ok()
        .and_then(|Path(tenant)| TenantId::parse(&tenant).ok())
        .ok_or(ApiError::InvalidSignature)?;
    let secrets = app.secrets();
    let slack = secrets
        .slack
        .get(&tenant)
        .ok_or(ApiError::InvalidSignature)?;
    let body = read_body(body, &headers, SLACK_BODY_LIMIT).await?;
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    // Under each secret (several while one is rotated): verified if one does; otherwise the
    // reason a matching signature was refused (stale), or that none matched.
    let now = app.clock.now();
    let results: Vec<_> = slack
        .signing_secrets
        .iter()
        .map(|secret| {
            verify(
                secret,
                header(TIMESTAMP_HEADER),
                header(SIGNATURE_HEADER),
                &body,
                now,
            )
        })
        .collect();
    let verdict = if results.iter().any(Result::is_ok) {
        Ok(())
    } else {
        Err(results
            .into_iter()
            .filter_map(Result::err)
            .find(|e| *e != SignatureError::Mismatch)
            .unwrap_or(SignatureError::Mismatch))
    };
    verdict.map_err(|reason| {
        tracing::info!(tenant = %tenant, %reason, "Slack request refused");
        if reason == SignatureError::Mismatch {
            // Perhaps signed with a rotated secret this function has not read yet.
            app.secret_failed();
        }
        ApiError::InvalidSignature
    })?;
    let Some(click) = parse_click(&body) else {
        return Ok(StatusCode::OK.into_response());
    };
    // Every line about the approval names it (the request's span; the path's id is a tenant's).
    let span = tracing::Span::current();
    span.record("tenant", tenant.as_str());
    if let Ok(id) = ApprovalId::parse(&click.approval_id) {
        span.record("approval_id", id.as_str());
    }
    let retried = headers.contains_key(RETRY_HEADER);
    if let Some(reason) = vote(&app, &tenant, slack, &click, retried).await? {
        tracing::info!(tenant = %tenant, slack_user = click.user, reason, "Slack click refused");
        tell(slack, &click, &reason).await;
    }
    Ok(StatusCode::OK.into_response())
}

/// Records the click's vote; the reason it was refused, if it was (`None` also for a repeat
/// Slack delivered again, which was counted the first time).
async fn vote(
    app: &App,
    tenant: &TenantId,
    slack: &SlackApp,
    click: &Click,
    retried: bool,
) -> Result<Option<String>, ApiError> {
    const NOTHING: &str = "Nothing was recorded.";
    let Some(approver) = slack.approver(&click.user) else {
        super::count_vote(Channel::Slack, Some(&DecideRefusal::NotAnApprover));
        return Ok(Some(format!(
            "Your Slack account is not mapped to a Countersign approver, so it decides nothing. {NOTHING}"
        )));
    };
    let Ok(id) = ApprovalId::parse(&click.approval_id) else {
        super::count_vote(Channel::Slack, Some(&DecideRefusal::NotFound));
        return Ok(Some(format!("This button names no approval. {NOTHING}")));
    };
    let now = app.clock.now();
    let decision = Decision {
        outcome: click.outcome,
        approver: approver.clone(),
        decided_at: now,
        channel: Channel::Slack,
        comment: None,
        webhook_event_id: None,
        key_id: None,
        signed_in: None,
        by: None,
    };
    let old = match app.store.decide(tenant, &id, &decision, None, now).await? {
        DecideOutcome::Won(_) => {
            super::count_vote(Channel::Slack, None);
            return Ok(None);
        }
        DecideOutcome::Refused(old) => old.map(|a| *a),
    };
    let request = DecideRequest {
        outcome: click.outcome,
        approver: approver.clone(),
        comment: None,
        sent_by: None,
        by: None,
    };
    let verb = |outcome: Outcome| match outcome {
        Outcome::Approved => "approve",
        Outcome::Rejected => "reject",
    };
    let who = approver.as_str();
    let refusal = classify_refusal(old, &request, now);
    super::count_vote(Channel::Slack, Some(&refusal));
    Ok(Some(match refusal {
        DecideRefusal::Repeat(_) if retried => return Ok(None),
        DecideRefusal::Repeat(_) => format!(
            "Your vote ({}) is already recorded, as {who}; it counts once.",
            verb(click.outcome)
        ),
        DecideRefusal::AlreadyVoted(approval) => format!(
            "You already voted on this request ({}), as {who}: one vote per person. {NOTHING}",
            approval.vote_of(approver).map_or("?", |v| verb(v.outcome))
        ),
        DecideRefusal::AlreadyDecided(approval) => format!(
            "This request is already {}. {NOTHING}",
            approval.status.as_str()
        ),
        DecideRefusal::Expired => format!("This request has expired. {NOTHING}"),
        DecideRefusal::NotFound => format!("This button names no approval. {NOTHING}"),
        DecideRefusal::NotAnApprover => {
            format!("You ({who}) are not an approver of this request. {NOTHING}")
        }
        DecideRefusal::SelfApproval => {
            format!("You requested this approval: someone else must decide it. {NOTHING}")
        }
        DecideRefusal::Completes(_) | DecideRefusal::Unexplained => {
            return Err(ApiError::Internal(StoreError::Corrupt(
                "the decision condition refused a decidable approval",
            )));
        }
    }))
}

/// Tells the clicking user alone why nothing was recorded, through the click's `response_url`
/// (as Slack gave it, in the verified body); a failure is logged, the click still answered.
async fn tell(slack: &SlackApp, click: &Click, reason: &str) {
    let (Some(url), Some(api)) = (&click.response_url, slack_api()) else {
        return;
    };
    if !is_slacks(url, &slack.api_base_url) {
        tracing::warn!("a click's response_url is not Slack's: not called");
        return;
    }
    if let Err(e) = api.tell(url, reason).await {
        tracing::warn!(error = e, "the refusal was not told to the Slack user");
    }
}

#[cfg(test)]
mod tests {
    use super::is_slacks;

    #[test]
    fn only_slacks_response_urls_are_called() {
        let base = "https://slack.com/api";
        assert!(is_slacks("https://hooks.slack.com/actions/T1/2/x", base));
        assert!(!is_slacks("http://hooks.slack.com/actions/T1/2/x", base));
        assert!(!is_slacks("https://hooks.slack.com.evil.example/x", base));
        assert!(!is_slacks("https://169.254.169.254/latest", base));
        assert!(!is_slacks("not a url", base));
        assert!(is_slacks(
            "http://127.0.0.1:9/respond/U1",
            "http://127.0.0.1:9/api"
        ));
        assert!(!is_slacks(
            "http://127.0.0.1:8/respond/U1",
            "http://127.0.0.1:9/api"
        ));
    }
}
