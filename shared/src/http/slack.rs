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
use crate::domain::delegation::{first_place, open_places};
use crate::domain::{
    Approval, ApprovalId, Approver, Channel, DecideRefusal, DecideRequest, Decision, EpochSeconds,
    Outcome, TenantId, classify_refusal,
};
use crate::slack::api::SlackApi;
use crate::slack::message::escape;
use crate::slack::signature::{SIGNATURE_HEADER, SignatureError, TIMESTAMP_HEADER, verify};
use crate::slack::{Click, SlackApp, parse_click};
use crate::store::{DecideOutcome, InPlace, StoreError, VoteBy};

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
    match vote(&app, &tenant, slack, &click, retried).await? {
        Some(Told::Refused(reason)) => {
            tracing::info!(tenant = %tenant, slack_user = click.user, reason, "Slack click refused");
            tell(slack, &click, &reason).await;
        }
        Some(Told::InPlace(said)) => tell(slack, &click, &said).await,
        None => {}
    }
    Ok(StatusCode::OK.into_response())
}

/// What the clicking user is told, if anything.
#[derive(Debug)]
enum Told {
    /// Nothing was recorded, and why.
    Refused(String),
    /// The vote was cast in someone's place: whose (the message shows it as theirs).
    InPlace(String),
}

/// Records the click's vote; what the clicking user is told, if anything (nothing for a vote
/// cast as themselves, which the message shows, nor for a repeat Slack delivered again, which
/// was counted the first time).
async fn vote(
    app: &App,
    tenant: &TenantId,
    slack: &SlackApp,
    click: &Click,
    retried: bool,
) -> Result<Option<Told>, ApiError> {
    let Some(approver) = slack.approver(&click.user) else {
        super::count_vote(Channel::Slack, Some(&DecideRefusal::NotAnApprover));
        return Ok(Some(Told::Refused(format!(
            "Your Slack account is not mapped to a Countersign approver, so it decides nothing. {NOTHING}"
        ))));
    };
    let Ok(id) = ApprovalId::parse(&click.approval_id) else {
        super::count_vote(Channel::Slack, Some(&DecideRefusal::NotFound));
        return Ok(Some(Told::Refused(format!(
            "This button names no approval. {NOTHING}"
        ))));
    };
    let place_groups = app.place_groups(tenant, &id, approver).await?;
    let now = app.clock.now();
    let mut request = DecideRequest {
        outcome: click.outcome,
        approver: approver.clone(),
        comment: None,
        sent_by: None,
        by: None,
        place_groups,
        passkey: false,
    };
    // As themselves first, as before delegation: a listed approver's click costs what it did.
    let Some(old) = cast(app, tenant, &id, &request, now).await? else {
        super::count_vote(Channel::Slack, None);
        return Ok(None);
    };
    let mut refusal = classify_refusal(old.clone(), &request, now);
    // Not listed, and no vote cast: perhaps a delegate. The refused write returned the
    // approval, so the one read this adds is the delegations of its open places.
    if let (DecideRefusal::NotAnApprover, Some(approval)) = (&refusal, &old) {
        let open = open_places(approval);
        let stored = app.store.delegations_of(tenant, &open).await?;
        let delegations: Vec<_> = stored.iter().map(|d| d.delegation.clone()).collect();
        if let Some(delegation) = first_place(&open, &delegations, approver, now)
            && let Some(read) = stored
                .iter()
                .find(|d| d.delegation.delegator.same_identity(&delegation.delegator))
        {
            request.approver = delegation.delegator.clone();
            request.by = Some(delegation.delegate.clone());
            // The clicker sends it: the decision's condition refuses a sender who asked for
            // the approval, as it refuses the key of a delegate who did.
            request.sent_by = Some(approver.clone());
            // The place is the delegator's: its groups now are what the write checks.
            request.place_groups = app.place_groups(tenant, &id, &request.approver).await?;
            // Written with the delegation checked as read, in one transaction.
            let decision = slack_vote(&request, now);
            match app
                .store
                .vote_as_read(
                    tenant,
                    approval.clone(),
                    &decision,
                    read,
                    VoteBy::of(&request),
                    now,
                )
                .await?
            {
                InPlace::Voted(DecideOutcome::Won(_)) => {
                    super::count_vote(Channel::Slack, None);
                    return Ok(Some(Told::InPlace(format!(
                        "{} in {}'s place.",
                        past(click.outcome),
                        escape(request.approver.as_str())
                    ))));
                }
                InPlace::Voted(DecideOutcome::Refused(old)) => {
                    refusal = classify_refusal(old.map(|a| *a), &request, now)
                }
                InPlace::NotDelegated => refusal = DecideRefusal::NotDelegated,
            }
        }
    }
    // A click names nobody: one by someone not listed, the same as the vote they cast in
    // someone's place, repeats it (as a listed approver's second click repeats theirs), and
    // Slack's retry of it is not answered.
    if let DecideRefusal::AlreadyVoted(approval) = &refusal
        && !approval.is_approver(approver)
        && approval
            .vote_cast_by(approver)
            .is_some_and(|v| v.by.is_some() && v.outcome == click.outcome)
    {
        refusal = DecideRefusal::Repeat(approval.clone());
    }
    super::count_vote(Channel::Slack, Some(&refusal));
    let said = refusal_text(
        refusal,
        (approver, &request.approver),
        click.outcome,
        retried,
    )?;
    Ok(said.map(Told::Refused))
}

const NOTHING: &str = "Nothing was recorded.";

/// The store's one conditional write of `request`'s vote from Slack: `None` once it is
/// counted, else the approval as the refused write found it (`None` inside: no such approval).
async fn cast(
    app: &App,
    tenant: &TenantId,
    id: &ApprovalId,
    request: &DecideRequest,
    now: EpochSeconds,
) -> Result<Option<Option<Approval>>, ApiError> {
    let decision = slack_vote(request, now);
    Ok(
        match app
            .store
            .decide(tenant, id, &decision, VoteBy::of(request), now)
            .await?
        {
            DecideOutcome::Won(_) => None,
            DecideOutcome::Refused(old) => Some(old.map(|a| *a)),
        },
    )
}

/// `request`'s vote, cast in Slack at `now`.
fn slack_vote(request: &DecideRequest, now: EpochSeconds) -> Decision {
    Decision {
        outcome: request.outcome,
        approver: request.approver.clone(),
        decided_at: now,
        channel: Channel::Slack,
        comment: None,
        webhook_event_id: None,
        key_id: None,
        signed_in: None,
        by: request.by.clone(),
        delegation_set_by: None,
        passkey: None,
    }
}

fn verb(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Approved => "approve",
        Outcome::Rejected => "reject",
    }
}

fn past(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Approved => "Approved",
        Outcome::Rejected => "Rejected",
    }
}

/// How a vote `voter` cast is named: as themselves, or in whose place.
fn cast_as(voter: &Approver, vote: Option<&Decision>) -> String {
    match vote {
        Some(v) if v.by.is_some() => format!("in {}'s place", escape(v.approver.as_str())),
        _ => format!("as {}", escape(voter.as_str())),
    }
}

/// What the clicking `voter` is told of `refusal` of their vote in `place` (their own, or one
/// they stand in for); `None`: nothing, for Slack's retry of a click that counted.
fn refusal_text(
    refusal: DecideRefusal,
    (voter, place): (&Approver, &Approver),
    outcome: Outcome,
    retried: bool,
) -> Result<Option<String>, ApiError> {
    let who = escape(voter.as_str());
    Ok(Some(match refusal {
        DecideRefusal::Repeat(_) if retried => return Ok(None),
        DecideRefusal::Repeat(approval) => format!(
            "Your vote ({}) is already recorded, {}; it counts once.",
            verb(outcome),
            cast_as(voter, approval.vote_cast_by(voter))
        ),
        DecideRefusal::AlreadyVoted(approval) => {
            match (approval.vote_cast_by(voter), approval.vote_of(place)) {
                (Some(vote), _) => format!(
                    "You already voted on this request ({}), {}: one vote per person. {NOTHING}",
                    verb(vote.outcome),
                    cast_as(voter, Some(vote))
                ),
                // The place was filled by someone else: its owner or their delegate.
                (None, Some(vote)) => format!(
                    "{} place on this request is already filled ({} by {}). {NOTHING}",
                    match place.same_identity(voter) {
                        true => "Your".to_owned(),
                        false => format!("{}'s", escape(place.as_str())),
                    },
                    verb(vote.outcome),
                    escape(vote.by.as_ref().unwrap_or(&vote.approver).as_str())
                ),
                (None, None) => {
                    format!("You already voted on this request: one vote per person. {NOTHING}")
                }
            }
        }
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
        DecideRefusal::NotDelegated => format!(
            "{}'s delegation to you ended before your vote was written. {NOTHING}",
            escape(place.as_str())
        ),
        DecideRefusal::NotInGroup(group) => format!(
            "{} no longer in group {group}, which the approval policy counts this vote in. {NOTHING}",
            match place.same_identity(voter) {
                true => "You are".to_owned(),
                false => format!("{} is", escape(place.as_str())),
            }
        ),
        DecideRefusal::PasskeyRequired => format!(
            "This request takes a passkey signature on its review page: Slack cannot sign it. {NOTHING}"
        ),
        // A click carries no comment.
        DecideRefusal::CommentTooLong { cap } => {
            format!("The comment is longer than this request keeps ({cap} bytes). {NOTHING}")
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
