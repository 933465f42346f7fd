//! The store itself: one DynamoDB client and the table names, and the transaction every
//! multi-item write goes through.

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{
    AttributeValue, CancellationReason, ReturnValue, ReturnValuesOnConditionCheckFailure,
    TransactWriteItem, Update,
};

use super::attr::Item;
use super::codec::approval_from_item;
use super::error::{StoreError, is_transient};
use super::expr::unused_values;
use super::keys::approval_key;
use super::tables::Tables;
use crate::domain::{Approval, ApprovalId, Retention, TenantId};

/// The DynamoDB store: one client (built once per process) and the table names.
#[derive(Debug, Clone)]
pub struct Store {
    // Only the store's own modules reach the client: every request is one of its operations.
    pub(super) client: Client,
    pub(super) tables: Tables,
    /// Whether an execution's begin also writes the ledger item of before v5 (see
    /// [`Store::guarding_v4_executors`]).
    pub(super) guard_v4_executors: bool,
    /// How long an ended approval's items are kept (`RETENTION_DAYS`; see
    /// [`crate::domain::Retention`]).
    pub(super) retention: Retention,
}

impl Store {
    pub fn new(client: Client, tables: Tables) -> Self {
        Self {
            client,
            tables,
            guard_v4_executors: false,
            retention: Retention::keep_everything(),
        }
    }

    /// Every item this store writes for an approval carries its `retain_until` under
    /// `retention` (kept for ever without it).
    pub fn retaining(mut self, retention: Retention) -> Self {
        self.retention = retention;
        self
    }

    /// While executors from before v5 may still run (an upgrade's first deploy), an
    /// execution's begin also writes the ledger item they check (`{id}#execute`, in progress
    /// under a lease that never ends), in one transaction with the approval: such an executor
    /// then finds the execution begun and never calls its target again.
    pub fn guarding_v4_executors(mut self, guard: bool) -> Self {
        self.guard_v4_executors = guard;
        self
    }

    pub fn tables(&self) -> &Tables {
        &self.tables
    }

    /// Whether the tables answer: one DescribeTable each, for `/health`.
    pub async fn check(&self) -> Result<(), StoreError> {
        for table in [&self.tables.approvals, &self.tables.idempotency_keys] {
            self.client
                .describe_table()
                .table_name(table)
                .send()
                .await
                .map_err(|e| StoreError::dynamo("DescribeTable", e))?;
        }
        Ok(())
    }
}

/// How a conditional update of an approval's decision (a vote, a cancel) ended.
#[derive(Debug, Clone, PartialEq)]
pub enum DecideOutcome {
    /// This request's update applied: the approval as it is now.
    Won(Box<Approval>),
    /// The condition refused it: the approval as it was (`None`: no such approval for the tenant).
    Refused(Option<Box<Approval>>),
}

/// A transaction's end, once conflicts with other in-flight transactions have been retried.
pub(crate) enum Transaction {
    Committed,
    /// A condition refused it: one reason per action, in order, with the item as it was where
    /// the action asked for `ALL_OLD`.
    Cancelled(Vec<CancellationReason>),
}

/// The item returned by the `index`th action's failed condition, if that is why it was cancelled.
pub(crate) fn condition_failed_item(reasons: &[CancellationReason], index: usize) -> Option<&Item> {
    reasons
        .get(index)
        .filter(|r| r.code() == Some("ConditionalCheckFailed"))
        .and_then(|r| r.item())
}

impl Store {
    /// Runs one `TransactWriteItems` (a single update goes alone, see [`Store::update_alone`]).
    /// A cancellation caused only by `TransactionConflict` (another
    /// transaction on the same items in flight) is retried with jitter: once the other commits,
    /// the retry meets its result in a condition, which is answered from the returned item.
    ///
    /// `token` names this one write (at most 32 characters; a caller that sends a different
    /// write, such as the completing write of a vote after its counted write, passes another
    /// token). It makes the SDK's own retries of a transaction that did commit, but whose answer
    /// was lost, come back as committed. DynamoDB keeps a token for 10 minutes and refuses any
    /// other request with it (`IdempotentParameterMismatchException`), so each try after a
    /// cancellation — a new request, since the last one was answered — gets a token of its own
    /// ([`try_token`]); only a try still in progress is asked again with the same one.
    pub(crate) async fn transact(
        &self,
        items: Vec<TransactWriteItem>,
        token: &str,
    ) -> Result<Transaction, StoreError> {
        if let [only] = items.as_slice()
            && let Some(update) = only.update()
        {
            return self.update_alone(update).await;
        }
        debug_assert!(
            unused_values(&items).is_empty(),
            "a transaction with values no expression uses (DynamoDB refuses it): {:?}",
            unused_values(&items)
        );
        let mut tries = 1;
        let mut in_progress_waits = 0;
        loop {
            let result = self
                .client
                .transact_write_items()
                .set_transact_items(Some(items.clone()))
                .client_request_token(try_token(token, tries))
                .send()
                .await;
            let cancelled = match result {
                Ok(_) => return Ok(Transaction::Committed),
                Err(e) if is_transient(&e) => {
                    return Err(StoreError::from_sdk("TransactWriteItems", e));
                }
                Err(e) => match e.into_service_error() {
                    TransactWriteItemsError::TransactionCanceledException(cancelled) => cancelled,
                    // The same token's earlier try is still being applied (the SDK retried a
                    // request whose answer was lost): ask again shortly, with the same token.
                    TransactWriteItemsError::TransactionInProgressException(_)
                        if in_progress_waits < TRANSACTION_TRIES =>
                    {
                        in_progress_waits += 1;
                        tokio::time::sleep(conflict_backoff(in_progress_waits)).await;
                        continue;
                    }
                    other => return Err(StoreError::from_service("TransactWriteItems", other)),
                },
            };
            let reasons = cancelled.cancellation_reasons();
            if reasons
                .iter()
                .any(|r| r.code() == Some("ConditionalCheckFailed"))
            {
                return Ok(Transaction::Cancelled(reasons.to_vec()));
            }
            // Throttled inside the transaction: unavailable for now, like a throttled request.
            if reasons.iter().any(|r| {
                matches!(
                    r.code(),
                    Some("ThrottlingError" | "ProvisionedThroughputExceeded")
                )
            }) {
                return Err(StoreError::Unavailable {
                    operation: "TransactWriteItems",
                    message: format!("{cancelled}"),
                });
            }
            if !reasons
                .iter()
                .any(|r| r.code() == Some("TransactionConflict"))
            {
                return Err(StoreError::dynamo("TransactWriteItems", cancelled));
            }
            if tries == TRANSACTION_TRIES {
                return Err(StoreError::Contention("TransactWriteItems"));
            }
            tokio::time::sleep(conflict_backoff(tries)).await;
            tries += 1;
        }
    }
}

impl Store {
    /// A transaction of one update, sent as that update: a conditional write of one item is
    /// atomic on its own, and costs half (a transactional write is billed twice). Its answer is
    /// a transaction's. Without a client token, an SDK retry of an update that applied but whose
    /// answer was lost meets its own result in the condition; the one-update callers (a ledger
    /// begin or end) tell their own write from the item returned, by its token.
    pub(crate) async fn update_alone(&self, update: &Update) -> Result<Transaction, StoreError> {
        Ok(self.update_alone_with(update, false).await?.0)
    }

    /// [`Store::update_alone`], and the item as the update left it (DynamoDB's `ALL_NEW`, at
    /// no extra capacity) when it applied.
    pub(crate) async fn update_returning(
        &self,
        update: &Update,
    ) -> Result<(Transaction, Option<Item>), StoreError> {
        self.update_alone_with(update, true).await
    }

    async fn update_alone_with(
        &self,
        update: &Update,
        return_new: bool,
    ) -> Result<(Transaction, Option<Item>), StoreError> {
        let mut tries = 1;
        loop {
            let result = self
                .client
                .update_item()
                .table_name(update.table_name())
                .set_key(Some(update.key().clone()))
                .update_expression(update.update_expression())
                .set_condition_expression(update.condition_expression().map(str::to_owned))
                .set_expression_attribute_names(update.expression_attribute_names().cloned())
                .set_expression_attribute_values(update.expression_attribute_values().cloned())
                .set_return_values_on_condition_check_failure(
                    update.return_values_on_condition_check_failure().cloned(),
                )
                .set_return_values(return_new.then_some(ReturnValue::AllNew))
                .send()
                .await;
            let error = match result {
                Ok(output) => return Ok((Transaction::Committed, output.attributes)),
                Err(e) if is_transient(&e) => return Err(StoreError::from_sdk("UpdateItem", e)),
                Err(e) => e.into_service_error(),
            };
            match error {
                UpdateItemError::ConditionalCheckFailedException(failed) => {
                    let reason = CancellationReason::builder()
                        .code("ConditionalCheckFailed")
                        .set_item(failed.item)
                        .build();
                    return Ok((Transaction::Cancelled(vec![reason]), None));
                }
                // The item is in another transaction in flight: tried again with jitter, as a
                // transaction cancelled by the conflict would be.
                UpdateItemError::TransactionConflictException(_) if tries < TRANSACTION_TRIES => {
                    tokio::time::sleep(conflict_backoff(tries)).await;
                    tries += 1;
                }
                UpdateItemError::TransactionConflictException(_) => {
                    return Err(StoreError::Contention("UpdateItem"));
                }
                other => return Err(StoreError::dynamo("UpdateItem", other)),
            }
        }
    }
}

/// One conditional `UpdateItem`, as [`Store::conditional_update`] sends it.
pub(crate) struct ConditionalUpdate<'a> {
    pub table: &'a str,
    pub key: AttributeValue,
    pub update: &'a str,
    pub condition: &'a str,
    pub names: HashMap<String, String>,
    pub values: HashMap<String, AttributeValue>,
    /// What an applied update answers with.
    pub returning: ReturnValue,
}

impl Store {
    /// Sends one conditional `UpdateItem`: `Ok` with the attributes `returning` asks for when
    /// the condition held, `Err` with the item as it was (`ALL_OLD`; `None` when there is no
    /// such item) when it did not — either way in the same round trip.
    pub(crate) async fn conditional_update(
        &self,
        write: ConditionalUpdate<'_>,
    ) -> Result<Result<Option<Item>, Option<Item>>, StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(write.table)
            .key("pk", write.key)
            .update_expression(write.update)
            .condition_expression(write.condition)
            .set_expression_attribute_names(Some(write.names))
            .set_expression_attribute_values(Some(write.values))
            .return_values(write.returning)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match result {
            Ok(output) => Ok(Ok(output.attributes)),
            Err(e) if is_transient(&e) => Err(StoreError::from_sdk("UpdateItem", e)),
            Err(e) => match e.into_service_error() {
                UpdateItemError::ConditionalCheckFailedException(failed) => Ok(Err(failed.item)),
                other => Err(StoreError::dynamo("UpdateItem", other)),
            },
        }
    }

    /// One conditional `UpdateItem` on an approval: the approval as it is now when the
    /// condition held (`ALL_NEW`), or as it was when it did not (`ALL_OLD`; `None` when there
    /// is no such approval) — either way in the same round trip.
    pub(crate) async fn update_approval(
        &self,
        tenant: &TenantId,
        id: &ApprovalId,
        update: &str,
        condition: &str,
        names: HashMap<String, String>,
        values: HashMap<String, AttributeValue>,
    ) -> Result<Result<Approval, Option<Approval>>, StoreError> {
        let write = ConditionalUpdate {
            table: &self.tables.approvals,
            key: approval_key(tenant, id),
            update,
            condition,
            names,
            values,
            returning: ReturnValue::AllNew,
        };
        match self.conditional_update(write).await? {
            Ok(new) => {
                let item = new.ok_or(StoreError::corrupt("ALL_NEW attributes"))?;
                Ok(Ok(approval_from_item(&item)?))
            }
            Err(old) => Ok(Err(old.as_ref().map(approval_from_item).transpose()?)),
        }
    }
}

/// The client token of the `tries`th try of the write `token` names: the first try uses it as
/// it is, each later one (a new request after a cancellation) adds its number, so no token is
/// ever sent with two requests. At most 36 characters, as DynamoDB requires.
pub(crate) fn try_token(token: &str, tries: u32) -> String {
    debug_assert!(token.len() <= 32, "a client token of {} bytes", token.len());
    if tries <= 1 {
        token.to_owned()
    } else {
        format!("{token}~{tries}")
    }
}

/// How many times a transaction cancelled by `TransactionConflict` (another transaction on the
/// same item, in flight) is tried in all, and the jitter between tries.
const TRANSACTION_TRIES: u32 = 5;

fn conflict_backoff(attempt: u32) -> Duration {
    let base = 10u64 << attempt.min(4);
    Duration::from_millis(base + rand::random_range(0..base))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_try_of_a_write_has_its_own_token_within_36_characters() {
        let write = "req_01JD3ZZZZZZZZZZZZZZZZZZZZZ.2";
        let tokens: Vec<String> = (1..=TRANSACTION_TRIES)
            .map(|t| try_token(write, t))
            .collect();
        assert_eq!(tokens[0], write);
        let distinct: std::collections::HashSet<_> = tokens.iter().collect();
        assert_eq!(distinct.len(), tokens.len());
        assert!(tokens.iter().all(|t| t.len() <= 36), "{tokens:?}");
    }
}
