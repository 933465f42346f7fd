//! `POST /approvals`: a create, as the tenant's approval policy decides it (docs/POLICY.md).
//! The policy and groups come from the cache (`KEY_CACHE_SECONDS`), so a create under policy is
//! still one DynamoDB round trip: the transaction that writes the approval with its key.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Extension, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::extract::{Caller, idempotency_key, is_json, parse_json, read_body};
use super::governed::{govern_refusal, unpoliced};
use super::{ApiError, REPLAYED};
use crate::App;
use crate::auth::Role;
use crate::domain::approval_policy::{AskRequest, Governance, govern};
use crate::domain::stall::{Stall, parse_escalation};
use crate::domain::{
    Approval, CreateRefusal, CreateRequest, DecideRequest, FieldError, Policy, PolicyRefusal,
    fingerprint, inexact_numbers,
};
use crate::observe::{self, Metric, TraceContext};
use crate::store::{CreateOutcome, IdempotencyRecord, size};

/// Create bodies above this are refused before parsing.
pub const CREATE_BODY_LIMIT: usize = 64 * 1024;

pub async fn create(
    State(app): State<Arc<App>>,
    caller: Caller,
    Extension(trace): Extension<TraceContext>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    caller.require(&[Role::Requester])?;
    if !is_json(&headers) {
        return Err(ApiError::UnsupportedMediaType);
    }
    let key = idempotency_key(&headers)?;
    let bytes = read_body(body, &headers, CREATE_BODY_LIMIT).await?;
    let value = parse_json(&bytes)?;
    let inexact = inexact_numbers(&bytes);
    if !inexact.is_empty() {
        return Err(ApiError::invalid(inexact));
    }
    let request =
        CreateRequest::parse(&value, |t| app.secrets().is_action_type(t)).map_err(|refusal| {
            match refusal {
                CreateRefusal::Invalid(errors) => ApiError::invalid(errors),
                CreateRefusal::UnknownActionType(kind) => ApiError::UnknownActionType(kind),
            }
        })?;
    if let Some(resume) = &request.resume
        && !app.config.resume_types.enables(resume.kind)
    {
        return Err(ApiError::ResumeNotEnabled(resume.kind.as_str()));
    }
    let Caller(caller) = caller;
    let key_id = caller.key_id.clone();
    // Separation of duties: an approval only its requester could approve can never be approved.
    let requester = caller.principal.identity();
    if !request.approvers.is_empty() && request.approvers.iter().all(|a| a.identity() == requester)
    {
        return Err(ApiError::PolicyUnsatisfiable {
            errors: vec![FieldError::new("approvers", "lists only the requester")],
        });
    }
    let refused = |refusal| match refusal {
        PolicyRefusal::Invalid(errors) => ApiError::invalid(errors),
        PolicyRefusal::Unsatisfiable(errors) => ApiError::PolicyUnsatisfiable { errors },
    };
    let policy = request
        .policy
        .as_ref()
        .map(|p| Policy::parse(p, &request.approvers, &caller.principal))
        .transpose()
        .map_err(refused)?;
    // Escalation approvers are checked as any approver is (the requester among them could never
    // vote: policy_unsatisfiable).
    let stall = Stall {
        escalation: request
            .escalation
            .as_ref()
            .map(|e| parse_escalation(e, &request.approvers, policy.as_ref(), &caller.principal))
            .transpose()
            .map_err(refused)?
            .unwrap_or_default(),
        reminders: request
            .reminders
            .or_else(|| app.secrets().default_reminders(&request.action_type)),
        ..Stall::default()
    };

    // The deployment's decision, before anything is written: a refusal leaves the key unused
    // (and a replay of a create that went ahead still answers as first: `replay_or`).
    let now = app.clock.now();
    let body_fingerprint = fingerprint(&value);
    let (tenant, action_type) = (caller.tenant.clone(), request.action_type.clone());
    let replay_or = |refusal: ApiError| {
        let (app, tenant, key) = (app.clone(), tenant.clone(), key.clone());
        let (fingerprint, action_type) = (body_fingerprint.clone(), action_type.clone());
        async move {
            match app
                .store
                .earlier_create(&tenant, &key, &fingerprint, now)
                .await?
            {
                Some(earlier) => {
                    if matches!(earlier, CreateOutcome::Replayed(_)) {
                        observe::count(Metric::CreateReplayed, &[action_type.as_str()]);
                    }
                    answer(earlier, None)
                }
                None => Err(refusal),
            }
        }
    };
    let tenant_policy = app.policies.get(&app.store, &caller.tenant, now).await?;
    let roles = caller.role_names();
    let summary = request
        .context
        .get("summary")
        .and_then(|s| s.as_str())
        .unwrap_or_default();
    let ask = AskRequest {
        tenant: caller.tenant.as_str(),
        requester: caller.principal.as_str(),
        roles,
        action_type: &request.action_type,
        payload: &request.payload,
        summary,
        approvers: request.approvers.iter().map(|a| a.as_str()).collect(),
        channel: "api",
        resume: request.resume.as_ref().map_or("", |r| r.kind.as_str()),
        expires_in_seconds: request.expires_in_seconds,
    };
    let governance = match govern(
        tenant_policy.current.as_ref(),
        &tenant_policy.groups,
        &ask,
        &caller.principal,
        (&request.approvers, policy.as_ref()),
    ) {
        Ok(governance) => governance,
        Err(refusal) => return replay_or(govern_refusal(refusal)).await,
    };
    match &governance {
        Governance::Unpoliced => unpoliced(&app, &caller.tenant),
        Governance::Logged { would_refuse, .. } if *would_refuse => {
            observe::count(Metric::PolicyWouldRefuse, &[request.action_type.as_str()]);
        }
        _ => {}
    }
    // The requester's own approvers are all there is without an enforced policy.
    if request.approvers.is_empty()
        && matches!(
            governance,
            Governance::Unpoliced | Governance::Logged { .. }
        )
    {
        return replay_or(ApiError::invalid(vec![FieldError::new(
            "approvers",
            "required: this tenant's approval policy does not choose the approvers (none is enforced)",
        )]))
        .await;
    }
    let executes = app.secrets().executes(&request.action_type);
    let mut approval = request
        .into_approval(
            caller.tenant,
            caller.principal,
            policy,
            key.clone(),
            executes,
            now,
        )
        .governed(governance, now);
    approval.trace = Some(trace.stored());
    approval.requested_by_key_id = key_id;
    if approval.decision.is_none() {
        if let Err(refusal) = check_escalation(&approval, &stall) {
            return replay_or(refusal).await;
        }
        approval.stall = stall;
    }
    // Refused now rather than stuck later: an item DynamoDB would not let grow (see
    // `store::size`). An approval whose groups a deployment's policy listed (the requester
    // cannot list fewer) keeps shorter comments instead, when it must.
    let too_big = |largest: usize| {
        ApiError::invalid(vec![FieldError::new(
            "action.payload",
            format!(
                "with every approver's vote (comments of up to {} characters) and what an execution records, this approval could grow to {largest} bytes, past the {} DynamoDB keeps in one item: send less in payload and context, or list fewer approvers",
                DecideRequest::MAX_COMMENT_CHARS,
                size::APPROVAL_BUDGET_BYTES
            ),
        )])
    };
    // A passkey-only approval's execute job carries its payload twice (and its certificate, the
    // votes): it must still fit an SQS message, so its payload and context take half the room.
    let written = serde_json::to_vec(&approval.payload).map_or(usize::MAX, |v| v.len())
        + serde_json::to_vec(&approval.context).map_or(usize::MAX, |v| v.len());
    if approval.assurance.is_some() && written > CreateRequest::MAX_WRITTEN_BYTES / 2 {
        return replay_or(ApiError::invalid(vec![FieldError::new(
            "action.payload",
            format!(
                "a passkey-only approval's payload and context take at most {} bytes once written out (its certificate carries the payload again); these take {written}",
                CreateRequest::MAX_WRITTEN_BYTES / 2
            ),
        )]))
        .await;
    }
    if approval.id.group_rules_hint() {
        match size::comment_cap_for(&approval) {
            Ok(cap) => approval.comment_cap = cap,
            Err(largest) => return replay_or(too_big(largest)).await,
        }
    } else {
        let largest = size::largest_item_bytes(&approval);
        if largest > size::APPROVAL_BUDGET_BYTES {
            return Err(too_big(largest));
        }
    }
    let record = IdempotencyRecord {
        key,
        fingerprint: body_fingerprint,
        approval_id: approval.id.clone(),
        response_status: StatusCode::CREATED.as_u16(),
        // Kept whole for replays; answered from here when this request creates the approval.
        response_body: approval_json(&approval, now),
        created_at: now,
        expires_at: now + app.config.idempotency_ttl_seconds,
    };
    let outcome = app.store.create_approval(&approval, &record, now).await?;
    let action_type = [approval.action_type.as_str()];
    match outcome {
        CreateOutcome::Created => {
            tracing::Span::current().record("approval_id", approval.id.as_str());
            observe::count(Metric::ApprovalCreated, &[action_type[0], "api"]);
        }
        CreateOutcome::Replayed(_) => observe::count(Metric::CreateReplayed, &action_type),
        CreateOutcome::KeyReused | CreateOutcome::ResumeInUse => {}
    }
    answer(outcome, Some((&approval, record.response_body)))
}

/// What a create answers: the approval it made (`made`: its body as saved), an earlier
/// create's first answer again, or the key's or the token's refusal.
fn answer(
    outcome: CreateOutcome,
    made: Option<(&Approval, Vec<u8>)>,
) -> Result<Response, ApiError> {
    match (outcome, made) {
        (CreateOutcome::Created, Some((approval, body))) => Ok(created(
            StatusCode::CREATED,
            approval.id.as_str(),
            body,
            false,
        )),
        (CreateOutcome::Created, None) => Err(ApiError::Internal(
            crate::store::StoreError::Corrupt("a create answered as made without its approval"),
        )),
        (CreateOutcome::Replayed(saved), _) => {
            let status = StatusCode::from_u16(saved.status).unwrap_or(StatusCode::CREATED);
            Ok(created(status, &saved.approval_id, saved.body, true))
        }
        (CreateOutcome::KeyReused, _) => Err(ApiError::IdempotencyKeyReused),
        (CreateOutcome::ResumeInUse, _) => Err(ApiError::ResumeInUse),
    }
}

/// A requester's escalation adds people to its own rules only: a step that names a
/// deployment's group rule, or that has no rule of the requester's to join, is refused (the
/// policy's groups are the groups' members, nobody else).
fn check_escalation(approval: &Approval, stall: &Stall) -> Result<(), ApiError> {
    let Some(policy) = &approval.policy else {
        return Ok(());
    };
    if policy.rules.iter().all(|r| r.group.is_none()) {
        return Ok(());
    }
    let own_rules = policy.rules.iter().any(|r| r.group.is_none());
    let errors: Vec<FieldError> = stall
        .escalation
        .iter()
        .enumerate()
        .filter(|(_, step)| match &step.rule {
            Some(name) => policy
                .rules
                .iter()
                .any(|r| r.group.is_some() && r.name == *name),
            None => !own_rules,
        })
        .map(|(i, _)| {
            FieldError::new(
                format!("escalation[{i}]"),
                "an escalation step joins the requester's own rules: the approval policy's groups are their members only",
            )
        })
        .collect();
    match errors.is_empty() {
        true => Ok(()),
        false => Err(ApiError::invalid(errors)),
    }
}

fn created(status: StatusCode, id: &str, body: Vec<u8>, replayed: bool) -> Response {
    let mut response = (status, body).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if let Ok(location) = HeaderValue::from_str(&format!("/approvals/{id}")) {
        headers.insert(header::LOCATION, location);
    }
    if replayed {
        headers.insert(REPLAYED, HeaderValue::from_static("true"));
    }
    response
}

fn approval_json(approval: &Approval, now: i64) -> Vec<u8> {
    // The view holds only strings, numbers and JSON objects: serialising it cannot fail.
    serde_json::to_vec(&approval.view(now)).unwrap_or_default()
}
