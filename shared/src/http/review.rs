//! The approver's review page (`GET /approvals/{id}/review?token=…`) and the form post behind
//! its buttons. Disabling a button is not duplicate protection; the server is: the form goes
//! through the same single conditional update as the JSON API, and always answers 303 See Other
//! to the review page (post-redirect-get), which shows the one outcome.

use std::sync::{Arc, LazyLock};

use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use maud::{DOCTYPE, Markup, html};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::App;
use crate::domain::{
    Approval, ApprovalId, Channel, DecideRefusal, DecideRequest, Decision, ExecutionStatus,
    FieldError, Outcome, Status, classify_refusal, rfc3339,
};
use crate::review_token::{ReviewGrant, TokenError};
use crate::store::DecideOutcome;

const STYLE: &str = r#"
:root { color-scheme: light; --ink: #1d2433; --muted: #5b6475; --line: #e3e6ec; --ok: #1f7a4d; --no: #b42318; }
* { box-sizing: border-box; }
body { margin: 0; font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--ink); background: #f5f6f8; }
main { max-width: 42rem; margin: 0 auto; padding: 1.5rem 1rem 3rem; }
.card { background: #fff; border: 1px solid var(--line); border-radius: 12px; padding: 1.25rem; margin-bottom: 1rem; }
h1 { font-size: 1.35rem; margin: 0 0 .25rem; }
h2 { font-size: .8rem; text-transform: uppercase; letter-spacing: .06em; color: var(--muted); margin: 0 0 .5rem; }
.muted { color: var(--muted); font-size: .9rem; }
.badge { display: inline-block; padding: .1rem .6rem; border-radius: 999px; font-size: .85rem; font-weight: 600; background: #eef1f6; }
.badge.approved { background: #e3f4ea; color: var(--ok); }
.badge.rejected, .badge.expired { background: #fdecea; color: var(--no); }
pre { margin: 0; padding: .75rem; background: #f7f8fa; border-radius: 8px; overflow-x: auto; font-size: .85rem; white-space: pre-wrap; word-break: break-word; }
dl { margin: 0; display: grid; grid-template-columns: minmax(6rem, max-content) 1fr; gap: .35rem 1rem; }
dt { color: var(--muted); } dd { margin: 0; word-break: break-word; }
ul { margin: 0; padding-left: 1.2rem; }
textarea { width: 100%; min-height: 4.5rem; padding: .6rem; border: 1px solid var(--line); border-radius: 8px; font: inherit; }
.actions { display: flex; gap: .75rem; margin-top: .75rem; flex-wrap: wrap; }
button { flex: 1 1 10rem; padding: .8rem 1rem; border: 0; border-radius: 8px; font: inherit; font-weight: 600; color: #fff; cursor: pointer; }
button.approve { background: var(--ok); } button.reject { background: var(--no); }
"#;

/// The headers of every review response: no caching (the page holds a live token), no
/// referrer (its URL holds the token), and a policy that runs no script at all.
static SECURITY_HEADERS: LazyLock<[(HeaderName, HeaderValue); 5]> = LazyLock::new(|| {
    let style_hash =
        base64::engine::general_purpose::STANDARD.encode(Sha256::digest(STYLE.as_bytes()));
    let csp = format!(
        "default-src 'none'; style-src 'sha256-{style_hash}'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    );
    [
        (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
        (
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_str(&csp)
                .unwrap_or_else(|_| HeaderValue::from_static("default-src 'none'")),
        ),
        (
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        ),
        (
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ),
        (header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
    ]
});

fn secured(mut response: Response) -> Response {
    for (name, value) in SECURITY_HEADERS.iter() {
        response.headers_mut().insert(name.clone(), value.clone());
    }
    response
}

fn page(status: StatusCode, title: &str, body: Markup) -> Response {
    let markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="robots" content="noindex";
                title { (title) " · Countersign" }
                style { (maud::PreEscaped(STYLE)) }
            }
            body { main { (body) } }
        }
    };
    secured((status, axum::response::Html(markup.into_string())).into_response())
}

/// Invalid, tampered, expired or foreign token: the same page, which reveals nothing.
fn forbidden() -> Response {
    page(
        StatusCode::FORBIDDEN,
        "Link not valid",
        html! {
            div.card {
                h1 { "This link is not valid" }
                p.muted { "It may have expired or been changed. Ask the requester for a new link." }
            }
        },
    )
}

fn self_approval_forbidden() -> Response {
    page(
        StatusCode::FORBIDDEN,
        "Not yours to decide",
        html! {
            div.card {
                h1 { "You requested this approval" }
                p.muted { "Its requester may not decide it: someone else on the list must. Nothing was recorded." }
            }
        },
    )
}

fn unavailable() -> Response {
    page(
        StatusCode::SERVICE_UNAVAILABLE,
        "Try again",
        html! { div.card { h1 { "Something went wrong" } p.muted { "Nothing was recorded. Please try again in a moment." } } },
    )
}

/// Checks the token against the approval it claims: the grant, or `None` (the 403 page).
fn authorise(
    app: &App,
    id: Result<ApprovalId, ()>,
    token: Option<&str>,
) -> Option<(ApprovalId, ReviewGrant)> {
    let secrets = app.secrets();
    let (Ok(id), Some(token), Some(secret)) = (id, token, secrets.decision_token_secret.as_ref())
    else {
        return None;
    };
    match secret.verify(token, &id, app.clock.now()) {
        Ok(grant) => Some((id, grant)),
        Err(error) => {
            if error == TokenError::BadSignature {
                // Perhaps minted with a rotated secret this function has not read yet.
                app.secret_failed();
            }
            None
        }
    }
}

fn path_id(raw: Result<Path<String>, PathRejection>) -> Result<ApprovalId, ()> {
    let Path(raw) = raw.map_err(|_| ())?;
    ApprovalId::parse(&raw).map_err(|_| ())
}

fn query_token(query: Option<&str>) -> Option<String> {
    url::form_urlencoded::parse(query?.as_bytes())
        .find(|(name, _)| name == "token")
        .map(|(_, value)| value.into_owned())
}

pub async fn show(
    State(app): State<Arc<App>>,
    id: Result<Path<String>, PathRejection>,
    RawQuery(query): RawQuery,
) -> Response {
    let token = query_token(query.as_deref());
    let Some((id, grant)) = authorise(&app, path_id(id), token.as_deref()) else {
        return forbidden();
    };
    let approval = match app.store.get_approval(&grant.tenant, &id).await {
        Ok(Some(approval)) if approval.is_approver(&grant.approver) => approval,
        Ok(_) => return forbidden(),
        Err(err) => {
            tracing::error!(error = %err, "review page: store");
            return unavailable();
        }
    };
    let now = app.clock.now();
    let status = approval.status_at(now);
    let token = token.unwrap_or_default();
    page(
        StatusCode::OK,
        &format!("Review {}", approval.action_type),
        render(&approval, status, &grant, &token),
    )
}

/// The form post of the review page's buttons: always 303 to the review page once the token
/// holds, whether this post won, repeated the winner, or lost.
pub async fn decide_form(
    app: &App,
    id: Result<Path<String>, PathRejection>,
    body: &Bytes,
) -> Response {
    let fields: Vec<(String, String)> = url::form_urlencoded::parse(body).into_owned().collect();
    let field = |name: &str| {
        fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    };
    let token = field("token");
    let (decision, comment) = (field("decision"), field("comment"));
    let Some((id, grant)) = authorise(app, path_id(id), token.as_deref()) else {
        return forbidden();
    };
    let mut errors: Vec<FieldError> = Vec::new();
    let outcome = decision.as_deref().and_then(DecideRequest::parse_outcome);
    let comment = comment.and_then(|c| DecideRequest::check_comment(&c, &mut errors));
    let Some(outcome) = outcome.filter(|_| errors.is_empty()) else {
        return page(
            StatusCode::BAD_REQUEST,
            "Not understood",
            html! { div.card { h1 { "That decision was not understood" } p.muted { "Nothing was recorded. Go back and use the Approve or Reject button." } } },
        );
    };
    let now = app.clock.now();
    let request = DecideRequest {
        outcome,
        approver: grant.approver.clone(),
        comment,
        sent_by: None,
    };
    let decision = Decision {
        outcome,
        approver: grant.approver,
        decided_at: now,
        channel: Channel::ReviewPage,
        comment: request.comment.clone(),
        webhook_event_id: None,
        key_id: None,
        signed_in: None,
    };
    match app
        .store
        .decide(&grant.tenant, &id, &decision, None, now)
        .await
    {
        Ok(DecideOutcome::Won(_)) => super::count_vote(Channel::ReviewPage, None),
        Ok(DecideOutcome::Refused(old)) => match super::refused_vote(
            Channel::ReviewPage,
            classify_refusal(old.map(|a| *a), &request, now),
        ) {
            // The page shows the one outcome, and this approver's vote.
            DecideRefusal::Repeat(_)
            | DecideRefusal::AlreadyDecided(_)
            | DecideRefusal::AlreadyVoted(_)
            | DecideRefusal::Expired => {}
            DecideRefusal::NotFound | DecideRefusal::NotAnApprover => return forbidden(),
            DecideRefusal::SelfApproval => return self_approval_forbidden(),
            DecideRefusal::Completes(_) | DecideRefusal::Unexplained => return unavailable(),
        },
        Err(err) => {
            tracing::error!(error = %err, "review form: store");
            return unavailable();
        }
    }
    // Relative to /approvals/{id}/decision, whatever path prefix (an API stage) is in front.
    let location = format!("review?token={}", token.unwrap_or_default());
    let mut response = StatusCode::SEE_OTHER.into_response();
    if let Ok(value) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    secured(response)
}

fn when(at: i64) -> String {
    rfc3339(at).replace('T', " ").replace('Z', " UTC")
}

fn json_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => serde_json::to_string_pretty(other).unwrap_or_default(),
    }
}

fn render(approval: &Approval, status: Status, grant: &ReviewGrant, token: &str) -> Markup {
    let summary = approval.context.get("summary").and_then(Value::as_str);
    let context: Map<String, Value> = approval
        .context
        .iter()
        .filter(|(k, _)| k.as_str() != "summary")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    html! {
        div.card {
            p.muted { "Approval requested · " span.badge.(status.as_str()) { (status.as_str()) } }
            h1 { (summary.unwrap_or(&approval.action_type)) }
            p.muted { "Action " strong { (approval.action_type) } " · requested " @if let Some(by) = &approval.requested_by { "by " strong { (by.as_str()) } " " } (when(approval.created_at)) }
        }
        div.card {
            h2 { "Payload" }
            pre { (serde_json::to_string_pretty(&approval.payload).unwrap_or_default()) }
        }
        @if !context.is_empty() {
            div.card {
                h2 { "Context" }
                dl { @for (key, value) in &context { dt { (key) } dd { (json_text(value)) } } }
            }
        }
        div.card {
            h2 { "Approvers" }
            ul { @for approver in &approval.approvers { li { (approver.as_str()) @if approver.same_identity(&grant.approver) { " (you)" } } } }
        }
        @if let Some(policy) = &approval.policy {
            div.card #policy {
                h2 { "Needed" }
                ul {
                    @for (rule, approvals) in policy.rules.iter().zip(approval.approvals_per_rule()) {
                        li { strong { (rule.name) } ": " (approvals) " of " (rule.min_approvals) " approvals" span.muted { " (" (rule.approvers.iter().map(|a| a.as_str()).collect::<Vec<_>>().join(", ")) ")" } }
                    }
                }
            }
        }
        @if !approval.recorded_votes().is_empty() {
            div.card #votes {
                h2 { "Votes" }
                ul {
                    @for vote in approval.recorded_votes() {
                        li { strong { (vote.approver.as_str()) } " " (if vote.outcome == Outcome::Approved { "approved" } else { "rejected" }) span.muted { " · " (when(vote.decided_at)) " · via " (channel_name(vote.channel)) } @if let Some(comment) = &vote.comment { " — “" (comment) "”" } }
                    }
                }
            }
        }
        @match (status, &approval.decision) {
            (Status::Pending, _) if approval.requester().is_some_and(|r| r.identity() == grant.approver.identity()) => {
                div.card #outcome {
                    h2 { "Your decision" }
                    p { "You requested this approval: someone else decides it." }
                }
            }
            (Status::Pending, _) if approval.vote_of(&grant.approver).is_some() => {
                div.card #outcome {
                    h2 { "Your vote" }
                    p { "Your vote is recorded. The request is still pending until the rules above are met." }
                }
            }
            (Status::Pending, _) => {
                div.card {
                    h2 { "Your decision" }
                    p.muted { "As " (grant.approver.as_str()) ". This request expires " (when(approval.expires_at)) "." }
                    form method="post" action="decision" {
                        input type="hidden" name="token" value=(token);
                        label for="comment" { "Comment (optional)" }
                        textarea id="comment" name="comment" maxlength="2000" {}
                        div.actions {
                            button.approve type="submit" name="decision" value="approve" { "Approve" }
                            button.reject type="submit" name="decision" value="reject" { "Reject" }
                        }
                    }
                }
            }
            (Status::Cancelled, _) => {
                div.card #outcome {
                    h2 { "Outcome" }
                    p { "This request was cancelled" @if let Some(c) = &approval.cancellation { " by " strong { (c.by.as_str()) } " " (when(c.at)) } ". Nothing will be done." }
                    @if let Some(reason) = approval.cancellation.as_ref().and_then(|c| c.reason.as_ref()) { p { "“" (reason) "”" } }
                }
            }
            (Status::Expired, _) => {
                div.card #outcome {
                    h2 { "Outcome" }
                    p { "This request expired on " (when(approval.expires_at)) " without a decision." }
                }
            }
            (_, Some(decision)) => {
                div.card #outcome {
                    h2 { "Outcome" }
                    p {
                        span.badge.(decision.outcome.as_str()) { (decision.outcome.as_str()) }
                        " by " strong.approver { (decision.approver.as_str()) }
                    }
                    p.muted { (when(decision.decided_at)) " · via " (channel_name(decision.channel)) }
                    @if let Some(comment) = &decision.comment { p { "“" (comment) "”" } }
                }
                @if decision.outcome == Outcome::Approved {
                    div.card #execution {
                        h2 { "The action" }
                        p { (what_became_of_it(approval)) }
                    }
                }
            }
            (_, None) => {}
        }
    }
}

/// What became of an approved action, in words.
fn what_became_of_it(approval: &Approval) -> String {
    let execution = &approval.execution;
    let error = execution
        .last_error
        .as_deref()
        .unwrap_or("no reason recorded");
    if !approval.executes {
        // An approval-only type: its requester claims it and performs the action itself.
        return match execution.status {
            ExecutionStatus::NotStarted => {
                "Approved for its requester to perform (not claimed yet).".to_owned()
            }
            ExecutionStatus::Running => "Claimed by its requester, who performs it.".to_owned(),
            ExecutionStatus::Succeeded | ExecutionStatus::Failed => format!(
                "{} — reported {}{}",
                if execution.status == ExecutionStatus::Succeeded {
                    "Done"
                } else {
                    "Failed"
                },
                when(execution.updated_at),
                execution
                    .note
                    .as_deref()
                    .map(|n| format!(": {n}"))
                    .unwrap_or_default()
            ),
            _ => format!("Handed to an operator: whether it was done is unknown ({error})."),
        };
    }
    match execution.status {
        ExecutionStatus::NotStarted | ExecutionStatus::Queued if execution.attempts == 0 => {
            "Waiting to run.".to_owned()
        }
        ExecutionStatus::NotStarted | ExecutionStatus::Queued => format!(
            "Waiting to run again: attempt {} failed ({error}).",
            execution.attempts
        ),
        ExecutionStatus::Running => format!("Running now (attempt {}).", execution.attempts),
        ExecutionStatus::Succeeded => match &execution.note {
            Some(note) => format!(
                "Ran — recorded by an operator {}: {note}",
                when(execution.updated_at)
            ),
            None => format!("Ran {}.", when(execution.updated_at)),
        },
        ExecutionStatus::Failed => format!("Failed: {error}."),
        ExecutionStatus::NeedsReconciliation => {
            format!("Handed to an operator: whether it ran is unknown ({error}).")
        }
    }
}

fn channel_name(channel: Channel) -> &'static str {
    match channel {
        Channel::Api => "the API",
        Channel::ReviewPage => "the review page",
        Channel::Webhook => "a webhook",
        Channel::Slack => "Slack",
        Channel::Github => "GitHub",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::approval::tests::pending;

    #[test]
    fn an_approval_only_execution_is_told_as_its_requester_s() {
        let mut approval = pending(1_000);
        approval.status = crate::domain::Status::Approved;
        assert_eq!(what_became_of_it(&approval), "Waiting to run.");
        approval.executes = false;
        assert!(what_became_of_it(&approval).contains("not claimed yet"));
        approval.execution.status = ExecutionStatus::Running;
        assert!(what_became_of_it(&approval).starts_with("Claimed by its requester"));
        approval.execution.status = ExecutionStatus::Succeeded;
        approval.execution.note = Some("refunded".into());
        let done = what_became_of_it(&approval);
        assert!(
            done.starts_with("Done — reported") && done.ends_with(": refunded"),
            "{done}"
        );
    }
}
