//! `countersign verify` (a certificate checked offline, docs/VERIFY.md) and `countersign
//! passkeys` (people's passkeys in the keys table, over the caller's AWS credentials).

use countersign::domain::passkey::{Jwk, Pinned, verify_certificate};
use countersign::domain::{Approver, rfc3339};
use countersign::store::PasskeyRecord;
use serde_json::{Value, json};

use crate::CliError;
use crate::args::{PasskeysCommand, VerifyArgs};
use crate::keys::{store, tenant};
use crate::progress::{stderr_line, stdout_line};

/// The exit code of a certificate that does not verify, or of a revoke of no such passkey.
pub const EXIT_REFUSED: u8 = 1;

fn read(path: &str, what: &str) -> Result<String, CliError> {
    match path {
        "-" => std::io::read_to_string(std::io::stdin())
            .map_err(|e| CliError::Usage(format!("{what}: standard input: {e}"))),
        path => std::fs::read_to_string(path)
            .map_err(|e| CliError::Usage(format!("{what}: {path}: {e}"))),
    }
}

fn json_of(text: &str, what: &str) -> Result<Value, CliError> {
    serde_json::from_str(text).map_err(|e| CliError::Usage(format!("{what}: not JSON ({e})")))
}

/// The JWKS from a file or a URL (`url`'s well-known one by default).
async fn jwks(args: &VerifyArgs, url: Option<&str>) -> Result<Vec<Jwk>, CliError> {
    let source = match (&args.jwks, url) {
        (Some(source), _) => source.clone(),
        (None, Some(base)) => format!(
            "{}/.well-known/countersign/jwks.json",
            base.trim_end_matches('/')
        ),
        (None, None) => {
            return Err(CliError::Usage(
                "--jwks: Countersign's public keys (a JWKS file or URL), or COUNTERSIGN_URL"
                    .to_owned(),
            ));
        }
    };
    let text = match source.starts_with("https://") || source.starts_with("http://") {
        true => reqwest::get(&source)
            .await
            .and_then(reqwest::Response::error_for_status)
            .map_err(|e| CliError::Transport(format!("--jwks {source}: {e}")))?
            .text()
            .await
            .map_err(|e| CliError::Transport(format!("--jwks {source}: {e}")))?,
        false => read(&source, "--jwks")?,
    };
    let keys = json_of(&text, "--jwks")?;
    serde_json::from_value(keys["keys"].clone())
        .map_err(|e| CliError::Usage(format!("--jwks: not a JWKS of P-256 keys ({e})")))
}

pub async fn verify(args: VerifyArgs, url: Option<&str>, json: bool) -> Result<u8, CliError> {
    let certificate = json_of(
        &read(&args.certificate, "the certificate")?,
        "the certificate",
    )?;
    let keys = jwks(&args, url).await?;
    let pinned: Option<Pinned> = args
        .credentials
        .as_deref()
        .map(|path| {
            serde_json::from_value(json_of(&read(path, "--credentials")?, "--credentials")?)
                .map_err(|e| CliError::Usage(format!("--credentials: {e}")))
        })
        .transpose()?;
    let payload = args
        .payload
        .as_deref()
        .map(|path| json_of(&read(path, "--payload")?, "--payload"))
        .transpose()?;
    match verify_certificate(&certificate, &keys, pinned.as_ref(), payload.as_ref()) {
        Ok(lines) => {
            match json {
                true => stdout_line(&json!({"verified": true, "rules": lines}).to_string()),
                false => lines.iter().for_each(|line| stdout_line(line)),
            }
            Ok(0)
        }
        Err(why) => {
            match json {
                true => {
                    stdout_line(&json!({"verified": false, "reason": why.to_string()}).to_string())
                }
                false => stderr_line(&format!("not verified: {why}")),
            }
            Ok(EXIT_REFUSED)
        }
    }
}

fn exported(record: &PasskeyRecord) -> Value {
    json!({
        "credential_id": record.credential_id,
        "identity": record.identity.as_str(),
        "public_key_jwk": record.public_key,
        "iss": record.iss,
        "sub": record.sub,
        "registered_at": rfc3339(record.registered_at),
    })
}

pub async fn run(command: PasskeysCommand, json: bool) -> Result<u8, CliError> {
    let transport = |e: countersign::store::StoreError| CliError::Transport(e.to_string());
    match command {
        PasskeysCommand::List(args) => {
            let tenant = tenant(&args.tenant)?;
            let identity = args
                .identity
                .as_deref()
                .map(|i| {
                    Approver::parse(i.trim())
                        .map_err(|e| CliError::Usage(format!("--identity: {e}")))
                })
                .transpose()?;
            let records = store(&args.table)
                .await
                .list_passkeys(&tenant)
                .await
                .map_err(transport)?;
            let records: Vec<&PasskeyRecord> = records
                .iter()
                .filter(|r| {
                    identity
                        .as_ref()
                        .is_none_or(|i| r.identity.same_identity(i))
                })
                .collect();
            match json {
                true => stdout_line(
                    &Value::from(records.iter().map(|r| exported(r)).collect::<Vec<_>>())
                        .to_string(),
                ),
                false => {
                    for r in records {
                        stdout_line(&format!(
                            "{}  {}  registered {}",
                            r.credential_id,
                            r.identity.as_str(),
                            rfc3339(r.registered_at)
                        ));
                    }
                }
            }
            Ok(0)
        }
        PasskeysCommand::Export(args) => {
            let records = store(&args.table)
                .await
                .list_passkeys(&tenant(&args.tenant)?)
                .await
                .map_err(transport)?;
            let credentials: Vec<Value> = records.iter().map(exported).collect();
            stdout_line(
                &serde_json::to_string_pretty(
                    &json!({"tenant": args.tenant, "credentials": credentials}),
                )
                .unwrap_or_default(),
            );
            Ok(0)
        }
        PasskeysCommand::Revoke(args) => {
            let identity = Approver::parse(args.identity.trim())
                .map_err(|e| CliError::Usage(format!("--identity: {e}")))?;
            let removed = store(&args.table)
                .await
                .remove_passkey(&tenant(&args.tenant)?, &identity, args.credential_id.trim())
                .await
                .map_err(transport)?;
            let answer = json!({"credential_id": args.credential_id, "revoked": removed});
            match (json, removed) {
                (true, _) => stdout_line(&answer.to_string()),
                (false, true) => stdout_line(&format!("revoked {}", args.credential_id)),
                (false, false) => stderr_line(&format!(
                    "{} has no passkey {}",
                    identity.as_str(),
                    args.credential_id
                )),
            }
            Ok(if removed { 0 } else { EXIT_REFUSED })
        }
    }
}
