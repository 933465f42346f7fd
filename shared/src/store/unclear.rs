//! The list of run ends the clocks could not place, one inbox item per tenant (see
//! `store/run_ends.rs`): its entries and the write that adds to it, for a run end's transaction.

use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem, Update};
use serde::{Deserialize, Serialize};

use super::attr::s;
use super::error::StoreError;
use super::expr::names;
use super::keys::github_source;
use crate::domain::{ApprovalId, EpochSeconds, TenantId};

/// How long an entry waits for GitHub's word before it is dropped (its approval then waits
/// for its expiry, as before v6): past any outage worth waiting out.
const UNCLEAR_FOR_AT_MOST_SECONDS: EpochSeconds = 86_400;

/// A round whose run ended too close to its opening for the clocks to say whose it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnclearRunEnd {
    pub repository_id: u64,
    /// `owner/name`, for GitHub's URL.
    pub repository: String,
    pub installation_id: u64,
    pub run_id: u64,
    pub environment: String,
    pub approval_id: ApprovalId,
    pub answered: bool,
    pub conclusion: String,
    /// The attempt that ended, when GitHub said.
    pub attempt: Option<u64>,
    /// When the end was listed (our clock).
    pub listed_at: EpochSeconds,
}

impl UnclearRunEnd {
    pub(super) fn text(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Whether GitHub's word is no longer worth waiting for.
    pub fn stale(&self, now: EpochSeconds) -> bool {
        now > self.listed_at + UNCLEAR_FOR_AT_MOST_SECONDS
    }
}

pub(super) fn unclear_key(tenant: &TenantId) -> String {
    format!("{}#unclear-run-ends", github_source(tenant))
}

/// The write that adds `entries` to the tenant's list, for a run end's transaction.
pub(super) fn list_unclear(
    table: &str,
    tenant: &TenantId,
    entries: &[UnclearRunEnd],
) -> Result<TransactWriteItem, StoreError> {
    let update = "ADD #entries :entries";
    let write = Update::builder()
        .table_name(table)
        .key("pk", s(unclear_key(tenant)))
        .update_expression(update)
        .set_expression_attribute_names(Some(names(&[update])))
        .expression_attribute_values(
            ":entries",
            AttributeValue::Ss(entries.iter().map(UnclearRunEnd::text).collect()),
        )
        .build()
        .map_err(|e| StoreError::dynamo("TransactWriteItems", e))?;
    Ok(TransactWriteItem::builder().update(write).build())
}
