//! How an attempt ends: the ledger item and the approval's `execution` (and the trail event,
//! if the end makes one) in one transaction, while the writer still owns the attempt.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::{AttributeValue, Update};

use super::{LedgerKey, ONLY_IF_CURRENT_GENERATION, values};
use crate::domain::resume::ResumeStatus;
use crate::domain::trail::TrailEvent;
use crate::domain::{Completion, EpochSeconds, ExecutionStatus, LedgerStatus, StatusCheck};
use crate::store::attr::{epoch, n, opt_s, s};
use crate::store::client::{Store, Transaction, condition_failed_item};
use crate::store::codec::status_check_to_attr;
use crate::store::error::StoreError;
use crate::store::expr::UpdateExpr;
use crate::store::size::{MAX_CHECK_DETAIL_CHARS, MAX_STATUS_CHECKS, cut, kept};

/// only_if_owner: the attempt is still the one `:token` began (no other worker took over after
/// its lease), and not ended yet (in progress, waiting for its retry, or its outcome not known
/// yet).
const ONLY_IF_OWNER: &str = "#token = :token AND #status IN (:in_progress, :retry_wait, :unknown)";

/// ... and, for a write that records a status query, while the execution holds fewer than
/// [`MAX_STATUS_CHECKS`] of them: what grows on an approval item is bounded, so it never
/// passes DynamoDB's 400 KB.
const ONLY_IF_ROOM_FOR_A_CHECK: &str = "(attribute_not_exists(#execution.#status_checks) \
     OR size(#execution.#status_checks) < :max_checks)";

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
    /// The trail events the end makes, committed with it: the notifications' outcomes, a
    /// GitHub answer's (an execution's events are derived from the approval's change instead).
    pub events: &'a [TrailEvent],
    /// The approvers a notify job's end adds to those done (`notified`), and of them to those
    /// whose notification failed (`not_notified`).
    pub notified: &'a [String],
    pub not_notified: &'a [String],
    /// The ledger's status as the writer read it, when what it writes was made from that read
    /// (a give-up's events name the approvers it found not notified): the end applies only
    /// while the ledger still says so — not after the attempt's own worker ended it meanwhile.
    pub found: Option<LedgerStatus>,
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
            events: &[],
            notified: &[],
            not_notified: &[],
            found: None,
        }
    }
}

impl Store {
    /// Records how the attempt `token` ended, while it is still that attempt and not ended:
    /// by its own worker, or by one that found it abandoned or waiting for a status query
    /// (`end.ended_by` says which). Returns false when the attempt was no longer there to end
    /// (another worker took it over, or ended it first).
    pub async fn end_attempt(
        &self,
        key: &LedgerKey,
        token: &str,
        end: &AttemptEnd<'_>,
        now: EpochSeconds,
    ) -> Result<bool, StoreError> {
        self.end_attempt_if(key, token, end, now, None).await
    }

    /// Ends a stuck execution's attempt `token` (the reconciler): as [`Store::end_attempt`], and
    /// only while neither the attempt nor the execution changed since `cutoff`.
    pub async fn end_stuck_attempt(
        &self,
        key: &LedgerKey,
        token: &str,
        end: &AttemptEnd<'_>,
        cutoff: EpochSeconds,
        now: EpochSeconds,
    ) -> Result<bool, StoreError> {
        self.end_attempt_if(key, token, end, now, Some(cutoff))
            .await
    }

    async fn end_attempt_if(
        &self,
        key: &LedgerKey,
        owner: &str,
        end: &AttemptEnd<'_>,
        now: EpochSeconds,
        unchanged_since: Option<EpochSeconds>,
    ) -> Result<bool, StoreError> {
        if key.moves_execution()
            && let Some(ended) = self
                .end_execution(key, owner, end, now, unchanged_since)
                .await?
        {
            return Ok(ended);
        }
        // What grows on the items is bounded: an error (which may quote the one before it, and
        // a target's reason) is kept to its first characters.
        let completion = &kept(end.completion);
        let status = completion.status();
        let mut ledger_update = match completion.error() {
            Some(_) => "SET #status = :status, #last_error = :error, #updated_at = :now, #ended_by = :ended_by"
                .to_owned(),
            None => "SET #status = :status, #updated_at = :now, #ended_by = :ended_by".to_owned(),
        };
        if end.call_ended_ms.is_some() {
            ledger_update.push_str(", #call_ended_at = :call_ended_at");
        }
        // The attempts whose request never reached the target: an answer refused later (a
        // GitHub run, a workflow's token) is an earlier attempt's only if one may have reached it.
        let never_sent = completion.never_sent();
        if never_sent {
            ledger_update
                .push_str(", #unsent = if_not_exists(#unsent, :zero_unsent) + :one_unsent");
        }
        ledger_update.push_str(match completion.error() {
            Some(_) => " REMOVE #lease_until",
            None => " REMOVE #lease_until, #last_error",
        });
        let sets = [
            ("notified", end.notified),
            ("not_notified", end.not_notified),
        ];
        let added: Vec<String> = sets
            .iter()
            .filter(|(_, members)| !members.is_empty())
            .map(|(name, _)| format!("#{name} :{name}"))
            .collect();
        if !added.is_empty() {
            ledger_update.push_str(&format!(" ADD {}", added.join(", ")));
        }
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
        if never_sent {
            ledger_vals.insert(":zero_unsent".to_owned(), n(0));
            ledger_vals.insert(":one_unsent".to_owned(), n(1));
        }
        for (name, members) in sets.iter().filter(|(_, members)| !members.is_empty()) {
            ledger_vals.insert(format!(":{name}"), AttributeValue::Ss(members.to_vec()));
        }
        let mut ledger_condition = ONLY_IF_OWNER.to_owned();
        if let Some(cutoff) = unchanged_since {
            ledger_condition.push_str(" AND #updated_at <= :cutoff");
            ledger_vals.insert(":cutoff".to_owned(), epoch(cutoff));
        }
        if let Some(found) = end.found {
            ledger_condition.push_str(" AND #status = :found");
            ledger_vals.insert(":found".to_owned(), s(found.as_str()));
        }
        let ledger = self.ledger_update(key, &ledger_update, &ledger_condition, ledger_vals)?;
        let mut check = end.check;
        loop {
            let execution =
                self.execution_end(key, completion, check, now, end.due_at, unchanged_since)?;
            match self
                .ledger_transaction(key, ledger.clone(), execution, end.events)
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
                        ledger_item = key.pk(),
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
        key: &LedgerKey,
        completion: &Completion,
        check: Option<&StatusCheck>,
        now: EpochSeconds,
        due_at: Option<EpochSeconds>,
        unchanged_since: Option<EpochSeconds>,
    ) -> Result<Option<Update>, StoreError> {
        if key.guards == super::Guarded::Resume {
            return self.resume_end(key, completion, now, true).map(Some);
        }
        let (update, vals, condition, due) =
            execution_end_parts(completion, check, now, due_at, unchanged_since);
        self.execution_update(key, update, due, vals, &condition)
    }

    /// The approval's side of a resume job's end: its `resume` status (pending while a retry
    /// or a doubt waits), the attempts (`tried`: this end follows an answer tried) and the last
    /// error, moved in the transaction that ends the attempt — what the approval shows of its
    /// workflow's answer. Once it succeeded, the token is removed: it answers nothing any more,
    /// and a credential is kept no longer than it is needed.
    pub(super) fn resume_end(
        &self,
        key: &LedgerKey,
        completion: &Completion,
        now: EpochSeconds,
        tried: bool,
    ) -> Result<Update, StoreError> {
        let status = match completion {
            Completion::Succeeded => ResumeStatus::Succeeded,
            Completion::Failed(_) | Completion::NeedsReconciliation(_) => ResumeStatus::Failed,
            Completion::RetryWait(_) | Completion::Unknown(_) => ResumeStatus::Pending,
        };
        let mut update = UpdateExpr::default()
            .set("#resume.#status = :resume_status")
            .set("#resume.#updated_at = :now");
        let mut vals = values(&[(":resume_status", s(status.as_str())), (":now", epoch(now))]);
        if tried {
            update =
                update.set("#resume.#attempts = if_not_exists(#resume.#attempts, :zero) + :one");
            vals.insert(":zero".to_owned(), n(0));
            vals.insert(":one".to_owned(), n(1));
        }
        // Once an answer landed the token answers nothing more: it is kept no longer. A failed
        // answer keeps it, for an operator's retry (`POST /approvals/{id}/resume/retry`).
        if status == ResumeStatus::Succeeded {
            update = update.remove("#resume.#token");
        }
        update = match completion.error() {
            Some(error) => {
                vals.insert(":error".to_owned(), s(error));
                update.set("#resume.#last_error = :error")
            }
            None => update.remove("#resume.#last_error"),
        };
        // Only the resume's current generation: a job of an answer an operator has since sent
        // again changes nothing of it.
        vals.insert(":generation".to_owned(), n(key.generation));
        let condition = match key.generation {
            // The answer's first generation: no retry yet (the attribute comes with the first).
            0 => {
                "attribute_exists(#resume) AND (attribute_not_exists(#resume.#generation) \
                  OR #resume.#generation = :generation)"
            }
            _ => "attribute_exists(#resume) AND #resume.#generation = :generation",
        };
        self.approval_update(key, &update.build(), condition, vals)
    }
}

/// The approval's side of an attempt's end: its update, values and condition, and the
/// execution status and time its index attributes follow.
pub(super) fn execution_end_parts(
    completion: &Completion,
    check: Option<&StatusCheck>,
    now: EpochSeconds,
    due_at: Option<EpochSeconds>,
    unchanged_since: Option<EpochSeconds>,
) -> (
    UpdateExpr,
    HashMap<String, AttributeValue>,
    String,
    (ExecutionStatus, EpochSeconds),
) {
    let execution = completion.status().execution_status();
    let mut update = UpdateExpr::default()
        .set("#execution.#status = :exec_status")
        .set("#execution.#updated_at = :now");
    update = match completion.error() {
        Some(_) => update.set("#execution.#last_error = :error"),
        None => update.remove("#execution.#last_error"),
    };
    if check.is_some() {
        update = update.set(
            "#execution.#status_checks = list_append(if_not_exists(#execution.#status_checks, :no_checks), :check)",
        );
    }
    let mut vals = values(&[
        (":exec_status", s(execution.as_str())),
        (":now", epoch(now)),
    ]);
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
    // Waiting for a retry or a status query, the execution is still due to end (the
    // reconciler watches it, from the status query it waits for if later); ended, nothing
    // is due.
    let due_from = due_at.unwrap_or(now).max(now);
    (update, vals, condition, (execution, due_from))
}
