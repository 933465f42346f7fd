//! Approval-only action types (docs/AGENTS.md): the approved execution is a
//! single-use capability its caller claims, then reports on. Each step is one conditional
//! `UpdateItem` on the approval, and each refusal returns the item as it was, from which the
//! caller tells a repeat of its own request (same key) from someone else's.
//!
//! - claim: `not_started → running` with `claimed_by` = the claim's key, only on an approved
//!   approval of an approval-only type (and, for a requester's key, only its own approval).
//!   `#execution.#status = :not_started` is what makes the claimer one: of two claims with
//!   different keys, the second finds it running.
//! - report: `running → succeeded | failed`, only with the claim's key; also from
//!   `needs_reconciliation` (the reconciler gave up waiting, but the claimer knows better).
//! - a claim never reported: the reconciler ends it `needs_reconciliation` once it sat
//!   running past `STUCK_EXECUTION_SECONDS` (it is in the `due` index from its claim on).

use std::collections::HashMap;

use super::attr::{epoch, n, s};
use super::client::Store;
use super::conditions::ONLY_IF_EXISTS;
use super::error::StoreError;
use super::expr::{UpdateExpr, names};
use super::indexes::{DUE_EXECUTION, Indexed};
use crate::domain::{
    Approval, ApprovalId, Approver, EpochSeconds, ExecutionStatus, Status, TenantId,
};

/// only_if_claimable: approved, approval-only, never claimed.
/// A passkey-only approval is claimable once its certificate is issued (the claim's answer
/// carries it).
const ONLY_IF_UNCLAIMED: &str = "attribute_exists(#approval_only) AND #status = :approved \
     AND #execution.#status = :not_started AND attribute_not_exists(#execution.#claimed_by) \
     AND (attribute_not_exists(#assurance) OR attribute_exists(#certificate))";
/// ... by its requester (a key with the operator role claims, or reports on, any of the
/// tenant's): the claim's key shows on the approval, so the report is bound to both.
const ONLY_IF_ITS_REQUESTER: &str = "#requested_by_id = :by";

/// only_if_reportable: claimed with this key, and not ended yet (or ended by the reconciler
/// for want of a report).
const ONLY_IF_REPORTABLE: &str = "#execution.#claimed_by = :key \
     AND #execution.#status IN (:running, :needs_reconciliation)";

/// only_if_unreported: a claim that sat running since `cutoff` with no report.
const ONLY_IF_UNREPORTED: &str = "attribute_exists(#approval_only) AND #status = :approved \
     AND #execution.#status = :running AND #due_kind = :execution_due AND #due_at <= :cutoff";

impl Store {
    /// Claims an approved approval-only execution for the request with `key`. `Err` carries
    /// the approval as it was (`None`: no such approval for this tenant).
    /// `requester`: the claiming key's principal when it may claim only its own approvals.
    pub async fn claim_execution(
        &self,
        tenant: &TenantId,
        id: &ApprovalId,
        key: &str,
        (claimant, requester_only): (&Approver, bool),
        now: EpochSeconds,
    ) -> Result<Result<Approval, Option<Approval>>, StoreError> {
        let mut values = HashMap::from([
            (":approved".to_owned(), s(Status::Approved.as_str())),
            (
                ":not_started".to_owned(),
                s(ExecutionStatus::NotStarted.as_str()),
            ),
            (":running".to_owned(), s(ExecutionStatus::Running.as_str())),
            (":key".to_owned(), s(key)),
            (":claimant".to_owned(), s(claimant.as_str())),
            (":one".to_owned(), n(1)),
            (":now".to_owned(), epoch(now)),
        ]);
        let condition = with_requester(
            format!("{ONLY_IF_EXISTS} AND {ONLY_IF_UNCLAIMED}"),
            (claimant, requester_only),
            &mut values,
        );
        // Running from now: the reconciler's once it sits unreported past its bound.
        let claimed = Indexed::after(id, Status::Approved, false, ExecutionStatus::Running, now);
        let update = UpdateExpr::default()
            .set("#execution.#status = :running")
            .set("#execution.#claimed_by = :key")
            .set("#execution.#claimant = :claimant")
            .set("#execution.#attempts = :one")
            .set("#execution.#updated_at = :now");
        let update = claimed.apply(update, &mut values, self.retention).build();
        self.update_where(tenant, id, (&update, &condition), values)
            .await
    }

    /// Ends a claimed execution with the claimer's `outcome` (succeeded or failed) and
    /// `detail`. `Err` carries the approval as it was (`None`: no such approval).
    /// `reporter`: the reporting key's principal, and whether it may report only on its own.
    pub async fn report_execution(
        &self,
        tenant: &TenantId,
        id: &ApprovalId,
        (key, reporter): (&str, (&Approver, bool)),
        (outcome, detail): (ExecutionStatus, Option<&str>),
        now: EpochSeconds,
    ) -> Result<Result<Approval, Option<Approval>>, StoreError> {
        let mut values = HashMap::from([
            (":running".to_owned(), s(ExecutionStatus::Running.as_str())),
            (
                ":needs_reconciliation".to_owned(),
                s(ExecutionStatus::NeedsReconciliation.as_str()),
            ),
            (":key".to_owned(), s(key)),
            (":outcome".to_owned(), s(outcome.as_str())),
            (":now".to_owned(), epoch(now)),
        ]);
        // `reported_at` tells the trail this end is the claimer's report (not an operator's
        // resolve, nor the reconciler's).
        let mut update = UpdateExpr::default()
            .set("#execution.#status = :outcome")
            .set("#execution.#reported_at = :now")
            .set("#execution.#updated_at = :now");
        update = match detail {
            Some(detail) => {
                values.insert(":detail".to_owned(), s(detail));
                update.set("#execution.#note = :detail")
            }
            None => update.remove("#execution.#note"),
        };
        let ended = Indexed::after(id, Status::Approved, false, outcome, now);
        let update = ended.apply(update, &mut values, self.retention).build();
        let condition = with_requester(
            format!("{ONLY_IF_EXISTS} AND {ONLY_IF_REPORTABLE}"),
            reporter,
            &mut values,
        );
        self.update_where(tenant, id, (&update, &condition), values)
            .await
    }

    /// Ends a claim that sat running, unreported, since `cutoff`: `needs_reconciliation` (the
    /// claimer may have acted or not; only it, or an operator, can say). `Err` carries the
    /// approval as it was, for the reconciler to tell one that is not approval-only (an id
    /// whose hint was wrong).
    pub async fn end_unreported_claim(
        &self,
        tenant: &TenantId,
        id: &ApprovalId,
        cutoff: EpochSeconds,
        now: EpochSeconds,
    ) -> Result<Result<Approval, Option<Approval>>, StoreError> {
        let mut values = HashMap::from([
            (":approved".to_owned(), s(Status::Approved.as_str())),
            (":running".to_owned(), s(ExecutionStatus::Running.as_str())),
            (
                ":needs_reconciliation".to_owned(),
                s(ExecutionStatus::NeedsReconciliation.as_str()),
            ),
            (":execution_due".to_owned(), s(DUE_EXECUTION)),
            (":cutoff".to_owned(), epoch(cutoff)),
            (":error".to_owned(), s(UNREPORTED)),
            (":now".to_owned(), epoch(now)),
        ]);
        let ended = Indexed::after(
            id,
            Status::Approved,
            false,
            ExecutionStatus::NeedsReconciliation,
            now,
        );
        let update = UpdateExpr::default()
            .set("#execution.#status = :needs_reconciliation")
            .set("#execution.#last_error = :error")
            .set("#execution.#updated_at = :now");
        let update = ended.apply(update, &mut values, self.retention).build();
        let condition = format!("{ONLY_IF_EXISTS} AND {ONLY_IF_UNREPORTED}");
        self.update_where(tenant, id, (&update, &condition), values)
            .await
    }
}

impl Store {
    /// One conditional update of the approval: `Err` carries the item as it was.
    async fn update_where(
        &self,
        tenant: &TenantId,
        id: &ApprovalId,
        (update, condition): (&str, &str),
        values: HashMap<String, aws_sdk_dynamodb::types::AttributeValue>,
    ) -> Result<Result<Approval, Option<Approval>>, StoreError> {
        let names = names(&[update, condition]);
        self.update_approval(tenant, id, update, condition, names, values)
            .await
    }
}

/// `condition`, and for a requester's key (`requester_only`) that the approval is its own.
fn with_requester(
    condition: String,
    (principal, requester_only): (&Approver, bool),
    values: &mut HashMap<String, aws_sdk_dynamodb::types::AttributeValue>,
) -> String {
    if !requester_only {
        return condition;
    }
    values.insert(":by".to_owned(), s(principal.identity()));
    format!("{condition} AND {ONLY_IF_ITS_REQUESTER}")
}

/// Why the reconciler ended a claim.
pub const UNREPORTED: &str =
    "claimed, but no outcome was reported in time: whether the claimer acted is unknown";
