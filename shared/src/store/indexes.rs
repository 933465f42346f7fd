//! The approvals table's index attributes, made in one place.
//!
//! - `status_id` (the `by_status` index, partitioned by tenant): the status, then the id, so one
//!   tenant's approvals of one status are a range of the index, newest last.
//! - `due_kind` / `due_at` (the sparse `due` index): a pending approval is due at the earliest
//!   of its next reminder (the `reminder` partition), its next escalation step (`escalation`)
//!   and its expiry (`expiry`), one entry, moved on by the write that sends the reminder or
//!   applies the step (the sweeper's); an approved one whose execution is queued or running is
//!   due to end (the reconciler's, from its last change, or from when it waits for a status
//!   query); any other approval has neither attribute, so it is in no partition and no query
//!   reads it.
//!
//! - `retain_until` (the table's TTL): set, to the write's time + `RETENTION_DAYS`, by the write
//!   that leaves nothing due (the approval has ended); removed by one that leaves something
//!   due, so nothing pending or running is ever deleted (see `domain::Retention`).
//!
//! Every write that changes an approval's status or its execution's status takes these from
//! [`Indexed`]: the put of a new approval ([`Indexed::of`]) and every update ([`Indexed::after`],
//! applied with [`Indexed::apply`]). A write that forgot one would leave an approval where the
//! expirer or the reconciler never looks, or list it under a status it no longer has.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

use super::attr::{epoch, s};
use super::expr::UpdateExpr;
use crate::domain::stall::Next;
use crate::domain::{Approval, ApprovalId, EpochSeconds, ExecutionStatus, Retention, Status};

/// The `due` index's partitions.
pub(crate) const DUE_EXPIRY: &str = "expiry";
pub(crate) const DUE_EXECUTION: &str = "execution";
pub(crate) const DUE_REMINDER: &str = "reminder";
pub(crate) const DUE_ESCALATION: &str = "escalation";

/// The TTL attribute of every table that holds an approval's items.
pub(crate) const RETAIN_UNTIL: &str = "retain_until";

/// What is due on an approval, and from when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Due {
    /// Pending: the expirer's, at its expiry.
    Expiry(EpochSeconds),
    /// Pending, a reminder falls due first: the sweeper's, then.
    Reminder(EpochSeconds),
    /// Pending, an escalation step falls due first: the sweeper's, then.
    Escalation(EpochSeconds),
    /// Approved, its execution queued or running: the reconciler's, from then.
    Execution(EpochSeconds),
    /// Nothing: decided otherwise, cancelled, expired, or its execution has ended.
    Nothing,
}

impl Due {
    /// A pending approval's next due time: a reminder, a step or its expiry.
    fn next(approval: &Approval) -> Self {
        match approval
            .stall
            .next(approval.created_at, approval.expires_at)
        {
            (Next::Reminder(_), at) => Self::Reminder(at),
            (Next::Escalation(_), at) => Self::Escalation(at),
            (Next::Expiry, at) => Self::Expiry(at),
        }
    }

    /// What an approval in `status`, its execution in `execution`, has due: its expiry
    /// (`expires_at`) while pending; its execution's end (from `execution_at`) while approved
    /// and queued or running; nothing otherwise.
    pub(crate) fn of(
        status: Status,
        execution: ExecutionStatus,
        expires_at: EpochSeconds,
        execution_at: EpochSeconds,
    ) -> Self {
        match (status, execution) {
            (Status::Pending, _) => Self::Expiry(expires_at),
            (Status::Approved, ExecutionStatus::Queued | ExecutionStatus::Running) => {
                Self::Execution(execution_at)
            }
            _ => Self::Nothing,
        }
    }
}

/// An approval item's TTL (`retain_until`), as a stream image carries it: set once it has ended.
pub fn retain_until_of(item: &HashMap<String, AttributeValue>) -> Option<EpochSeconds> {
    match item.get(RETAIN_UNTIL) {
        Some(AttributeValue::N(n)) => n.parse().ok(),
        _ => None,
    }
}

/// The `by_status` index's sort key.
fn status_id(status: Status, id: &ApprovalId) -> AttributeValue {
    s(format!("{}#{id}", status.as_str()))
}

/// The index attributes of the state a write leaves an approval in.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Indexed {
    /// `None`: the write leaves the status as it is.
    status_id: Option<AttributeValue>,
    due: Due,
    /// When the write happens (an ended approval's retention counts from it).
    at: EpochSeconds,
}

impl Indexed {
    /// A whole approval's (its put).
    pub(crate) fn of(approval: &Approval) -> Self {
        let due = match Due::of(
            approval.status,
            approval.execution.status,
            approval.expires_at,
            approval.execution.updated_at,
        ) {
            Due::Expiry(_) => Due::next(approval),
            due => due,
        };
        Self {
            status_id: Some(status_id(approval.status, &approval.id)),
            due,
            at: approval.execution.updated_at,
        }
    }

    /// What a write that leaves `approval` pending (its reminders and steps as the write
    /// leaves them) has due next: the sweeper's, when it sends a reminder or applies a step.
    pub(crate) fn still_pending(approval: &Approval, at: EpochSeconds) -> Self {
        Self {
            status_id: None,
            due: Due::next(approval),
            at,
        }
    }

    /// What an update leaves: the approval `id` in `status` (`sets_status`: the update writes
    /// it; otherwise it is what the update's condition requires), its execution in `execution`,
    /// due from `at` if it is due to end. No update leaves an approval pending.
    pub(crate) fn after(
        id: &ApprovalId,
        status: Status,
        sets_status: bool,
        execution: ExecutionStatus,
        at: EpochSeconds,
    ) -> Self {
        debug_assert_ne!(
            status,
            Status::Pending,
            "an update never leaves an approval pending"
        );
        Self {
            status_id: sets_status.then(|| status_id(status, id)),
            due: Due::of(status, execution, at, at),
            at,
        }
    }

    /// The attributes of a put (of a new approval: pending, so it has no TTL).
    pub(crate) fn attributes(&self) -> Vec<(String, AttributeValue)> {
        let mut attributes = Vec::new();
        if let Some(status_id) = &self.status_id {
            attributes.push(("status_id".to_owned(), status_id.clone()));
        }
        if let Some((kind, at)) = self.due_attributes() {
            attributes.push(("due_kind".to_owned(), s(kind)));
            attributes.push(("due_at".to_owned(), epoch(at)));
        }
        attributes
    }

    /// Adds the index attributes to an update: set where something is due, removed where
    /// nothing is. Their values are named `:index_*`, apart from the write's own.
    pub(crate) fn apply(
        &self,
        update: UpdateExpr,
        values: &mut HashMap<String, AttributeValue>,
        retention: Retention,
    ) -> UpdateExpr {
        let mut update = update;
        if let Some(status_id) = &self.status_id {
            update = update.set("#status_id = :index_status_id");
            values.insert(":index_status_id".to_owned(), status_id.clone());
        }
        match self.due_attributes() {
            Some((kind, at)) => {
                values.insert(":index_due_kind".to_owned(), s(kind));
                values.insert(":index_due_at".to_owned(), epoch(at));
                update
                    .set("#due_kind = :index_due_kind")
                    .set("#due_at = :index_due_at")
                    .remove("#retain_until")
            }
            None => {
                let update = update.remove("#due_kind").remove("#due_at");
                match self.retain_until(retention) {
                    Some(until) => {
                        values.insert(":index_retain_until".to_owned(), epoch(until));
                        update.set("#retain_until = :index_retain_until")
                    }
                    None => update,
                }
            }
        }
    }

    /// An ended approval's TTL: nothing is due on it.
    fn retain_until(&self, retention: Retention) -> Option<EpochSeconds> {
        match self.due {
            Due::Nothing => retention.after_end(self.at),
            Due::Expiry(_) | Due::Reminder(_) | Due::Escalation(_) | Due::Execution(_) => None,
        }
    }

    fn due_attributes(&self) -> Option<(&'static str, EpochSeconds)> {
        match self.due {
            Due::Expiry(at) => Some((DUE_EXPIRY, at)),
            Due::Execution(at) => Some((DUE_EXECUTION, at)),
            Due::Reminder(at) => Some((DUE_REMINDER, at)),
            Due::Escalation(at) => Some((DUE_ESCALATION, at)),
            Due::Nothing => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::approval::tests::pending;

    #[test]
    fn each_state_is_in_the_partition_its_reader_queries() {
        use ExecutionStatus as E;
        assert_eq!(
            Due::of(Status::Pending, E::NotStarted, 100, 5),
            Due::Expiry(100)
        );
        for execution in [E::Queued, E::Running] {
            assert_eq!(
                Due::of(Status::Approved, execution, 100, 5),
                Due::Execution(5)
            );
        }
        for execution in [
            E::NotStarted,
            E::Succeeded,
            E::Failed,
            E::NeedsReconciliation,
        ] {
            assert_eq!(Due::of(Status::Approved, execution, 100, 5), Due::Nothing);
        }
        for status in [Status::Rejected, Status::Expired, Status::Cancelled] {
            assert_eq!(Due::of(status, E::NotStarted, 100, 5), Due::Nothing);
        }
    }

    #[test]
    fn an_update_sets_what_a_put_of_the_same_state_holds_and_removes_the_rest() {
        let mut approval = pending(1_000);
        approval.status = Status::Approved;
        approval.execution.status = ExecutionStatus::Running;
        approval.execution.updated_at = 7;
        let put = Indexed::of(&approval);
        let update = Indexed::after(
            &approval.id,
            Status::Approved,
            true,
            ExecutionStatus::Running,
            7,
        );
        assert_eq!(put, update);
        let mut values = HashMap::new();
        let retention = Retention::days(1);
        let expression = update
            .apply(UpdateExpr::default(), &mut values, retention)
            .build();
        // Running: nothing may delete it (an operator's retry of a failed one takes its TTL off).
        assert_eq!(
            expression,
            "SET #status_id = :index_status_id, #due_kind = :index_due_kind, #due_at = :index_due_at \
             REMOVE #retain_until"
        );
        let attributes: HashMap<String, AttributeValue> = put.attributes().into_iter().collect();
        assert_eq!(attributes["status_id"], values[":index_status_id"]);
        assert_eq!(attributes["due_kind"], values[":index_due_kind"]);
        assert_eq!(attributes["due_at"], values[":index_due_at"]);

        let ended = Indexed::after(
            &approval.id,
            Status::Approved,
            false,
            ExecutionStatus::Succeeded,
            9,
        );
        let mut values = HashMap::new();
        assert_eq!(
            ended
                .apply(
                    UpdateExpr::default(),
                    &mut values,
                    Retention::keep_everything()
                )
                .build(),
            "REMOVE #due_kind, #due_at"
        );
        assert!(values.is_empty());
        // Ended: its TTL is set in the write that ends it, a day after it.
        assert_eq!(
            ended
                .apply(UpdateExpr::default(), &mut values, retention)
                .build(),
            "SET #retain_until = :index_retain_until REMOVE #due_kind, #due_at"
        );
        assert_eq!(values[":index_retain_until"], epoch(9 + 86_400));
    }
}
