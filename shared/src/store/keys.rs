//! Every table's key, spelled in one place. Tenant ids never contain `#`, so a key that starts
//! with one names it unambiguously, and no read or write can reach another tenant's item by id
//! alone.

use aws_sdk_dynamodb::types::AttributeValue;

use crate::domain::{ApprovalId, Approver, IdempotencyKey, TenantId};

/// The approvals table's key.
pub(crate) fn approval_key(tenant: &TenantId, id: &ApprovalId) -> AttributeValue {
    AttributeValue::S(format!("{tenant}#{id}"))
}

/// The approvals table's key parsed back into its tenant and approval (an index item's key).
pub(crate) fn parse_approval_key(pk: &str) -> Option<(TenantId, ApprovalId)> {
    let (tenant, id) = pk.split_once('#')?;
    Some((TenantId::parse(tenant).ok()?, ApprovalId::parse(id).ok()?))
}

/// The idempotency table's key: create keys are scoped per tenant.
pub(crate) fn idempotency_key(tenant: &TenantId, key: &IdempotencyKey) -> AttributeValue {
    AttributeValue::S(format!("{tenant}#{}", key.as_str()))
}

/// The item, in the idempotency table, that binds a workflow's task token or callback id to
/// the one approval that names it: keyed by the token's SHA-256 alone, whatever the tenant (a
/// token is one workflow's, in one account). No idempotency record's key lacks a `#` (it is
/// `{tenant}#{key}`), so this one, which has none, never meets one.
pub(crate) fn resume_binding_key(token: &crate::domain::resume::ResumeToken) -> AttributeValue {
    AttributeValue::S(format!("resume:sha256:{}", token.digest()))
}

/// The events table's partition: one approval's trail.
pub(crate) fn trail_key(tenant: &TenantId, id: &ApprovalId) -> String {
    format!("{tenant}#{id}")
}

/// What every delegation's key in the keys table starts with: no key id has a `#` (key ids are
/// base32), so a delegation is never read as a key nor a key as a delegation.
pub(crate) const DELEGATION_PREFIX: &str = "delegation#";

/// A person's delegation, in the keys table: one per person per tenant, by their identity (so
/// every spelling of them names the one item).
pub(crate) fn delegation_key(tenant: &TenantId, delegator: &Approver) -> AttributeValue {
    AttributeValue::S(format!(
        "{DELEGATION_PREFIX}{tenant}#{}",
        delegator.identity()
    ))
}

/// The webhook inbox's key: one item per source and event id.
pub(crate) fn inbox_key(source: &str, event_id: &str) -> String {
    format!("{source}#{event_id}")
}

/// The inbox's source of a tenant's GitHub App: no webhook source is named so (source names
/// hold no `.`), so its deliveries and rounds are apart from every other source's.
pub fn github_source(tenant: &TenantId) -> String {
    format!("github.{tenant}")
}

/// A GitHub round's pointer, in the inbox: by repository, run and environment (the only part
/// that is free text, last).
pub(crate) fn github_round_key(
    tenant: &TenantId,
    repository_id: u64,
    run_id: u64,
    environment: &str,
) -> String {
    format!(
        "{}#round#{repository_id}#{run_id}#{environment}",
        github_source(tenant)
    )
}

/// A GitHub run's environments (those with a round), in the inbox.
pub(crate) fn github_run_key(tenant: &TenantId, repository_id: u64, run_id: u64) -> String {
    format!("{}#run#{repository_id}#{run_id}", github_source(tenant))
}

/// Where the local runner keeps its position in a stream's shard: an item of the ledger table
/// (never of the approvals table, whose writes would feed the stream itself).
pub(crate) fn stream_position_key(stream_arn: &str, shard_id: &str) -> String {
    format!("_local_runner#stream#{stream_arn}#{shard_id}")
}
