//! GitHub deployments' rounds (docs/GITHUB.md). A job waiting on an
//! environment is decided by the approval of its **round**: one per (tenant, repository, run,
//! environment) at a time. The round's pointer — an item of the inbox table, where the events
//! that move it are recorded — names its approval and whether Countersign has begun answering
//! it. Every event is recorded in the inbox by its delivery, in the same transaction as its
//! effect, so a redelivery changes nothing.
//!
//! - **Open** (one transaction: the inbox item, the pointer, the run's list of environments and
//!   the new approval): only while no round is open — the pointer is absent or answered. Of any
//!   number of events racing, one opens the round.
//! - **Join** (one more transaction, after an open refused because a round is open): the inbox
//!   item, a check that the pointer still names that open round, and the delivery added to its
//!   approval (which the trail shows). No read decides either: the open's refusal returns the
//!   pointer as it was.
//! - **Answer**: the job that tells GitHub marks the round answered in its begin, on the
//!   condition that the pointer still names its approval ([`Store::github_answer_fence`]): once a
//!   newer round has opened, an older answer is never sent (GitHub's API names no round, so a
//!   late "approved" would wave the newer one through).
//! - **A run that ended** closes its open rounds and cancels their pending approvals.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, Put, ReturnValuesOnConditionCheckFailure, TransactWriteItem,
    Update,
};

use super::approvals::ONLY_IF_CANCELLABLE;
use super::attr::{epoch, get_s, n, s};
use super::client::{Store, Transaction, condition_failed_item};
use super::codec::{
    GITHUB_GATE, approval_from_item, approval_to_item, cancellation_to_attr,
    github_delivery_to_attr,
};
use super::conditions::{ONLY_IF_EXISTS, ONLY_IF_NEW};
use super::error::StoreError;
use super::expr::{UpdateExpr, names};
use super::inbox::{InboxRecord, recorded_outcome};
use super::indexes::Indexed;
use super::keys::{approval_key, github_round_key, github_run_key};
use super::unclear::{UnclearRunEnd, list_unclear};
use crate::domain::{
    Approval, ApprovalId, Cancellation, EpochSeconds, ExecutionStatus, GithubDelivery, GithubGate,
    MAX_DELIVERIES, Status, TenantId, WebhookOutcome,
};

/// only_if_no_round_open: a round opens when there is none, or the last one was answered; of
/// any number of events racing, one opens it (the others join it).
const ONLY_IF_NO_ROUND_OPEN: &str = "attribute_not_exists(#pk) OR #answered = :true";

/// only_if_round_still_open: a delivery joins the round the open's refusal named, and only
/// while its answer has not begun (after, the event opens the next round).
const ONLY_IF_ROUND_STILL_OPEN: &str = "#approval_id = :approval_id AND #answered = :false";

/// only_if_this_rounds_answer: an answer is sent only while the pointer names its own round and
/// its run has not ended — never once a newer round opened (a late answer would decide it), nor
/// into a run that ended (nothing waits; a re-run's job would be decided by it).
const ONLY_IF_THIS_ROUNDS_ANSWER: &str =
    "#approval_id = :approval_id AND attribute_not_exists(#closed)";

/// A round opened this close to its run's end (by the two clocks, GitHub's and ours) may be the
/// ended attempt's or a re-run's: the run's end leaves it open and lists it for the sweep, which
/// asks GitHub (`store/run_ends.rs`).
const RUN_END_MARGIN_SECONDS: EpochSeconds = 10;

/// only_if_room_for_a_delivery: an approval names at most [`MAX_DELIVERIES`] deliveries.
const ONLY_IF_ROOM_FOR_A_DELIVERY: &str = "attribute_exists(#pk) AND size(#gh.#dl) < :max";

/// Rounds closed in one transaction: two items each (the pointer, the approval's cancel), with
/// room for the delivery's record, the list of unclear ends and the replay guard.
const ROUNDS_PER_TRANSACTION: usize = 45;

/// A round open when its run's end arrived: its approval, whether its answer began, and whether
/// it opened too close to the end for the clocks to say which attempt it belongs to.
#[derive(Debug, Clone)]
pub struct OpenRound {
    pub round: RoundKey,
    pub approval: Approval,
    pub answered: bool,
    pub unclear: bool,
}

impl OpenRound {
    /// The entry that lists this round as an unclear run end (`None` for an approval that is
    /// not a GitHub round).
    fn unclear_entry(&self, end: &RunEnd, now: EpochSeconds) -> Option<UnclearRunEnd> {
        let gate = self.approval.github.as_ref()?;
        Some(UnclearRunEnd {
            repository_id: self.round.repository_id,
            repository: gate.repository.clone(),
            installation_id: gate.installation_id,
            run_id: self.round.run_id,
            environment: self.round.environment.clone(),
            approval_id: self.approval.id.clone(),
            answered: self.answered,
            conclusion: end.conclusion.clone(),
            attempt: end.attempt,
            listed_at: now,
        })
    }
}

/// A run's end as GitHub told it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunEnd {
    /// `success`, `failure`, `cancelled`, …
    pub conclusion: String,
    /// When it ended, by GitHub's clock.
    pub ended_at: Option<EpochSeconds>,
    /// Which attempt ended, when GitHub said.
    pub attempt: Option<u64>,
}

/// How long a round's pointer is kept: past the longest an approval of it may wait (29 days)
/// and GitHub's own 30.
const ROUND_TTL_SECONDS: EpochSeconds = 31 * 86_400;

/// Tries of an event that finds its round moving under it (opened, then answered, between its
/// writes): each try is one more transaction, and a round's answer begins at most once a
/// round, so this is plenty.
const ROUND_TRIES: u32 = 4;

/// Where a GitHub deployment waits: the round's coordinates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoundKey {
    pub tenant: TenantId,
    pub repository_id: u64,
    pub run_id: u64,
    pub environment: String,
}

impl RoundKey {
    pub fn of(tenant: &TenantId, gate: &GithubGate) -> Self {
        Self {
            tenant: tenant.clone(),
            repository_id: gate.repository_id,
            run_id: gate.run_id,
            environment: gate.environment.clone(),
        }
    }

    fn pk(&self) -> String {
        github_round_key(
            &self.tenant,
            self.repository_id,
            self.run_id,
            &self.environment,
        )
    }
}

/// How a `deployment_protection_rule` delivery was taken.
#[derive(Debug, Clone, PartialEq)]
pub enum RoundIngested {
    /// It opened a round: the approval it created.
    Opened(Box<Approval>),
    /// It joined the open round of this approval.
    Joined(ApprovalId),
    /// Seen before: nothing changed; the first delivery's outcome.
    Duplicate(WebhookOutcome),
}

/// How a `workflow_run` / `completed` delivery was taken.
#[derive(Debug, Clone, PartialEq)]
pub enum RunClosed {
    /// The run had no round open: nothing recorded.
    NothingOpen,
    /// Its open rounds closed, these pending approvals cancelled.
    Closed(Vec<ApprovalId>),
    Duplicate(WebhookOutcome),
}

fn values(pairs: &[(&str, AttributeValue)]) -> HashMap<String, AttributeValue> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

impl Store {
    /// Records a waiting job's delivery and opens its round with `approval` (born pending, or
    /// already rejected when Countersign refuses the round itself), or joins the round open.
    pub async fn open_or_join_github_round(
        &self,
        record: &InboxRecord,
        round: &RoundKey,
        approval: &Approval,
        now: EpochSeconds,
    ) -> Result<RoundIngested, StoreError> {
        let opened = match approval.status {
            Status::Pending => WebhookOutcome::Opened,
            _ => WebhookOutcome::Refused,
        };
        for _ in 1..=ROUND_TRIES {
            // A token per write: the SDK's own retry of it meets its result, never another's.
            let token = ulid::Ulid::new().to_string();
            let reasons = match self
                .transact(
                    self.open_round(record, round, approval, opened, now)?,
                    &token,
                )
                .await?
            {
                Transaction::Committed => {
                    return Ok(RoundIngested::Opened(Box::new(approval.clone())));
                }
                Transaction::Cancelled(reasons) => reasons,
            };
            if let Some(first) = condition_failed_item(&reasons, 0) {
                return Ok(RoundIngested::Duplicate(recorded_outcome(first)?));
            }
            if record.replayed(&reasons) {
                return Ok(RoundIngested::Duplicate(WebhookOutcome::Ignored));
            }
            let Some(pointer) = condition_failed_item(&reasons, 1) else {
                return Err(StoreError::Corrupt("a new approval's id was taken"));
            };
            // A round is open: join it (its approval's id is in the refusal).
            let open = ApprovalId::parse(get_s(pointer, "approval_id")?)
                .map_err(|_| StoreError::corrupt("approval_id"))?;
            let mut room = true;
            loop {
                let token = ulid::Ulid::new().to_string();
                let join = self.join_round(record, round, &open, room, approval.requester())?;
                let reasons = match self.transact(join, &token).await? {
                    Transaction::Committed => return Ok(RoundIngested::Joined(open)),
                    Transaction::Cancelled(reasons) => reasons,
                };
                if let Some(first) = condition_failed_item(&reasons, 0) {
                    return Ok(RoundIngested::Duplicate(recorded_outcome(first)?));
                }
                if record.replayed(&reasons) {
                    return Ok(RoundIngested::Duplicate(WebhookOutcome::Ignored));
                }
                // The round's approval names as many deliveries as it keeps: join without.
                let pointer_held =
                    reasons.get(1).and_then(|r| r.code()) != Some("ConditionalCheckFailed");
                if pointer_held && room {
                    room = false;
                    continue;
                }
                // Its answer began meanwhile: the event opens the next round.
                break;
            }
        }
        Err(StoreError::Contention("a GitHub round"))
    }

    fn open_round(
        &self,
        record: &InboxRecord,
        round: &RoundKey,
        approval: &Approval,
        outcome: WebhookOutcome,
        now: EpochSeconds,
    ) -> Result<Vec<TransactWriteItem>, StoreError> {
        let inbox = record.put(&self.tables.webhook_inbox, outcome)?;
        let pointer_update = "SET #approval_id = :approval_id, #answered = :false, \
             #opened_at = :now, #expires_at = :expires_at REMOVE #closed";
        let pointer = Update::builder()
            .table_name(&self.tables.webhook_inbox)
            .key("pk", s(round.pk()))
            .update_expression(pointer_update)
            .condition_expression(ONLY_IF_NO_ROUND_OPEN)
            .set_expression_attribute_names(Some(names(&[pointer_update, ONLY_IF_NO_ROUND_OPEN])))
            .set_expression_attribute_values(Some(values(&[
                (":approval_id", s(approval.id.as_str())),
                (":false", AttributeValue::Bool(false)),
                (":true", AttributeValue::Bool(true)),
                (":now", epoch(now)),
                (":expires_at", epoch(now + ROUND_TTL_SECONDS)),
            ])))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(|e| StoreError::dynamo("TransactWriteItems", e))?;
        // The run's environments, for the run's end (ADD makes the item and the set).
        let run_update = "ADD #environments :environment SET #expires_at = :expires_at";
        let run = Update::builder()
            .table_name(&self.tables.webhook_inbox)
            .key(
                "pk",
                s(github_run_key(
                    &round.tenant,
                    round.repository_id,
                    round.run_id,
                )),
            )
            .update_expression(run_update)
            .set_expression_attribute_names(Some(names(&[run_update])))
            .set_expression_attribute_values(Some(values(&[
                (
                    ":environment",
                    AttributeValue::Ss(vec![round.environment.clone()]),
                ),
                (":expires_at", epoch(now + ROUND_TTL_SECONDS)),
            ])))
            .build()
            .map_err(|e| StoreError::dynamo("TransactWriteItems", e))?;
        let put_approval = Put::builder()
            .table_name(&self.tables.approvals)
            .set_item(Some(approval_to_item(approval)))
            .condition_expression(ONLY_IF_NEW)
            .set_expression_attribute_names(Some(names(&[ONLY_IF_NEW])))
            .build()
            .map_err(|e| StoreError::dynamo("TransactWriteItems", e))?;
        let mut items = vec![
            TransactWriteItem::builder().put(inbox).build(),
            TransactWriteItem::builder().update(pointer).build(),
            TransactWriteItem::builder().update(run).build(),
            TransactWriteItem::builder().put(put_approval).build(),
        ];
        items.extend(self.replay_guard(record)?);
        Ok(items)
    }

    /// The record's guard against a replay under another delivery id, last in its transaction.
    fn replay_guard(&self, record: &InboxRecord) -> Result<Option<TransactWriteItem>, StoreError> {
        Ok(record
            .replay_guard(&self.tables.webhook_inbox)?
            .map(|put| TransactWriteItem::builder().put(put).build()))
    }

    /// `requester`: who sent the joining delivery (as the approval it would have opened names
    /// its requester): added to the round's askers, none of whom approves it.
    fn join_round(
        &self,
        record: &InboxRecord,
        round: &RoundKey,
        open: &ApprovalId,
        room: bool,
        requester: Option<&crate::domain::Approver>,
    ) -> Result<Vec<TransactWriteItem>, StoreError> {
        let inbox = record.put(&self.tables.webhook_inbox, WebhookOutcome::Joined)?;
        let still_open = ConditionCheck::builder()
            .table_name(&self.tables.webhook_inbox)
            .key("pk", s(round.pk()))
            .condition_expression(ONLY_IF_ROUND_STILL_OPEN)
            .set_expression_attribute_names(Some(names(&[ONLY_IF_ROUND_STILL_OPEN])))
            .set_expression_attribute_values(Some(values(&[
                (":approval_id", s(open.as_str())),
                (":false", AttributeValue::Bool(false)),
            ])))
            .build()
            .map_err(|e| StoreError::dynamo("TransactWriteItems", e))?;
        let mut items = vec![
            TransactWriteItem::builder().put(inbox).build(),
            TransactWriteItem::builder()
                .condition_check(still_open)
                .build(),
        ];
        // Its sender asked too: never an approver of it (the decision's condition tests the set).
        // The trail shows each delivery that joined (derived from this change), while the
        // approval has room to name it.
        let mut update = super::expr::UpdateExpr::default();
        let mut vals = HashMap::new();
        if let Some(requester) = requester {
            update = update.add("#gh.#rq :requester");
            vals.insert(
                ":requester".to_owned(),
                AttributeValue::Ss(vec![requester.identity()]),
            );
        }
        let condition = if room {
            update = update.set("#gh.#dl = list_append(#gh.#dl, :delivery)");
            vals.insert(
                ":delivery".to_owned(),
                AttributeValue::L(vec![github_delivery_to_attr(&GithubDelivery {
                    id: record.event_id.clone(),
                    at: record.received_at,
                })]),
            );
            vals.insert(":max".to_owned(), n(MAX_DELIVERIES));
            ONLY_IF_ROOM_FOR_A_DELIVERY
        } else {
            ONLY_IF_EXISTS
        };
        if !vals.is_empty() {
            let update = update.build();
            let mut names = names(&[&update, condition]);
            names.insert("#gh".to_owned(), GITHUB_GATE.to_owned());
            let joined = Update::builder()
                .table_name(&self.tables.approvals)
                .key("pk", approval_key(&round.tenant, open))
                .update_expression(&update)
                .condition_expression(condition)
                .set_expression_attribute_names(Some(names))
                .set_expression_attribute_values(Some(vals))
                .build()
                .map_err(|e| StoreError::dynamo("TransactWriteItems", e))?;
            items.push(TransactWriteItem::builder().update(joined).build());
        }
        items.extend(self.replay_guard(record)?);
        Ok(items)
    }

    /// The write that fences a GitHub answer, for the begin of the job that sends it: the round
    /// is marked answered (a later event opens the next round), on the condition that it is
    /// still this approval's.
    pub(crate) fn github_answer_fence(
        &self,
        round: &RoundKey,
        approval: &ApprovalId,
    ) -> Result<TransactWriteItem, StoreError> {
        let update = "SET #answered = :true";
        let fence = Update::builder()
            .table_name(&self.tables.webhook_inbox)
            .key("pk", s(round.pk()))
            .update_expression(update)
            .condition_expression(ONLY_IF_THIS_ROUNDS_ANSWER)
            .set_expression_attribute_names(Some(names(&[update, ONLY_IF_THIS_ROUNDS_ANSWER])))
            .set_expression_attribute_values(Some(values(&[
                (":approval_id", s(approval.as_str())),
                (":true", AttributeValue::Bool(true)),
            ])))
            .build()
            .map_err(|e| StoreError::dynamo("TransactWriteItems", e))?;
        Ok(TransactWriteItem::builder().update(fence).build())
    }

    /// Records a run's end and closes its open rounds, cancelling their pending approvals —
    /// those opened clearly before the end. A round opened so close to the end that the two
    /// clocks cannot tell whether it is the ended attempt's or a re-run's is left open and put
    /// on the tenant's list of unclear run ends, which the sweep settles by asking GitHub. At
    /// most [`ROUNDS_PER_TRANSACTION`] rounds a transaction (DynamoDB takes 100 items): a run
    /// with more closes in several, the delivery recorded with the last, so a retry after a
    /// crash closes what is left.
    pub async fn close_github_run(
        &self,
        record: &InboxRecord,
        (tenant, repository_id, run_id): (&TenantId, u64, u64),
        end: &RunEnd,
        now: EpochSeconds,
    ) -> Result<RunClosed, StoreError> {
        'read: for _ in 1..=ROUND_TRIES {
            let open = self
                .open_rounds(tenant, repository_id, run_id, end.ended_at)
                .await?;
            if open.is_empty() {
                return Ok(RunClosed::NothingOpen);
            }
            let (unclear, clear): (Vec<&OpenRound>, Vec<&OpenRound>) =
                open.iter().partition(|r| r.unclear);
            let chunks: Vec<&[&OpenRound]> = if clear.is_empty() {
                vec![&[]]
            } else {
                clear.chunks(ROUNDS_PER_TRANSACTION).collect()
            };
            let mut cancelled = Vec::new();
            for (i, chunk) in chunks.iter().enumerate() {
                let last = i + 1 == chunks.len();
                let mut items = Vec::new();
                let mut chunk_cancelled = Vec::new();
                for open in chunk.iter() {
                    items.extend(self.close_open_round(open, end, now, &mut chunk_cancelled)?);
                }
                if !last {
                    match self.transact(items, &ulid::Ulid::new().to_string()).await? {
                        Transaction::Committed => {
                            cancelled.extend(chunk_cancelled);
                            continue;
                        }
                        // A round moved meanwhile: read them again.
                        Transaction::Cancelled(_) => continue 'read,
                    }
                }
                cancelled.extend(chunk_cancelled);
                let outcome = if cancelled.is_empty() {
                    WebhookOutcome::Ignored
                } else {
                    WebhookOutcome::Cancelled
                };
                let mut all = vec![
                    TransactWriteItem::builder()
                        .put(record.put(&self.tables.webhook_inbox, outcome)?)
                        .build(),
                ];
                all.extend(items);
                let entries: Vec<UnclearRunEnd> = unclear
                    .iter()
                    .filter_map(|open| open.unclear_entry(end, now))
                    .collect();
                // DynamoDB refuses an empty set: the list is written only with an entry.
                if !entries.is_empty() {
                    all.push(list_unclear(&self.tables.webhook_inbox, tenant, &entries)?);
                }
                all.extend(self.replay_guard(record)?);
                match self.transact(all, &ulid::Ulid::new().to_string()).await? {
                    Transaction::Committed => return Ok(RunClosed::Closed(cancelled)),
                    Transaction::Cancelled(reasons) => {
                        if let Some(first) = condition_failed_item(&reasons, 0) {
                            return Ok(RunClosed::Duplicate(recorded_outcome(first)?));
                        }
                        if record.replayed(&reasons) {
                            return Ok(RunClosed::Duplicate(WebhookOutcome::Ignored));
                        }
                        continue 'read;
                    }
                }
            }
        }
        Err(StoreError::Contention("a GitHub run's rounds"))
    }

    /// The writes that close `open` at the run's end: its pointer, and its approval's cancel
    /// when it was pending and not answered (its id added to `cancelled`).
    pub(super) fn close_open_round(
        &self,
        open: &OpenRound,
        end: &RunEnd,
        now: EpochSeconds,
        cancelled: &mut Vec<ApprovalId>,
    ) -> Result<Vec<TransactWriteItem>, StoreError> {
        let mut items = vec![
            TransactWriteItem::builder()
                .update(self.close_round(&open.round, &open.approval.id, open.answered)?)
                .build(),
        ];
        let approval = &open.approval;
        if !open.answered && approval.status == Status::Pending && approval.expires_at > now {
            let cancellation = Cancellation {
                by: crate::domain::Approver::parse("github")
                    .map_err(|_| StoreError::Corrupt("the github actor"))?,
                at: now,
                reason: Some(format!("the workflow run ended: {}", end.conclusion)),
                channel: Some(crate::domain::Channel::Github),
            };
            items.push(
                TransactWriteItem::builder()
                    .update(self.run_end_cancel(
                        &open.round.tenant,
                        &approval.id,
                        &cancellation,
                        now,
                    )?)
                    .build(),
            );
            cancelled.push(approval.id.clone());
        }
        Ok(items)
    }

    /// The run's rounds not closed yet, with their approvals and whether their answer began.
    async fn open_rounds(
        &self,
        tenant: &TenantId,
        repository_id: u64,
        run_id: u64,
        ended_at: Option<EpochSeconds>,
    ) -> Result<Vec<OpenRound>, StoreError> {
        let run = self
            .client
            .get_item()
            .table_name(&self.tables.webhook_inbox)
            .key("pk", s(github_run_key(tenant, repository_id, run_id)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| StoreError::from_sdk("GetItem", e))?;
        let environments = match run.item().and_then(|i| i.get("environments")) {
            Some(AttributeValue::Ss(environments)) => environments.clone(),
            _ => return Ok(Vec::new()),
        };
        let rounds: Vec<RoundKey> = environments
            .into_iter()
            .map(|environment| RoundKey {
                tenant: tenant.clone(),
                repository_id,
                run_id,
                environment,
            })
            .collect();
        let pointers = self
            .get_many(
                &self.tables.webhook_inbox,
                rounds.iter().map(RoundKey::pk).collect(),
            )
            .await?;
        let mut open = Vec::new();
        for round in rounds {
            let Some(pointer) = pointers.get(&round.pk()) else {
                continue;
            };
            if pointer.contains_key("closed") {
                continue;
            }
            let answered = pointer.get("answered") == Some(&AttributeValue::Bool(true));
            let opened_at: EpochSeconds = super::attr::get_n(pointer, "opened_at").unwrap_or(0);
            // Opened clearly after the run's end: a re-run's, not this end's.
            if ended_at.is_some_and(|ended| opened_at > ended + RUN_END_MARGIN_SECONDS) {
                continue;
            }
            // Opened this close to the end, by two clocks: the ended attempt's or a re-run's?
            // GitHub is asked (by the sweep), not the clocks.
            let unclear = ended_at.is_some_and(|ended| opened_at > ended - RUN_END_MARGIN_SECONDS);
            let id = ApprovalId::parse(get_s(pointer, "approval_id")?)
                .map_err(|_| StoreError::corrupt("approval_id"))?;
            open.push((round, id, answered, unclear));
        }
        let keys = open
            .iter()
            .map(|(_, id, _, _)| approval_pk(tenant, id))
            .collect();
        let approvals = self.get_many(&self.tables.approvals, keys).await?;
        let mut found = Vec::new();
        for (round, id, answered, unclear) in open {
            if let Some(item) = approvals.get(&approval_pk(tenant, &id)) {
                found.push(OpenRound {
                    round,
                    approval: approval_from_item(item)?,
                    answered,
                    unclear,
                });
            }
        }
        Ok(found)
    }

    /// Closes a round as read (`answered`: whether its answer had begun), on the condition that
    /// it is still so.
    pub(super) fn close_round(
        &self,
        round: &RoundKey,
        approval: &ApprovalId,
        answered: bool,
    ) -> Result<Update, StoreError> {
        // Answered (the next event opens a new round) and closed (no answer of it is sent).
        let update = "SET #answered = :true, #closed = :true";
        let condition = "#approval_id = :approval_id AND #answered = :answered \
                         AND attribute_not_exists(#closed)";
        Update::builder()
            .table_name(&self.tables.webhook_inbox)
            .key("pk", s(round.pk()))
            .update_expression(update)
            .condition_expression(condition)
            .set_expression_attribute_names(Some(names(&[update, condition])))
            .set_expression_attribute_values(Some(values(&[
                (":approval_id", s(approval.as_str())),
                (":answered", AttributeValue::Bool(answered)),
                (":true", AttributeValue::Bool(true)),
            ])))
            .build()
            .map_err(|e| StoreError::dynamo("TransactWriteItems", e))
    }

    /// The run's end cancels a pending approval: as a person's cancel, with the cancel's own
    /// condition (pending, not past its expiry), so a decision racing it and the cancel cannot
    /// both apply.
    pub(super) fn run_end_cancel(
        &self,
        tenant: &TenantId,
        id: &ApprovalId,
        cancellation: &Cancellation,
        now: EpochSeconds,
    ) -> Result<Update, StoreError> {
        let mut vals = values(&[
            (":pending", s(Status::Pending.as_str())),
            (":cancelled", s(Status::Cancelled.as_str())),
            (":cancellation", cancellation_to_attr(cancellation)),
            (":now", epoch(now)),
        ]);
        let update = UpdateExpr::default()
            .set("#status = :cancelled")
            .set("#cancellation = :cancellation");
        let update = Indexed::after(
            id,
            Status::Cancelled,
            true,
            ExecutionStatus::NotStarted,
            now,
        )
        .apply(update, &mut vals, self.retention)
        .build();
        let condition = format!("{ONLY_IF_EXISTS} AND {ONLY_IF_CANCELLABLE}");
        Update::builder()
            .table_name(&self.tables.approvals)
            .key("pk", approval_key(tenant, id))
            .update_expression(&update)
            .condition_expression(&condition)
            .set_expression_attribute_names(Some(names(&[&update, &condition])))
            .set_expression_attribute_values(Some(vals))
            .build()
            .map_err(|e| StoreError::dynamo("TransactWriteItems", e))
    }
}

/// The approvals table's key as text.
fn approval_pk(tenant: &TenantId, id: &ApprovalId) -> String {
    format!("{tenant}#{id}")
}
