//! The approval domain: pure rules, no AWS. Types here can only hold valid values, so the rest of
//! the code never re-checks them.

mod api_key;
pub(crate) mod approval;
pub mod approval_policy;
mod attempt;
mod create;
mod decide;
pub mod delegation;
mod github;
mod ids;
mod numbers;
pub mod passkey;
mod policy;
pub mod resume;
mod retention;
pub mod stall;
pub mod trail;

pub use api_key::{KeyId, KeyRecord, TableKey};
pub use approval::{
    Approval, ApprovalView, Cancellation, CertificateSeal, Channel, Decision, Execution,
    ExecutionStatus, Outcome, PasskeyEvidence, SignIn, SlackMessage, Status, StatusCheck,
};
pub use attempt::{Completion, LedgerStatus};
pub use create::{CreateRefusal, CreateRequest, FieldError, fingerprint};
pub use decide::{DecideRefusal, DecideRequest, WebhookOutcome, classify_refusal};
pub use github::{GITHUB_DEPLOYMENT, GithubAnswer, GithubDelivery, GithubGate, MAX_DELIVERIES};
pub use ids::{ApprovalId, Approver, IdempotencyKey, InvalidValue, TenantId};
pub use numbers::inexact_numbers;
pub use policy::{Policy, PolicyRefusal, Rule, VoteEffect};
pub use retention::Retention;

use std::fmt;
use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::{self, MapAccess, Visitor};

/// A configuration value given as one string or as a list of them (a secret during its rotation:
/// the first is the current one).
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(untagged)]
pub enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    pub fn into_vec(self) -> Vec<String> {
        match self {
            Self::One(one) => vec![one],
            Self::Many(many) => many,
        }
    }
}

/// A JSON object's entries in order, refusing a key written twice (serde would keep the last,
/// silently: a user mapped twice is a mistake to report, not to guess about).
pub struct Entries<V>(pub Vec<(String, V)>);

impl<'de, V: Deserialize<'de>> Deserialize<'de> for Entries<V> {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EntriesVisitor<V>(PhantomData<V>);
        impl<'de, V: Deserialize<'de>> Visitor<'de> for EntriesVisitor<V> {
            type Value = Entries<V>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut entries: Vec<(String, V)> = Vec::new();
                while let Some((key, value)) = map.next_entry::<String, V>()? {
                    if entries.iter().any(|(k, _)| *k == key) {
                        return Err(de::Error::custom(format!("duplicate key {key:?}")));
                    }
                    entries.push((key, value));
                }
                Ok(Entries(entries))
            }
        }
        deserializer.deserialize_map(EntriesVisitor(PhantomData))
    }
}

/// Parses a JSON configuration value into `T`. Its error names where the problem is (the
/// field's path, line and column) and never quotes a value, which may be a secret: serde's own
/// words only when they name a field or a key, else the `shape` expected.
pub fn parse_config_json<T: serde::de::DeserializeOwned>(
    raw: &str,
    shape: &str,
) -> Result<T, String> {
    let mut deserializer = serde_json::Deserializer::from_str(raw);
    let parsed = serde_path_to_error::deserialize(&mut deserializer)
        .map_err(|e| config_json_problem(&e.path().to_string(), e.inner(), shape))?;
    deserializer
        .end()
        .map_err(|e| config_json_problem(".", &e, shape))?;
    Ok(parsed)
}

fn config_json_problem(path: &str, error: &serde_json::Error, shape: &str) -> String {
    let text = error.to_string();
    let names_a_field = [
        "unknown field",
        "missing field",
        "duplicate field",
        "duplicate key",
    ]
    .iter()
    .any(|start| text.starts_with(start));
    let at = if path == "." {
        String::new()
    } else {
        format!("{path}: ")
    };
    let (line, column) = (error.line(), error.column());
    match error.classify() {
        // serde's words up to " at line": the field's name, and what fields there are.
        serde_json::error::Category::Data if names_a_field => {
            let words = text.split(" at line ").next().unwrap_or(&text);
            format!("{at}{words} (line {line} column {column})")
        }
        serde_json::error::Category::Data => {
            format!("{at}not the expected shape (line {line} column {column}): {shape}")
        }
        _ => format!("not valid JSON at line {line} column {column}"),
    }
}

/// Seconds since the Unix epoch: the unit of every time the store compares in a condition.
pub type EpochSeconds = i64;

/// Formats epoch seconds as RFC 3339 (`2026-11-30T10:00:00Z`).
pub fn rfc3339(at: EpochSeconds) -> String {
    let at =
        time::OffsetDateTime::from_unix_timestamp(at).unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    at.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}
