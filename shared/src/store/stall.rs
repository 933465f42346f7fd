//! The sweeper's writes on pending approvals that stall: a reminder sent, an escalation step
//! applied. Found through the `due` index's `reminder` and `escalation` partitions (see
//! [`super::indexes`]), read in one batch, and each moved on by one conditional write that holds
//! only while the approval is pending, unexpired and as it was read — neither count moved
//! since. So any number of sweeps running at once sends each reminder and applies each step
//! once: the write is what sends it (the dispatcher makes the notifications from the change).

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

use super::attr::{epoch, n, s};
use super::client::Store;
use super::codec::{ESCALATED, REMINDED, approval_from_item};
use super::conditions::ONLY_IF_EXISTS;
use super::error::StoreError;
use super::expr::{UpdateExpr, names};
use super::indexes::{DUE_ESCALATION, DUE_REMINDER, Indexed};
use crate::domain::{Approval, EpochSeconds, Status};

/// only_if_pending_and_unexpired: a decision, cancel or expiry stops the rest.
const ONLY_IF_PENDING: &str = "#status = :pending AND #expires_at > :now";

/// What a run found: the approvals, and how many could not be read.
pub struct Stalled {
    pub approvals: Vec<Approval>,
    pub unreadable: u32,
}

impl Store {
    /// The pending approvals with a reminder or an escalation step due by `now`, as they are.
    pub async fn stalled(&self, now: EpochSeconds) -> Result<Stalled, StoreError> {
        let mut keys = self.due(DUE_ESCALATION, now).await?;
        keys.extend(self.due(DUE_REMINDER, now).await?);
        if keys.is_empty() {
            return Ok(Stalled {
                approvals: Vec::new(),
                unreadable: 0,
            });
        }
        let pks = keys.iter().map(|(t, i)| format!("{t}#{i}")).collect();
        let items = self.get_many(&self.tables.approvals, pks).await?;
        let mut approvals = Vec::new();
        let mut unreadable = 0;
        for (pk, item) in items {
            match approval_from_item(&item) {
                Ok(approval) => approvals.push(approval),
                Err(e) => {
                    tracing::error!(key = %pk, error = %e, "a stalled approval this version cannot read; the others go on");
                    unreadable += 1;
                }
            }
        }
        approvals.sort_by(|a, b| a.id.as_str().cmp(b.id.as_str()));
        Ok(Stalled {
            approvals,
            unreadable,
        })
    }

    /// Sends reminder `number` of `read` (the approval as read): the write that records it
    /// sent. `None`: it was not (decided, cancelled, expired, or moved on by another sweep).
    pub async fn remind(
        &self,
        read: &Approval,
        number: u32,
        now: EpochSeconds,
    ) -> Result<Option<Approval>, StoreError> {
        let mut after = read.clone();
        after.stall.reminded = number;
        let values = HashMap::from([(":reminded".to_owned(), n(number))]);
        let update = UpdateExpr::default().set("#reminded = :reminded");
        self.move_on(read, &after, update, values, now).await
    }

    /// Applies `read`'s next escalation step: its approvers are listed (the rules they join are
    /// kept in the step, and their ballots were written at create). `None`: not applied here.
    pub async fn escalate(
        &self,
        read: &Approval,
        now: EpochSeconds,
    ) -> Result<Option<Approval>, StoreError> {
        let Some(step) = usize::try_from(read.stall.escalated)
            .ok()
            .and_then(|i| read.stall.escalation.get(i))
        else {
            return Ok(None);
        };
        let mut after = read.clone();
        after.stall.escalated += 1;
        let values = HashMap::from([
            (":escalated".to_owned(), n(after.stall.escalated)),
            (
                ":joined".to_owned(),
                AttributeValue::L(step.approvers.iter().map(|a| s(a.as_str())).collect()),
            ),
        ]);
        let update = UpdateExpr::default()
            .set("#escalated = :escalated")
            .set("#approvers = list_append(#approvers, :joined)");
        self.move_on(read, &after, update, values, now).await
    }

    /// `update` on `read`, leaving it pending with what falls due next on `after`, while it
    /// is pending, unexpired and its counts are as read.
    async fn move_on(
        &self,
        read: &Approval,
        after: &Approval,
        update: UpdateExpr,
        mut values: HashMap<String, AttributeValue>,
        now: EpochSeconds,
    ) -> Result<Option<Approval>, StoreError> {
        values.insert(":pending".to_owned(), s(Status::Pending.as_str()));
        values.insert(":now".to_owned(), epoch(now));
        let mut as_read = Vec::new();
        for (attribute, count) in [
            (REMINDED, read.stall.reminded),
            (ESCALATED, read.stall.escalated),
        ] {
            if count == 0 {
                as_read.push(format!("attribute_not_exists(#{attribute})"));
            } else {
                as_read.push(format!("#{attribute} = :{attribute}_was"));
                values.insert(format!(":{attribute}_was"), n(count));
            }
        }
        let update = Indexed::still_pending(after, now)
            .apply(update, &mut values, self.retention)
            .build();
        let condition = format!(
            "{ONLY_IF_EXISTS} AND {ONLY_IF_PENDING} AND {}",
            as_read.join(" AND ")
        );
        let outcome = self
            .update_approval(
                &read.tenant,
                &read.id,
                &update,
                &condition,
                names(&[&update, &condition]),
                values,
            )
            .await?;
        Ok(outcome.ok())
    }
}
