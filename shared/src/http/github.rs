//! `POST /github/events/{tenant}`: a tenant's GitHub App's deliveries. The signature first, on
//! the raw body; then the delivery is recorded by its `X-GitHub-Delivery` in the same write as
//! its effect (a round opened or joined, a run's rounds closed), so a redelivery changes
//! nothing. Only DynamoDB writes: GitHub is answered within its 10 s, and told the outcome
//! later, by a job.

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
use crate::domain::{FieldError, TenantId, WebhookOutcome};
use crate::github::event::{DELIVERY_HEADER, EVENT_HEADER};
use crate::github::signature::{self, SIGNATURE_HEADER};
use crate::github::{GithubEvent, round_approval};
use crate::observe::{self, Metric, TraceContext};
use crate::store::size::MAX_GITHUB_DELIVERY_BYTES;
use crate::store::{InboxRecord, RoundIngested, RoundKey, RunClosed, RunEnd, github_source};

/// GitHub caps a payload at 25 MB; the events acted on are a few KB, and a `workflow_run` of a
/// large repository some tens of KB.
pub const GITHUB_BODY_LIMIT: usize = 1024 * 1024;

pub async fn events(
    State(app): State<Arc<App>>,
    tenant: Result<Path<String>, PathRejection>,
    Extension(RequestId(request_id)): Extension<RequestId>,
    Extension(trace): Extension<TraceContext>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let answer = deliver(&app, tenant, request_id, trace, headers, body).await;
    if let Err(err) = &answer
        && err.status().is_client_error()
    {
        let reason = match err {
            ApiError::UnknownSource => "unknown_source",
            ApiError::InvalidSignature => "signature",
            other => other.code(),
        };
        observe::count(Metric::WebhookRefused, &[reason]);
    }
    answer
}

async fn deliver(
    app: &App,
    tenant: Result<Path<String>, PathRejection>,
    request_id: String,
    trace: TraceContext,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let tenant = tenant
        .ok()
        .and_then(|Path(t)| TenantId::parse(&t).ok())
        .ok_or(ApiError::UnknownSource)?;
    tracing::Span::current().record("tenant", tenant.as_str());
    let secrets = app.secrets();
    let github = secrets.github.get(&tenant).ok_or(ApiError::UnknownSource)?;
    let body = read_body(body, &headers, GITHUB_BODY_LIMIT).await?;
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    signature::verify(&github.webhook_secrets, header(SIGNATURE_HEADER), &body).map_err(
        |reason| {
            tracing::info!(tenant = tenant.as_str(), %reason, "GitHub delivery refused");
            if reason == signature::SignatureError::Mismatch {
                // Perhaps signed with a rotated secret this function has not read yet.
                app.secret_failed();
            }
            ApiError::InvalidSignature
        },
    )?;
    let event = header(EVENT_HEADER).unwrap_or_default();
    // The delivery becomes part of a DynamoDB key, beside the tenant's rounds: a GUID's
    // characters only (the header is not signed: no `#` may reach a key).
    let delivery = header(DELIVERY_HEADER)
        .filter(|d| {
            !d.is_empty()
                && d.len() <= MAX_GITHUB_DELIVERY_BYTES
                && d.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
        .ok_or_else(|| {
            ApiError::invalid(vec![FieldError::new(
                "X-GitHub-Delivery",
                "a delivery id (a GUID: letters, digits and -) of 1 to 100 characters is required",
            )])
        })?;
    let parsed = crate::github::event::parse(event, &body, &github.api_url).map_err(|errors| {
        ApiError::InvalidRequest {
            detail: "the event is not as GitHub documents it".to_owned(),
            errors,
        }
    })?;
    let now = app.clock.now();
    let record = InboxRecord {
        source: github_source(&tenant),
        event_id: delivery.to_owned(),
        event_type: event.to_owned(),
        approval_id: None,
        received_at: now,
        webhook_timestamp: now,
        request_id,
        body_sha256: hex::encode(Sha256::digest(&body)),
        expires_at: now + app.config.inbox_ttl_seconds,
        // The delivery id is not signed: a captured body replayed under a fresh one is told
        // apart by what it names (its deployment, its run's attempt).
        replay_key: match &parsed {
            GithubEvent::DeploymentRequested(request) => request.replay_key(),
            GithubEvent::RunCompleted(run) => run.replay_key(),
            GithubEvent::Unused => None,
        },
    };
    let (status, outcome, approval) = match parsed {
        // `ping`, and what Countersign does not act on: acknowledged, nothing recorded.
        GithubEvent::Unused => ("processed", WebhookOutcome::Ignored, None),
        GithubEvent::DeploymentRequested(request) => {
            let policy = app.policies.get(&app.store, &tenant, now).await?;
            if policy.current.is_none() {
                super::governed::unpoliced(app, &tenant);
            }
            let mut approval = round_approval(
                github,
                &tenant,
                &request,
                delivery,
                (policy.current.as_ref(), &policy.groups),
                now,
            )
            .map_err(|problem| {
                ApiError::invalid(vec![FieldError::new("deployment_protection_rule", problem)])
            })?;
            if matches!(&approval.policy_evaluated, Some(e) if e["would_refuse"] == true) {
                observe::count(Metric::PolicyWouldRefuse, &[approval.action_type.as_str()]);
            }
            approval.trace = Some(trace.stored());
            let round = RoundKey {
                tenant: tenant.clone(),
                repository_id: request.repository_id,
                run_id: request.run_id,
                environment: request.environment.clone(),
            };
            let record = InboxRecord {
                approval_id: Some(approval.id.to_string()),
                ..record
            };
            match app
                .store
                .open_or_join_github_round(&record, &round, &approval, now)
                .await?
            {
                RoundIngested::Opened(opened) => {
                    tracing::Span::current().record("approval_id", opened.id.as_str());
                    observe::count(
                        Metric::ApprovalCreated,
                        &[
                            opened.action_type.as_str(),
                            crate::domain::Channel::Github.as_str(),
                        ],
                    );
                    // Open for votes, or approved by the tenant's approval policy; refused at
                    // once otherwise.
                    let outcome = if opened.status == crate::domain::Status::Rejected {
                        WebhookOutcome::Refused
                    } else {
                        WebhookOutcome::Opened
                    };
                    ("processed", outcome, Some(opened.id.to_string()))
                }
                RoundIngested::Joined(id) => {
                    tracing::Span::current().record("approval_id", id.as_str());
                    ("processed", WebhookOutcome::Joined, Some(id.to_string()))
                }
                RoundIngested::Duplicate(outcome) => {
                    observe::count(Metric::WebhookDuplicate, &[]);
                    ("duplicate", outcome, None)
                }
            }
        }
        GithubEvent::RunCompleted(run) => match app
            .store
            .close_github_run(
                &record,
                (&tenant, run.repository_id, run.run_id),
                &RunEnd {
                    conclusion: run.conclusion.clone(),
                    ended_at: run.completed_at,
                    attempt: run.run_attempt,
                },
                now,
            )
            .await?
        {
            RunClosed::NothingOpen => ("processed", WebhookOutcome::Ignored, None),
            RunClosed::Closed(cancelled) => {
                let ids: Vec<String> = cancelled.iter().map(ToString::to_string).collect();
                let first = ids.first().cloned();
                if let Some(id) = &first {
                    tracing::Span::current().record("approval_id", id.as_str());
                }
                ("processed", WebhookOutcome::Cancelled, first)
            }
            RunClosed::Duplicate(outcome) => {
                observe::count(Metric::WebhookDuplicate, &[]);
                ("duplicate", outcome, None)
            }
        },
    };
    tracing::info!(
        tenant = tenant.as_str(),
        delivery,
        event,
        outcome = outcome.as_str(),
        "GitHub delivery"
    );
    let mut answer = json!({"status": status, "outcome": outcome.as_str()});
    if let Some(id) = approval {
        answer["approval_id"] = json!(id);
    }
    Ok(Json(answer).into_response())
}
