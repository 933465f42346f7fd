//! Seats for held reads (`GET /approvals/{id}?wait=N`, SPEC "Waiting without polling"): at most
//! `cap` reads hold at once across every function instance, whatever the number of instances.
//! One item of the ledger table (`pk = held-reads`) holds a string set of leases, one per held
//! read: `{end}#{lease id}`. Taking a seat is one conditional `UpdateItem` (`ADD` the lease,
//! only while the set has fewer than `cap` members); leaving is one `UpdateItem` (`DELETE` it).
//! A held read whose process died never leaves: its lease names when the read ends (`end`), and
//! a read refused while a lease that ended long enough ago for its process to be surely gone is
//! in the set removes it and asks once more.

use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValuesOnConditionCheckFailure};

use super::attr::{Item, s};
use super::client::Store;
use super::error::StoreError;
use crate::domain::EpochSeconds;

/// The one item that counts held reads (in the ledger table: the leases of work in progress).
const HELD_READS_PK: &str = "held-reads";

/// only_if_a_seat_is_free: of any number of reads asking at once, at most `cap` hold — the set's
/// size is checked and the lease added in one write, so no two reads take the last seat.
const ONLY_IF_A_SEAT_IS_FREE: &str = "attribute_not_exists(#leases) OR size(#leases) < :cap";

/// A lease on a seat: the text stored in the set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldReadLease(String);

impl HeldReadLease {
    /// A lease for a read that ends at `end` (epoch seconds).
    pub fn new(end: EpochSeconds) -> Self {
        Self(format!("{end}#{}", ulid::Ulid::new()))
    }

    /// When the read holding it ends (a lease of another shape has ended, so it can be removed).
    fn end(text: &str) -> EpochSeconds {
        text.split_once('#')
            .and_then(|(until, _)| until.parse().ok())
            .unwrap_or(0)
    }
}

/// The answer to a request for a seat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seat {
    /// The read holds; it leaves with [`Store::leave_held_read`].
    Taken,
    /// Every seat is taken; a seat is likely free again at `next_free` (when the soonest
    /// holding read ends, or a lease past its end is found dead).
    Full { next_free: EpochSeconds },
}

impl Store {
    /// Takes a seat for `lease` if fewer than `cap` reads hold: one conditional `UpdateItem`,
    /// two more (the removal of dead leases, then one more try) only when the seats are full and
    /// a lease in them is dead: its read ended before `dead_before`.
    pub async fn take_held_read_seat(
        &self,
        lease: &HeldReadLease,
        cap: u32,
        (now, grace): (EpochSeconds, EpochSeconds),
    ) -> Result<Seat, StoreError> {
        let first = self.try_seat(lease, cap).await?;
        let Some(leases) = first else {
            return Ok(Seat::Taken);
        };
        let dead: Vec<String> = leases
            .iter()
            .filter(|l| HeldReadLease::end(l) + grace < now)
            .cloned()
            .collect();
        if dead.is_empty() {
            return Ok(Seat::Full {
                next_free: next_free(&leases, now, grace),
            });
        }
        self.remove_leases(dead).await?;
        match self.try_seat(lease, cap).await? {
            None => Ok(Seat::Taken),
            Some(leases) => Ok(Seat::Full {
                next_free: next_free(&leases, now, grace),
            }),
        }
    }

    /// Gives the seat back (one `UpdateItem`; removing a lease that is gone already changes
    /// nothing, so a retry is safe).
    pub async fn leave_held_read(&self, lease: &HeldReadLease) -> Result<(), StoreError> {
        self.remove_leases(vec![lease.0.clone()]).await
    }

    /// The leases holding now (for tests and the runbook's question "who holds?").
    pub async fn held_read_leases(&self) -> Result<Vec<String>, StoreError> {
        let got = self
            .client
            .get_item()
            .table_name(&self.tables.execution_ledger)
            .key("pk", s(HELD_READS_PK))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| StoreError::from_sdk("GetItem", e))?;
        Ok(got.item().map(leases_of).unwrap_or_default())
    }

    /// `None`: the seat is taken; otherwise the leases that fill the seats.
    async fn try_seat(
        &self,
        lease: &HeldReadLease,
        cap: u32,
    ) -> Result<Option<Vec<String>>, StoreError> {
        let update = self
            .client
            .update_item()
            .table_name(&self.tables.execution_ledger)
            .key("pk", s(HELD_READS_PK))
            .update_expression("ADD #leases :lease")
            .condition_expression(ONLY_IF_A_SEAT_IS_FREE)
            .expression_attribute_names("#leases", "leases")
            .expression_attribute_values(":lease", AttributeValue::Ss(vec![lease.0.clone()]))
            .expression_attribute_values(":cap", AttributeValue::N(cap.to_string()))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match update {
            Ok(_) => Ok(None),
            Err(e) => match e.into_service_error() {
                UpdateItemError::ConditionalCheckFailedException(failed) => {
                    let leases = failed.item().map(leases_of).unwrap_or_default();
                    // Our own write applied, its answer was lost, and the SDK's retry met it
                    // (taking the last seat): the seat is ours.
                    if leases.contains(&lease.0) {
                        return Ok(None);
                    }
                    Ok(Some(leases))
                }
                other => Err(StoreError::dynamo("UpdateItem", other)),
            },
        }
    }

    async fn remove_leases(&self, leases: Vec<String>) -> Result<(), StoreError> {
        self.client
            .update_item()
            .table_name(&self.tables.execution_ledger)
            .key("pk", s(HELD_READS_PK))
            .update_expression("DELETE #leases :leases")
            .expression_attribute_names("#leases", "leases")
            .expression_attribute_values(":leases", AttributeValue::Ss(leases))
            .send()
            .await
            .map_err(|e| StoreError::from_sdk("UpdateItem", e))?;
        Ok(())
    }
}

fn leases_of(item: &Item) -> Vec<String> {
    match item.get("leases") {
        Some(AttributeValue::Ss(leases)) => leases.clone(),
        _ => Vec::new(),
    }
}

/// When a seat is likely free again: the soonest end of a read still holding, or of the grace
/// of one past its end (it is giving its seat back, or dead and found so then).
fn next_free(leases: &[String], now: EpochSeconds, grace: EpochSeconds) -> EpochSeconds {
    leases
        .iter()
        .map(|l| HeldReadLease::end(l))
        .map(|end| if end >= now { end } else { end + grace })
        .min()
        .unwrap_or(now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_names_its_end_and_one_of_another_shape_has_ended() {
        let lease = HeldReadLease::new(1_700_000_030);
        assert_eq!(HeldReadLease::end(&lease.0), 1_700_000_030);
        assert_ne!(
            lease,
            HeldReadLease::new(1_700_000_030),
            "each lease is its own"
        );
        assert_eq!(HeldReadLease::end("garbage"), 0);
        let leases = |ends: &[i64]| ends.iter().map(|e| format!("{e}#x")).collect::<Vec<_>>();
        assert_eq!(next_free(&leases(&[130, 112, 140]), 100, 30), 112);
        assert_eq!(
            next_free(&leases(&[95, 140]), 100, 30),
            125,
            "a read past its end frees its seat by the end of its grace"
        );
        assert_eq!(next_free(&[], 100, 30), 100);
    }
}
