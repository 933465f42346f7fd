//! A vote in someone's place (docs/API.md "Delegation"): counted only while the delegation it
//! is cast under is the one read, in force, in the same write.
//!
//! Review of v6, finding 3: the delegation used to be read, then the vote written — so a vote
//! could still count after `DELETE /delegations/…` had answered 204, or past `until`. Now the
//! vote's write is a transaction of the approval's conditional update and a `ConditionCheck` of
//! the delegation item: [`ONLY_IF_DELEGATION_AS_READ`] — the same delegate, window and write as
//! read, and in force now. A delegation ended, replaced or run out between the read and the
//! write refuses the vote whole (403, nothing recorded).
//!
//! Round trips: the one a vote in someone's place may add is the read — the approval and the
//! delegation in one consistent `BatchGetItem` — and the vote is then one transaction (two for
//! the completing vote of a quorum only when another vote landed in between). A transaction
//! answers nothing of the item, so the answer is the approval as read with the vote applied
//! (`Approval::with_vote`).

use aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, KeysAndAttributes, ReturnValuesOnConditionCheckFailure,
    TransactWriteItem, Update,
};

use super::attr::{Item, epoch, n, s};
use super::client::{DecideOutcome, Store, Transaction, condition_failed_item};
use super::codec::approval_from_item;
use super::delegations::{StoredDelegation, delegation_from_item};
use super::error::StoreError;
use super::expr::names;
use super::keys::{approval_key, delegation_key};
use super::votes::{self, VoteBy, VoteWrite, WriteKind};
use crate::domain::{Approval, ApprovalId, Approver, Decision, EpochSeconds, TenantId};

/// only_if_delegation_as_read: the delegation is still the one the vote was shaped by — the
/// same delegate, window and write (`created_at`) — and in force now. A `DELETE` (the item is
/// gone), a new `PUT` (another write) or the end of its window between the read and the vote
/// refuses the vote's whole transaction.
const ONLY_IF_DELEGATION_AS_READ: &str = "#delegate = :delegate AND #from = :from AND #until = :until \
     AND #created_at = :created_at AND #from <= :now AND #until > :now";

/// How a vote in someone's place ended.
#[derive(Debug, Clone, PartialEq)]
pub enum InPlace {
    /// The vote's write applied or was refused by the approval (as any vote).
    Voted(DecideOutcome),
    /// The named person has not delegated to the voter, not now, or not any more by the time
    /// of the write: 403 `forbidden`, nothing recorded.
    NotDelegated,
}

impl Store {
    /// `vote` (`approver`: the place; `by`: the delegate casting it) on approval `id`: the
    /// approval and the place's delegation read together (strongly consistent), then the vote
    /// written with the delegation checked in the same transaction. `sent_by`: the principal
    /// of the key or the person that sent it, and the place's groups now.
    pub async fn decide_in_place(
        &self,
        tenant: &TenantId,
        id: &ApprovalId,
        vote: &Decision,
        by: VoteBy<'_>,
        now: EpochSeconds,
    ) -> Result<InPlace, StoreError> {
        let Some(delegate) = vote.by.as_ref() else {
            return Err(StoreError::Corrupt(
                "a vote in someone's place names its delegate",
            ));
        };
        let (approval, delegation) = self
            .approval_and_delegation(tenant, id, &vote.approver)
            .await?;
        // One hop: only the named person's own delegation, and it must name this voter now.
        let Some(delegation) = delegation.filter(|d| d.delegation.lets(delegate, now)) else {
            return Ok(InPlace::NotDelegated);
        };
        let Some(approval) = approval else {
            return Ok(InPlace::Voted(DecideOutcome::Refused(None)));
        };
        // Between the read and the write, where a delegation that ends meanwhile must not
        // count: a failpoint (`return(MS)`) pauses here without blocking the thread.
        let pause = paused_after_read();
        if let Some(ms) = pause {
            tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
        }
        self.vote_as_read(tenant, approval, vote, &delegation, by, now)
            .await
    }

    /// `vote` cast under `delegation` (read a moment ago, as `approval` was): the approval's
    /// conditional update and the delegation's check, in one transaction; a quorum's completing
    /// vote is shaped from `approval` at once. A refusal by the approval is answered as any
    /// vote's; one by the delegation's check is [`InPlace::NotDelegated`].
    pub async fn vote_as_read(
        &self,
        tenant: &TenantId,
        approval: Approval,
        vote: &Decision,
        delegation: &StoredDelegation,
        by: VoteBy<'_>,
        now: EpochSeconds,
    ) -> Result<InPlace, StoreError> {
        let mut vote = vote.clone();
        vote.delegation_set_by = delegation.set_by.clone();
        let mut base = approval;
        let mut write = votes::first_for(&base, &vote, by, (now, self.retention));
        // Each write is its own request (its own client token), and each kind is sent once.
        let request = ulid::Ulid::new().to_string();
        for writes in 1..=4 {
            let (kind, executes) = (write.kind, write.executes);
            let items = vec![
                TransactWriteItem::builder()
                    .update(self.vote_update(tenant, &base.id, write)?)
                    .build(),
                TransactWriteItem::builder()
                    .condition_check(self.delegation_as_read(tenant, delegation, now)?)
                    .build(),
            ];
            let reasons = match self.transact(items, &format!("{request}.{writes}")).await? {
                Transaction::Committed => {
                    // A single decision keeps no list of votes; every write but a counted one
                    // decides.
                    let listed = kind != WriteKind::Single;
                    let decides = !matches!(kind, WriteKind::Counted(_));
                    return Ok(InPlace::Voted(DecideOutcome::Won(Box::new(
                        base.with_vote(&vote, listed, decides),
                    ))));
                }
                Transaction::Cancelled(reasons) => reasons,
            };
            if reasons
                .get(1)
                .is_some_and(|r| r.code() == Some("ConditionalCheckFailed"))
            {
                return Ok(InPlace::NotDelegated);
            }
            let old = condition_failed_item(&reasons, 0)
                .map(approval_from_item)
                .transpose()?;
            match votes::next(
                (kind, executes),
                old.as_ref(),
                &vote,
                by,
                (now, self.retention),
            ) {
                Some(next) => {
                    write = next;
                    if let Some(old) = old {
                        base = old;
                    }
                }
                None => return Ok(InPlace::Voted(DecideOutcome::Refused(old.map(Box::new)))),
            }
        }
        Err(StoreError::Corrupt(
            "a vote in someone's place found no write that fits",
        ))
    }

    /// The approval and `place`'s delegation, in one strongly consistent `BatchGetItem`.
    async fn approval_and_delegation(
        &self,
        tenant: &TenantId,
        id: &ApprovalId,
        place: &Approver,
    ) -> Result<(Option<Approval>, Option<StoredDelegation>), StoreError> {
        let key = |pk: AttributeValue| {
            KeysAndAttributes::builder()
                .keys(std::collections::HashMap::from([("pk".to_owned(), pk)]))
                .consistent_read(true)
                .build()
                .map_err(|e| StoreError::dynamo("BatchGetItem", e))
        };
        let tables = [
            (&self.tables.approvals, approval_key(tenant, id)),
            (&self.tables.api_keys, delegation_key(tenant, place)),
        ];
        let mut found: std::collections::HashMap<&str, Item> = std::collections::HashMap::new();
        let mut pending: Vec<(&String, AttributeValue)> = tables.to_vec();
        let mut pause = std::time::Duration::from_millis(25);
        for _ in 0..8 {
            if pending.is_empty() {
                break;
            }
            let mut request = self.client.batch_get_item();
            for (table, pk) in &pending {
                request = request.request_items(table.as_str(), key(pk.clone())?);
            }
            let answer = request
                .send()
                .await
                .map_err(|e| StoreError::from_sdk("BatchGetItem", e))?;
            for (table, items) in answer.responses().into_iter().flatten() {
                if let Some(item) = items.first() {
                    found.insert(
                        if *table == self.tables.approvals {
                            "approval"
                        } else {
                            "delegation"
                        },
                        item.clone(),
                    );
                }
            }
            // What DynamoDB left unprocessed (throttled) is asked for again.
            let left = answer.unprocessed_keys().cloned().unwrap_or_default();
            pending.retain(|(table, _)| {
                left.get(table.as_str())
                    .is_some_and(|k| !k.keys().is_empty())
            });
            if !pending.is_empty() {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(std::time::Duration::from_secs(1));
            }
        }
        if !pending.is_empty() {
            return Err(StoreError::Unavailable {
                operation: "BatchGetItem",
                message: "keys still unprocessed".to_owned(),
            });
        }
        let approval = found.get("approval").map(approval_from_item).transpose()?;
        let delegation = found
            .get("delegation")
            .map(|item| delegation_from_item(place, item))
            .transpose()?;
        Ok((approval, delegation))
    }

    /// The vote's conditional update of the approval, for its transaction.
    fn vote_update(
        &self,
        tenant: &TenantId,
        id: &ApprovalId,
        write: VoteWrite,
    ) -> Result<Update, StoreError> {
        Update::builder()
            .table_name(&self.tables.approvals)
            .key("pk", approval_key(tenant, id))
            .update_expression(write.update)
            .condition_expression(write.condition)
            .set_expression_attribute_names(Some(write.names))
            .set_expression_attribute_values(Some(write.values))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(|e| StoreError::dynamo("TransactWriteItems", e))
    }

    /// The delegation's check ([`ONLY_IF_DELEGATION_AS_READ`]), for the vote's transaction.
    fn delegation_as_read(
        &self,
        tenant: &TenantId,
        stored: &StoredDelegation,
        now: EpochSeconds,
    ) -> Result<ConditionCheck, StoreError> {
        let d = &stored.delegation;
        ConditionCheck::builder()
            .table_name(&self.tables.api_keys)
            .key("pk", delegation_key(tenant, &d.delegator))
            .condition_expression(ONLY_IF_DELEGATION_AS_READ)
            .set_expression_attribute_names(Some(names(&[ONLY_IF_DELEGATION_AS_READ])))
            .expression_attribute_values(":delegate", s(d.delegate.as_str()))
            .expression_attribute_values(":from", epoch(d.from))
            .expression_attribute_values(":until", epoch(d.until))
            .expression_attribute_values(":created_at", n(stored.created_at))
            .expression_attribute_values(":now", epoch(now))
            .build()
            .map_err(|e| StoreError::dynamo("TransactWriteItems", e))
    }
}

/// The failpoint `vote::after_delegation_read` as a pause (`return(MS)`), awaited by the caller
/// rather than slept on the thread. `None` without it (and in builds without failpoints).
fn paused_after_read() -> Option<u64> {
    fail::fail_point!("vote::after_delegation_read", |ms: Option<String>| ms
        .and_then(|ms| ms.parse().ok()));
    None
}
