//! The execution ledger: one item per job, written before the downstream call (begin) and after
//! it (complete), each in one transaction with the approval's `execution` for execute jobs.
//! A worker owns an attempt through a random token and a lease; every later write is
//! conditioned on still owning it.
//!
//! The ledger knows a job by its [`LedgerKey`]; what ends an attempt and which trail event a
//! transition makes come from the jobs layer, and are written here in the transaction that
//! records the transition.

mod end;
mod execution;
mod slack;

use std::collections::HashMap;

use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{
    AttributeValue, ReturnValuesOnConditionCheckFailure, TransactWriteItem, Update,
};

use super::attr::{Item, epoch, get_n, get_s, n, opt_s, s};
use super::client::{Store, Transaction, condition_failed_item};
use super::conditions::ONLY_IF_EXISTS;
use super::error::{StoreError, is_transient};
use super::expr::{UpdateExpr, names, with_set};
use super::github::RoundKey;
use super::indexes::Indexed;
use super::keys::approval_key;
use super::size::{MAX_LATE_REPORTS, MAX_REPORT_CHARS, cut};
use crate::domain::trail::TrailEvent;
use crate::domain::{
    ApprovalId, Approver, Completion, EpochSeconds, ExecutionStatus, LedgerStatus, Status, TenantId,
};

pub use end::AttemptEnd;
pub use slack::{SlackClaim, SlackRelease};

/// A job as the ledger knows it: the approval it belongs to, which of the approval's jobs it is
/// (the ledger item that guards it), and its execution generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerKey {
    pub tenant: TenantId,
    pub approval_id: ApprovalId,
    pub guards: Guarded,
    /// 0 for anything but an execution; n for an execution's nth operator retry.
    pub generation: u32,
    /// The approval's expiry, which bounds the job's items' retention (`None`: a job queued
    /// before jobs carried it).
    pub expires_at: Option<EpochSeconds>,
}

/// What a ledger item guards: an approval's notifications, one execution per approval across
/// its operator retries (each a generation of the same item), its Slack message, a GitHub
/// rejection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Guarded {
    /// Every approver's notification: one item, which keeps the approvers done (`notified`).
    Notifications,
    /// One approver's notification, as jobs queued before v5 kept it.
    Notification(Approver),
    /// A reminder's or an escalation step's notifications (`reminder:2`): one item each.
    LaterNotifications(String),
    Execution,
    /// The event id it delivers.
    Callback(String),
    /// The approval's Slack message, across every state it shows.
    SlackMessage,
    /// The answer to GitHub of a deployment that was not approved.
    GithubAnswer,
    /// The answer to the AWS workflow waiting on the approval (its `resume` moves with it).
    Resume,
}

impl LedgerKey {
    /// The ledger item's key.
    pub fn pk(&self) -> String {
        let id = &self.approval_id;
        match &self.guards {
            Guarded::Notifications => format!("{id}#notify"),
            Guarded::Notification(approver) => format!("{id}#notify#{}", approver.as_str()),
            Guarded::LaterNotifications(tag) => format!("{id}#{tag}"),
            Guarded::Execution => format!("{id}#execute"),
            Guarded::Callback(event_id) => format!("{id}#callback#{event_id}"),
            Guarded::SlackMessage => format!("{id}#slack"),
            Guarded::GithubAnswer => format!("{id}#github"),
            Guarded::Resume => format!("{id}#resume"),
        }
    }

    /// The job's kind, as the ledger item records it.
    pub fn kind(&self) -> &'static str {
        match self.guards {
            Guarded::Notifications | Guarded::Notification(_) | Guarded::LaterNotifications(_) => {
                "notify"
            }
            Guarded::Execution => "execute",
            Guarded::Callback(_) => "callback",
            Guarded::SlackMessage => "slack",
            Guarded::GithubAnswer => "github",
            Guarded::Resume => "resume",
        }
    }

    /// Whether the job moves the approval's `execution` along with its ledger item.
    fn moves_execution(&self) -> bool {
        self.guards == Guarded::Execution
    }
}

/// A ledger item as it was when a begin was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerEntry {
    pub status: LedgerStatus,
    pub generation: u32,
    pub token: String,
    /// When the attempt's lease ends, in epoch milliseconds.
    pub lease_until_ms: i64,
    pub attempts: u32,
    /// Of the attempts, those that ended before their request could reach the target (`not
    /// sent: …`): a GitHub answer's 422 after only such attempts is this attempt's own.
    pub unsent: u32,
    pub last_error: Option<String>,
    /// When the call whose outcome is unknown ended (epoch ms), for an attempt left `unknown`.
    pub call_ended_ms: Option<i64>,
    /// The last write's time (epoch seconds).
    pub updated_at: EpochSeconds,
    /// The approvers whose notification is done (sent, or failed for good): a notify job's
    /// later attempts call only the others.
    pub notified: Vec<String>,
    /// Of those, the ones whose notification failed for good: the job ends failed (its message
    /// on to the DLQ, whose alarm someone watches) even when the last to be done was sent.
    pub not_notified: Vec<String>,
}

impl LedgerEntry {
    fn from_item(item: &Item) -> Result<Self, StoreError> {
        Ok(Self {
            status: LedgerStatus::parse(get_s(item, "status")?)
                .ok_or(StoreError::corrupt("ledger status"))?,
            generation: get_n(item, "generation")?,
            unsent: get_n(item, "unsent").unwrap_or(0),
            token: opt_s(item, "token").unwrap_or_default(),
            lease_until_ms: get_n(item, "lease_until").unwrap_or(0),
            attempts: get_n(item, "attempts")?,
            last_error: opt_s(item, "last_error"),
            call_ended_ms: get_n(item, "call_ended_at").ok(),
            updated_at: get_n(item, "updated_at").unwrap_or(0),
            notified: strings(item, "notified"),
            not_notified: strings(item, "not_notified"),
        })
    }
}

/// A string set attribute's members (none when absent).
fn strings(item: &Item, name: &str) -> Vec<String> {
    match item.get(name) {
        Some(AttributeValue::Ss(members)) => members.clone(),
        _ => Vec::new(),
    }
}

/// How a begin ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Begin {
    /// This worker owns a new attempt: the ledger as the begin left it, when the store said
    /// (a begin that wrote the ledger alone).
    Started(Option<LedgerEntry>),
    /// Refused: the ledger as it was. `None` when the approval refused instead (the job is of
    /// an older execution generation).
    Refused(Option<LedgerEntry>),
    /// A GitHub answer's round is no longer its own (a newer round opened): nothing may be
    /// sent, nothing began.
    Superseded,
}

/// only_if_startable: nobody has begun the job, or its last attempt asked for a retry, or an
/// operator resumed a failed or unreconciled execution (a newer generation).
const ONLY_IF_STARTABLE: &str = "attribute_not_exists(#pk) \
     OR (#status = :retry_wait AND #generation = :generation) \
     OR (#status IN (:failed, :needs_reconciliation) AND #generation < :generation)";

/// ... or the worker that held it stopped (its lease ended) and the target tolerates a repeat
/// with the same `Idempotency-Key`.
const ONLY_IF_STARTABLE_OR_ABANDONED: &str = "attribute_not_exists(#pk) \
     OR (#status = :retry_wait AND #generation = :generation) \
     OR (#status IN (:failed, :needs_reconciliation) AND #generation < :generation) \
     OR (#status = :in_progress AND #lease_until <= :now_ms AND #generation = :generation)";

const BEGIN_ATTEMPT: &str = "SET #status = :in_progress, #attempts = if_not_exists(#attempts, :zero) + :one, \
     #generation = :generation, #token = :token, #lease_until = :lease_until, #kind = :kind, \
     #approval_id = :approval_id, #tenant = :tenant, #updated_at = :now \
     REMOVE #ended_by, #call_ended_at";

/// only_if_not_begun: no attempt of this job's generation ever began (the item is absent, or
/// still an older generation's end). A begin that wins the race first makes this refuse.
const ONLY_IF_NOT_BEGUN: &str = "attribute_not_exists(#pk) \
     OR (#status IN (:failed, :needs_reconciliation) AND #generation < :generation)";

const FAIL_UNBEGUN: &str = "SET #status = :failed, #attempts = :zero, #generation = :generation, \
     #kind = :kind, #approval_id = :approval_id, #tenant = :tenant, #last_error = :error, \
     #updated_at = :now REMOVE #token, #lease_until";

/// only_if_current_generation: a job of an execution an operator has since resumed changes
/// nothing.
const ONLY_IF_CURRENT_GENERATION: &str =
    "#status = :approved AND #execution.#generation = :generation";

/// One item's conditional update, for a transaction: `(table, key)`, `(update, condition)`.
fn conditional_update(
    (table, pk): (&str, AttributeValue),
    (update, condition): (&str, &str),
    vals: HashMap<String, AttributeValue>,
    on_refusal: Option<ReturnValuesOnConditionCheckFailure>,
) -> Result<Update, StoreError> {
    Update::builder()
        .table_name(table)
        .key("pk", pk)
        .update_expression(update)
        .condition_expression(condition)
        .set_expression_attribute_names(Some(names(&[update, condition])))
        .set_expression_attribute_values(Some(vals))
        .set_return_values_on_condition_check_failure(on_refusal)
        .build()
        .map_err(|e| StoreError::dynamo("TransactWriteItems", e))
}

fn values(pairs: &[(&str, AttributeValue)]) -> HashMap<String, AttributeValue> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

impl Store {
    /// `update` of a job's ledger item written at `now`, with the item's TTL (`retain_until`,
    /// see `domain::Retention`): set by the writes that begin an attempt or fail a job
    /// unbegun, so each generation of a job refreshes it.
    pub(super) fn job_retained(
        &self,
        update: &str,
        vals: &mut HashMap<String, AttributeValue>,
        (now, expires_at): (EpochSeconds, Option<EpochSeconds>),
    ) -> String {
        match self.retention.after_job_write(now, expires_at) {
            Some(until) => {
                vals.insert(":retain_until".to_owned(), epoch(until));
                with_set(update, "#retain_until = :retain_until")
            }
            None => update.to_owned(),
        }
    }

    /// The ledger item's update, for a transaction; a refused condition returns the item as it
    /// was.
    fn ledger_update(
        &self,
        key: &LedgerKey,
        update: &str,
        condition: &str,
        vals: HashMap<String, AttributeValue>,
    ) -> Result<Update, StoreError> {
        conditional_update(
            (&self.tables.execution_ledger, s(key.pk())),
            (update, condition),
            vals,
            Some(ReturnValuesOnConditionCheckFailure::AllOld),
        )
    }

    /// The approval's `execution`, updated in the same transaction as the ledger (execute jobs):
    /// `update` with the index attributes of the execution's new status (`execution`, due from
    /// `due_at`), while `condition` holds. `None` for the jobs that move no execution.
    fn execution_update(
        &self,
        key: &LedgerKey,
        update: UpdateExpr,
        (execution, due_at): (ExecutionStatus, EpochSeconds),
        mut vals: HashMap<String, AttributeValue>,
        condition: &str,
    ) -> Result<Option<Update>, StoreError> {
        if !key.moves_execution() {
            return Ok(None);
        }
        let after = Indexed::after(&key.approval_id, Status::Approved, false, execution, due_at);
        let update = after.apply(update, &mut vals, self.retention).build();
        vals.insert(":approved".to_owned(), s(Status::Approved.as_str()));
        vals.insert(":generation".to_owned(), n(key.generation));
        self.approval_update(key, &update, condition, vals)
            .map(Some)
    }

    /// The approval's side of a job's transaction: `update` while `condition` holds.
    fn approval_update(
        &self,
        key: &LedgerKey,
        update: &str,
        condition: &str,
        vals: HashMap<String, AttributeValue>,
    ) -> Result<Update, StoreError> {
        conditional_update(
            (
                &self.tables.approvals,
                approval_key(&key.tenant, &key.approval_id),
            ),
            (update, condition),
            vals,
            None,
        )
    }

    /// The ledger's write, the approval's `execution` (execute jobs) and the event the
    /// transition makes (a notification sent, a callback delivered or given up), committed
    /// together: the event exists exactly when the transition does.
    async fn ledger_transaction(
        &self,
        key: &LedgerKey,
        ledger: Update,
        execution: Option<Update>,
        events: &[TrailEvent],
    ) -> Result<Transaction, StoreError> {
        self.ledger_transaction_fenced(key, ledger, execution, events, None)
            .await
    }

    /// [`Store::ledger_transaction`], with `fence` (a GitHub answer's round) last.
    async fn ledger_transaction_fenced(
        &self,
        key: &LedgerKey,
        ledger: Update,
        execution: Option<Update>,
        events: &[TrailEvent],
        fence: Option<TransactWriteItem>,
    ) -> Result<Transaction, StoreError> {
        let mut items = vec![TransactWriteItem::builder().update(ledger).build()];
        if let Some(execution) = execution {
            items.push(TransactWriteItem::builder().update(execution).build());
        }
        for put in self.event_puts(events, key.expires_at)? {
            items.push(TransactWriteItem::builder().put(put).build());
        }
        items.extend(fence);
        self.transact(items, &ulid::Ulid::new().to_string()).await
    }

    /// Begins an attempt before any downstream call: one conditional write (with the approval's
    /// `execution` moving to running, for execute jobs). `takeover` allows taking over an
    /// attempt whose worker stopped; only targets that dedupe by `Idempotency-Key` allow it.
    /// `github`: the round of a GitHub answer, fenced in the same transaction (see
    /// `store/github.rs`).
    #[allow(clippy::too_many_arguments)]
    pub async fn begin_job(
        &self,
        key: &LedgerKey,
        token: &str,
        now: EpochSeconds,
        now_ms: i64,
        lease_until_ms: i64,
        takeover: bool,
        github: Option<&RoundKey>,
    ) -> Result<Begin, StoreError> {
        // An execution's ledger is on its approval; one begun before v5 keeps its own item.
        if key.moves_execution()
            && let Some(begun) = self
                .begin_execution(key, token, now, now_ms, lease_until_ms, takeover, github)
                .await?
        {
            return Ok(begun);
        }
        let condition = if takeover {
            ONLY_IF_STARTABLE_OR_ABANDONED
        } else {
            ONLY_IF_STARTABLE
        };
        let mut vals = values(&[
            (":in_progress", s(LedgerStatus::InProgress.as_str())),
            (":retry_wait", s(LedgerStatus::RetryWait.as_str())),
            (":failed", s(LedgerStatus::Failed.as_str())),
            (
                ":needs_reconciliation",
                s(LedgerStatus::NeedsReconciliation.as_str()),
            ),
            (":generation", n(key.generation)),
            (":zero", n(0)),
            (":one", n(1)),
            (":token", s(token)),
            (":lease_until", n(lease_until_ms)),
            (":kind", s(key.kind())),
            (":approval_id", s(key.approval_id.as_str())),
            (":tenant", s(key.tenant.as_str())),
            (":now", epoch(now)),
        ]);
        if takeover {
            vals.insert(":now_ms".to_owned(), n(now_ms));
        }
        let begin = self.job_retained(BEGIN_ATTEMPT, &mut vals, (now, key.expires_at));
        let ledger = self.ledger_update(key, &begin, condition, vals)?;
        let show_running = UpdateExpr::default()
            .set("#execution.#status = :running")
            .set("#execution.#attempts = #execution.#attempts + :one")
            .set("#execution.#updated_at = :now");
        let execution = self.execution_update(
            key,
            show_running,
            (ExecutionStatus::Running, now),
            values(&[
                (":running", s(ExecutionStatus::Running.as_str())),
                (":one", n(1)),
                (":now", epoch(now)),
            ]),
            ONLY_IF_CURRENT_GENERATION,
        )?;
        let fence = github
            .map(|round| self.github_answer_fence(round, &key.approval_id))
            .transpose()?;
        let fenced = fence.is_some();
        // The ledger alone: one update, which says what it left.
        let (begun, left) = if execution.is_none() && fence.is_none() {
            self.update_returning(&ledger).await?
        } else {
            let begun = self
                .ledger_transaction_fenced(key, ledger, execution, &[], fence)
                .await?;
            (begun, None)
        };
        let left = left.as_ref().map(LedgerEntry::from_item).transpose()?;
        match begun {
            Transaction::Committed => Ok(Begin::Started(left)),
            // The ledger's own refusal comes first (a job already done is done, fence or not).
            Transaction::Cancelled(reasons)
                if fenced
                    && condition_failed_item(&reasons, 0).is_none()
                    && reasons.last().and_then(|r| r.code()) == Some("ConditionalCheckFailed") =>
            {
                Ok(Begin::Superseded)
            }
            Transaction::Cancelled(reasons) => match condition_failed_item(&reasons, 0) {
                // Our own begin: it applied, its answer was lost, and the SDK's retry met it.
                Some(old)
                    if opt_s(old, "token").as_deref() == Some(token)
                        && opt_s(old, "status").as_deref()
                            == Some(LedgerStatus::InProgress.as_str()) =>
                {
                    Ok(Begin::Started(Some(LedgerEntry::from_item(old)?)))
                }
                Some(old) => Ok(Begin::Refused(Some(LedgerEntry::from_item(old)?))),
                None => Ok(Begin::Refused(None)),
            },
        }
    }

    /// Records that the job never began within its attempts: `failed`, so that an operator's
    /// retry resumes it (nothing was sent), with the events that makes (`events`: the
    /// notifications' or a GitHub answer's failure; an execution's is derived from the
    /// approval's change). Returns false when an attempt began meanwhile.
    pub async fn fail_unbegun_job(
        &self,
        key: &LedgerKey,
        reason: &str,
        events: &[TrailEvent],
        now: EpochSeconds,
    ) -> Result<bool, StoreError> {
        if key.moves_execution()
            && let Some(failed) = self.fail_unbegun_execution(key, reason, now).await?
        {
            return Ok(failed);
        }
        let mut vals = values(&[
            (":failed", s(LedgerStatus::Failed.as_str())),
            (
                ":needs_reconciliation",
                s(LedgerStatus::NeedsReconciliation.as_str()),
            ),
            (":generation", n(key.generation)),
            (":zero", n(0)),
            (":kind", s(key.kind())),
            (":approval_id", s(key.approval_id.as_str())),
            (":tenant", s(key.tenant.as_str())),
            (":error", s(reason)),
            (":now", epoch(now)),
        ]);
        let fail = self.job_retained(FAIL_UNBEGUN, &mut vals, (now, key.expires_at));
        let ledger = self.ledger_update(key, &fail, ONLY_IF_NOT_BEGUN, vals)?;
        let failed = UpdateExpr::default()
            .set("#execution.#status = :exec_status")
            .set("#execution.#last_error = :error")
            .set("#execution.#updated_at = :now");
        let execution = if key.guards == Guarded::Resume {
            Some(self.resume_end(key, &Completion::Failed(reason.to_owned()), now, false)?)
        } else {
            self.execution_update(
                key,
                failed,
                (ExecutionStatus::Failed, now),
                values(&[
                    (":exec_status", s(ExecutionStatus::Failed.as_str())),
                    (":error", s(reason)),
                    (":now", epoch(now)),
                ]),
                ONLY_IF_CURRENT_GENERATION,
            )?
        };
        Ok(matches!(
            self.ledger_transaction(key, ledger, execution, events)
                .await?,
            Transaction::Committed
        ))
    }

    /// Keeps what a worker learnt after its attempt was taken over, where whoever reconciles the
    /// execution sees it: the approval's `execution.late_reports` (the ledger item, for a
    /// notification or a callback). It owns nothing any more, it only adds a report — at most
    /// [`MAX_LATE_REPORTS`] of them, each cut to [`MAX_REPORT_CHARS`], so the item stays bounded.
    /// Returns false when the report was not kept (the list is full, or nothing to add it to).
    pub async fn record_late_report(
        &self,
        key: &LedgerKey,
        report: &str,
    ) -> Result<bool, StoreError> {
        let (table, pk, list) = if key.moves_execution() {
            (
                &self.tables.approvals,
                approval_key(&key.tenant, &key.approval_id),
                "#execution.#late_reports",
            )
        } else {
            (&self.tables.execution_ledger, s(key.pk()), "#late_reports")
        };
        let update = format!("SET {list} = list_append(if_not_exists({list}, :none), :report)");
        let condition =
            format!("{ONLY_IF_EXISTS} AND (attribute_not_exists({list}) OR size({list}) < :max)");
        let report = cut(report, MAX_REPORT_CHARS);
        let result = self
            .client
            .update_item()
            .table_name(table)
            .key("pk", pk)
            .update_expression(&update)
            .condition_expression(&condition)
            .set_expression_attribute_names(Some(names(&[&update, &condition])))
            .expression_attribute_values(":none", AttributeValue::L(Vec::new()))
            .expression_attribute_values(":report", AttributeValue::L(vec![s(report)]))
            .expression_attribute_values(":max", n(MAX_LATE_REPORTS))
            .send()
            .await;
        match result {
            Ok(_) => Ok(true),
            Err(e) if is_transient(&e) => Err(StoreError::from_sdk("UpdateItem", e)),
            Err(e) => match e.into_service_error() {
                UpdateItemError::ConditionalCheckFailedException(_) => Ok(false),
                other => Err(StoreError::dynamo("UpdateItem", other)),
            },
        }
    }

    /// The job's ledger entry, read for a job that has used up its attempts (the one path that
    /// reads the ledger before writing it).
    pub async fn ledger_entry(&self, key: &LedgerKey) -> Result<Option<LedgerEntry>, StoreError> {
        if key.moves_execution()
            && let Some(entry) = self.execution_entry(key).await?
        {
            return Ok(Some(entry));
        }
        let output = self
            .client
            .get_item()
            .table_name(&self.tables.execution_ledger)
            .key("pk", s(key.pk()))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| StoreError::from_sdk("GetItem", e))?;
        output.item().map(LedgerEntry::from_item).transpose()
    }
}
