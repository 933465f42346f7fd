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
     #approval_id = :approval_id, #tenant = :tenant, #updated_at = :now";

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
    /// notification). Unconditional: it owns nothing any more, it only adds a report.
    pub async fn record_late_report(&self, job: &Job, report: &str) -> Result<(), StoreError> {
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
        self.client
            .update_item()
            .table_name(table)
            .key("pk", key)
            .update_expression(&update)
            .condition_expression("attribute_exists(#pk)")
            .set_expression_attribute_names(Some(names(&[&update, "#pk"])))
            .expression_attribute_values(":none", AttributeValue::L(Vec::new()))
            .expression_attribute_values(":report", AttributeValue::L(vec![s(report)]))
            .send()
            .await
            .map_err(|e| StoreError::dynamo("UpdateItem", e))?;
        Ok(())
    }

    /// Records how the attempt `token` ended, if this worker still owns it. Returns false when
    /// it no longer does (its lease ended and another worker took over the job).
    pub async fn complete_job(
        &self,
        job: &Job,
        token: &str,
        completion: &Completion,
        now: EpochSeconds,
    ) -> Result<bool, StoreError> {
        self.end_attempt(job, token, completion, now).await
    }

    /// [`Store::complete_job`] for an outcome learnt from the target's status URL: the question
    /// and its answer are recorded on the execution in the same write.
    pub async fn complete_job_checked(
        &self,
        job: &Job,
        token: &str,
        completion: &Completion,
        check: &StatusCheck,
        now: EpochSeconds,
    ) -> Result<bool, StoreError> {
        self.end_attempt_if(job, token, completion, now, None, Some(check))
            .await
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
            .map_err(|e| StoreError::dynamo("GetItem", e))?;
        output.item().map(LedgerEntry::from_item).transpose()
    }

    /// Ends the attempt `token` with `completion` (see [`Store::complete_job`]), for a worker
    /// that found the attempt abandoned or waiting after the job's last allowed receive.
    pub async fn end_job(
        &self,
        job: &Job,
        token: &str,
        completion: &Completion,
        now: EpochSeconds,
    ) -> Result<bool, StoreError> {
        self.end_attempt(job, token, completion, now).await
    }

    /// Records that the attempt `abandoned_token`, whose worker stopped after it may have called
    /// a target that does not dedupe, has an unknown outcome: an operator must reconcile it.
    pub async fn abandon_job(
        &self,
        job: &Job,
        abandoned_token: &str,
        reason: &str,
        now: EpochSeconds,
    ) -> Result<bool, StoreError> {
        let completion = Completion::NeedsReconciliation(reason.to_owned());
        self.end_attempt(job, abandoned_token, &completion, now)
            .await
    }

    /// Ends a stuck execution's attempt `token` (the reconciler): as [`Store::end_job`], and
    /// only while neither the attempt nor the execution changed since `cutoff`.
    pub async fn end_stuck_attempt(
        &self,
        job: &Job,
        token: &str,
        completion: &Completion,
        cutoff: EpochSeconds,
        now: EpochSeconds,
    ) -> Result<bool, StoreError> {
        self.end_attempt_if(job, token, completion, now, Some(cutoff), None)
            .await
    }

    async fn end_attempt(
        &self,
        job: &Job,
        owner: &str,
        completion: &Completion,
        now: EpochSeconds,
    ) -> Result<bool, StoreError> {
        self.end_attempt_if(job, owner, completion, now, None, None)
            .await
    }

    async fn end_attempt_if(
        &self,
        job: &Job,
        owner: &str,
        completion: &Completion,
        now: EpochSeconds,
        unchanged_since: Option<EpochSeconds>,
        check: Option<&StatusCheck>,
    ) -> Result<bool, StoreError> {
        let status = completion.status();
        let ledger_update = match completion.error() {
            Some(_) => {
                "SET #status = :status, #last_error = :error, #updated_at = :now REMOVE #lease_until"
            }
            None => "SET #status = :status, #updated_at = :now REMOVE #lease_until, #last_error",
        };
        // Waiting for a retry, the execution is still due to end (the reconciler watches it);
        // ended, nothing is due.
        let (error, due) = match (completion.error(), status) {
            (Some(_), LedgerStatus::RetryWait | LedgerStatus::Unknown) => {
                ("SET #execution.#last_error = :error,", "#due_at = :now")
            }
            (Some(_), _) => (
                "SET #execution.#last_error = :error,",
                "REMOVE #due_kind, #due_at",
            ),
            (None, _) => ("SET", "REMOVE #execution.#last_error, #due_kind, #due_at"),
        };
        let checked = if check.is_some() {
            "#execution.#status_checks = list_append(if_not_exists(#execution.#status_checks, :no_checks), :check), "
        } else {
            ""
        };
        let error = match error {
            "SET" => format!("SET {checked}"),
            error => format!("{error} {checked}"),
        };
        let execution_update = match due.strip_prefix("REMOVE") {
            Some(removed) => format!(
                "{error} #execution.#status = :exec_status, #execution.#updated_at = :now REMOVE{removed}"
            ),
            None => format!(
                "{error} #execution.#status = :exec_status, #execution.#updated_at = :now, {due}"
            ),
        };
        let mut ledger_vals = values(&[
            (":status", s(status.as_str())),
            (":now", epoch(now)),
            (":in_progress", s(LedgerStatus::InProgress.as_str())),
            (":retry_wait", s(LedgerStatus::RetryWait.as_str())),
            (":unknown", s(LedgerStatus::Unknown.as_str())),
            (":token", s(owner)),
        ]);
        let mut execution_vals = values(&[
            (":exec_status", s(status.execution_status().as_str())),
            (":now", epoch(now)),
        ]);
        if let Some(error) = completion.error() {
            ledger_vals.insert(":error".to_owned(), s(error));
            execution_vals.insert(":error".to_owned(), s(error));
        }
        if let Some(check) = check {
            execution_vals.insert(":no_checks".to_owned(), AttributeValue::L(Vec::new()));
            execution_vals.insert(
                ":check".to_owned(),
                AttributeValue::L(vec![status_check_to_attr(check)]),
            );
        }
        let mut ledger_condition = ONLY_IF_OWNER.to_owned();
        let mut execution_condition = ONLY_IF_CURRENT_GENERATION.to_owned();
        if let Some(cutoff) = unchanged_since {
            ledger_condition.push_str(" AND #updated_at <= :cutoff");
            execution_condition.push_str(" AND #due_at <= :cutoff");
            ledger_vals.insert(":cutoff".to_owned(), epoch(cutoff));
            execution_vals.insert(":cutoff".to_owned(), epoch(cutoff));
        }
        let ledger = self
            .ledger_update(job, ledger_update, &ledger_condition)
            .set_expression_attribute_values(Some(ledger_vals))
            .build()
            .map_err(|e| StoreError::dynamo("TransactWriteItems", e))?;
        let execution =
            self.execution_update_if(job, &execution_update, execution_vals, &execution_condition)?;
        let event = ledger_event(job, completion, now);
        match self
            .ledger_transaction_with(ledger, execution, event)
            .await?
        {
            Transaction::Committed => Ok(true),
            // Our own end of the attempt: it applied, its answer was lost, the SDK's retry met
            // it (same token, the status it set).
            Transaction::Cancelled(reasons) => {
                Ok(condition_failed_item(&reasons, 0).is_some_and(|old| {
                    opt_s(old, "token").as_deref() == Some(owner)
                        && opt_s(old, "status").as_deref() == Some(status.as_str())
                }))
            }
        }
    }
}
