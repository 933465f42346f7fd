//! `countersign keys`: the keys table administered over the caller's AWS credentials (the SDK's
//! default chain, `AWS_ENDPOINT_URL` locally). No HTTP route creates, lists or revokes a key.
//! Each command is one conditional write or one transaction (the store's), so a refused one
//! changes nothing: exit 1.

use std::time::Duration;

use countersign::auth::Role;
use countersign::domain::{Approver, KeyId, KeyRecord, TableKey, TenantId, rfc3339};
use countersign::store::{KeyRefusal, Store, Tables};
use serde_json::{Value, json};

use crate::CliError;
use crate::args::{KeyCreateArgs, KeysCommand, KeysTable};
use crate::progress::{stderr_line, stdout_line};

/// The exit code of a refused key command (an id that exists, an unknown or revoked key).
pub const EXIT_REFUSED: u8 = 1;

const MAX_DESCRIPTION_CHARS: usize = 256;

pub async fn run(command: KeysCommand, json: bool) -> Result<u8, CliError> {
    let now = now();
    let result = match command {
        KeysCommand::Create(args) => {
            let record = new_record(&args, now, caller_identity().await)?;
            let key = TableKey::generate(record.id.clone());
            let record = KeyRecord {
                key_hash: key.digest(),
                ..record
            };
            store(&args.table)
                .await
                .create_key(&record)
                .await
                .map(|()| {
                    print_new_key(&key, &record, json);
                })
        }
        KeysCommand::List(args) => {
            let tenant = args.tenant.as_deref().map(tenant).transpose()?;
            let keys = store(&args.table)
                .await
                .list_keys(tenant.as_ref())
                .await
                .map_err(|e| CliError::Transport(e.to_string()))?;
            if json {
                stdout_line(&Value::Array(keys.iter().map(listed).collect()).to_string());
            } else {
                for key in &keys {
                    stdout_line(&list_line(key));
                }
            }
            Ok(())
        }
        KeysCommand::Revoke(args) => {
            let id = key_id(&args.key_id)?;
            store(&args.table)
                .await
                .revoke_key(&id, now)
                .await
                .map(|()| {
                    if json {
                        stdout_line(
                            &json!({"key_id": id.as_str(), "revoked_at": rfc3339(now)}).to_string(),
                        );
                    } else {
                        stdout_line(&format!("revoked {id}"));
                    }
                })
        }
        KeysCommand::Roll(args) => {
            let id = key_id(&args.key_id)?;
            let overlap = seconds(args.overlap)?;
            let cache = key_cache_seconds()?;
            if overlap < cache {
                return Err(CliError::Usage(format!(
                    "--overlap: at least KEY_CACHE_SECONDS ({cache} s): a warm function keeps \
                     a key's item that long, so the old key would work past a shorter overlap"
                )));
            }
            let store = store(&args.table).await;
            let old = store
                .key(&id)
                .await
                .map_err(|e| CliError::Transport(e.to_string()))?
                .ok_or_else(|| KeyRefusal::Unknown(id.clone()));
            match old {
                Err(refusal) => Err(refusal),
                Ok(old) => {
                    let key = TableKey::generate(KeyId::random());
                    let successor = KeyRecord {
                        id: key.id().clone(),
                        key_hash: key.digest(),
                        created_at: now,
                        created_by: caller_identity().await,
                        description: Some(format!("rolled from {id}")),
                        // The successor keeps no expiry the old key had: it is a new key.
                        expires_at: None,
                        revoked_at: None,
                        last_used_at: None,
                        ..old
                    };
                    let ends = now + overlap;
                    store
                        .roll_key(&id, &successor, (now, ends))
                        .await
                        .map(|()| {
                            print_new_key(&key, &successor, json);
                            stderr_line(&format!("{id} keeps working until {}", rfc3339(ends)));
                        })
                }
            }
        }
    };
    match result {
        Ok(()) => Ok(0),
        Err(KeyRefusal::Store(e)) => Err(CliError::Transport(e.to_string())),
        Err(refusal) => {
            if json {
                stderr_line(
                    &json!({"code": refusal_code(&refusal), "detail": refusal.to_string()})
                        .to_string(),
                );
            } else {
                stderr_line(&format!("error: {refusal}"));
            }
            Ok(EXIT_REFUSED)
        }
    }
}

fn refusal_code(refusal: &KeyRefusal) -> &'static str {
    match refusal {
        KeyRefusal::Exists(_) => "key_exists",
        KeyRefusal::Unknown(_) => "unknown_key",
        KeyRefusal::Revoked(_) => "key_revoked",
        KeyRefusal::Expired(_) => "key_expired",
        KeyRefusal::Store(_) => "transport",
    }
}

pub(crate) async fn store(table: &KeysTable) -> Store {
    let aws = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .load()
        .await;
    let tables = Tables {
        api_keys: table.table.clone(),
        ..Tables::with_prefix("countersign")
    };
    Store::new(aws_sdk_dynamodb::Client::new(&aws), tables)
}

pub(crate) fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

fn seconds(duration: Duration) -> Result<i64, CliError> {
    i64::try_from(duration.as_secs())
        .map_err(|_| CliError::Usage("the duration is too long".to_owned()))
}

/// Who ran the command, as AWS knows the caller: the ARN `sts:GetCallerIdentity` answers (an
/// action every identity may call). If STS cannot be reached, `unknown (…)` with the user the
/// machine names — never a guess passed off as the AWS identity.
pub(crate) async fn caller_identity() -> String {
    let aws = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .load()
        .await;
    match aws_sdk_sts::Client::new(&aws)
        .get_caller_identity()
        .send()
        .await
    {
        Ok(identity) => identity.arn().unwrap_or("unknown").to_owned(),
        Err(_) => format!(
            "unknown (local user {})",
            std::env::var("USER").unwrap_or_else(|_| "?".to_owned())
        ),
    }
}

/// `KEY_CACHE_SECONDS` as the functions are given it (default 60, as theirs): a roll's overlap
/// may not be shorter.
fn key_cache_seconds() -> Result<i64, CliError> {
    match std::env::var("KEY_CACHE_SECONDS") {
        Err(_) => Ok(60),
        Ok(raw) => raw
            .trim()
            .parse::<i64>()
            .ok()
            .filter(|s| (0..=300).contains(s))
            .ok_or_else(|| {
                CliError::Usage("KEY_CACHE_SECONDS: an integer from 0 to 300".to_owned())
            }),
    }
}

pub(crate) fn tenant(raw: &str) -> Result<TenantId, CliError> {
    TenantId::parse(raw.trim()).map_err(|e| CliError::Usage(format!("--tenant: {e}")))
}

fn key_id(raw: &str) -> Result<KeyId, CliError> {
    KeyId::parse(raw.trim()).ok_or_else(|| {
        CliError::Usage("a key id is the 16 characters a-z 2-7 after csk_".to_owned())
    })
}

/// A new key's item, without its hash yet; every input checked as `API_KEYS` checks it.
fn new_record(args: &KeyCreateArgs, now: i64, created_by: String) -> Result<KeyRecord, CliError> {
    let principal = Approver::parse(args.principal.trim())
        .map_err(|e| CliError::Usage(format!("--principal: {e}")))?;
    let mut roles = Vec::new();
    for raw in &args.roles {
        let role = Role::parse(raw.trim()).ok_or_else(|| {
            CliError::Usage(format!(
                "--role {raw}: one of requester, approver, decider, operator, reader"
            ))
        })?;
        if !roles.contains(&role) {
            roles.push(role);
        }
    }
    if roles.contains(&Role::Requester) && roles.contains(&Role::Decider) {
        return Err(CliError::Usage(
            "requester and decider on one key would let a requester approve its own requests"
                .to_owned(),
        ));
    }
    if let Some(description) = &args.description
        && description.chars().count() > MAX_DESCRIPTION_CHARS
    {
        return Err(CliError::Usage(format!(
            "--description: at most {MAX_DESCRIPTION_CHARS} characters"
        )));
    }
    let expires_at = args
        .expires_in
        .map(|d| seconds(d).map(|s| now + s))
        .transpose()?;
    Ok(KeyRecord {
        id: KeyId::random(),
        tenant: tenant(&args.tenant)?,
        principal,
        roles: roles.iter().map(|r| r.as_str().to_owned()).collect(),
        key_hash: [0; 32],
        created_at: now,
        created_by,
        description: args.description.clone().filter(|d| !d.trim().is_empty()),
        expires_at,
        revoked_at: None,
        last_used_at: None,
    })
}

/// The key, once: alone on standard output (so `$(countersign keys create …)` is the key), what
/// it is on standard error.
fn print_new_key(key: &TableKey, record: &KeyRecord, json: bool) {
    if json {
        let mut shown = listed(record);
        shown["key"] = json!(key.expose());
        stdout_line(&shown.to_string());
    } else {
        stdout_line(key.expose());
        stderr_line(&format!(
            "key {} for {} in tenant {} ({}): shown this once, store it now",
            record.id,
            record.principal.as_str(),
            record.tenant,
            record.roles.join(", ")
        ));
    }
}

fn time(at: Option<i64>) -> Value {
    at.map_or(Value::Null, |at| json!(rfc3339(at)))
}

/// A key as `list --json` shows it: never its hash.
fn listed(key: &KeyRecord) -> Value {
    json!({
        "key_id": key.id.as_str(),
        "tenant": key.tenant.as_str(),
        "principal": key.principal.as_str(),
        "roles": key.roles,
        "created_at": rfc3339(key.created_at),
        "created_by": key.created_by,
        "description": key.description,
        "expires_at": time(key.expires_at),
        "revoked_at": time(key.revoked_at),
        "last_used_at": time(key.last_used_at),
    })
}

fn list_line(key: &KeyRecord) -> String {
    let or_dash = |at: Option<i64>| at.map_or_else(|| "-".to_owned(), rfc3339);
    format!(
        "{}  {}  {}  {}  created {}  expires {}  revoked {}  last used {}{}",
        key.id,
        key.tenant,
        key.principal.as_str(),
        key.roles.join(","),
        rfc3339(key.created_at),
        or_dash(key.expires_at),
        or_dash(key.revoked_at),
        or_dash(key.last_used_at),
        key.description
            .as_deref()
            .map(|d| format!("  {d:?}"))
            .unwrap_or_default()
    )
}
