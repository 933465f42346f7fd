//! An execution's ledger, kept on its approval (v5): the `lg_*` attributes of the approval's
//! `execution`, beside what the API shows of it. An attempt's begin and end are then each one
//! conditional write of the approval — what was a two-item transaction (the ledger item and the
//! approval) — with the same conditions: the attempt's token, its lease, its generation.
//!
//! An execution begun before v5 keeps its ledger item (`{id}#execute`) until it ends, through
//! its retries and an operator's: its approval has no `lg_status` but an attempt counted (or an
//! execution past `queued`), and every write here then says so (`None`), for the ledger item's
//! own path to take it. (An attempt waiting for its retry reads `queued`: the count tells.)

use std::collections::HashMap;

use aws_sdk_dynamodb::types::{AttributeValue, ReturnValuesOnConditionCheckFailure, Update};

use super::end::{AttemptEnd, execution_end_parts};
use super::{Begin, LedgerEntry, LedgerKey, ONLY_IF_CURRENT_GENERATION, values};
use crate::domain::{EpochSeconds, ExecutionStatus, LedgerStatus, Status};
use crate::store::attr::{Item, epoch, get_n, n, opt_s, s};
use crate::store::client::{Store, Transaction, condition_failed_item};
use crate::store::error::StoreError;
use crate::store::expr::UpdateExpr;
use crate::store::github::RoundKey;
use crate::store::indexes::RETAIN_UNTIL;
use crate::store::keys::approval_key;
use crate::store::size::kept;

/// only_if_startable, on the approval: nothing ever began (no ledger on it and no attempt
/// counted: an execution begun before v5 has one, whether it waits for a retry — `queued` — or
/// an operator resumed it), or its last attempt asked for a retry, or an operator resumed a
/// failed or unreconciled one (a newer generation).
const ONLY_IF_STARTABLE: &str = "(attribute_not_exists(#execution.#lg_status) AND #execution.#status = :queued \
     AND #execution.#attempts = :zero) \
     OR (#execution.#lg_status = :retry_wait AND #execution.#lg_generation = :generation) \
     OR (#execution.#lg_status IN (:failed, :needs_reconciliation) AND #execution.#lg_generation < :generation)";

/// ... or the worker that held it stopped (its lease ended), for a target that dedupes.
const OR_ABANDONED: &str = " OR (#execution.#lg_status = :in_progress \
     AND #execution.#lg_lease_until <= :now_ms AND #execution.#lg_generation = :generation)";

/// only_if_owner: the attempt is still the one `:token` began, and not ended yet.
const ONLY_IF_OWNER: &str = "#execution.#lg_token = :token \
     AND #execution.#lg_status IN (:in_progress, :retry_wait, :unknown)";

/// only_if_not_begun: no attempt of this generation began.
const ONLY_IF_NOT_BEGUN: &str = "(attribute_not_exists(#execution.#lg_status) AND #execution.#status = :queued \
     AND #execution.#attempts = :zero) \
     OR (#execution.#lg_status IN (:failed, :needs_reconciliation) AND #execution.#lg_generation < :generation)";

/// The lease of a guard item for executors from before v5: the year 2286, in milliseconds, so
/// that no such executor takes it over as abandoned.
const V4_GUARD_LEASE_UNTIL_MS: i64 = 9_999_999_999_999;

/// The ledger an approval's execution carries, if it carries one (v5).
pub(super) fn entry_of(approval: &Item) -> Result<Option<LedgerEntry>, StoreError> {
    let Some(AttributeValue::M(execution)) = approval.get("execution") else {
        return Ok(None);
    };
    let Some(status) = opt_s(execution, "lg_status") else {
        return Ok(None);
    };
    Ok(Some(LedgerEntry {
        status: LedgerStatus::parse(&status).ok_or(StoreError::corrupt("lg_status"))?,
        generation: get_n(execution, "lg_generation")?,
        token: opt_s(execution, "lg_token").unwrap_or_default(),
        lease_until_ms: get_n(execution, "lg_lease_until").unwrap_or(0),
        attempts: get_n(execution, "lg_attempts")?,
        unsent: get_n(execution, "lg_unsent").unwrap_or(0),
        // The execution's own error is the ledger's: both are written by the same ends.
        last_error: opt_s(execution, "last_error"),
        call_ended_ms: get_n(execution, "lg_call_ended_at").ok(),
        updated_at: get_n(execution, "lg_updated_at").unwrap_or(0),
        notified: Vec::new(),
        not_notified: Vec::new(),
    }))
}

/// Whether an approval as a refused write found it is one whose execution began before v5 (no
/// ledger on it, an attempt counted or its execution past `queued`, the generation the job's):
/// its ledger item decides.
fn begun_before_v5(approval: &Item, key: &LedgerKey) -> Result<bool, StoreError> {
    let Some(AttributeValue::M(execution)) = approval.get("execution") else {
        return Ok(false);
    };
    let approved = opt_s(approval, "status").as_deref() == Some(Status::Approved.as_str());
    let generation: u32 = get_n(execution, "generation").unwrap_or(0);
    let queued = opt_s(execution, "status").as_deref() == Some(ExecutionStatus::Queued.as_str());
    let attempts: u32 = get_n(execution, "attempts").unwrap_or(0);
    Ok(approved
        && generation == key.generation
        && (!queued || attempts > 0)
        && entry_of(approval)?.is_none())
}

/// Whether the approval is the job's: approved, its execution of the job's generation.
fn current(approval: &Item, key: &LedgerKey) -> bool {
    let generation = match approval.get("execution") {
        Some(AttributeValue::M(execution)) => get_n::<u32>(execution, "generation").ok(),
        _ => None,
    };
    opt_s(approval, "status").as_deref() == Some(Status::Approved.as_str())
        && generation == Some(key.generation)
}

fn ledger_values() -> HashMap<String, AttributeValue> {
    values(&[
        (":queued", s(ExecutionStatus::Queued.as_str())),
        (":in_progress", s(LedgerStatus::InProgress.as_str())),
        (":retry_wait", s(LedgerStatus::RetryWait.as_str())),
        (":unknown", s(LedgerStatus::Unknown.as_str())),
        (":failed", s(LedgerStatus::Failed.as_str())),
        (
            ":needs_reconciliation",
            s(LedgerStatus::NeedsReconciliation.as_str()),
        ),
    ])
}

/// Keeps only the values `update` and `condition` use (DynamoDB refuses the others).
fn used(
    mut vals: HashMap<String, AttributeValue>,
    update: &Update,
) -> HashMap<String, AttributeValue> {
    let texts = [
        update.update_expression(),
        update.condition_expression().unwrap_or_default(),
    ];
    vals.retain(|name, _| {
        texts
            .iter()
            .any(|text| crate::store::expr::uses(text, name))
    });
    vals
}

impl Store {
    /// The approval's update of `update`, while `condition` holds (and the approval is the
    /// job's), with the index attributes of `(execution, due_at)`; a refusal returns the
    /// approval as it was.
    fn execution_write(
        &self,
        key: &LedgerKey,
        update: UpdateExpr,
        due: (ExecutionStatus, EpochSeconds),
        vals: HashMap<String, AttributeValue>,
        condition: &str,
    ) -> Result<Update, StoreError> {
        let update = self
            .execution_update(key, update, due, vals, condition)?
            .ok_or(StoreError::Corrupt("an execution's ledger for another job"))?;
        let vals = used(
            update
                .expression_attribute_values()
                .cloned()
                .unwrap_or_default(),
            &update,
        );
        Update::builder()
            .table_name(update.table_name())
            .key("pk", approval_key(&key.tenant, &key.approval_id))
            .update_expression(update.update_expression())
            .set_condition_expression(update.condition_expression().map(str::to_owned))
            .set_expression_attribute_names(update.expression_attribute_names().cloned())
            .set_expression_attribute_values(Some(vals))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(|e| StoreError::dynamo("UpdateItem", e))
    }

    /// Begins an execution's attempt on its approval: one conditional update (a transaction
    /// with the round's fence, for a GitHub answer). `None`: the execution began before v5, its
    /// ledger item decides.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn begin_execution(
        &self,
        key: &LedgerKey,
        token: &str,
        now: EpochSeconds,
        now_ms: i64,
        lease_until_ms: i64,
        takeover: bool,
        github: Option<&RoundKey>,
    ) -> Result<Option<Begin>, StoreError> {
        let mut condition = format!("{ONLY_IF_CURRENT_GENERATION} AND ({ONLY_IF_STARTABLE}");
        if takeover {
            condition.push_str(OR_ABANDONED);
        }
        condition.push(')');
        let update = UpdateExpr::default()
            .set("#execution.#status = :running")
            .set("#execution.#attempts = #execution.#attempts + :one")
            .set("#execution.#updated_at = :now")
            .set("#execution.#lg_status = :in_progress")
            .set("#execution.#lg_attempts = if_not_exists(#execution.#lg_attempts, :zero) + :one")
            .set("#execution.#lg_generation = :generation")
            .set("#execution.#lg_token = :token")
            .set("#execution.#lg_lease_until = :lease_until")
            .set("#execution.#lg_updated_at = :now")
            .remove("#execution.#lg_ended_by")
            .remove("#execution.#lg_call_ended_at");
        let mut vals = ledger_values();
        vals.extend(values(&[
            (":running", s(ExecutionStatus::Running.as_str())),
            (":one", n(1)),
            (":zero", n(0)),
            (":now", epoch(now)),
            (":token", s(token)),
            (":lease_until", n(lease_until_ms)),
            (":now_ms", n(now_ms)),
        ]));
        let write = self.execution_write(
            key,
            update,
            (ExecutionStatus::Running, now),
            vals,
            &condition,
        )?;
        let fence = github
            .map(|round| self.github_answer_fence(round, &key.approval_id))
            .transpose()?;
        let fenced = fence.is_some();
        let guard = self
            .guard_v4_executors
            .then(|| self.v4_executor_guard(key, token, now))
            .transpose()?;
        // The executor reads nothing back from an execution's begin (a notification's ledger
        // item is what it reads): no `ALL_NEW` of the whole approval.
        let (begun, left): (Transaction, Option<Item>) = if fence.is_none() && guard.is_none() {
            (self.update_alone(&write).await?, None)
        } else {
            // The approval first (its refusal is reason 0), the fence last (its refusal alone
            // means a newer round).
            let mut items = vec![
                aws_sdk_dynamodb::types::TransactWriteItem::builder()
                    .update(write)
                    .build(),
            ];
            items.extend(guard);
            items.extend(fence);
            let begun = self.transact(items, &ulid::Ulid::new().to_string()).await?;
            (begun, None)
        };
        let reasons = match begun {
            Transaction::Committed => {
                let left = left.as_ref().map(entry_of).transpose()?.flatten();
                return Ok(Some(Begin::Started(left)));
            }
            Transaction::Cancelled(reasons) => reasons,
        };
        let Some(old) = condition_failed_item(&reasons, 0) else {
            // The fence refused alone: a newer round is the run's.
            if fenced && reasons.last().and_then(|r| r.code()) == Some("ConditionalCheckFailed") {
                return Ok(Some(Begin::Superseded));
            }
            return Ok(Some(Begin::Refused(None)));
        };
        if begun_before_v5(old, key)? {
            return Ok(None);
        }
        if !current(old, key) {
            // The approval moved on to a newer execution generation: this job is stale.
            return Ok(Some(Begin::Refused(None)));
        }
        Ok(Some(match entry_of(old)? {
            // Our own begin: it applied, its answer was lost, and the SDK's retry met it.
            Some(entry) if entry.token == token && entry.status == LedgerStatus::InProgress => {
                Begin::Started(Some(entry))
            }
            entry => Begin::Refused(entry),
        }))
    }

    /// The ledger item an executor from before v5 checks before it begins (`{id}#execute`), as
    /// one of its attempts in progress under a lease that never ends: such an executor's begin
    /// (`attribute_not_exists`, a retry's wait, an older generation's end, or — for targets
    /// that dedupe — a lease past its end) finds none of them. Written with the approval's
    /// begin, whose condition alone decides (an execution that executor began has moved its
    /// approval, so this transaction is refused whole); the ends on the approval leave it be.
    fn v4_executor_guard(
        &self,
        key: &LedgerKey,
        token: &str,
        now: EpochSeconds,
    ) -> Result<aws_sdk_dynamodb::types::TransactWriteItem, StoreError> {
        let mut put = aws_sdk_dynamodb::types::Put::builder()
            .table_name(&self.tables.execution_ledger)
            .item("pk", s(key.pk()))
            .item("status", s(LedgerStatus::InProgress.as_str()))
            .item("generation", n(key.generation))
            .item("attempts", n(1))
            .item("token", s(token))
            .item("lease_until", n(V4_GUARD_LEASE_UNTIL_MS))
            .item("kind", s(key.kind()))
            .item("approval_id", s(key.approval_id.as_str()))
            .item("tenant", s(key.tenant.as_str()))
            .item("updated_at", epoch(now))
            .item("guards_v5_execution", AttributeValue::Bool(true));
        if let Some(until) = self.retention.after_job_write(now, key.expires_at) {
            put = put.item(RETAIN_UNTIL, epoch(until));
        }
        let put = put
            .build()
            .map_err(|e| StoreError::dynamo("TransactWriteItems", e))?;
        Ok(aws_sdk_dynamodb::types::TransactWriteItem::builder()
            .put(put)
            .build())
    }

    /// Ends the execution's attempt `owner` on its approval: one conditional update of the
    /// ledger and what the API shows (and what is due). `None`: the execution began before v5,
    /// its ledger item decides.
    pub(super) async fn end_execution(
        &self,
        key: &LedgerKey,
        owner: &str,
        end: &AttemptEnd<'_>,
        now: EpochSeconds,
        unchanged_since: Option<EpochSeconds>,
    ) -> Result<Option<bool>, StoreError> {
        let completion = &kept(end.completion);
        let status = completion.status();
        let mut check = end.check;
        loop {
            let (update, mut vals, mut condition, due) =
                execution_end_parts(completion, check, now, end.due_at, unchanged_since);
            let mut update = update
                .set("#execution.#lg_status = :ledger_status")
                .set("#execution.#lg_updated_at = :now")
                .set("#execution.#lg_ended_by = :ended_by")
                .remove("#execution.#lg_lease_until");
            if let Some(ms) = end.call_ended_ms {
                update = update.set("#execution.#lg_call_ended_at = :call_ended_at");
                vals.insert(":call_ended_at".to_owned(), n(ms));
            }
            if end.completion.never_sent() {
                update = update.set(
                    "#execution.#lg_unsent = if_not_exists(#execution.#lg_unsent, :no_unsent) + :one_unsent",
                );
                vals.insert(":no_unsent".to_owned(), n(0));
                vals.insert(":one_unsent".to_owned(), n(1));
            }
            vals.extend(ledger_values());
            vals.extend(values(&[
                (":ledger_status", s(status.as_str())),
                (":ended_by", s(end.ended_by)),
                (":token", s(owner)),
            ]));
            condition.push_str(&format!(" AND {ONLY_IF_OWNER}"));
            if unchanged_since.is_some() {
                condition.push_str(" AND #execution.#lg_updated_at <= :cutoff");
            }
            if let Some(found) = end.found {
                condition.push_str(" AND #execution.#lg_status = :found");
                vals.insert(":found".to_owned(), s(found.as_str()));
            }
            let write = self.execution_write(key, update, due, vals, &condition)?;
            let reasons = match self.update_alone(&write).await? {
                Transaction::Committed => return Ok(Some(true)),
                Transaction::Cancelled(reasons) => reasons,
            };
            let Some(old) = condition_failed_item(&reasons, 0) else {
                return Ok(Some(false));
            };
            if begun_before_v5(old, key)? {
                return Ok(None);
            }
            let entry = entry_of(old)?;
            let owned = entry.as_ref().is_some_and(|e| {
                e.token == owner
                    && matches!(
                        e.status,
                        LedgerStatus::InProgress | LedgerStatus::RetryWait | LedgerStatus::Unknown
                    )
            });
            if owned && current(old, key) && check.take().is_some() {
                // Only the status query did not fit (the execution holds as many as it keeps):
                // the end is written without it; the query is in the log.
                tracing::warn!(
                    ledger_item = key.pk(),
                    "status query not kept on the execution (it holds the most it keeps)"
                );
                continue;
            }
            // Our own end: it applied, its answer was lost, the SDK's retry met it.
            let ended_by = match old.get("execution") {
                Some(AttributeValue::M(execution)) => opt_s(execution, "lg_ended_by"),
                _ => None,
            };
            return Ok(Some(entry.is_some_and(|e| {
                e.token == owner && e.status == status && ended_by.as_deref() == Some(end.ended_by)
            })));
        }
    }

    /// Records, on the approval, that the execution never began within its attempts. `None`:
    /// the execution began before v5, its ledger item decides.
    pub(super) async fn fail_unbegun_execution(
        &self,
        key: &LedgerKey,
        reason: &str,
        now: EpochSeconds,
    ) -> Result<Option<bool>, StoreError> {
        let update = UpdateExpr::default()
            .set("#execution.#status = :exec_status")
            .set("#execution.#last_error = :error")
            .set("#execution.#updated_at = :now")
            .set("#execution.#lg_status = :failed")
            .set("#execution.#lg_attempts = :zero")
            .set("#execution.#lg_generation = :generation")
            .set("#execution.#lg_updated_at = :now")
            .remove("#execution.#lg_token")
            .remove("#execution.#lg_lease_until");
        let mut vals = ledger_values();
        vals.extend(values(&[
            (":exec_status", s(ExecutionStatus::Failed.as_str())),
            (":error", s(reason)),
            (":now", epoch(now)),
            (":zero", n(0)),
        ]));
        let condition = format!("{ONLY_IF_CURRENT_GENERATION} AND ({ONLY_IF_NOT_BEGUN})");
        let write = self.execution_write(
            key,
            update,
            (ExecutionStatus::Failed, now),
            vals,
            &condition,
        )?;
        match self.update_alone(&write).await? {
            Transaction::Committed => Ok(Some(true)),
            Transaction::Cancelled(reasons) => match condition_failed_item(&reasons, 0) {
                Some(old) if begun_before_v5(old, key)? => Ok(None),
                _ => Ok(Some(false)),
            },
        }
    }

    /// The execution's ledger as its approval carries it: `None` when it carries none (an
    /// execution begun before v5 keeps its ledger item; one never begun has neither).
    pub(super) async fn execution_entry(
        &self,
        key: &LedgerKey,
    ) -> Result<Option<LedgerEntry>, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.tables.approvals)
            .key("pk", approval_key(&key.tenant, &key.approval_id))
            .projection_expression("#execution")
            .expression_attribute_names("#execution", "execution")
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| StoreError::from_sdk("GetItem", e))?;
        output.item().map(entry_of).transpose().map(Option::flatten)
    }
}
