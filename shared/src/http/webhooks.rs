//! `POST /webhooks/{source}`: verify, then record and apply in one transaction.

use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Extension, Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use sha2::{Digest, Sha256};

use super::extract::read_body;
use super::{ApiError, RequestId};
use crate::App;
use crate::domain::{ApprovalId, Channel, Decision, WebhookOutcome};
use crate::observe::{self, Metric};
use crate::store::{InboxRecord, Ingested};
use crate::webhook::{self, WebhookEvent};

pub async fn ingest(
    State(app): State<Arc<App>>,
    source_name: Result<Path<String>, PathRejection>,
    Extension(request_id): Extension<RequestId>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let mut signature_refused = None;
    let answer = deliver(
        &app,
        source_name,
        request_id,
        headers,
        body,
        &mut signature_refused,
    )
    .await;
    if let Err(err) = &answer
        && err.status().is_client_error()
    {
        let reason = match err {
            ApiError::UnknownSource => "unknown_source",
            ApiError::InvalidSignature => signature_refused.unwrap_or("invalid_event_id"),
            other => other.code(),
        };
        observe::count(Metric::WebhookRefused, &[reason]);
    }
    answer
}

/// One delivery; `signature_refused` tells why a signature check refused it.
async fn deliver(
    app: &App,
    source_name: Result<Path<String>, PathRejection>,
    RequestId(request_id): RequestId,
    headers: HeaderMap,
    body: Body,
    signature_refused: &mut Option<&'static str>,
) -> Result<Response, ApiError> {
    // A name that is not UTF-8 once decoded (`/webhooks/%FF`) names no configured source either.
    let Ok(Path(source_name)) = source_name else {
        return Err(ApiError::UnknownSource);
    };
    let secrets = app.secrets();
    let source = secrets
        .webhook_sources
        .get(&source_name)
        .ok_or(ApiError::UnknownSource)?;
    let body = read_body(body, &headers, webhook::BODY_LIMIT).await?;

    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let now = app.clock.now();
    let (event_id, timestamp) = (header("webhook-id"), header("webhook-timestamp"));
    webhook::verify(
        &source.secrets,
        event_id,
        timestamp,
        header("webhook-signature"),
        &body,
        now,
    )
    .map_err(|reason| {
        tracing::info!(source = source_name, %reason, "webhook refused");
        *signature_refused = Some(reason.reason());
        if reason.reason() == "signature" {
            // Perhaps signed with a rotated secret this function has not read yet.
            app.secret_failed();
        }
        ApiError::InvalidSignature
    })?;
    // verify() checked both headers are present and the timestamp is integer seconds.
    let (Some(event_id), Some(Ok(webhook_timestamp))) = (event_id, timestamp.map(str::parse))
    else {
        return Err(ApiError::InvalidSignature);
    };
    // The id becomes part of a DynamoDB key: bounded and printable, or it is no valid delivery.
    if event_id.is_empty()
        || event_id.len() > 256
        || !event_id.bytes().all(|b| b.is_ascii_graphic())
    {
        return Err(ApiError::InvalidSignature);
    }

    let (event_type, event) = webhook::parse_event(&body).map_err(ApiError::invalid)?;
    let mut record = InboxRecord {
        source: source_name.clone(),
        event_id: event_id.to_owned(),
        event_type,
        approval_id: None,
        received_at: now,
        webhook_timestamp,
        request_id,
        body_sha256: hex::encode(Sha256::digest(&body)),
        expires_at: now + app.config.inbox_ttl_seconds,
        // A webhook's id is signed with its body (Standard Webhooks): the id is the event.
        replay_key: None,
    };
    let ingested = match event {
        WebhookEvent::Other => {
            app.store
                .record_event(&record, WebhookOutcome::Ignored)
                .await?
        }
        WebhookEvent::Decided {
            approval_id,
            outcome,
            approver,
            comment,
        } => {
            record.approval_id = Some(approval_id.clone());
            match ApprovalId::parse(&approval_id) {
                // An id that is no approval id names no approval.
                Err(_) => {
                    app.store
                        .record_event(&record, WebhookOutcome::UnknownApproval)
                        .await?
                }
                Ok(id) => {
                    let place_groups = app.place_groups(&source.tenant, &id, &approver).await?;
                    let decision = Decision {
                        outcome,
                        approver,
                        decided_at: now,
                        channel: Channel::Webhook,
                        comment,
                        webhook_event_id: Some(event_id.to_owned()),
                        key_id: None,
                        signed_in: None,
                        by: None,
                        delegation_set_by: None,
                        passkey: None,
                    };
                    app.store
                        .ingest_decision(
                            &source.tenant,
                            &id,
                            &record,
                            &decision,
                            &place_groups,
                            now,
                        )
                        .await?
                }
            }
        }
    };
    let (status, outcome) = match ingested {
        Ingested::Processed(outcome) => {
            match outcome {
                WebhookOutcome::Applied => super::count_vote(Channel::Webhook, None),
                WebhookOutcome::Ignored => {}
                refused => observe::count(Metric::VoteRefused, &[refused.as_str()]),
            }
            ("processed", outcome)
        }
        Ingested::Duplicate(outcome) => {
            observe::count(Metric::WebhookDuplicate, &[]);
            ("duplicate", outcome)
        }
    };
    Ok(Json(json!({"status": status, "outcome": outcome})).into_response())
}
