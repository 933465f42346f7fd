//! Run ends the clocks cannot place (SPEC "A cancelled run cancels its approval", v6): a round
//! opened so close to its run's end — by GitHub's clock and ours — that it may be the ended
//! attempt's or a re-run's. The webhook function cannot ask GitHub (it holds no App key and
//! answers within GitHub's 10 s), so it lists the round in one item of the inbox per tenant
//! (`{source}#unclear-run-ends`, a string set of [`UnclearRunEnd`]s as JSON) in the run end's
//! own transaction. The scheduled sweep asks GitHub for each run and settles each entry: still
//! `completed` at the attempt that ended closes the round (and cancels its pending approval);
//! a newer `run_attempt`, or a run going again, keeps it for the re-run.

use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem, Update};
use serde::{Deserialize, Serialize};

use super::attr::{Item, s};
use super::client::{Store, Transaction};
use super::codec::approval_from_item;
use super::error::StoreError;
use super::expr::names;
use super::github::{OpenRound, RoundKey, RunEnd};
use super::keys::{approval_key, github_source};
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
    fn text(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Whether GitHub's word is no longer worth waiting for.
    pub fn stale(&self, now: EpochSeconds) -> bool {
        now > self.listed_at + UNCLEAR_FOR_AT_MOST_SECONDS
    }

    fn round(&self, tenant: &TenantId) -> RoundKey {
        RoundKey {
            tenant: tenant.clone(),
            repository_id: self.repository_id,
            run_id: self.run_id,
            environment: self.environment.clone(),
        }
    }
}

fn unclear_key(tenant: &TenantId) -> String {
    format!("{}#unclear-run-ends", github_source(tenant))
}

impl Store {
    /// The write that lists `rounds` as unclear run ends, for the run end's transaction.
    pub(super) fn list_unclear_run_end(
        &self,
        tenant: &TenantId,
        rounds: &[&OpenRound],
        end: &RunEnd,
        now: EpochSeconds,
    ) -> Result<TransactWriteItem, StoreError> {
        let entries: Vec<String> = rounds
            .iter()
            .filter_map(|open| {
                let gate = open.approval.github.as_ref()?;
                Some(
                    UnclearRunEnd {
                        repository_id: open.round.repository_id,
                        repository: gate.repository.clone(),
                        installation_id: gate.installation_id,
                        run_id: open.round.run_id,
                        environment: open.round.environment.clone(),
                        approval_id: open.approval.id.clone(),
                        answered: open.answered,
                        conclusion: end.conclusion.clone(),
                        attempt: end.attempt,
                        listed_at: now,
                    }
                    .text(),
                )
            })
            .collect();
        let update = "ADD #entries :entries";
        let write = Update::builder()
            .table_name(&self.tables.webhook_inbox)
            .key("pk", s(unclear_key(tenant)))
            .update_expression(update)
            .set_expression_attribute_names(Some(names(&[update])))
            .expression_attribute_values(":entries", AttributeValue::Ss(entries))
            .build()
            .map_err(|e| StoreError::dynamo("TransactWriteItems", e))?;
        Ok(TransactWriteItem::builder().update(write).build())
    }

    /// The tenant's unclear run ends: one `GetItem`.
    pub async fn unclear_run_ends(
        &self,
        tenant: &TenantId,
    ) -> Result<Vec<UnclearRunEnd>, StoreError> {
        let got = self
            .client
            .get_item()
            .table_name(&self.tables.webhook_inbox)
            .key("pk", s(unclear_key(tenant)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| StoreError::from_sdk("GetItem", e))?;
        let entries = match got.item().and_then(|item| item.get("entries")) {
            Some(AttributeValue::Ss(entries)) => entries.clone(),
            _ => Vec::new(),
        };
        Ok(entries
            .iter()
            .filter_map(|text| serde_json::from_str(text).ok())
            .collect())
    }

    /// Settles an unclear run end: with `close`, the round is closed and its pending approval
    /// cancelled (as the run's end would have), in one transaction with the entry's removal;
    /// otherwise (the round is a re-run's, or GitHub's word came too late) the entry alone is
    /// removed. A round or an approval that moved meanwhile (decided, answered) is left as it
    /// is: the entry goes either way. Whether the approval was cancelled.
    pub async fn settle_unclear_run_end(
        &self,
        tenant: &TenantId,
        entry: &UnclearRunEnd,
        close: bool,
        now: EpochSeconds,
    ) -> Result<bool, StoreError> {
        let remove = self.remove_unclear(tenant, entry)?;
        if close && let Some(approval) = self.approval_item(tenant, &entry.approval_id).await? {
            let open = OpenRound {
                round: entry.round(tenant),
                approval: approval_from_item(&approval)?,
                answered: entry.answered,
                unclear: false,
            };
            let end = RunEnd {
                conclusion: entry.conclusion.clone(),
                ended_at: None,
                attempt: entry.attempt,
            };
            let mut cancelled = Vec::new();
            let mut items = self.close_open_round(&open, &end, now, &mut cancelled)?;
            items.push(TransactWriteItem::builder().update(remove.clone()).build());
            if let Transaction::Committed =
                self.transact(items, &ulid::Ulid::new().to_string()).await?
            {
                return Ok(!cancelled.is_empty());
            }
        }
        self.transact(
            vec![TransactWriteItem::builder().update(remove).build()],
            &ulid::Ulid::new().to_string(),
        )
        .await?;
        Ok(false)
    }

    fn remove_unclear(
        &self,
        tenant: &TenantId,
        entry: &UnclearRunEnd,
    ) -> Result<Update, StoreError> {
        let update = "DELETE #entries :entry";
        Update::builder()
            .table_name(&self.tables.webhook_inbox)
            .key("pk", s(unclear_key(tenant)))
            .update_expression(update)
            .set_expression_attribute_names(Some(names(&[update])))
            .expression_attribute_values(":entry", AttributeValue::Ss(vec![entry.text()]))
            .build()
            .map_err(|e| StoreError::dynamo("UpdateItem", e))
    }

    /// The approval's item (consistent), if any.
    async fn approval_item(
        &self,
        tenant: &TenantId,
        id: &ApprovalId,
    ) -> Result<Option<Item>, StoreError> {
        let got = self
            .client
            .get_item()
            .table_name(&self.tables.approvals)
            .key("pk", approval_key(tenant, id))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| StoreError::from_sdk("GetItem", e))?;
        Ok(got.item().cloned())
    }
}
