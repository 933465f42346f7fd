//! The approval domain: pure rules, no AWS. Types here can only hold valid values, so the rest of
//! the code never re-checks them.

mod api_key;
pub(crate) mod approval;
mod attempt;
mod create;
mod decide;
mod ids;
mod numbers;
mod policy;
pub mod trail;

pub use api_key::{KeyId, KeyRecord, TableKey};
pub use approval::{
    Approval, ApprovalView, Cancellation, Channel, Decision, Execution, ExecutionStatus, Outcome,
    SlackMessage, Status, StatusCheck,
};
pub use attempt::{Completion, LedgerStatus};
pub use create::{CreateRefusal, CreateRequest, FieldError, fingerprint};
pub use decide::{DecideRefusal, DecideRequest, WebhookOutcome, classify_refusal};
pub use ids::{ApprovalId, Approver, IdempotencyKey, InvalidValue, TenantId};
pub use numbers::inexact_numbers;
pub use policy::{Policy, PolicyRefusal, Rule, VoteEffect};

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

/// Seconds since the Unix epoch: the unit of every time the store compares in a condition.
pub type EpochSeconds = i64;

/// Formats epoch seconds as RFC 3339 (`2026-11-30T10:00:00Z`).
pub fn rfc3339(at: EpochSeconds) -> String {
    let at =
        time::OffsetDateTime::from_unix_timestamp(at).unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    at.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}
