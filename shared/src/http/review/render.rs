//! The review page's markup: the approval, its rules and votes, and what the viewer may do —
//! decide, sign in to decide, or only read.

use maud::{Markup, html};
use serde_json::{Map, Value};

use super::passkey::PasskeyAsk;
use crate::domain::{Approval, Approver, Channel, ExecutionStatus, Outcome, Status};
use crate::http::html::when;

/// Who looks at the page, and what they may do.
pub(super) enum Viewer {
    /// A tenant without sign-in: the link's approver (the link is the credential).
    Link { approver: Approver },
    /// A signing-in tenant, nobody signed in: the page only reads.
    Anonymous { sign_in: String },
    /// A listed approver, signed in.
    SignedIn {
        identity: Approver,
        csrf: String,
        /// Signed in recently enough to decide (`max_auth_age_seconds`); else where to sign
        /// in again.
        sign_in_again: Option<String>,
        logout: String,
        /// On a passkey-only approval: what the page signs with (`None` otherwise, or when
        /// this deployment cannot ask for a passkey).
        passkey: Option<Box<PasskeyAsk>>,
    },
}

impl Viewer {
    fn approver(&self) -> Option<&Approver> {
        match self {
            Self::Link { approver } => Some(approver),
            Self::SignedIn { identity, .. } => Some(identity),
            Self::Anonymous { .. } => None,
        }
    }
}

fn json_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => serde_json::to_string_pretty(other).unwrap_or_default(),
    }
}

/// `place`: the listed person in whose place the viewer, their delegate, decides (checked by
/// the caller against the delegation).
pub(super) fn render(
    approval: &Approval,
    status: Status,
    viewer: &Viewer,
    token: &str,
    place: Option<&Approver>,
) -> Markup {
    let summary = approval.context.get("summary").and_then(Value::as_str);
    let context: Map<String, Value> = approval
        .context
        .iter()
        .filter(|(k, _)| k.as_str() != "summary")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let you = viewer.approver();
    html! {
        @if let Viewer::SignedIn { identity, logout, .. } = viewer {
            nav {
                span.muted.who { "Signed in as " strong { (identity.as_str()) } }
                form method="post" action=(logout) { button.quiet type="submit" { "Sign out" } }
            }
        }
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
            ul { @for approver in &approval.approvers { li {
                (approver.as_str()) @if you.is_some_and(|you| approver.same_identity(you)) { " (you)" }
                @if let Some(step) = approval.joined_at_step(approver) { span.muted { " (added by escalation step " (step) ")" } }
                @if let Some(why) = approval.required_by(approver) { span.muted.required { " (required by " (why) ")" } }
            } } }
        }
        @if let Some(policy) = &approval.policy {
            div.card #policy {
                h2 { "Needed" }
                ul {
                    @for (rule, approvals) in policy.rules.iter().zip(approval.approvals_per_rule()) {
                        li { strong { (rule.name) } ": " (approvals) " of " (rule.min_approvals) " approvals" span.muted { " (" (rule.approvers.iter().map(|a| a.as_str()).collect::<Vec<_>>().join(", ")) ")" }
                            @if let Some(source) = approval.rule_source(rule) { br; span.muted.source { (source) } } }
                    }
                }
            }
        }
        @if !approval.recorded_votes().is_empty() {
            div.card #votes {
                h2 { "Votes" }
                ul {
                    @for vote in approval.recorded_votes() {
                        li { strong { (vote.approver.as_str()) } @if let Some(by) = &vote.by { " (by " (by.as_str()) ")" } " " (if vote.outcome == Outcome::Approved { "approved" } else { "rejected" }) span.muted { " · " (when(vote.decided_at)) " · via " (channel_name(vote.channel)) } @if let Some(comment) = &vote.comment { " — “" (comment) "”" } }
                    }
                }
            }
        }
        @match (status, &approval.decision) {
            (Status::Pending, _) if you.is_some_and(|you| approval.is_requester(you)) => {
                div.card #outcome {
                    h2 { "Your decision" }
                    p { "You requested this approval: someone else decides it." }
                }
            }
            (Status::Pending, _) if place.is_some_and(|place| approval.vote_of(place).is_some()) => {
                div.card #outcome {
                    h2 { "Their vote" }
                    p { "The place of " (place.map_or("", Approver::as_str)) " is filled. The request is still pending until the rules above are met." }
                }
            }
            (Status::Pending, _) if place.is_none() && you.is_some_and(|you| approval.vote_of(you).is_some()) => {
                div.card #outcome {
                    h2 { "Your vote" }
                    p { "Your vote is recorded. The request is still pending until the rules above are met." }
                }
            }
            (Status::Pending, _) => {
                div.card #decide {
                    h2 { "Your decision" }
                    @match viewer {
                        Viewer::Anonymous { sign_in } => {
                            p.muted { "Sign in to decide: this link shows the request, and only a listed approver who signs in can decide it. This request expires " (when(approval.expires_at)) "." }
                            div.actions { a.button #sign-in href=(sign_in) { "Sign in to decide" } }
                        }
                        Viewer::SignedIn { sign_in_again: Some(again), .. } => {
                            p.muted { "Deciding needs a recent sign-in: sign in again, then decide." }
                            div.actions { a.button #sign-in href=(again) { "Sign in again to decide" } }
                        }
                        Viewer::SignedIn { identity, csrf, passkey, .. } if approval.assurance.is_some() => {
                            p.muted { "As " (identity.as_str()) (in_place(place)) ". This request expires " (when(approval.expires_at)) "." }
                            (passkey_form(token, csrf, place, passkey.as_deref()))
                        }
                        Viewer::SignedIn { identity, csrf, .. } => {
                            p.muted { "As " (identity.as_str()) (in_place(place)) ". This request expires " (when(approval.expires_at)) "." }
                            (decision_form(token, Some(csrf), place))
                        }
                        Viewer::Link { .. } if approval.assurance.is_some() => {
                            p.muted { "This request takes a passkey signature, which needs sign-in: this organisation's approvers do not sign in to Countersign, so nobody can decide it here." }
                        }
                        Viewer::Link { approver } => {
                            p.muted { "As " (approver.as_str()) (in_place(place)) ". This request expires " (when(approval.expires_at)) "." }
                            (decision_form(token, None, place))
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

/// The Approve and Reject buttons: the review link's token names the approval; a signed-in
/// approver's form also carries the session's CSRF token.
fn decision_form(token: &str, csrf: Option<&str>, place: Option<&Approver>) -> Markup {
    html! {
        form method="post" action="decision" {
            input type="hidden" name="token" value=(token);
            @if let Some(csrf) = csrf { input type="hidden" name="csrf" value=(csrf); }
            @if let Some(place) = place { input type="hidden" name="place" value=(place.as_str()); }
            label for="comment" { "Comment (optional)" }
            textarea id="comment" name="comment" maxlength="2000" {}
            div.actions {
                button.approve type="submit" name="decision" value="approve" { "Approve" }
                button.reject type="submit" name="decision" value="reject" { "Reject" }
            }
        }
    }
}

/// A passkey-only approval's buttons: each signs its statement with the approver's passkey
/// (our script fills the assertion's fields), then posts the form.
fn passkey_form(
    token: &str,
    csrf: &str,
    place: Option<&Approver>,
    ask: Option<&PasskeyAsk>,
) -> Markup {
    let Some(ask) = ask else {
        return html! { p.muted { "This request takes a passkey signature, and this deployment has no public address to ask for one." } };
    };
    let credentials = serde_json::to_string(&ask.credentials).unwrap_or_default();
    html! {
        p.muted #passkey-only {
            "This request takes a passkey signature: your passkey signs the exact action (payload digest "
            code { (&ask.payload_sha256[..16]) "…" } ") and your vote, and the certificate anyone can check carries it."
        }
        @if ask.credentials.is_empty() {
            p #no-passkey { "You have no passkey yet: " a href=(ask.passkeys_page) { "add one" } ", then come back to this page." }
        } @else {
            form method="post" action="decision" data-passkey="vote" data-rp-id=(ask.rp_id) data-credentials=(credentials) {
                input type="hidden" name="token" value=(token);
                input type="hidden" name="csrf" value=(csrf);
                @if let Some(place) = place { input type="hidden" name="place" value=(place.as_str()); }
                input type="hidden" name="nonce" value=(ask.nonce);
                input type="hidden" name="action_type" value=(ask.action_type);
                input type="hidden" name="payload_sha256" value=(ask.payload_sha256);
                input type="hidden" name="policy_version" value=(ask.policy_version.map(|v| v.to_string()).unwrap_or_default());
                input type="hidden" name="decision" value="";
                @for name in ["credential_id", "authenticator_data", "client_data_json", "signature"] {
                    input type="hidden" name=(name) value="";
                }
                label for="comment" { "Comment (optional)" }
                textarea id="comment" name="comment" maxlength="2000" {}
                p.passkey-status.muted {}
                div.actions {
                    button.approve type="button" value="approve" data-challenge=(ask.approve_challenge) { "Approve with passkey" }
                    button.reject type="button" value="reject" data-challenge=(ask.reject_challenge) { "Reject with passkey" }
                }
            }
        }
    }
}

/// ", in alice@example.com's place" for a delegate.
fn in_place(place: Option<&Approver>) -> String {
    place.map_or_else(String::new, |p| {
        format!(", in the place of {} (their delegate)", p.as_str())
    })
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
        Channel::Policy => "the approval policy",
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
