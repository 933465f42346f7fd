//! The requester's endpoints beside the create (`create.rs`): read, decide (JSON), cancel.

use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::extract::{Caller, is_json, media_type, parse_json, read_body};
use super::pages::query_params;
use super::{ApiError, REPLAYED, count_vote, refused_vote};
use crate::App;
use crate::auth::Role;
use crate::domain::{
    Approval, ApprovalId, Approver, Cancellation, Channel, DecideRefusal, DecideRequest, Decision,
    FieldError, Status, classify_refusal,
};
use crate::store::{DecideOutcome, InPlace, StoreError, VoteBy};

/// A cancel's body is at most a reason.
pub const CANCEL_BODY_LIMIT: usize = 16 * 1024;
/// Decision bodies are small; the same limit keeps one rule for clients.
pub const DECIDE_BODY_LIMIT: usize = 64 * 1024;

/// A path id that is not an approval id (or not even UTF-8) names no approval: 404, with no
/// store call.
pub(super) fn approval_id(
    raw: Result<Path<String>, PathRejection>,
) -> Result<ApprovalId, ApiError> {
    let Path(raw) = raw.map_err(|_| ApiError::NotFound)?;
    ApprovalId::parse(&raw).map_err(|_| ApiError::NotFound)
}

/// Every role reads (a key has at least one). With `wait=N` the read holds until the approval is
/// decided (`until=executed`: and its execution ended) or N seconds pass (see [`super::wait`]).
pub async fn get(
    State(app): State<Arc<App>>,
    caller: Caller,
    id: Result<Path<String>, PathRejection>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let hold = super::wait::parse(&query_params(query.as_deref(), &["wait", "until"])?)?;
    let id = approval_id(id)?;
    let approval = super::wait::read(&app, caller.tenant(), &id, hold).await?;
    Ok(Json(approval.view(app.clock.now())).into_response())
}

/// JSON with a Bearer key (a trusted backend deciding for an approver), or the review page's
/// form post (authorised by its review-link token).
pub async fn decide(
    State(app): State<Arc<App>>,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    if media_type(&headers).as_deref() == Some("application/x-www-form-urlencoded") {
        let bytes = read_body(body, &headers, DECIDE_BODY_LIMIT).await?;
        return Ok(super::review::decide_form(&app, id, &headers, &bytes).await);
    }
    let Caller(caller) = Caller::from_headers(&app, &headers).await?;
    if !caller.has(Role::Decider) && !caller.has(Role::Approver) {
        return Err(ApiError::Forbidden);
    }
    if !is_json(&headers) {
        return Err(ApiError::UnsupportedMediaType);
    }
    let bytes = read_body(body, &headers, DECIDE_BODY_LIMIT).await?;
    let mut value = parse_json(&bytes)?;
    // Whether the vote names someone else, in whose place it may be cast as their delegate.
    let mut in_place = false;
    if !caller.has(Role::Decider) {
        // An approver decides as itself (the body names it, or nobody), or as a delegate.
        match value.get("approver") {
            None | Some(serde_json::Value::Null) => {
                if let Some(fields) = value.as_object_mut() {
                    fields.insert("approver".to_owned(), json!(caller.principal.as_str()));
                }
            }
            Some(serde_json::Value::String(named)) if named != caller.principal.as_str() => {
                match Approver::parse(named) {
                    Ok(named) if !named.same_identity(&caller.principal) => in_place = true,
                    // Itself spelled otherwise, or nobody: as before delegation.
                    _ => return Err(ApiError::Forbidden),
                }
            }
            // Itself, or not a string (which the parse below reports).
            Some(_) => {}
        }
    }
    let mut request = DecideRequest::parse_json(&value).map_err(ApiError::invalid)?;
    request.sent_by = caller.vote_sender();
    let tenant = caller.tenant;
    let id = approval_id(id)?;

    request.place_groups = app.place_groups(&tenant, &id, &request.approver).await?;
    let now = app.clock.now();
    if in_place {
        // One hop: the named person's own delegation, to this voter, read with the approval
        // and checked again in the vote's own write (store/votes_in_place.rs).
        request.by = Some(caller.principal.clone());
    }
    let decision = Decision {
        outcome: request.outcome,
        approver: request.approver.clone(),
        decided_at: now,
        channel: Channel::Api,
        comment: request.comment.clone(),
        webhook_event_id: None,
        key_id: caller.key_id.clone(),
        signed_in: None,
        by: request.by.clone(),
        delegation_set_by: None,
        passkey: None,
    };
    let outcome = if in_place {
        match app
            .store
            .decide_in_place(&tenant, &id, &decision, VoteBy::of(&request), now)
            .await?
        {
            InPlace::Voted(outcome) => outcome,
            // Not delegated to this voter, or not now: 403 `forbidden`, as naming anyone else
            // always was.
            InPlace::NotDelegated => {
                super::refused_vote(Channel::Api, DecideRefusal::NotDelegated);
                return Err(ApiError::NotDelegated);
            }
        }
    } else {
        app.store
            .decide(&tenant, &id, &decision, VoteBy::of(&request), now)
            .await?
    };
    match outcome {
        DecideOutcome::Won(approval) => {
            count_vote(Channel::Api, None);
            Ok(Json(approval.view(now)).into_response())
        }
        DecideOutcome::Refused(old) => {
            match refused_vote(
                Channel::Api,
                classify_refusal(old.map(|a| *a), &request, now),
            ) {
                DecideRefusal::Repeat(approval) => Ok(replayed(&approval, now)),
                DecideRefusal::AlreadyDecided(approval) => Err(ApiError::AlreadyDecided {
                    approval: json!(approval.view(now)),
                }),
                DecideRefusal::AlreadyVoted(approval) => Err(ApiError::AlreadyVoted {
                    approval: json!(approval.view(now)),
                }),
                DecideRefusal::NotFound => Err(ApiError::NotFound),
                DecideRefusal::Expired => Err(ApiError::ApprovalExpired),
                DecideRefusal::NotAnApprover => Err(ApiError::NotAnApprover),
                DecideRefusal::SelfApproval => Err(ApiError::SelfApprovalForbidden),
                DecideRefusal::NotDelegated => Err(ApiError::NotDelegated),
                DecideRefusal::NotInGroup(group) => Err(ApiError::NotInGroup(group)),
                DecideRefusal::PasskeyRequired => Err(ApiError::PasskeyRequired),
                DecideRefusal::CommentTooLong { cap } => Err(ApiError::CommentTooLong(cap)),
                DecideRefusal::Completes(_) | DecideRefusal::Unexplained => {
                    Err(ApiError::Internal(StoreError::Corrupt(
                        "the decision condition refused a decidable approval",
                    )))
                }
            }
        }
    }
}

/// The requester that created it, or an operator: pending → `cancelled`, with an optional
/// `{"reason": "…"}`. A repeat answers 200 + `Idempotent-Replayed`; decided 409; expired 410.
pub async fn cancel(
    State(app): State<Arc<App>>,
    id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let Caller(caller) = Caller::from_headers(&app, &headers).await?;
    let by_anyone = caller.has(Role::Operator);
    if !by_anyone && !caller.has(Role::Requester) {
        return Err(ApiError::Forbidden);
    }
    let bytes = read_body(body, &headers, CANCEL_BODY_LIMIT).await?;
    let reason = if bytes.is_empty() {
        None
    } else {
        if !is_json(&headers) {
            return Err(ApiError::UnsupportedMediaType);
        }
        cancel_reason(&parse_json(&bytes)?).map_err(ApiError::invalid)?
    };
    let id = approval_id(id)?;
    let now = app.clock.now();
    let cancellation = Cancellation {
        by: caller.principal.clone(),
        at: now,
        reason,
        channel: None,
    };
    match app
        .store
        .cancel(&caller.tenant, &id, &cancellation, by_anyone, now)
        .await?
    {
        DecideOutcome::Won(approval) => Ok(Json(approval.view(now)).into_response()),
        DecideOutcome::Refused(None) => Err(ApiError::NotFound),
        DecideOutcome::Refused(Some(old)) => match old.status_at(now) {
            Status::Cancelled => Ok(replayed(&old, now)),
            Status::Approved | Status::Rejected => Err(ApiError::AlreadyDecided {
                approval: json!(old.view(now)),
            }),
            Status::Expired => Err(ApiError::ApprovalExpired),
            // Pending: the condition only fails it for a requester that is not this one's.
            Status::Pending => Err(ApiError::Forbidden),
        },
    }
}

/// A repeat of a change that already applied: the approval as it is, marked as a replay.
fn replayed(approval: &Approval, now: i64) -> Response {
    let mut response = Json(approval.view(now)).into_response();
    response
        .headers_mut()
        .insert(REPLAYED, HeaderValue::from_static("true"));
    response
}

fn cancel_reason(body: &serde_json::Value) -> Result<Option<String>, Vec<FieldError>> {
    let Some(fields) = body.as_object() else {
        return Err(vec![FieldError::new("", "the body must be a JSON object")]);
    };
    if let Some(unknown) = fields.keys().find(|k| k.as_str() != "reason") {
        return Err(vec![FieldError::new(unknown.clone(), "unknown field")]);
    }
    match fields.get("reason") {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(reason)) => {
            let mut errors = Vec::new();
            let reason = DecideRequest::check_comment(reason, &mut errors);
            if errors.is_empty() {
                Ok(reason)
            } else {
                Err(vec![FieldError::new(
                    "reason",
                    "must be at most 2000 characters",
                )])
            }
        }
        Some(_) => Err(vec![FieldError::new("reason", "must be a string")]),
    }
}
