//! Run ends the clocks cannot place (docs/GITHUB.md): a round
//! opened so close to its run's end — by GitHub's clock and ours — that it may be the ended
//! attempt's or a re-run's. The webhook function cannot ask GitHub (it holds no App key and
//! answers within GitHub's 10 s), so it lists the round in one item of the inbox per tenant
//! (`{source}#unclear-run-ends`, a string set of [`UnclearRunEnd`]s as JSON) in the run end's
//! own transaction. The scheduled sweep asks GitHub for each run and settles each entry: still
//! `completed` at the attempt that ended closes the round (and cancels its pending approval);
//! a newer `run_attempt`, or a run going again, keeps it for the re-run.

use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem, Update};

use super::attr::s;
use super::client::{Store, Transaction};
use super::error::StoreError;
use super::expr::names;
use super::github::{OpenRound, RoundKey, RunEnd};
use super::unclear::{UnclearRunEnd, unclear_key};
use crate::domain::{EpochSeconds, TenantId};

impl Store {
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
        if close && let Some(approval) = self.get_approval(tenant, &entry.approval_id).await? {
            let open = OpenRound {
                round: RoundKey {
                    tenant: tenant.clone(),
                    repository_id: entry.repository_id,
                    run_id: entry.run_id,
                    environment: entry.environment.clone(),
                },
                approval,
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
}
