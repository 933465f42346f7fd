//! The keys table (docs/KEYS.md): one item per table API key, keyed by its key id (and the
//! delegations, store/delegations.rs, under keys no key id can take).
//! Requests read it with one `GetItem`; administration (`countersign keys …`) changes it with
//! one conditional write or one transaction each, so no race makes a second key of one id or
//! brings a revoked key back.

use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, Put, ReturnValuesOnConditionCheckFailure, TransactWriteItem,
    Update,
};

use super::attr::{Item, epoch, get_b, get_n, get_s, n, opt_s, s};
use super::client::{Store, Transaction, condition_failed_item};
use super::conditions::ONLY_IF_NEW;
use super::error::StoreError;
use super::keys::DELEGATION_PREFIX;
use super::passkeys::PASSKEY_PREFIX;
use crate::domain::{Approver, EpochSeconds, KeyId, KeyRecord, TenantId};

/// only_if_new_key: `keys create` never overwrites a key; of any number of concurrent creates
/// of one id, one writes it.
const ONLY_IF_NEW_KEY: &str = ONLY_IF_NEW;

/// only_if_live_key: revoke and roll act on a key that exists and is not revoked; a revoked
/// key is never un-revoked nor given a successor.
const ONLY_IF_LIVE_KEY: &str = "attribute_exists(#pk) AND attribute_not_exists(#revoked_at)";

/// only_if_unused_for_an_hour: `last_used_at` is written at most once an hour per key, however
/// many warm functions use it at once; never on a deleted item.
const ONLY_IF_UNUSED_FOR_AN_HOUR: &str =
    "attribute_exists(#pk) AND (attribute_not_exists(#last_used_at) OR #last_used_at <= :hour_ago)";

/// Why an administrative write of a key was refused.
#[derive(Debug, thiserror::Error)]
pub enum KeyRefusal {
    #[error("a key with id {0} already exists")]
    Exists(KeyId),
    #[error("no key with id {0}")]
    Unknown(KeyId),
    #[error("key {0} is revoked")]
    Revoked(KeyId),
    #[error("key {0} has expired")]
    Expired(KeyId),
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn key_item(record: &KeyRecord) -> Item {
    let mut item = Item::from([
        ("pk".to_owned(), s(record.id.as_str())),
        ("tenant".to_owned(), s(record.tenant.as_str())),
        ("principal".to_owned(), s(record.principal.as_str())),
        ("roles".to_owned(), AttributeValue::Ss(record.roles.clone())),
        ("key_hash".to_owned(), super::attr::b(&record.key_hash)),
        ("created_at".to_owned(), epoch(record.created_at)),
        ("created_by".to_owned(), s(&record.created_by)),
    ]);
    if let Some(description) = &record.description {
        item.insert("description".to_owned(), s(description));
    }
    if let Some(at) = record.expires_at {
        item.insert("expires_at".to_owned(), epoch(at));
    }
    item
}

fn key_from_item(item: &Item) -> Result<KeyRecord, StoreError> {
    let opt_n = |name: &'static str| match item.get(name) {
        Some(_) => get_n::<EpochSeconds>(item, name).map(Some),
        None => Ok(None),
    };
    let roles = match item.get("roles") {
        Some(AttributeValue::Ss(roles)) => roles.clone(),
        _ => return Err(StoreError::corrupt("roles")),
    };
    Ok(KeyRecord {
        id: KeyId::parse(get_s(item, "pk")?).ok_or(StoreError::corrupt("pk"))?,
        tenant: TenantId::parse(get_s(item, "tenant")?)
            .map_err(|_| StoreError::corrupt("tenant"))?,
        principal: Approver::parse(get_s(item, "principal")?)
            .map_err(|_| StoreError::corrupt("principal"))?,
        roles,
        key_hash: get_b(item, "key_hash")?
            .try_into()
            .map_err(|_| StoreError::corrupt("key_hash"))?,
        created_at: get_n(item, "created_at")?,
        created_by: get_s(item, "created_by")?.to_owned(),
        description: opt_s(item, "description"),
        expires_at: opt_n("expires_at")?,
        revoked_at: opt_n("revoked_at")?,
        last_used_at: opt_n("last_used_at")?,
    })
}

fn names(pairs: &[&str]) -> std::collections::HashMap<String, String> {
    pairs
        .iter()
        .map(|p| (format!("#{p}"), (*p).to_owned()))
        .collect()
}

impl Store {
    /// The key's item: one `GetItem` (strongly consistent, so a key created a moment ago works
    /// on its first request and a revocation is seen by every fetch after it).
    pub async fn key(&self, id: &KeyId) -> Result<Option<KeyRecord>, StoreError> {
        let got = self
            .client
            .get_item()
            .table_name(&self.tables.api_keys)
            .key("pk", s(id.as_str()))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| StoreError::from_sdk("GetItem", e))?;
        got.item().map(key_from_item).transpose()
    }

    /// Writes a new key: refused if its id exists (one conditional `PutItem`).
    pub async fn create_key(&self, record: &KeyRecord) -> Result<(), KeyRefusal> {
        let put = self
            .client
            .put_item()
            .table_name(&self.tables.api_keys)
            .set_item(Some(key_item(record)))
            .condition_expression(ONLY_IF_NEW_KEY)
            .expression_attribute_names("#pk", "pk")
            .send()
            .await;
        match put {
            Ok(_) => Ok(()),
            Err(e) => match e.into_service_error() {
                PutItemError::ConditionalCheckFailedException(_) => {
                    Err(KeyRefusal::Exists(record.id.clone()))
                }
                other => Err(StoreError::dynamo("PutItem", other).into()),
            },
        }
    }

    /// Revokes a key at `now` (one conditional `UpdateItem`): an unknown or already revoked
    /// key is refused.
    pub async fn revoke_key(&self, id: &KeyId, now: EpochSeconds) -> Result<(), KeyRefusal> {
        let update = self
            .client
            .update_item()
            .table_name(&self.tables.api_keys)
            .key("pk", s(id.as_str()))
            .update_expression("SET #revoked_at = :now")
            .condition_expression(ONLY_IF_LIVE_KEY)
            .set_expression_attribute_names(Some(names(&["pk", "revoked_at"])))
            .expression_attribute_values(":now", epoch(now))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match update {
            Ok(_) => Ok(()),
            Err(e) => match e.into_service_error() {
                UpdateItemError::ConditionalCheckFailedException(failed) => {
                    Err(refusal(id, failed.item().is_some()))
                }
                other => Err(StoreError::dynamo("UpdateItem", other).into()),
            },
        }
    }

    /// Rolls a key: writes `successor` (same tenant, principal and roles) and moves the old
    /// key's expiry to `old_expires_at`, in one transaction — never a successor of an unknown,
    /// revoked or expired key (rolling an expired key would revive it), never a half-rolled
    /// pair. An old expiry already sooner is kept: then the old key is checked, not written,
    /// in the same transaction (so a revocation in between still refuses the roll).
    pub async fn roll_key(
        &self,
        old: &KeyId,
        successor: &KeyRecord,
        (now, old_expires_at): (EpochSeconds, EpochSeconds),
    ) -> Result<(), KeyRefusal> {
        let put = Put::builder()
            .table_name(&self.tables.api_keys)
            .set_item(Some(key_item(successor)))
            .condition_expression(ONLY_IF_NEW_KEY)
            .expression_attribute_names("#pk", "pk")
            .build()
            .map_err(|e| StoreError::dynamo("TransactWriteItems", e))?;
        let live = format!(
            "{ONLY_IF_LIVE_KEY} AND (attribute_not_exists(#expires_at) OR #expires_at > :now)"
        );
        let update = Update::builder()
            .table_name(&self.tables.api_keys)
            .key("pk", s(old.as_str()))
            .update_expression("SET #expires_at = :expires_at")
            .condition_expression(format!(
                "{live} AND (attribute_not_exists(#expires_at) OR #expires_at > :expires_at)"
            ))
            .set_expression_attribute_names(Some(names(&["pk", "revoked_at", "expires_at"])))
            .expression_attribute_values(":expires_at", n(old_expires_at))
            .expression_attribute_values(":now", n(now))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(|e| StoreError::dynamo("TransactWriteItems", e))?;
        let token = format!("roll-{}", successor.id);
        let items = vec![
            TransactWriteItem::builder().put(put.clone()).build(),
            TransactWriteItem::builder().update(update).build(),
        ];
        let reasons = match self.transact(items, &token).await? {
            Transaction::Committed => return Ok(()),
            Transaction::Cancelled(reasons) => reasons,
        };
        if reasons.first().and_then(|r| r.code()) == Some("ConditionalCheckFailed") {
            return Err(KeyRefusal::Exists(successor.id.clone()));
        }
        let expires_sooner = match condition_failed_item(&reasons, 1) {
            None => return Err(KeyRefusal::Unknown(old.clone())),
            Some(item) if item.contains_key("revoked_at") => {
                return Err(KeyRefusal::Revoked(old.clone()));
            }
            Some(item) => match get_n::<EpochSeconds>(item, "expires_at") {
                Ok(at) if at <= now => return Err(KeyRefusal::Expired(old.clone())),
                Ok(at) => at,
                Err(_) => return Err(KeyRefusal::Unknown(old.clone())),
            },
        };
        // The old key expires sooner already: keep that expiry. Checked, not written, beside
        // the successor's put: still live, still unexpired, still the expiry read.
        let check = ConditionCheck::builder()
            .table_name(&self.tables.api_keys)
            .key("pk", s(old.as_str()))
            .condition_expression(format!("{live} AND #expires_at = :expires_at"))
            .set_expression_attribute_names(Some(names(&["pk", "revoked_at", "expires_at"])))
            .expression_attribute_values(":expires_at", n(expires_sooner))
            .expression_attribute_values(":now", n(now))
            .build()
            .map_err(|e| StoreError::dynamo("TransactWriteItems", e))?;
        let items = vec![
            TransactWriteItem::builder().put(put).build(),
            TransactWriteItem::builder().condition_check(check).build(),
        ];
        match self.transact(items, &format!("{token}-kept")).await? {
            Transaction::Committed => Ok(()),
            Transaction::Cancelled(reasons) => {
                if reasons.first().and_then(|r| r.code()) == Some("ConditionalCheckFailed") {
                    Err(KeyRefusal::Exists(successor.id.clone()))
                } else {
                    // Revoked, expired or changed in between: as the first attempt would say.
                    Err(KeyRefusal::Revoked(old.clone()))
                }
            }
        }
    }

    /// Every key, or a tenant's (a `Scan`: an administrator's listing of at most thousands of
    /// items, never in a request's path).
    pub async fn list_keys(&self, tenant: Option<&TenantId>) -> Result<Vec<KeyRecord>, StoreError> {
        let mut keys = Vec::new();
        let mut start = None;
        loop {
            let mut scan = self
                .client
                .scan()
                .table_name(&self.tables.api_keys)
                .consistent_read(true)
                .set_exclusive_start_key(start);
            if let Some(tenant) = tenant {
                scan = scan
                    .filter_expression("#tenant = :tenant")
                    .expression_attribute_names("#tenant", "tenant")
                    .expression_attribute_values(":tenant", s(tenant.as_str()));
            }
            let page = scan
                .send()
                .await
                .map_err(|e| StoreError::from_sdk("Scan", e))?;
            // The table also holds delegations (store/delegations.rs): not keys.
            for item in page.items().iter().filter(|item| {
                !get_s(item, "pk").is_ok_and(|pk| {
                    pk.starts_with(DELEGATION_PREFIX) || pk.starts_with(PASSKEY_PREFIX)
                })
            }) {
                keys.push(key_from_item(item)?);
            }
            start = page.last_evaluated_key().cloned();
            if start.is_none() {
                break;
            }
        }
        keys.sort_by(|a, b| {
            (&a.tenant, a.created_at, &a.id).cmp(&(&b.tenant, b.created_at, &b.id))
        });
        Ok(keys)
    }

    /// Records that the key was used at `now`, unless it was within the hour (one conditional
    /// `UpdateItem`, sent after the request's answer). `Ok(false)`: nothing to write.
    pub async fn touch_key(&self, id: &KeyId, now: EpochSeconds) -> Result<bool, StoreError> {
        let update = self
            .client
            .update_item()
            .table_name(&self.tables.api_keys)
            .key("pk", s(id.as_str()))
            .update_expression("SET #last_used_at = :now")
            .condition_expression(ONLY_IF_UNUSED_FOR_AN_HOUR)
            .set_expression_attribute_names(Some(names(&["pk", "last_used_at"])))
            .expression_attribute_values(":now", epoch(now))
            .expression_attribute_values(":hour_ago", epoch(now - 3600))
            // Sent, not left out: the functions' grant on this write is conditioned on
            // `dynamodb:ReturnValues`, a key a request carries only when it names it.
            .return_values(aws_sdk_dynamodb::types::ReturnValue::None)
            .send()
            .await;
        match update {
            Ok(_) => Ok(true),
            Err(e) => match e.into_service_error() {
                UpdateItemError::ConditionalCheckFailedException(_) => Ok(false),
                other => Err(StoreError::dynamo("UpdateItem", other)),
            },
        }
    }
}

fn refusal(id: &KeyId, exists: bool) -> KeyRefusal {
    if exists {
        KeyRefusal::Revoked(id.clone())
    } else {
        KeyRefusal::Unknown(id.clone())
    }
}
