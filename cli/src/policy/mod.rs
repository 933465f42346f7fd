//! `countersign policy` and `countersign groups`: a tenant's approval policy and groups in the
//! keys table, over the caller's AWS credentials as `countersign keys` (no API route changes
//! who must approve: docs/POLICY.md). `policy test` and `policy schema` need no AWS at all.

pub mod args;
mod groups;
mod test;

use countersign::domain::approval_policy::{Mode, PolicySet, base_schema};
use countersign::domain::{TenantId, rfc3339};
use countersign::store::{PushRefusal, Store, StoredPolicy};
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::CliError;
use crate::keys::{caller_identity, now, store, tenant};
use crate::progress::{stderr_line, stdout_line};
use args::{ModeArg, PolicyCommand};

pub use groups::run as run_groups;

/// The exit code of a refused push, rollback or group change (nothing stored).
pub const EXIT_REFUSED: u8 = 1;

/// The longest policy set stored (UTF-8 bytes): each version is one item of the keys table,
/// and DynamoDB keeps at most 400 KB in an item.
pub const MAX_POLICY_BYTES: usize = 256 * 1024;

/// How many times a push that met another push is made again as the next version.
const PUSH_ATTEMPTS: u32 = 5;

pub async fn run(command: PolicyCommand, json: bool) -> Result<u8, CliError> {
    match command {
        PolicyCommand::Push(args) => {
            let text = read(&args.file)?;
            let schema = args.schema.as_ref().map(read).transpose()?;
            let mode = match args.mode {
                ModeArg::Enforce => Mode::Enforce,
                ModeArg::LogOnly => Mode::LogOnly,
            };
            let tenant = tenant(&args.tenant)?;
            if let Err(refused) = check(&text, schema.as_deref()) {
                return Ok(refuse(&refused, json));
            }
            let store = store(&args.table).await;
            warn_of_missing_groups(&store, &tenant, &text).await?;
            push(&store, &tenant, text, mode, json).await
        }
        PolicyCommand::Rollback(args) => {
            let tenant = tenant(&args.tenant)?;
            let store = store(&args.table).await;
            let Some(old) = store
                .policy_version(&tenant, args.to)
                .await
                .map_err(transport)?
            else {
                return Ok(refuse(
                    &format!("tenant {tenant} has no policy version {}", args.to),
                    json,
                ));
            };
            push(&store, &tenant, old.text, old.mode, json).await
        }
        PolicyCommand::Show(args) => {
            let tenant = tenant(&args.tenant)?;
            let store = store(&args.table).await;
            let found = match args.version {
                Some(version) => store.policy_version(&tenant, version).await,
                None => store.tenant_policy(&tenant).await.map(|p| p.policy),
            }
            .map_err(transport)?;
            let Some(policy) = found else {
                return Ok(refuse(
                    &format!(
                        "tenant {tenant} has no such policy version (none pushed, or not that one)"
                    ),
                    json,
                ));
            };
            if json {
                let mut shown = facts(&policy);
                shown["text"] = json!(policy.text);
                stdout_line(&shown.to_string());
            } else {
                stdout_line(&fact_line(&policy));
                stdout_line(&policy.text);
            }
            Ok(0)
        }
        PolicyCommand::History(args) => {
            let tenant = tenant(&args.tenant)?;
            let versions = store(&args.table)
                .await
                .policy_history(&tenant)
                .await
                .map_err(transport)?;
            if json {
                stdout_line(
                    &serde_json::Value::Array(versions.iter().map(facts).collect()).to_string(),
                );
            } else {
                for version in &versions {
                    stdout_line(&fact_line(version));
                }
            }
            Ok(0)
        }
        PolicyCommand::Test(args) => test::run(&args),
        PolicyCommand::Schema(args) => {
            let mut actions: Vec<String> = args.actions;
            if actions.is_empty() {
                actions = configured_actions();
            }
            let actions: Vec<&str> = actions.iter().map(String::as_str).collect();
            stdout_line(base_schema(&actions).trim_end());
            Ok(0)
        }
    }
}

/// The set as a push checks it: its size, Cedar's parser (and validator, with a schema), the
/// annotations.
fn check(text: &str, schema: Option<&str>) -> Result<PolicySet, String> {
    if text.len() > MAX_POLICY_BYTES {
        return Err(format!(
            "the set is {} bytes: at most {MAX_POLICY_BYTES} (a version is one DynamoDB item)",
            text.len()
        ));
    }
    PolicySet::parse(text, schema).map_err(|e| e.to_string())
}

/// Stores `text` as the tenant's next version, made again as the next one if another push got
/// there first.
async fn push(
    store: &Store,
    tenant: &TenantId,
    text: String,
    mode: Mode,
    json: bool,
) -> Result<u8, CliError> {
    let pushed_by = caller_identity().await;
    let sha256 = hex::encode(Sha256::digest(text.as_bytes()));
    for _ in 0..PUSH_ATTEMPTS {
        let current = store.tenant_policy(tenant).await.map_err(transport)?;
        let version = current.policy.map_or(1, |p| p.version + 1);
        let policy = StoredPolicy {
            version,
            text: text.clone(),
            sha256: sha256.clone(),
            mode,
            pushed_at: now(),
            pushed_by: pushed_by.clone(),
        };
        match store
            .push_policy(tenant, &policy)
            .await
            .map_err(transport)?
        {
            Ok(()) => {
                if json {
                    let mut shown = facts(&policy);
                    shown["tenant"] = json!(tenant.as_str());
                    stdout_line(&shown.to_string());
                } else {
                    stdout_line(&format!(
                        "policy version {version} for {tenant} (sha256 {sha256}, {})",
                        mode.as_str()
                    ));
                }
                return Ok(0);
            }
            Err(PushRefusal::Raced(_)) => continue,
        }
    }
    Ok(refuse(
        "other pushes kept making the next version first: push again",
        json,
    ))
}

/// A group the set requires that the tenant does not have makes every create it matches fail
/// closed: said before the push, not refused (the group may be set next).
async fn warn_of_missing_groups(
    store: &Store,
    tenant: &TenantId,
    text: &str,
) -> Result<(), CliError> {
    let Ok(set) = PolicySet::parse(text, None) else {
        return Ok(());
    };
    let groups = store.tenant_policy(tenant).await.map_err(transport)?.groups;
    for name in set.required_groups() {
        if groups.get(name).is_none() {
            stderr_line(&format!(
                "warning: the set requires group {name}, which tenant {tenant} does not have: \
                 creates it matches are refused (policy_error) until `countersign groups set`"
            ));
        }
    }
    Ok(())
}

/// The action types of `ACTION_TARGETS` (as the functions are given it), and the GitHub gate's.
fn configured_actions() -> Vec<String> {
    let mut actions: Vec<String> = std::env::var("ACTION_TARGETS")
        .ok()
        .and_then(|raw| {
            serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(&raw).ok()
        })
        .map(|targets| targets.keys().cloned().collect())
        .unwrap_or_default();
    actions.push(countersign::domain::GITHUB_DEPLOYMENT.to_owned());
    actions
}

fn read(path: &std::path::PathBuf) -> Result<String, CliError> {
    std::fs::read_to_string(path).map_err(|e| CliError::Usage(format!("{}: {e}", path.display())))
}

fn transport(error: countersign::store::StoreError) -> CliError {
    CliError::Transport(error.to_string())
}

/// Says why nothing was stored; the refusal's exit code.
fn refuse(why: &str, json: bool) -> u8 {
    if json {
        stderr_line(&json!({"code": "refused", "detail": why}).to_string());
    } else {
        stderr_line(&format!("error: {why}"));
    }
    EXIT_REFUSED
}

fn facts(policy: &StoredPolicy) -> serde_json::Value {
    json!({
        "version": policy.version,
        "sha256": policy.sha256,
        "mode": policy.mode.as_str(),
        "pushed_at": rfc3339(policy.pushed_at),
        "pushed_by": policy.pushed_by,
    })
}

fn fact_line(policy: &StoredPolicy) -> String {
    format!(
        "version {}  {}  sha256 {}  pushed {} by {}",
        policy.version,
        policy.mode.as_str(),
        policy.sha256,
        rfc3339(policy.pushed_at),
        policy.pushed_by
    )
}
