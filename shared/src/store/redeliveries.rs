//! GitHub's redelivery sweep in the store (docs/GITHUB.md): which
//! deliveries the inbox holds, each failed attempt's ask claimed as a lease and recorded once
//! asked, and each period's sweep claimed once.

use std::collections::HashSet;

use super::attr::{epoch, opt_s, s};
use super::client::Store;
use super::error::StoreError;
use super::expr::names;
use super::keys::github_source;
use crate::domain::{EpochSeconds, TenantId};

impl Store {
    /// Which of `guids` (the App's deliveries) the inbox holds for `tenant`.
    pub async fn github_deliveries_held(
        &self,
        tenant: &TenantId,
        guids: &[String],
    ) -> Result<HashSet<String>, StoreError> {
        let source = github_source(tenant);
        let keys = guids
            .iter()
            .map(|g| super::keys::inbox_key(&source, g))
            .collect();
        let found = self.get_many(&self.tables.webhook_inbox, keys).await?;
        Ok(found
            .values()
            .filter_map(|item| opt_s(item, "event_id"))
            .collect())
    }

    /// Claims the asking for a failed attempt (`delivery`, GitHub's id of it) again: of any
    /// number of sweeps, one asks (a marker in the inbox, kept past GitHub's 3-day window).
    /// The claim is a lease until `now + lease_seconds`: a sweep killed before it recorded its
    /// ask ([`Store::github_redelivery_asked`]) leaves a claim that the next period's sweep
    /// takes back, never one that holds for days. A marker of a v5 sweep (`asked_at` written
    /// with its claim) counts as asked.
    pub async fn claim_github_redelivery(
        &self,
        tenant: &TenantId,
        delivery: u64,
        (now, lease_seconds): (EpochSeconds, EpochSeconds),
    ) -> Result<bool, StoreError> {
        let pk = github_redelivery_key(tenant, delivery);
        let condition = "attribute_not_exists(#pk) OR (attribute_not_exists(#asked_at) \
                         AND #lease_until <= :now)";
        let put = self
            .client
            .put_item()
            .table_name(&self.tables.webhook_inbox)
            .item("pk", s(pk))
            .item("lease_until", epoch(now + lease_seconds))
            .item("expires_at", epoch(now + 4 * 86_400))
            .condition_expression(condition)
            .set_expression_attribute_names(Some(names(&[condition])))
            .expression_attribute_values(":now", epoch(now))
            .send()
            .await;
        match put {
            Ok(_) => Ok(true),
            Err(e) => match e.into_service_error() {
                aws_sdk_dynamodb::operation::put_item::PutItemError::ConditionalCheckFailedException(_) => Ok(false),
                other => Err(StoreError::dynamo("PutItem", other)),
            },
        }
    }

    /// Records that the claimed attempt was asked for: no sweep asks for it again.
    pub async fn github_redelivery_asked(
        &self,
        tenant: &TenantId,
        delivery: u64,
        now: EpochSeconds,
    ) -> Result<(), StoreError> {
        let update = "SET #asked_at = :now REMOVE #lease_until";
        self.client
            .update_item()
            .table_name(&self.tables.webhook_inbox)
            .key("pk", s(github_redelivery_key(tenant, delivery)))
            .update_expression(update)
            .set_expression_attribute_names(Some(names(&[update])))
            .expression_attribute_values(":now", epoch(now))
            .send()
            .await
            .map_err(|e| StoreError::from_sdk("UpdateItem", e))?;
        Ok(())
    }

    /// Releases the claim of an attempt whose ask failed, so that the next sweep asks.
    pub async fn release_github_redelivery(
        &self,
        tenant: &TenantId,
        delivery: u64,
    ) -> Result<(), StoreError> {
        self.client
            .delete_item()
            .table_name(&self.tables.webhook_inbox)
            .key("pk", s(github_redelivery_key(tenant, delivery)))
            .send()
            .await
            .map_err(|e| StoreError::from_sdk("DeleteItem", e))?;
        Ok(())
    }

    /// Claims this period's redelivery sweep for `tenant` (an item of the inbox, beside the
    /// deliveries it sweeps): at most one sweep every `period` seconds, however many scheduled
    /// runs start at once.
    pub async fn claim_github_sweep(
        &self,
        tenant: &TenantId,
        period: EpochSeconds,
        now: EpochSeconds,
    ) -> Result<bool, StoreError> {
        let condition = "attribute_not_exists(#pk) OR #swept_at <= :due";
        let update = "SET #swept_at = :now";
        let result = self
            .client
            .update_item()
            .table_name(&self.tables.webhook_inbox)
            .key("pk", s(github_sweep_key(tenant)))
            .update_expression(update)
            .condition_expression(condition)
            .set_expression_attribute_names(Some(names(&[update, condition])))
            .expression_attribute_values(":now", epoch(now))
            .expression_attribute_values(":due", epoch(now - period))
            .send()
            .await;
        match result {
            Ok(_) => Ok(true),
            Err(e) => match e.into_service_error() {
                aws_sdk_dynamodb::operation::update_item::UpdateItemError::ConditionalCheckFailedException(_) => Ok(false),
                other => Err(StoreError::dynamo("UpdateItem", other)),
            },
        }
    }
}

/// This period's sweep of a tenant's deliveries: a `#` after the source, which no delivery id
/// holds (the route accepts letters, digits and `-`), so a delivery named `sweep` is not it.
fn github_sweep_key(tenant: &TenantId) -> String {
    format!("{}#sweep#period", github_source(tenant))
}

/// The marker of a failed attempt asked for again.
fn github_redelivery_key(tenant: &TenantId, delivery: u64) -> String {
    format!("{}#asked#{delivery}", github_source(tenant))
}
