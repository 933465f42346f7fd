//! The approver's inbox, `GET /inbox/{tenant}` (signed in): what waits on the signed-in person,
//! newest first, in pages of 50 — one listing read, the approver facet, as
//! `GET /approvals?approver=…&status=pending` — or, with `?status=`, what was decided. Each row
//! links to its review page, where decisions are made.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use maud::{Markup, html};
use serde_json::{Value, json};

use super::html::{notice, page, see_other, span, unavailable, when};
use super::pages::{DEFAULT_LIMIT, cursor_key};
use super::sign_in;
use crate::App;
use crate::domain::{Approval, Approver, EpochSeconds, Outcome, Status, TenantId};
use crate::session::Session;
use crate::store::ListQuery;

/// The most characters of a summary a row shows.
const SUMMARY_CHARS: usize = 200;

fn bad_query(text: &str) -> Response {
    notice(
        StatusCode::BAD_REQUEST,
        "Not understood",
        "That page does not exist",
        text,
    )
}

pub async fn show(
    State(app): State<Arc<App>>,
    tenant: Result<Path<String>, PathRejection>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    let Some(tenant) = tenant.ok().and_then(|Path(raw)| TenantId::parse(&raw).ok()) else {
        return notice(
            StatusCode::NOT_FOUND,
            "No inbox",
            "No inbox here",
            "Check the address.",
        );
    };
    if sign_in::oidc_of(&app, &tenant).is_none() {
        return notice(
            StatusCode::NOT_FOUND,
            "No inbox",
            "No inbox here",
            "This organisation's approvers do not sign in to Countersign: follow the review links you are sent.",
        );
    };
    let here = format!(
        "{}{}",
        sign_in::inbox_path(&app, &tenant),
        query
            .as_deref()
            .map(|q| format!("?{q}"))
            .unwrap_or_default()
    );
    let Some(session) = sign_in::session_of(&app, &headers, &tenant) else {
        return see_other(&sign_in::login_path(&app, &tenant, &here, false));
    };
    let mut params: HashMap<String, String> = HashMap::new();
    for (name, value) in
        url::form_urlencoded::parse(query.as_deref().unwrap_or_default().as_bytes())
    {
        if !["status", "cursor"].contains(&name.as_ref())
            || params
                .insert(name.into_owned(), value.into_owned())
                .is_some()
        {
            return bad_query("The inbox takes a status and a cursor, each once.");
        }
    }
    let status = match params.get("status").map(|raw| Status::parse(raw)) {
        None => Status::Pending,
        Some(Some(status)) => status,
        Some(None) => {
            return bad_query("Status is pending, approved, rejected, expired or cancelled.");
        }
    };
    let list = ListQuery {
        tenant: tenant.clone(),
        status: Some(status),
        approver: Some(session.identity.identity()),
        requested_by: None,
    };
    let Ok(key) = cursor_key(&app) else {
        return unavailable();
    };
    // Bound to the tenant, the person and the status: an inbox cursor opens nothing else.
    let scope = format!(
        "inbox\n{tenant}\n{}\n{}",
        status.as_str(),
        session.identity.identity()
    );
    let start = match params.get("cursor") {
        None => None,
        Some(cursor) => match key
            .open(&scope, cursor)
            .and_then(|position| serde_json::from_value::<HashMap<String, String>>(position).ok())
        {
            Some(position) => Some(position),
            None => {
                app.secret_failed();
                return bad_query("That page's link has expired: start from the inbox again.");
            }
        },
    };
    let listed = match app.store.list_approvals(&list, start, DEFAULT_LIMIT).await {
        Ok(listed) => listed,
        Err(error) => {
            tracing::error!(%error, "inbox: store");
            return unavailable();
        }
    };
    let now = app.clock.now();
    // A pending approval past its expiry reads as expired until the sweeper stores it so.
    let approvals: Vec<&Approval> = listed
        .approvals
        .iter()
        .map(|entry| &entry.approval)
        .filter(|a| status != Status::Pending || a.status_at(now) == Status::Pending)
        .collect();
    let next = listed.next.map(|position| {
        let query = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("status", status.as_str())
            .append_pair("cursor", &key.seal(&scope, &json!(position)))
            .finish();
        format!("{}?{query}", sign_in::inbox_path(&app, &tenant))
    });
    let secrets = app.secrets();
    let Some(secret) = secrets.decision_token_secret.as_ref() else {
        return unavailable();
    };
    // Each row's review link: its token names the approval (the session decides who votes).
    let review = |approval: &Approval| {
        let token = secret.mint(
            &tenant,
            &approval.id,
            &session.identity,
            approval.expires_at.max(session.expires_at),
        );
        let query = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("token", &token)
            .finish();
        format!(
            "{}/approvals/{}/review?{query}",
            sign_in::base_path(&app),
            approval.id
        )
    };
    let body = render(
        &app,
        &tenant,
        &session,
        status,
        &approvals,
        &review,
        next.as_deref(),
        now,
    );
    // Its only form is Sign out, on this origin.
    page(StatusCode::OK, "Inbox", body)
}

fn summary(approval: &Approval) -> String {
    let text = approval
        .context
        .get("summary")
        .and_then(Value::as_str)
        .unwrap_or(&approval.action_type);
    let mut chars = text.chars();
    let shown: String = chars.by_ref().take(SUMMARY_CHARS).collect();
    if chars.next().is_some() {
        format!("{shown}…")
    } else {
        shown
    }
}

/// Each rule's progress and who voted toward it: (name, approvals, needed, voters).
fn progress(approval: &Approval) -> Vec<(String, u32, u32, Vec<String>)> {
    let votes = approval.recorded_votes();
    let voters = |listed: &[Approver]| -> Vec<String> {
        votes
            .iter()
            .filter(|v| listed.iter().any(|a| a.same_identity(&v.approver)))
            .map(|v| {
                let vote = if v.outcome == Outcome::Approved {
                    "approved"
                } else {
                    "rejected"
                };
                match &v.by {
                    Some(by) => format!("{} {vote} (by {})", v.approver.as_str(), by.as_str()),
                    None => format!("{} {vote}", v.approver.as_str()),
                }
            })
            .collect()
    };
    match &approval.policy {
        Some(policy) => policy
            .rules
            .iter()
            .zip(approval.approvals_per_rule())
            .map(|(rule, approvals)| {
                (
                    rule.name.clone(),
                    approvals,
                    rule.min_approvals,
                    voters(&rule.approvers),
                )
            })
            .collect(),
        None => {
            let approvals = votes
                .iter()
                .filter(|v| v.outcome == Outcome::Approved)
                .count();
            vec![(
                "any approver".to_owned(),
                u32::try_from(approvals).unwrap_or(u32::MAX),
                1,
                voters(&approval.approvers),
            )]
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn render(
    app: &App,
    tenant: &TenantId,
    session: &Session,
    status: Status,
    approvals: &[&Approval],
    review: &dyn Fn(&Approval) -> String,
    next: Option<&str>,
    now: EpochSeconds,
) -> Markup {
    let inbox = sign_in::inbox_path(app, tenant);
    let logout = format!("{}/auth/{tenant}/logout", sign_in::base_path(app));
    let tabs = [
        Status::Pending,
        Status::Approved,
        Status::Rejected,
        Status::Expired,
        Status::Cancelled,
    ];
    html! {
        nav {
            @for tab in tabs {
                @if tab == status { strong { (tab.as_str()) } }
                @else { a href=(format!("{inbox}?status={}", tab.as_str())) { (tab.as_str()) } }
            }
            span.muted.who { "Signed in as " strong { (session.identity.as_str()) } }
            form method="post" action=(logout) { button.quiet type="submit" { "Sign out" } }
        }
        div.card {
            h1 { @if status == Status::Pending { "Waiting on you" } @else { "Decided: " (status.as_str()) } }
            p.muted { (approvals.len()) " on this page" }
        }
        @if approvals.is_empty() {
            div.card #empty { p { @if status == Status::Pending { "Nothing waits on you." } @else { "Nothing here." } } }
        }
        @for approval in approvals {
            div.card.approval data-id=(approval.id.as_str()) {
                h1 { a href=(review(approval)) { (summary(approval)) } }
                p.muted {
                    strong { (approval.action_type) }
                    @if let Some(by) = &approval.requested_by { " · requested by " (by.as_str()) }
                    " · " (span(now - approval.created_at)) " ago"
                    @if approval.status_at(now) == Status::Pending { " · expires in " (span(approval.expires_at - now)) }
                    @else { " · " span.badge.(approval.status_at(now).as_str()) { (approval.status_at(now).as_str()) } }
                }
                ul.rules {
                    @for (name, approvals, needed, voters) in progress(approval) {
                        li { strong { (name) } ": " (approvals) " of " (needed)
                            @if !voters.is_empty() { span.muted { " (" (voters.join(", ")) ")" } } }
                    }
                }
                p.yours {
                    @match approval.vote_of(&session.identity) {
                        Some(vote) => { "Your vote: " strong { (if vote.outcome == Outcome::Approved { "approved" } else { "rejected" }) } " " (when(vote.decided_at)) }
                        None => { "You have not voted." }
                    }
                    @if let Some(step) = approval.joined_at_step(&session.identity) { " You were added by escalation step " (step) "." }
                }
                @if let Some(why) = approval.required_by(&session.identity) {
                    p.muted.required { "Asked of you by " (why) "." }
                }
            }
        }
        @if let Some(next) = next { p { a #next href=(next) { "Older" } } }
    }
}
