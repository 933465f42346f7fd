//! The execution ledger: one item per job, written before the downstream call (begin) and after
//! it (complete), each in one transaction with the approval's `execution` for execute jobs.
//! A worker owns an attempt through a random token and a lease; every later write is
//! conditioned on still owning it.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::{
    AttributeValue, ReturnValuesOnConditionCheckFailure, TransactWriteItem, Update,
};

use super::expr::names;
use super::items::{
    DUE_EXECUTION, Item, approval_key, epoch, get_n, get_s, n, opt_s, s, status_check_to_attr,
};
use super::size::{MAX_CHECK_DETAIL_CHARS, MAX_ERROR_CHARS, cut};
use super::{Store, StoreError, Transaction, condition_failed_item};
use crate::domain::{ApprovalId, EpochSeconds, ExecutionStatus, Status, StatusCheck, TenantId};
use crate::events::{Event, EventType};
use crate::jobs::Job;
use serde_json::json;

/// A ledger item's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LedgerStatus {
    /// A worker holds the attempt until its lease ends (and may have called downstream).
    InProgress,
    /// The last attempt failed in a way worth retrying; the message comes back after a backoff.
    RetryWait,
    /// Whether the last attempt acted is not known yet, and the target has a status URL: the
    /// next receive asks it before anything else (never calls again blindly).
    Unknown,
    Succeeded,
    Failed,
    NeedsReconciliation,
}

impl LedgerStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InProgress => "in_progress",
            Self::RetryWait => "retry_wait",
            Self::Unknown => "unknown",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::NeedsReconciliation => "needs_reconciliation",
        }
    }

    fn parse(raw: &str) -> Option<Self> {
        [
            Self::InProgress,
            Self::RetryWait,
            Self::Unknown,
            Self::Succeeded,
            Self::Failed,
            Self::NeedsReconciliation,
        ]
        .into_iter()
        .find(|s| s.as_str() == raw)
    }

    /// What the approval's `execution.status` reads while the ledger is in this status.
    fn execution_status(self) -> ExecutionStatus {
        match self {
            Self::InProgress => ExecutionStatus::Running,
            Self::RetryWait => ExecutionStatus::Queued,
            // The attempt is not over until the target says what became of it.
            Self::Unknown => ExecutionStatus::Running,
            Self::Succeeded => ExecutionStatus::Succeeded,
            Self::Failed => ExecutionStatus::Failed,
            Self::NeedsReconciliation => ExecutionStatus::NeedsReconciliation,
        }
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
    pub last_error: Option<String>,
    /// When the call whose outcome is unknown ended (epoch ms), for an attempt left `unknown`.
    pub call_ended_ms: Option<i64>,
    /// The last write's time (epoch seconds).
    pub updated_at: EpochSeconds,
}

impl LedgerEntry {
    fn from_item(item: &Item) -> Result<Self, StoreError> {
        Ok(Self {
            status: LedgerStatus::parse(get_s(item, "status")?)
                .ok_or(StoreError::corrupt("ledger status"))?,
            generation: get_n(item, "generation")?,
            token: opt_s(item, "token").unwrap_or_default(),
            lease_until_ms: get_n(item, "lease_until").unwrap_or(0),
            attempts: get_n(item, "attempts")?,
            last_error: opt_s(item, "last_error"),
            call_ended_ms: get_n(item, "call_ended_at").ok(),
            updated_at: get_n(item, "updated_at").unwrap_or(0),
        })
    }
}

/// How a begin ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Begin {
    /// This worker owns a new attempt.
    Started,
    /// Refused: the ledger as it was. `None` when the approval refused instead (the job is of
    /// an older execution generation).
    Refused(Option<LedgerEntry>),
}

/// The end of an attempt, as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Completion {
    Succeeded,
    Failed(String),
    RetryWait(String),
    /// The outcome is unknown for now; the target's status URL is asked again later.
    Unknown(String),
    NeedsReconciliation(String),
}

impl Completion {
    /// In words, for a report: the status and the error, if any.
    pub fn describe(&self) -> String {
        match self.error() {
            Some(error) => format!("{} ({error})", self.status().as_str()),
            None => self.status().as_str().to_owned(),
        }
    }

    fn status(&self) -> LedgerStatus {
        match self {
            Self::Succeeded => LedgerStatus::Succeeded,
            Self::Failed(_) => LedgerStatus::Failed,
            Self::RetryWait(_) => LedgerStatus::RetryWait,
            Self::Unknown(_) => LedgerStatus::Unknown,
            Self::NeedsReconciliation(_) => LedgerStatus::NeedsReconciliation,
        }
    }

    /// The same completion with its error replaced by `error` (where it has one).
    fn with_error(&self, error: Option<String>) -> Self {
        let error = error.unwrap_or_default();
        match self {
            Self::Succeeded => Self::Succeeded,
            Self::Failed(_) => Self::Failed(error),
            Self::RetryWait(_) => Self::RetryWait(error),
            Self::Unknown(_) => Self::Unknown(error),
            Self::NeedsReconciliation(_) => Self::NeedsReconciliation(error),
        }
    }

    fn error(&self) -> Option<&str> {
        match self {
            Self::Succeeded => None,
            Self::Failed(e)
            | Self::RetryWait(e)
            | Self::Unknown(e)
            | Self::NeedsReconciliation(e) => Some(e),
        }
    }
}

/// The event a notify or callback job's end makes (an execute job's events come from the
/// approval's own change, on the stream).
fn ledger_event(job: &Job, completion: &Completion, now: EpochSeconds) -> Option<Event> {
    let (after, kind, discriminator, data) = match (job, completion) {
        (Job::Notify(j), Completion::Succeeded) => (
            &j.after,
            EventType::NotificationSent,
            j.approver.trim().to_lowercase(),
            json!({ "approver": j.approver }),
        ),
        // Refused by the notifier, or out of attempts: no review link reached the approver.
        (Job::Notify(j), Completion::Failed(error)) => (
            &j.after,
            EventType::NotificationFailed,
            j.approver.trim().to_lowercase(),
            json!({ "approver": j.approver, "error": error }),
        ),
        (Job::Callback(j), Completion::Succeeded) => (
            &j.event_order,
            EventType::CallbackDelivered,
            j.event_id.clone(),
            json!({ "event_id": j.event_id, "event_type": j.event_type}),
        ),
        (Job::Callback(j), Completion::Failed(error)) => (
            &j.event_order,
            EventType::CallbackFailed,
            j.event_id.clone(),
            json!({ "event_id": j.event_id, "event_type": j.event_type, "error": error }),
        ),
        _ => return None,
    };
    let actor = json!({ "channel": job.kind() });
    Some(Event::recorded_after(
        after,
        kind,
        (job.tenant(), job.approval_id()),
        &discriminator,
        now,
        actor,
        data,
    ))
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

/// only_if_owner: the attempt is still the one `:token` began (no other worker took over after
/// its lease), and not ended yet (in progress, waiting for its retry, or its outcome not known
/// yet).
const ONLY_IF_OWNER: &str = "#token = :token AND #status IN (:in_progress, :retry_wait, :unknown)";

const SHOW_RUNNING: &str = "SET #execution.#status = :running, \
     #execution.#attempts = #execution.#attempts + :one, #execution.#updated_at = :now, \
     #due_kind = :execution_due, #due_at = :now";

/// only_if_current_generation: a job of an execution an operator has since resumed changes
/// nothing.
const ONLY_IF_CURRENT_GENERATION: &str =
    "#status = :approved AND #execution.#generation = :generation";

/// ... and, for a write that records a status query, while the execution holds fewer than
/// [`MAX_STATUS_CHECKS`] of them: what grows on an approval item is bounded, so it never
/// passes DynamoDB's 400 KB.
const ONLY_IF_ROOM_FOR_A_CHECK: &str = "(attribute_not_exists(#execution.#status_checks) \
     OR size(#execution.#status_checks) < :max_checks)";

/// The status queries one execution generation keeps on the approval (an operator's retry
/// starts a new list); one asked beyond them still decides the attempt, and is logged.
pub const MAX_STATUS_CHECKS: usize = 20;
/// Reports of attempts taken over that an approval keeps, and the characters of each.
pub const MAX_LATE_REPORTS: usize = 10;
pub const MAX_REPORT_CHARS: usize = 1_000;

/// How an attempt ends, as one write records it.
#[derive(Debug, Clone, Copy)]
pub struct AttemptEnd<'a> {
    pub completion: &'a Completion,
    /// The status query that decided it, recorded on the execution.
    pub check: Option<&'a StatusCheck>,
    /// Who writes the end: the attempt's own token when its worker ends it, a token of the
    /// writer's otherwise (a worker settling, abandoning or giving up another's attempt; the
    /// reconciler). A write that finds the attempt already ended takes it for its own (an SDK
    /// retry that met its first try) only when this matches, so a stalled worker never mistakes
    /// an end another wrote for its own and drops what it learnt.
    pub ended_by: &'a str,
    /// When the call whose outcome is unknown ended (epoch ms), for an `unknown` end that
    /// follows a call: `not_found` is believed only the target's status delay after it.
    pub call_ended_ms: Option<i64>,
    /// When the execution is next due (epoch seconds), if later than now: the status query the
    /// delay puts off. The reconciler counts its bound from then, so a long status delay is not
    /// taken for a lost job.
    pub due_at: Option<EpochSeconds>,
}

impl<'a> AttemptEnd<'a> {
    /// An end written by the attempt's own worker (`token`).
    pub fn by_owner(completion: &'a Completion, token: &'a str) -> Self {
        Self {
            completion,
            check: None,
            ended_by: token,
            call_ended_ms: None,
            due_at: None,
        }
    }
}

fn values(pairs: &[(&str, AttributeValue)]) -> HashMap<String, AttributeValue> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

impl Store {
    fn ledger_update(
        &self,
        job: &Job,
        update: &str,
        condition: &str,
    ) -> aws_sdk_dynamodb::types::builders::UpdateBuilder {
        Update::builder()
            .table_name(&self.tables.execution_ledger)
            .key("pk", s(job.ledger_key()))
            .update_expression(update)
            .condition_expression(condition)
            .set_expression_attribute_names(Some(names(&[update, condition])))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
    }

    /// The approval's `execution`, updated in the same transaction as the ledger (execute jobs).
    fn execution_update(
        &self,
        job: &Job,
        update: &str,
        vals: HashMap<String, AttributeValue>,
    ) -> Result<Option<Update>, StoreError> {
        self.execution_update_if(job, update, vals, ONLY_IF_CURRENT_GENERATION)
    }

    fn execution_update_if(
        &self,
        job: &Job,
        update: &str,
        mut vals: HashMap<String, AttributeValue>,
        condition: &str,
    ) -> Result<Option<Update>, StoreError> {
        if !matches!(job, Job::Execute(_)) {
            return Ok(None);
        }
        let tenant =
            TenantId::parse(job.tenant()).map_err(|_| StoreError::corrupt("job tenant"))?;
        let id = ApprovalId::parse(job.approval_id())
            .map_err(|_| StoreError::corrupt("job approval id"))?;
        vals.insert(":approved".to_owned(), s(Status::Approved.as_str()));
        vals.insert(":generation".to_owned(), n(job.generation()));
        Update::builder()
            .table_name(&self.tables.approvals)
            .key("pk", approval_key(&tenant, &id))
            .update_expression(update)
            .condition_expression(condition)
            .set_expression_attribute_names(Some(names(&[update, condition])))
            .set_expression_attribute_values(Some(vals))
            .build()
            .map(Some)
            .map_err(|e| StoreError::dynamo("TransactWriteItems", e))
    }

    async fn ledger_transaction(
        &self,
        ledger: Update,
        execution: Option<Update>,
    ) -> Result<Transaction, StoreError> {
        self.ledger_transaction_with(ledger, execution, None).await
    }

    /// The ledger's write, the approval's `execution` (execute jobs) and the event the
    /// transition makes (a notification sent, a callback delivered or given up), committed
    /// together: the event exists exactly when the transition does.
    async fn ledger_transaction_with(
        &self,
        ledger: Update,
        execution: Option<Update>,
        event: Option<Event>,
    ) -> Result<Transaction, StoreError> {
        let mut items = vec![TransactWriteItem::builder().update(ledger).build()];
        if let Some(execution) = execution {
            items.push(TransactWriteItem::builder().update(execution).build());
        }
        if let Some(event) = event {
            items.push(
                TransactWriteItem::builder()
                    .put(self.event_put(&event)?)
                    .build(),
            );
        }
        self.transact(items, &ulid::Ulid::new().to_string()).await
    }

    /// Begins an attempt before any downstream call: one conditional write (with the approval's
    /// `execution` moving to running, for execute jobs). `takeover` allows taking over an
    /// attempt whose worker stopped; only targets that dedupe by `Idempotency-Key` allow it.
    pub async fn begin_job(
        &self,
        job: &Job,
        token: &str,
        now: EpochSeconds,
        now_ms: i64,
        lease_until_ms: i64,
        takeover: bool,
    ) -> Result<Begin, StoreError> {
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
            (":generation", n(job.generation())),
            (":zero", n(0)),
            (":one", n(1)),
            (":token", s(token)),
            (":lease_until", n(lease_until_ms)),
            (":kind", s(job.kind())),
            (":approval_id", s(job.approval_id())),
            (":tenant", s(job.tenant())),
            (":now", epoch(now)),
        ]);
        if takeover {
            vals.insert(":now_ms".to_owned(), n(now_ms));
        }
        let ledger = self
            .ledger_update(job, BEGIN_ATTEMPT, condition)
            .set_expression_attribute_values(Some(vals))
            .build()
            .map_err(|e| StoreError::dynamo("TransactWriteItems", e))?;
        let execution = self.execution_update(
            job,
            SHOW_RUNNING,
            values(&[
                (":running", s(ExecutionStatus::Running.as_str())),
                (":one", n(1)),
                (":now", epoch(now)),
                (":execution_due", s(DUE_EXECUTION)),
            ]),
        )?;
        match self.ledger_transaction(ledger, execution).await? {
            Transaction::Committed => Ok(Begin::Started),
            Transaction::Cancelled(reasons) => match condition_failed_item(&reasons, 0) {
                // Our own begin: it applied, its answer was lost, and the SDK's retry met it.
                Some(old)
                    if opt_s(old, "token").as_deref() == Some(token)
                        && opt_s(old, "status").as_deref()
                            == Some(LedgerStatus::InProgress.as_str()) =>
                {
                    Ok(Begin::Started)
                }
                Some(old) => Ok(Begin::Refused(Some(LedgerEntry::from_item(old)?))),
                None => Ok(Begin::Refused(None)),
            },
        }
    }

    /// Records that the job never began within its attempts: `failed`, so that an operator's
    /// retry resumes it (nothing was sent). Returns false when an attempt began meanwhile.
    pub async fn fail_unbegun_job(
        &self,
        job: &Job,
        reason: &str,
        now: EpochSeconds,
    ) -> Result<bool, StoreError> {
        let ledger = self
            .ledger_update(job, FAIL_UNBEGUN, ONLY_IF_NOT_BEGUN)
            .set_expression_attribute_values(Some(values(&[
                (":failed", s(LedgerStatus::Failed.as_str())),
                (
                    ":needs_reconciliation",
                    s(LedgerStatus::NeedsReconciliation.as_str()),
                ),
                (":generation", n(job.generation())),
                (":zero", n(0)),
                (":kind", s(job.kind())),
                (":approval_id", s(job.approval_id())),
                (":tenant", s(job.tenant())),
                (":error", s(reason)),
                (":now", epoch(now)),
            ])))
            .build()
            .map_err(|e| StoreError::dynamo("TransactWriteItems", e))?;
        let execution = self.execution_update(
            job,
            "SET #execution.#status = :exec_status, #execution.#last_error = :error, #execution.#updated_at = :now \
             REMOVE #due_kind, #due_at",
            values(&[
                (":exec_status", s(ExecutionStatus::Failed.as_str())),
                (":error", s(reason)),
                (":now", epoch(now)),
            ]),
        )?;
        let event = ledger_event(job, &Completion::Failed(reason.to_owned()), now);
        Ok(matches!(
            self.ledger_transaction_with(ledger, execution, event)
                .await?,
            Transaction::Committed
        ))
    }

    /// Keeps what a worker learnt after its attempt was taken over, where whoever reconciles the
    /// execution sees it: the approval's `execution.late_reports` (the ledger item, for a
    /// notification). It owns nothing any more, it only adds a report — at most
    /// [`MAX_LATE_REPORTS`] of them, each cut to [`MAX_REPORT_CHARS`], so the item stays bounded.
    /// Returns false when the report was not kept (the list is full, or nothing to add it to).
    pub async fn record_late_report(&self, job: &Job, report: &str) -> Result<bool, StoreError> {
        let (table, key, list) = match job {
            Job::Execute(_) => {
                let tenant =
                    TenantId::parse(job.tenant()).map_err(|_| StoreError::corrupt("job tenant"))?;
                let id = ApprovalId::parse(job.approval_id())
                    .map_err(|_| StoreError::corrupt("job approval id"))?;
                (
                    &self.tables.approvals,
                    approval_key(&tenant, &id),
                    "#execution.#late_reports",
                )
            }
            Job::Notify(_) | Job::Callback(_) => (
                &self.tables.execution_ledger,
                s(job.ledger_key()),
                "#late_reports",
            ),
        };
        let update = format!("SET {list} = list_append(if_not_exists({list}, :none), :report)");
        let condition = format!(
            "attribute_exists(#pk) AND (attribute_not_exists({list}) OR size({list}) < :max)"
        );
        let report = cut(report, MAX_REPORT_CHARS);
        let result = self
            .client
            .update_item()
            .table_name(table)
            .key("pk", key)
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
            Err(e) if super::is_transient(&e) => Err(StoreError::from_sdk("UpdateItem", e)),
            Err(e) => match e.into_service_error() {
                aws_sdk_dynamodb::operation::update_item::UpdateItemError::ConditionalCheckFailedException(_) => {
                    Ok(false)
                }
                other => Err(StoreError::dynamo("UpdateItem", other)),
            },
        }
    }

    /// The job's ledger entry, read for a job that has used up its attempts (the one path that
    /// reads the ledger before writing it).
    pub async fn ledger_entry(&self, job: &Job) -> Result<Option<LedgerEntry>, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.tables.execution_ledger)
            .key("pk", s(job.ledger_key()))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| StoreError::from_sdk("GetItem", e))?;
        output.item().map(LedgerEntry::from_item).transpose()
    }

    /// Records how the attempt `token` ended, while it is still that attempt and not ended:
    /// by its own worker, or by one that found it abandoned or waiting for a status query
    /// (`end.ended_by` says which). Returns false when the attempt was no longer there to end
    /// (another worker took it over, or ended it first).
    pub async fn end_attempt(
        &self,
        job: &Job,
        token: &str,
        end: &AttemptEnd<'_>,
        now: EpochSeconds,
    ) -> Result<bool, StoreError> {
        self.end_attempt_if(job, token, end, now, None).await
    }

    /// Ends a stuck execution's attempt `token` (the reconciler): as [`Store::end_attempt`], and
    /// only while neither the attempt nor the execution changed since `cutoff`.
    pub async fn end_stuck_attempt(
        &self,
        job: &Job,
        token: &str,
        end: &AttemptEnd<'_>,
        cutoff: EpochSeconds,
        now: EpochSeconds,
    ) -> Result<bool, StoreError> {
        self.end_attempt_if(job, token, end, now, Some(cutoff))
            .await
    }

    async fn end_attempt_if(
        &self,
        job: &Job,
        owner: &str,
        end: &AttemptEnd<'_>,
        now: EpochSeconds,
        unchanged_since: Option<EpochSeconds>,
    ) -> Result<bool, StoreError> {
        // What grows on the items is bounded: an error (which may quote the one before it, and
        // a target's reason) is kept to its first characters.
        let cut_error = end.completion.error().map(|e| cut(e, MAX_ERROR_CHARS));
        let completion = &end.completion.with_error(cut_error);
        let status = completion.status();
        let mut ledger_update = match completion.error() {
            Some(_) => "SET #status = :status, #last_error = :error, #updated_at = :now, #ended_by = :ended_by"
                .to_owned(),
            None => "SET #status = :status, #updated_at = :now, #ended_by = :ended_by".to_owned(),
        };
        if end.call_ended_ms.is_some() {
            ledger_update.push_str(", #call_ended_at = :call_ended_at");
        }
        ledger_update.push_str(match completion.error() {
            Some(_) => " REMOVE #lease_until",
            None => " REMOVE #lease_until, #last_error",
        });
        let mut ledger_vals = values(&[
            (":status", s(status.as_str())),
            (":now", epoch(now)),
            (":in_progress", s(LedgerStatus::InProgress.as_str())),
            (":retry_wait", s(LedgerStatus::RetryWait.as_str())),
            (":unknown", s(LedgerStatus::Unknown.as_str())),
            (":token", s(owner)),
            (":ended_by", s(end.ended_by)),
        ]);
        if let Some(error) = completion.error() {
            ledger_vals.insert(":error".to_owned(), s(error));
        }
        if let Some(ms) = end.call_ended_ms {
            ledger_vals.insert(":call_ended_at".to_owned(), n(ms));
        }
        let mut ledger_condition = ONLY_IF_OWNER.to_owned();
        if let Some(cutoff) = unchanged_since {
            ledger_condition.push_str(" AND #updated_at <= :cutoff");
            ledger_vals.insert(":cutoff".to_owned(), epoch(cutoff));
        }
        let ledger = self
            .ledger_update(job, &ledger_update, &ledger_condition)
            .set_expression_attribute_values(Some(ledger_vals))
            .build()
            .map_err(|e| StoreError::dynamo("TransactWriteItems", e))?;
        let event = ledger_event(job, completion, now);
        let mut check = end.check;
        loop {
            let execution =
                self.execution_end(job, completion, check, now, end.due_at, unchanged_since)?;
            match self
                .ledger_transaction_with(ledger.clone(), execution, event.clone())
                .await?
            {
                Transaction::Committed => return Ok(true),
                Transaction::Cancelled(reasons) => {
                    if let Some(old) = condition_failed_item(&reasons, 0) {
                        // Our own end: it applied, its answer was lost, the SDK's retry met it.
                        return Ok(opt_s(old, "token").as_deref() == Some(owner)
                            && opt_s(old, "status").as_deref() == Some(status.as_str())
                            && opt_s(old, "ended_by").as_deref() == Some(end.ended_by));
                    }
                    // Only the approval refused: the execution moved on to another generation,
                    // or (writing a status query) it holds as many as it keeps. Without the
                    // query the end is written still; the query is in the log.
                    if check.take().is_none() {
                        return Ok(false);
                    }
                    tracing::warn!(
                        job = job.id(),
                        max = MAX_STATUS_CHECKS,
                        "status query not kept on the execution (it holds the most it keeps, or the generation moved on)"
                    );
                }
            }
        }
    }

    /// The approval's side of an attempt's end (execute jobs): the execution's status and error,
    /// the status query if any, and what is due.
    fn execution_end(
        &self,
        job: &Job,
        completion: &Completion,
        check: Option<&StatusCheck>,
        now: EpochSeconds,
        due_at: Option<EpochSeconds>,
        unchanged_since: Option<EpochSeconds>,
    ) -> Result<Option<Update>, StoreError> {
        let status = completion.status();
        let mut set = vec![
            "#execution.#status = :exec_status",
            "#execution.#updated_at = :now",
        ];
        let mut remove = Vec::new();
        match completion.error() {
            Some(_) => set.push("#execution.#last_error = :error"),
            None => remove.push("#execution.#last_error"),
        }
        // Waiting for a retry or a status query, the execution is still due to end (the
        // reconciler watches it); ended, nothing is due.
        match status {
            LedgerStatus::RetryWait | LedgerStatus::Unknown if completion.error().is_some() => {
                set.push("#due_at = :due_at");
            }
            _ => remove.extend(["#due_kind", "#due_at"]),
        }
        if check.is_some() {
            set.push(
                "#execution.#status_checks = list_append(if_not_exists(#execution.#status_checks, :no_checks), :check)",
            );
        }
        let mut update = format!("SET {}", set.join(", "));
        if !remove.is_empty() {
            update.push_str(&format!(" REMOVE {}", remove.join(", ")));
        }
        let mut vals = values(&[
            (":exec_status", s(status.execution_status().as_str())),
            (":now", epoch(now)),
        ]);
        if set.contains(&"#due_at = :due_at") {
            vals.insert(":due_at".to_owned(), epoch(due_at.unwrap_or(now).max(now)));
        }
        if let Some(error) = completion.error() {
            vals.insert(":error".to_owned(), s(error));
        }
        let mut condition = ONLY_IF_CURRENT_GENERATION.to_owned();
        if let Some(check) = check {
            condition.push_str(&format!(" AND {ONLY_IF_ROOM_FOR_A_CHECK}"));
            vals.insert(":no_checks".to_owned(), AttributeValue::L(Vec::new()));
            let check = StatusCheck {
                detail: check
                    .detail
                    .as_deref()
                    .map(|d| cut(d, MAX_CHECK_DETAIL_CHARS)),
                ..check.clone()
            };
            vals.insert(
                ":check".to_owned(),
                AttributeValue::L(vec![status_check_to_attr(&check)]),
            );
            vals.insert(":max_checks".to_owned(), n(MAX_STATUS_CHECKS));
        }
        if let Some(cutoff) = unchanged_since {
            condition.push_str(" AND #due_at <= :cutoff");
            vals.insert(":cutoff".to_owned(), epoch(cutoff));
        }
        self.execution_update_if(job, &update, vals, &condition)
    }
}
