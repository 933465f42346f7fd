//! Approval policies and groups, in the keys table (docs/POLICY.md): written by the CLI with the
//! deployer's AWS credentials (never through the API), read by every function through the same
//! cache as keys.
//!
//! - `policy#{tenant}#{version}`: each version pushed, immutable (its text, SHA-256, mode, when
//!   and by whom).
//! - `policy#{tenant}`: the current version, a copy of its fields — the one item a function
//!   reads for the set.
//! - `groups#{tenant}`: every group of the tenant, one attribute each (`g_{name}`: its members).
//!
//! No key id has a `#`, and a tenant id none either, so these never meet a key or another
//! tenant's items.

use std::collections::{BTreeMap, HashMap};

use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes, Put, TransactWriteItem};

use super::attr::{Item, epoch, get_n, get_s, n, opt_s, s};
use super::client::{Store, Transaction, condition_failed_item};
use super::error::StoreError;
use crate::domain::approval_policy::{GroupName, Groups, Mode};
use crate::domain::{Approver, EpochSeconds, TenantId};

/// What a group's attribute is named: `g_` and the group's name.
const GROUP_PREFIX: &str = "g_";

/// A version of a tenant's policy set, as pushed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredPolicy {
    pub version: u32,
    pub text: String,
    /// Hex SHA-256 of `text`.
    pub sha256: String,
    pub mode: Mode,
    pub pushed_at: EpochSeconds,
    /// The pusher's AWS identity (STS `GetCallerIdentity`'s ARN).
    pub pushed_by: String,
}

/// A tenant's policy and groups, as one read finds them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TenantPolicyItems {
    pub policy: Option<StoredPolicy>,
    pub groups: Groups,
}

fn current_key(tenant: &TenantId) -> String {
    format!("policy#{tenant}")
}

fn version_key(tenant: &TenantId, version: u32) -> String {
    format!("policy#{tenant}#{version:06}")
}

fn groups_key(tenant: &TenantId) -> String {
    format!("groups#{tenant}")
}

fn policy_item(pk: String, policy: &StoredPolicy) -> Item {
    Item::from([
        ("pk".to_owned(), s(pk)),
        ("version".to_owned(), n(policy.version)),
        ("text".to_owned(), s(&policy.text)),
        ("sha256".to_owned(), s(&policy.sha256)),
        ("mode".to_owned(), s(policy.mode.as_str())),
        ("pushed_at".to_owned(), epoch(policy.pushed_at)),
        ("pushed_by".to_owned(), s(&policy.pushed_by)),
    ])
}

fn policy_from(item: &Item) -> Result<StoredPolicy, StoreError> {
    Ok(StoredPolicy {
        version: get_n(item, "version")?,
        text: get_s(item, "text")?.to_owned(),
        sha256: get_s(item, "sha256")?.to_owned(),
        mode: Mode::parse(get_s(item, "mode")?).ok_or(StoreError::corrupt("policy mode"))?,
        pushed_at: get_n(item, "pushed_at")?,
        pushed_by: opt_s(item, "pushed_by").unwrap_or_default(),
    })
}

fn groups_from(item: &Item) -> Result<Groups, StoreError> {
    let mut groups = BTreeMap::new();
    for (name, members) in item {
        let Some(name) = name.strip_prefix(GROUP_PREFIX) else {
            continue;
        };
        let name = GroupName::parse(name).map_err(|_| StoreError::corrupt("group name"))?;
        let members = match members {
            AttributeValue::L(list) => {
                list.iter()
                    .map(|m| match m {
                        AttributeValue::S(m) => Approver::from_stored(m)
                            .map_err(|_| StoreError::corrupt("group member")),
                        _ => Err(StoreError::corrupt("group member")),
                    })
                    .collect::<Result<Vec<_>, _>>()?
            }
            _ => return Err(StoreError::corrupt("group")),
        };
        groups.insert(name, members);
    }
    Ok(Groups::new(groups))
}

/// Why a push was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PushRefusal {
    /// Another push made version `0` first: push again (the CLI does).
    #[error("another push made version {0} first")]
    Raced(u32),
}

impl Store {
    /// The tenant's current policy and its groups: one strongly consistent `BatchGetItem`.
    pub async fn tenant_policy(&self, tenant: &TenantId) -> Result<TenantPolicyItems, StoreError> {
        let keys: Vec<HashMap<String, AttributeValue>> = [current_key(tenant), groups_key(tenant)]
            .into_iter()
            .map(|pk| HashMap::from([("pk".to_owned(), s(pk))]))
            .collect();
        let mut found: HashMap<String, Item> = HashMap::new();
        let mut pending = keys;
        let mut pause = std::time::Duration::from_millis(25);
        for _ in 0..8 {
            if pending.is_empty() {
                break;
            }
            let request = KeysAndAttributes::builder()
                .set_keys(Some(std::mem::take(&mut pending)))
                .consistent_read(true)
                .build()
                .map_err(|e| StoreError::dynamo("BatchGetItem", e))?;
            let answer = self
                .client
                .batch_get_item()
                .request_items(&self.tables.api_keys, request)
                .send()
                .await
                .map_err(|e| StoreError::from_sdk("BatchGetItem", e))?;
            for item in answer
                .responses()
                .and_then(|r| r.get(&self.tables.api_keys))
                .into_iter()
                .flatten()
            {
                if let Some(pk) = opt_s(item, "pk") {
                    found.insert(pk, item.clone());
                }
            }
            if let Some(left) = answer
                .unprocessed_keys()
                .and_then(|u| u.get(&self.tables.api_keys))
            {
                pending = left.keys().to_vec();
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(std::time::Duration::from_secs(1));
            }
        }
        if !pending.is_empty() {
            return Err(StoreError::Unavailable {
                operation: "BatchGetItem",
                message: "keys still unprocessed".to_owned(),
            });
        }
        Ok(TenantPolicyItems {
            policy: found
                .get(&current_key(tenant))
                .map(policy_from)
                .transpose()?,
            groups: found
                .get(&groups_key(tenant))
                .map(groups_from)
                .transpose()?
                .unwrap_or_default(),
        })
    }

    /// Stores `policy` as version `policy.version` and makes it current, in one transaction:
    /// only_if_next_version — the version item is new, and the current one is still the
    /// version before it (of two pushes racing, one wins; the other is refused and pushes
    /// again as the next).
    pub async fn push_policy(
        &self,
        tenant: &TenantId,
        policy: &StoredPolicy,
    ) -> Result<Result<(), PushRefusal>, StoreError> {
        let version = Put::builder()
            .table_name(&self.tables.api_keys)
            .set_item(Some(policy_item(
                version_key(tenant, policy.version),
                policy,
            )))
            .condition_expression("attribute_not_exists(#pk)")
            .expression_attribute_names("#pk", "pk")
            .build()
            .map_err(|e| StoreError::dynamo("TransactWriteItems", e))?;
        let current = Put::builder()
            .table_name(&self.tables.api_keys)
            .set_item(Some(policy_item(current_key(tenant), policy)))
            .condition_expression("attribute_not_exists(#pk) OR #version = :previous")
            .expression_attribute_names("#pk", "pk")
            .expression_attribute_names("#version", "version")
            .expression_attribute_values(":previous", n(policy.version.saturating_sub(1)))
            .return_values_on_condition_check_failure(
                aws_sdk_dynamodb::types::ReturnValuesOnConditionCheckFailure::AllOld,
            )
            .build()
            .map_err(|e| StoreError::dynamo("TransactWriteItems", e))?;
        let items = vec![
            TransactWriteItem::builder().put(version).build(),
            TransactWriteItem::builder().put(current).build(),
        ];
        match self.transact(items, &ulid::Ulid::new().to_string()).await? {
            Transaction::Committed => Ok(Ok(())),
            Transaction::Cancelled(reasons) => {
                let first = condition_failed_item(&reasons, 1)
                    .and_then(|item| get_n::<u32>(item, "version").ok())
                    .unwrap_or(policy.version);
                Ok(Err(PushRefusal::Raced(first)))
            }
        }
    }

    /// Version `version` of the tenant's set, as pushed (`None`: no such version).
    pub async fn policy_version(
        &self,
        tenant: &TenantId,
        version: u32,
    ) -> Result<Option<StoredPolicy>, StoreError> {
        let item = self
            .client
            .get_item()
            .table_name(&self.tables.api_keys)
            .key("pk", s(version_key(tenant, version)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| StoreError::from_sdk("GetItem", e))?;
        item.item().map(policy_from).transpose()
    }

    /// Every version of the tenant's set, oldest first (the current one's number, then one
    /// `BatchGetItem` per hundred).
    pub async fn policy_history(&self, tenant: &TenantId) -> Result<Vec<StoredPolicy>, StoreError> {
        let Some(current) = self.tenant_policy(tenant).await?.policy else {
            return Ok(Vec::new());
        };
        let keys: Vec<String> = (1..=current.version)
            .map(|v| version_key(tenant, v))
            .collect();
        let found = self.get_many(&self.tables.api_keys, keys).await?;
        let mut versions: Vec<StoredPolicy> =
            found.values().map(policy_from).collect::<Result<_, _>>()?;
        versions.sort_by_key(|p| p.version);
        Ok(versions)
    }

    /// Replaces group `name`'s members (one `UpdateItem`, creating the tenant's groups item if
    /// need be).
    pub async fn set_group(
        &self,
        tenant: &TenantId,
        name: &GroupName,
        members: &[Approver],
        now: EpochSeconds,
    ) -> Result<(), StoreError> {
        self.client
            .update_item()
            .table_name(&self.tables.api_keys)
            .key("pk", s(groups_key(tenant)))
            .update_expression("SET #g = :members, #updated_at = :now")
            .expression_attribute_names("#g", format!("{GROUP_PREFIX}{name}"))
            .expression_attribute_names("#updated_at", "updated_at")
            .expression_attribute_values(
                ":members",
                AttributeValue::L(members.iter().map(|m| s(m.as_str())).collect()),
            )
            .expression_attribute_values(":now", epoch(now))
            .send()
            .await
            .map_err(|e| StoreError::from_sdk("UpdateItem", e))?;
        Ok(())
    }

    /// Deletes group `name` (nothing to delete is no error).
    pub async fn delete_group(
        &self,
        tenant: &TenantId,
        name: &GroupName,
        now: EpochSeconds,
    ) -> Result<(), StoreError> {
        self.client
            .update_item()
            .table_name(&self.tables.api_keys)
            .key("pk", s(groups_key(tenant)))
            .update_expression("REMOVE #g SET #updated_at = :now")
            .expression_attribute_names("#g", format!("{GROUP_PREFIX}{name}"))
            .expression_attribute_names("#updated_at", "updated_at")
            .expression_attribute_values(":now", epoch(now))
            .send()
            .await
            .map_err(|e| StoreError::from_sdk("UpdateItem", e))?;
        Ok(())
    }
}
