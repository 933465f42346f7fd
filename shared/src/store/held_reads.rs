//! Seats for held reads (`GET /approvals/{id}?wait=N`, docs/API.md "Held reads"): at most
//! `cap` reads hold at once across every function instance, whatever the number of instances,
//! and at most `per_tenant` of them for one tenant, so no tenant can take every seat.
//! One item of the ledger table (`pk = held-reads`) holds a string set of leases, one per held
//! read: `{end}#{tenant}#{lease id}`, and one set per tenant holding that tenant's leases
//! (attribute `tenant#{tenant}`). Taking a seat is one conditional `UpdateItem` (`ADD` the lease
//! to both sets, only while the first has fewer than `cap` members and the tenant's fewer than
//! `per_tenant`); leaving is one `UpdateItem` (`DELETE` it from both).
//! A held read whose process died never leaves: its lease names when the read ends (`end`), and
//! a read refused while a lease that ended long enough ago for its process to be surely gone is
//! in the set removes it and asks once more.

use std::collections::BTreeMap;

use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValuesOnConditionCheckFailure};

use super::attr::{Item, s};
use super::client::Store;
use super::error::StoreError;
use crate::domain::{EpochSeconds, TenantId};

/// The one item that counts held reads (in the ledger table: the leases of work in progress).
const HELD_READS_PK: &str = "held-reads";

/// only_if_a_seat_is_free: of any number of reads asking at once, at most `cap` hold — the set's
/// size is checked and the lease added in one write, so no two reads take the last seat.
/// The tenant's own set is checked in the same condition: one write, so no two reads of a tenant
/// take its last seat either.
const ONLY_IF_A_SEAT_IS_FREE: &str = "(attribute_not_exists(#leases) OR size(#leases) < :cap) \
     AND (attribute_not_exists(#mine) OR size(#mine) < :per_tenant)";

/// A lease on a seat: the text stored in the set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldReadLease(String);

impl HeldReadLease {
    /// A lease for a read of `tenant` that ends at `end` (epoch seconds).
    pub fn new(tenant: &TenantId, end: EpochSeconds) -> Self {
        Self(format!("{end}#{}#{}", tenant.as_str(), ulid::Ulid::new()))
    }

    /// When the read holding it ends (a lease of another shape has ended, so it can be removed).
    fn end(text: &str) -> EpochSeconds {
        text.split_once('#')
            .and_then(|(until, _)| until.parse().ok())
            .unwrap_or(0)
    }

    /// The attribute holding the tenant's own leases; `None` for a lease written before seats
    /// were counted per tenant (`{end}#{lease id}`), which only the whole set holds.
    fn tenant_attribute(text: &str) -> Option<String> {
        let mut parts = text.splitn(3, '#');
        let (_end, tenant, _id) = (parts.next()?, parts.next()?, parts.next()?);
        Some(tenant_attribute(tenant))
    }
}

fn tenant_attribute(tenant: &str) -> String {
    format!("tenant#{tenant}")
}

/// How many seats there are: `all` for every tenant together, `per_tenant` for each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeatCaps {
    pub all: u32,
    pub per_tenant: u32,
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
    /// Takes a seat for `lease` (of `tenant`) if fewer than `caps.all` reads hold and fewer than
    /// `caps.per_tenant` of the tenant's: one conditional `UpdateItem`, two more (the removal of
    /// dead leases, then one more try) only when the seats are full and a lease in them is dead:
    /// its read ended more than `grace` before `now`.
    pub async fn take_held_read_seat(
        &self,
        tenant: &TenantId,
        lease: &HeldReadLease,
        caps: SeatCaps,
        (now, grace): (EpochSeconds, EpochSeconds),
    ) -> Result<Seat, StoreError> {
        let first = self.try_seat(tenant, lease, caps).await?;
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
        match self.try_seat(tenant, lease, caps).await? {
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

    /// `None`: the seat is taken; otherwise the leases that fill the seats: every tenant's when
    /// those are full, else the tenant's own.
    async fn try_seat(
        &self,
        tenant: &TenantId,
        lease: &HeldReadLease,
        caps: SeatCaps,
    ) -> Result<Option<Vec<String>>, StoreError> {
        let mine = tenant_attribute(tenant.as_str());
        let update = self
            .client
            .update_item()
            .table_name(&self.tables.execution_ledger)
            .key("pk", s(HELD_READS_PK))
            .update_expression("ADD #leases :lease, #mine :lease")
            .condition_expression(ONLY_IF_A_SEAT_IS_FREE)
            .expression_attribute_names("#leases", "leases")
            .expression_attribute_names("#mine", &mine)
            .expression_attribute_values(":lease", AttributeValue::Ss(vec![lease.0.clone()]))
            .expression_attribute_values(":cap", AttributeValue::N(caps.all.to_string()))
            .expression_attribute_values(
                ":per_tenant",
                AttributeValue::N(caps.per_tenant.to_string()),
            )
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
                    if leases.len() < caps.all as usize {
                        // The tenant's own seats are full: only its leases free one for it.
                        let own = failed
                            .item()
                            .map(|item| set_of(item, &mine))
                            .unwrap_or_default();
                        return Ok(Some(own));
                    }
                    Ok(Some(leases))
                }
                other => Err(StoreError::dynamo("UpdateItem", other)),
            },
        }
    }

    /// Removes `leases` from the whole set and from their tenants' sets, in one write.
    async fn remove_leases(&self, leases: Vec<String>) -> Result<(), StoreError> {
        let mut by_tenant: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for lease in &leases {
            if let Some(attribute) = HeldReadLease::tenant_attribute(lease) {
                by_tenant.entry(attribute).or_default().push(lease.clone());
            }
        }
        let mut update = self
            .client
            .update_item()
            .table_name(&self.tables.execution_ledger)
            .key("pk", s(HELD_READS_PK))
            .expression_attribute_names("#leases", "leases")
            .expression_attribute_values(":leases", AttributeValue::Ss(leases));
        let mut deletes = vec!["#leases :leases".to_owned()];
        for (i, (attribute, own)) in by_tenant.into_iter().enumerate() {
            deletes.push(format!("#t{i} :t{i}"));
            update = update
                .expression_attribute_names(format!("#t{i}"), attribute)
                .expression_attribute_values(format!(":t{i}"), AttributeValue::Ss(own));
        }
        update
            .update_expression(format!("DELETE {}", deletes.join(", ")))
            .send()
            .await
            .map_err(|e| StoreError::from_sdk("UpdateItem", e))?;
        Ok(())
    }
}

fn leases_of(item: &Item) -> Vec<String> {
    set_of(item, "leases")
}

fn set_of(item: &Item, attribute: &str) -> Vec<String> {
    match item.get(attribute) {
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
        let tenant = TenantId::parse("tenant-a").unwrap();
        let lease = HeldReadLease::new(&tenant, 1_700_000_030);
        assert_eq!(HeldReadLease::end(&lease.0), 1_700_000_030);
        assert_eq!(
            HeldReadLease::tenant_attribute(&lease.0).as_deref(),
            Some("tenant#tenant-a")
        );
        assert_eq!(
            HeldReadLease::tenant_attribute("1700000030#01J0"),
            None,
            "a lease from before per-tenant seats"
        );
        assert_ne!(
            lease,
            HeldReadLease::new(&tenant, 1_700_000_030),
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
