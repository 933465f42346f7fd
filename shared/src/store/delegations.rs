//! Delegations (docs/API.md "Delegation"): one item per person per tenant in the keys table,
//! keyed `delegation#{tenant}#{identity}` (no new table, and the read a vote in someone's place
//! takes is one `GetItem`). A put replaces the person's delegation; a delete ends it at once:
//! every read is strongly consistent, so no vote after the delete finds it.

use super::attr::{Item, epoch, get_n, get_s, opt_s, s};
use super::client::Store;
use super::error::StoreError;
use super::keys::delegation_key;
use crate::domain::delegation::Delegation;
use crate::domain::{Approver, EpochSeconds, TenantId};

fn delegation_item(
    tenant: &TenantId,
    delegation: &Delegation,
    (set_by, now): (&Approver, EpochSeconds),
) -> Item {
    let mut item = Item::from([
        (
            "pk".to_owned(),
            delegation_key(tenant, &delegation.delegator),
        ),
        ("delegate".to_owned(), s(delegation.delegate.as_str())),
        ("from".to_owned(), epoch(delegation.from)),
        ("until".to_owned(), epoch(delegation.until)),
        ("created_at".to_owned(), epoch(now)),
        ("set_by".to_owned(), s(set_by.as_str())),
    ]);
    if let Some(reason) = &delegation.reason {
        item.insert("reason".to_owned(), s(reason));
    }
    item
}

/// A delegation as stored: what it says, who set it, and when (which tells one write of it
/// from another: a vote in someone's place counts only while the delegation is the one read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredDelegation {
    pub delegation: Delegation,
    /// The principal that set it: the delegator, or an operator (`None`: stored without).
    pub set_by: Option<Approver>,
    pub created_at: EpochSeconds,
}

pub(super) fn delegation_from_item(
    delegator: &Approver,
    item: &Item,
) -> Result<StoredDelegation, StoreError> {
    Ok(StoredDelegation {
        delegation: Delegation {
            delegator: delegator.clone(),
            delegate: Approver::from_stored(get_s(item, "delegate")?)
                .map_err(|_| StoreError::corrupt("delegate"))?,
            from: get_n(item, "from")?,
            until: get_n(item, "until")?,
            reason: opt_s(item, "reason"),
        },
        set_by: opt_s(item, "set_by")
            .map(|by| Approver::from_stored(&by))
            .transpose()
            .map_err(|_| StoreError::corrupt("set_by"))?,
        created_at: get_n(item, "created_at").unwrap_or(0),
    })
}

impl Store {
    /// Sets `delegation` (one `PutItem`), replacing the delegator's earlier one: a person has
    /// one delegate at a time. `set_by`: the principal whose key set it (themselves or an
    /// operator).
    pub async fn put_delegation(
        &self,
        tenant: &TenantId,
        delegation: &Delegation,
        set_by: &Approver,
        now: EpochSeconds,
    ) -> Result<(), StoreError> {
        self.client
            .put_item()
            .table_name(&self.tables.api_keys)
            .set_item(Some(delegation_item(tenant, delegation, (set_by, now))))
            // Named, as the grant's `dynamodb:ReturnValues` condition expects (the key is in
            // a request's context only when the request carries it).
            .return_values(aws_sdk_dynamodb::types::ReturnValue::None)
            .send()
            .await
            .map_err(|e| StoreError::from_sdk("PutItem", e))?;
        Ok(())
    }

    /// `delegator`'s delegation, whether or not in force now (one strongly consistent
    /// `GetItem`: a delegation just ended is never found).
    pub async fn delegation(
        &self,
        tenant: &TenantId,
        delegator: &Approver,
    ) -> Result<Option<StoredDelegation>, StoreError> {
        let got = self
            .client
            .get_item()
            .table_name(&self.tables.api_keys)
            .key("pk", delegation_key(tenant, delegator))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| StoreError::from_sdk("GetItem", e))?;
        got.item()
            .map(|item| delegation_from_item(delegator, item))
            .transpose()
    }

    /// The delegations of each of `delegators` (one strongly consistent `BatchGetItem`), in
    /// force or not: which places a delegate may fill.
    pub async fn delegations_of(
        &self,
        tenant: &TenantId,
        delegators: &[&Approver],
    ) -> Result<Vec<StoredDelegation>, StoreError> {
        self.read_delegations(tenant, delegators, true).await
    }

    /// [`Store::delegations_of`], eventually consistent (half the read units): whom a
    /// notification also goes to, where one a moment old tells as well.
    pub async fn delegations_to_notify(
        &self,
        tenant: &TenantId,
        delegators: &[&Approver],
    ) -> Result<Vec<Delegation>, StoreError> {
        Ok(self
            .read_delegations(tenant, delegators, false)
            .await?
            .into_iter()
            .map(|d| d.delegation)
            .collect())
    }

    async fn read_delegations(
        &self,
        tenant: &TenantId,
        delegators: &[&Approver],
        consistent: bool,
    ) -> Result<Vec<StoredDelegation>, StoreError> {
        if delegators.is_empty() {
            return Ok(Vec::new());
        }
        let keys = delegators
            .iter()
            .filter_map(|d| delegation_key(tenant, d).as_s().ok().cloned())
            .collect();
        let found = self
            .get_many_read(&self.tables.api_keys, keys, consistent)
            .await?;
        delegators
            .iter()
            .filter_map(|d| {
                let key = delegation_key(tenant, d);
                let item = found.get(key.as_s().ok()?)?;
                Some(delegation_from_item(d, item))
            })
            .collect()
    }

    /// Ends `delegator`'s delegation now (one `DeleteItem`; nothing to end is no error).
    pub async fn end_delegation(
        &self,
        tenant: &TenantId,
        delegator: &Approver,
    ) -> Result<(), StoreError> {
        self.client
            .delete_item()
            .table_name(&self.tables.api_keys)
            .key("pk", delegation_key(tenant, delegator))
            .return_values(aws_sdk_dynamodb::types::ReturnValue::None)
            .send()
            .await
            .map_err(|e| StoreError::from_sdk("DeleteItem", e))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use aws_sdk_dynamodb::types::AttributeValue;

    use super::*;

    #[test]
    fn an_item_reads_back_as_the_delegation_it_stores() {
        let alice = Approver::parse("Alice@Example.com").unwrap();
        let delegation = Delegation {
            delegator: alice.clone(),
            delegate: Approver::parse("bob@example.com").unwrap(),
            from: 100,
            until: 200,
            reason: Some("holiday".into()),
        };
        let tenant = TenantId::parse("acme").unwrap();
        let item = delegation_item(&tenant, &delegation, (&alice, 50));
        assert_eq!(
            item["pk"],
            AttributeValue::S("delegation#acme#alice@example.com".into())
        );
        let stored = delegation_from_item(&alice, &item).unwrap();
        assert_eq!(stored.delegation, delegation);
        assert_eq!(
            (stored.set_by, stored.created_at),
            (Some(alice.clone()), 50)
        );
        let mut keys: Vec<&str> = item.keys().map(String::as_str).collect();
        keys.sort_unstable();
        // What the API function's role may write (infra/template.yaml), and nothing else.
        assert_eq!(
            keys,
            [
                "created_at",
                "delegate",
                "from",
                "pk",
                "reason",
                "set_by",
                "until"
            ]
        );
    }
}
