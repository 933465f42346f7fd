//! The demo tenant's approval policy (docs/POLICY.md): pushed at start, as `countersign policy
//! push` and `countersign groups set` would, when the tenant has none — so the quickstart shows
//! an approval whose approvers the policy chose.

use countersign::domain::TenantId;
use countersign::domain::approval_policy::{GroupName, Groups, Mode, PolicySet};
use countersign::store::{Store, StoredPolicy};
use sha2::{Digest, Sha256};

/// Echo actions need an owner; an agent's tool call needs an owner and may never drop a table.
pub const DEMO_POLICY: &str = r#"@id("echo-needs-an-owner")
@require("owners:1")
permit(principal, action == Countersign::Action::"echo", resource);

@id("agents-ask-an-owner")
@require("owners:1")
permit(principal, action == Countersign::Action::"agent", resource);

@id("agents-never-drop-tables")
forbid(principal, action == Countersign::Action::"agent", resource)
when {
  context.payload has input && context.payload.input has command &&
  context.payload.input.command like "*DROP TABLE*"
};
"#;

pub const DEMO_OWNERS: [&str; 2] = ["alice@example.com", "bob@example.com"];

/// Pushes the demo's policy and its `owners` group for tenant `demo` unless it has a policy.
/// The version in force, and whether this start pushed it.
pub async fn ensure(store: &Store, now: i64) -> Result<(u32, bool), String> {
    let tenant = TenantId::parse("demo").map_err(|e| e.to_string())?;
    let current = store
        .tenant_policy(&tenant)
        .await
        .map_err(|e| e.to_string())?;
    if let Some(policy) = current.policy {
        return Ok((policy.version, false));
    }
    PolicySet::parse(DEMO_POLICY, None).map_err(|e| format!("the demo's policy: {e}"))?;
    let owners: Vec<String> = DEMO_OWNERS.iter().map(|o| (*o).to_owned()).collect();
    let owners = Groups::members(&owners)?;
    let group = GroupName::parse("owners").map_err(str::to_owned)?;
    store
        .set_group(&tenant, &group, &owners, now)
        .await
        .map_err(|e| e.to_string())?;
    let policy = StoredPolicy {
        version: 1,
        text: DEMO_POLICY.to_owned(),
        sha256: hex::encode(Sha256::digest(DEMO_POLICY.as_bytes())),
        mode: Mode::Enforce,
        pushed_at: now,
        pushed_by: "countersign-local (the demo)".to_owned(),
    };
    match store.push_policy(&tenant, &policy).await {
        Ok(Ok(())) => Ok((1, true)),
        // Another runner on these tables pushed first: theirs is in force.
        Ok(Err(_)) => Ok((1, false)),
        Err(e) => Err(e.to_string()),
    }
}
