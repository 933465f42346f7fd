//! The approver's review page (`GET /approvals/{id}/review?token=…`) and the form post behind
//! its buttons. Disabling a button is not duplicate protection; the server is: the form goes
//! through the same single conditional update as the JSON API, and always answers 303 See Other
//! to the review page (post-redirect-get), which shows the one outcome.
//!
//! For a tenant whose approvers sign in (`OIDC`), the link's token only names the approval: a
//! GET shows it read-only until a listed approver signs in, and a post decides only for the
//! session's person, with the session's CSRF token, from this origin. Without `OIDC`, the link
//! is the credential (v1's signed links).

mod passkey;
mod render;

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use maud::html;

use super::html::{forbidden, notice, page, page_for, see_other, unavailable};
use super::sign_in;
use crate::App;
use crate::config::OidcTenant;
use crate::domain::{
    ApprovalId, Approver, Channel, DecideRefusal, DecideRequest, Decision, FieldError, SignIn,
    classify_refusal,
};
use crate::review_token::{ReviewGrant, TokenError};
use crate::session::Session;
use crate::store::{DecideOutcome, InPlace, VoteBy};
use render::{Viewer, render};

fn self_approval_forbidden() -> Response {
    notice(
        StatusCode::FORBIDDEN,
        "Not yours to decide",
        "You requested this approval",
        "Its requester may not decide it: someone else on the list must. Nothing was recorded.",
    )
}

/// A vote without a passkey signature on a passkey-only approval.
fn passkey_required() -> Response {
    notice(
        StatusCode::FORBIDDEN,
        "Passkey required",
        "This request takes a passkey signature",
        "Nothing was recorded. Add a passkey on your passkeys page, then approve or reject with it here.",
    )
}

/// A passkey vote whose checks failed: why, in the approver's words.
fn passkey_refused(refusal: &passkey::PasskeyRefusal) -> Response {
    let why = match refusal {
        passkey::PasskeyRefusal::Nonce => {
            "This page is older than 5 minutes, or was opened in another session: open the review link again and sign there.".to_owned()
        }
        passkey::PasskeyRefusal::Credential => {
            "That passkey is not registered to you (or was removed): add it on your passkeys page.".to_owned()
        }
        passkey::PasskeyRefusal::Assertion(why) => format!("The signature did not verify: {why}."),
    };
    notice(
        StatusCode::FORBIDDEN,
        "Not recorded",
        "Your passkey signature was not accepted",
        &format!("Nothing was recorded. {why}"),
    )
}

/// A signed-in person the approval does not list.
fn not_listed(identity: &Approver) -> Response {
    page(
        StatusCode::FORBIDDEN,
        "Not on the list",
        html! {
            div.card {
                h1 { "You are not an approver of this request" }
                p.muted { "Signed in as " strong { (identity.as_str()) } ". Only the people it lists may see and decide it. Nothing was recorded." }
            }
        },
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

fn query_field(query: Option<&str>, field: &str) -> Option<String> {
    url::form_urlencoded::parse(query?.as_bytes())
        .find(|(name, _)| name == field)
        .map(|(_, value)| value.into_owned())
}

/// The place `person` fills as `place`'s delegate, if `place` is named, and has delegated to
/// them now: the one read (its delegation) a vote in someone's place takes. `Err`: the store.
async fn standing(
    app: &App,
    tenant: &crate::domain::TenantId,
    place: Option<&str>,
    person: &Approver,
) -> Result<Option<Approver>, crate::store::StoreError> {
    let Some(place) = place.and_then(|p| Approver::parse(p).ok()) else {
        return Ok(None);
    };
    let delegation = app.store.delegation(tenant, &place).await?;
    Ok(delegation
        .filter(|d| d.delegation.lets(person, app.clock.now()))
        .map(|d| d.delegation.delegator))
}

/// The page for a vote in a place whose delegation is not the voter's, or not now.
fn not_delegated() -> Response {
    notice(
        StatusCode::FORBIDDEN,
        "Not recorded",
        "Not yours to decide in that place",
        "That person has not delegated to you, or not now. Nothing was recorded.",
    )
}

/// The review page's own path (what a sign-in comes back to), in a delegate's `place`.
fn review_path(app: &App, id: &ApprovalId, token: &str, place: Option<&str>) -> String {
    let mut query = url::form_urlencoded::Serializer::new(String::new());
    query.append_pair("token", token);
    if let Some(place) = place {
        query.append_pair("place", place);
    }
    format!(
        "{}/approvals/{id}/review?{}",
        sign_in::base_path(app),
        query.finish()
    )
}

/// Who decides through a signing-in tenant's page: the session's person, if they are signed
/// in recently enough.
struct Signer {
    session: Session,
    fresh: bool,
}

fn signer(
    app: &App,
    oidc: &OidcTenant,
    headers: &HeaderMap,
    tenant: &crate::domain::TenantId,
) -> Option<Signer> {
    let session = sign_in::session_of(app, headers, tenant)?;
    let fresh = sign_in::fresh_enough(oidc, session.auth_time, app.clock.now());
    Some(Signer { session, fresh })
}

pub async fn show(
    State(app): State<Arc<App>>,
    id: Result<Path<String>, PathRejection>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    let token = query_field(query.as_deref(), "token");
    let named_place = query_field(query.as_deref(), "place");
    let Some((id, grant)) = authorise(&app, path_id(id), token.as_deref()) else {
        return forbidden();
    };
    let approval = match app.store.get_approval(&grant.tenant, &id).await {
        // The link must be one minted for a listed approver, whoever then signs in — or a
        // delegate's, naming the listed place.
        Ok(Some(approval))
            if approval.is_approver(&grant.approver)
                || named_place
                    .as_deref()
                    .and_then(|p| Approver::parse(p).ok())
                    .is_some_and(|p| approval.is_approver(&p)) =>
        {
            approval
        }
        Ok(_) => return forbidden(),
        Err(err) => {
            tracing::error!(error = %err, "review page: store");
            return unavailable();
        }
    };
    let token = token.unwrap_or_default();
    let oidc = sign_in::oidc_of(&app, &grant.tenant);
    // Who looks: the link's person, or the signed-in one; and the place they fill as a
    // delegate, when the link names one that has delegated to them.
    let person = match &oidc {
        None => Some(grant.approver.clone()),
        Some(oidc) => signer(&app, oidc, &headers, &grant.tenant).map(|s| s.session.identity),
    };
    let place = match &person {
        Some(person) => match standing(&app, &grant.tenant, named_place.as_deref(), person).await {
            Ok(place) => place.filter(|p| approval.is_approver(p)),
            Err(err) => {
                tracing::error!(error = %err, "review page: store");
                return unavailable();
            }
        },
        None => None,
    };
    if place.is_none()
        && person.as_ref().is_some_and(|p| !approval.is_approver(p))
        && oidc.is_none()
    {
        return forbidden();
    }
    let viewer = match &oidc {
        None => Viewer::Link {
            approver: grant.approver,
        },
        Some(oidc) => {
            let here = review_path(&app, &id, &token, named_place.as_deref());
            match signer(&app, oidc, &headers, &grant.tenant) {
                None => Viewer::Anonymous {
                    sign_in: sign_in::login_path(&app, &grant.tenant, &here, false),
                },
                Some(signer)
                    if place.is_none() && !approval.is_approver(&signer.session.identity) =>
                {
                    return not_listed(&signer.session.identity);
                }
                Some(signer) => Viewer::SignedIn {
                    passkey: match approval.assurance {
                        None => None,
                        Some(_) => {
                            match passkey::ask(&app, &approval, &signer.session, place.as_ref())
                                .await
                            {
                                Ok(ask) => ask.map(Box::new),
                                Err(err) => {
                                    tracing::error!(error = %err, "review page: passkeys");
                                    return unavailable();
                                }
                            }
                        }
                    },
                    csrf: sign_in::csrf_token(&app, &signer.session).unwrap_or_default(),
                    sign_in_again: (!signer.fresh)
                        .then(|| sign_in::login_path(&app, &grant.tenant, &here, true)),
                    logout: format!("{}/auth/{}/logout", sign_in::base_path(&app), grant.tenant),
                    identity: signer.session.identity,
                },
            }
        }
    };
    let status = approval.status_at(app.clock.now());
    // A signed-in approver's form may be sent to sign in again (a session that ended while the
    // page was open): through the login route to the provider.
    let form_action = match (&viewer, &oidc) {
        (Viewer::SignedIn { .. }, Some(oidc)) => {
            sign_in::provider_origin(&app, &grant.tenant, oidc)
        }
        _ => None,
    };
    page_for(
        StatusCode::OK,
        &format!("Review {}", approval.action_type),
        render(&approval, status, &viewer, &token, place.as_ref()),
        form_action.as_deref(),
    )
}

/// The form post of the review page's buttons: always 303 to the review page once the token
/// (and, for a signing-in tenant, the session) holds, whether this post won, repeated the
/// winner, or lost.
pub async fn decide_form(
    app: &App,
    id: Result<Path<String>, PathRejection>,
    headers: &HeaderMap,
    body: &Bytes,
) -> Response {
    let fields: Vec<(String, String)> = url::form_urlencoded::parse(body).into_owned().collect();
    let field = |name: &str| {
        fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    };
    let token = field("token").unwrap_or_default();
    let (decision, comment) = (field("decision"), field("comment"));
    let Some((id, grant)) = authorise(app, path_id(id), Some(&token)) else {
        return forbidden();
    };
    let review = review_path(app, &id, &token, field("place").as_deref());
    // Who votes: the link's approver, or the signed-in person.
    let (mut approver, signed_in, session): (Approver, Option<SignIn>, Option<Session>) =
        match sign_in::oidc_of(app, &grant.tenant) {
            None => (grant.approver.clone(), None, None),
            Some(oidc) => {
                if !sign_in::same_origin(app, headers) {
                    return notice(
                        StatusCode::FORBIDDEN,
                        "Not recorded",
                        "That form did not come from this site",
                        "Nothing was recorded. Open the review link and decide there.",
                    );
                }
                let Some(signer) = signer(app, &oidc, headers, &grant.tenant) else {
                    return see_other(&sign_in::login_path(app, &grant.tenant, &review, false));
                };
                if !sign_in::csrf_holds(app, &signer.session, field("csrf").as_deref()) {
                    return notice(
                        StatusCode::FORBIDDEN,
                        "Not recorded",
                        "That form has expired",
                        "Nothing was recorded. Open the review link again and decide there.",
                    );
                }
                if !signer.fresh {
                    return see_other(&sign_in::login_path(app, &grant.tenant, &review, true));
                }
                let sign_in = sign_in::sign_in_of(&signer.session);
                (
                    signer.session.identity.clone(),
                    Some(sign_in),
                    Some(signer.session),
                )
            }
        };
    // A delegate's form names the place they fill: its delegation is read with the approval
    // and checked again in the vote's own write.
    let by = match field("place").map(|named| Approver::parse(&named)) {
        None => None,
        Some(Ok(place)) if !place.same_identity(&approver) => {
            Some(std::mem::replace(&mut approver, place))
        }
        // Their own place, however spelled: their own vote.
        Some(Ok(_)) => None,
        Some(Err(_)) => return not_delegated(),
    };
    let mut errors: Vec<FieldError> = Vec::new();
    let outcome = decision.as_deref().and_then(DecideRequest::parse_outcome);
    let comment = comment.and_then(|c| DecideRequest::check_comment(&c, &mut errors));
    let Some(outcome) = outcome.filter(|_| errors.is_empty()) else {
        return notice(
            StatusCode::BAD_REQUEST,
            "Not understood",
            "That decision was not understood",
            "Nothing was recorded. Go back and use the Approve or Reject button.",
        );
    };
    let place_groups = match app.place_groups(&grant.tenant, &id, &approver).await {
        Ok(groups) => groups,
        Err(err) => {
            tracing::error!(error = %err, "review form: the tenant's groups");
            return unavailable();
        }
    };
    // A passkey vote: verified before its write, which stores it with the vote.
    let evidence = match (field("nonce"), &session) {
        (Some(nonce), Some(session)) => {
            let version = field("policy_version");
            let fields = passkey::PasskeyFields {
                nonce: &nonce,
                action_type: &field("action_type").unwrap_or_default(),
                payload_sha256: &field("payload_sha256").unwrap_or_default(),
                policy_version: version.as_deref(),
                credential_id: &field("credential_id").unwrap_or_default(),
                authenticator_data: &field("authenticator_data").unwrap_or_default(),
                client_data_json: &field("client_data_json").unwrap_or_default(),
                signature: &field("signature").unwrap_or_default(),
            };
            let checked = passkey::verified(
                app,
                (&grant.tenant, &id),
                &fields,
                session,
                (outcome, &approver, by.as_ref()),
            )
            .await;
            match checked {
                Ok(Ok(evidence)) => Some(evidence),
                Ok(Err(refusal)) => {
                    super::refused_vote(Channel::ReviewPage, DecideRefusal::PasskeyRequired);
                    return passkey_refused(&refusal);
                }
                Err(err) => {
                    tracing::error!(error = %err, "review form: passkeys");
                    return unavailable();
                }
            }
        }
        _ => None,
    };
    let now = app.clock.now();
    let request = DecideRequest {
        outcome,
        approver: approver.clone(),
        comment,
        sent_by: by.clone(),
        by: by.clone(),
        place_groups,
        passkey: evidence.is_some(),
    };
    let decision = Decision {
        outcome,
        approver: approver.clone(),
        decided_at: now,
        channel: Channel::ReviewPage,
        comment: request.comment.clone(),
        webhook_event_id: None,
        key_id: None,
        signed_in,
        by: by.clone(),
        delegation_set_by: None,
        passkey: evidence,
    };
    // A delegate's vote is sent by the delegate: the requester may not stand in either.
    let outcome = match &by {
        None => {
            app.store
                .decide(&grant.tenant, &id, &decision, VoteBy::of(&request), now)
                .await
        }
        Some(_) => match app
            .store
            .decide_in_place(&grant.tenant, &id, &decision, VoteBy::of(&request), now)
            .await
        {
            Ok(InPlace::Voted(outcome)) => Ok(outcome),
            Ok(InPlace::NotDelegated) => {
                super::refused_vote(Channel::ReviewPage, DecideRefusal::NotDelegated);
                return not_delegated();
            }
            Err(err) => Err(err),
        },
    };
    match outcome {
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
            DecideRefusal::NotAnApprover if decision.signed_in.is_some() => {
                return not_listed(&approver);
            }
            DecideRefusal::NotFound | DecideRefusal::NotAnApprover => return forbidden(),
            DecideRefusal::NotDelegated => return not_delegated(),
            DecideRefusal::SelfApproval => return self_approval_forbidden(),
            DecideRefusal::NotInGroup(group) => {
                return notice(
                    StatusCode::FORBIDDEN,
                    "No longer in the group",
                    &format!("You are no longer in group {group}"),
                    "Nothing was recorded: the approval policy counts this place's vote only while it is in the group.",
                );
            }
            DecideRefusal::PasskeyRequired => return passkey_required(),
            DecideRefusal::CommentTooLong { cap } => {
                return notice(
                    StatusCode::BAD_REQUEST,
                    "Comment too long",
                    "That comment is too long",
                    &format!(
                        "Nothing was recorded. This approval keeps comments of at most {cap} bytes: go back and shorten it."
                    ),
                );
            }
            DecideRefusal::Completes(_) | DecideRefusal::Unexplained => return unavailable(),
        },
        Err(err) => {
            tracing::error!(error = %err, "review form: store");
            return unavailable();
        }
    }
    // Relative to /approvals/{id}/decision, whatever path prefix (an API stage) is in front.
    let mut query = url::form_urlencoded::Serializer::new(String::new());
    query.append_pair("token", &token);
    if by.is_some() {
        // Back to the page in the place just filled (the vote's approver).
        query.append_pair("place", approver.as_str());
    }
    see_other(&format!("review?{}", query.finish()))
}
