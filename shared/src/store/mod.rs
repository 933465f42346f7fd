//! Every DynamoDB expression lives here, next to the guarantee it provides. The store is a leaf
//! above the domain: it imports the domain's types and nothing of the jobs, the HTTP API or the
//! runner; what those need from it they get as its operations and small key types.
//!
//! Inside, each module builds on the ones before it and never on a later one (`layering.rs`
//! checks it): `error`, `expr`, `keys`, `tables`, `conditions` → `attr` → `indexes`, `ballots`
//! → `codec` → `client` (the store, its transactions and its one conditional update) → `batch`,
//! `schema` → the operations (`approvals`, `votes`, `operator`, `due`, `trail`, `positions`,
//! `held_reads`, `delegations`, `policies`) → `votes_in_place`, `inbox`, `listing`, `size` → `github` (GitHub's rounds) →
//! `ledger`.

mod api_keys;
mod approvals;
mod attr;
mod ballots;
mod batch;
mod claims;
mod client;
mod codec;
mod conditions;
mod delegations;
mod due;
mod error;
mod expr;
mod github;
mod held_reads;
mod inbox;
mod indexes;
mod keys;
mod ledger;
mod listing;
mod operator;
mod passkeys;
mod policies;
mod positions;
mod redeliveries;
mod run_ends;
pub mod schema;
pub mod size;
mod stall;
mod tables;
mod trail;
mod unclear;
mod votes;
mod votes_in_place;

pub use api_keys::KeyRefusal;
pub use approvals::{CreateOutcome, IdempotencyRecord, SavedResponse};
pub use client::{DecideOutcome, Store};
pub use delegations::StoredDelegation;
pub use due::Requeue;
pub use error::StoreError;
pub use github::{RoundIngested, RoundKey, RunClosed, RunEnd};
pub use held_reads::{HeldReadLease, Seat, SeatCaps};
pub use inbox::{InboxRecord, Ingested};
pub use indexes::retain_until_of;
pub use keys::github_source;
pub use ledger::{AttemptEnd, Begin, Guarded, LedgerEntry, LedgerKey, SlackClaim, SlackRelease};
pub use listing::{ListPage, ListQuery, Listed, StatusMove};
pub use operator::{MAX_RETRIES, OperatorRefusal};
pub use passkeys::{MAX_PASSKEYS, PasskeyRecord, PasskeyRefusal};
pub use policies::{PushRefusal, StoredPolicy, TenantPolicyItems};
pub use size::{MAX_LATE_REPORTS, MAX_REPORT_CHARS, MAX_STATUS_CHECKS};
pub use stall::Stalled;
pub use tables::Tables;
pub use trail::EventPage;
pub use unclear::UnclearRunEnd;
pub use votes::{MAX_GROUPS_OF_ONE, VoteBy};
pub use votes_in_place::InPlace;

/// An approval from a stored image (a stream record's old or new image).
pub fn items_to_approval(
    item: &std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>,
) -> Result<crate::domain::Approval, StoreError> {
    codec::approval_from_item(item)
}
