//! The table definitions (`infra/tables.json`, shared with the deployment) and their creation on
//! a local or test AWS. Lambdas never create tables; the SAM template does.

use std::time::Duration;

use aws_sdk_dynamodb::client::Waiters;
use aws_sdk_dynamodb::operation::create_table::CreateTableError;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType,
    LocalSecondaryIndex, Projection, ProjectionType, ScalarAttributeType, StreamSpecification,
    StreamViewType, TimeToLiveSpecification, TimeToLiveStatus,
};
use serde::Deserialize;

use super::client::Store;
use super::error::StoreError;
use super::tables::Tables;

const DEFINITIONS: &str = include_str!("../../../infra/tables.json");

#[derive(Debug, Clone, Deserialize)]
pub struct TableDefinition {
    /// The logical name, as in [`Tables`].
    pub name: String,
    /// The table's resource in `infra/template.yaml`.
    pub logical_id: String,
    /// The variable that names the table at run time.
    pub env: String,
    pub partition_key: String,
    pub sort_key: Option<String>,
    pub ttl_attribute: Option<String>,
    pub stream: Option<String>,
    pub indexes: Vec<IndexDefinition>,
}

/// A secondary index: `global`, or `local` (the table's partition key, another sort key).
#[derive(Debug, Clone, Deserialize)]
pub struct IndexDefinition {
    pub name: String,
    pub kind: String,
    pub partition_key: String,
    pub sort_key: String,
    /// `S` unless given.
    pub sort_key_type: Option<String>,
    /// `ALL` or `KEYS_ONLY`.
    pub projection: String,
}

impl TableDefinition {
    /// Every key attribute (table and indexes) with its type, once each.
    pub fn key_attributes(&self) -> Vec<(String, String)> {
        let mut attributes = vec![(self.partition_key.clone(), "S".to_owned())];
        if let Some(sort) = &self.sort_key {
            attributes.push((sort.clone(), "S".to_owned()));
        }
        for index in &self.indexes {
            attributes.push((index.partition_key.clone(), "S".to_owned()));
            let kind = index
                .sort_key_type
                .clone()
                .unwrap_or_else(|| "S".to_owned());
            attributes.push((index.sort_key.clone(), kind));
        }
        let mut seen = std::collections::HashSet::new();
        attributes.retain(|(name, _)| seen.insert(name.clone()));
        attributes
    }
}

fn key_schema(partition: &str, sort: Option<&str>) -> Result<Vec<KeySchemaElement>, StoreError> {
    let mut keys = vec![(partition, KeyType::Hash)];
    if let Some(sort) = sort {
        keys.push((sort, KeyType::Range));
    }
    keys.into_iter()
        .map(|(name, kind)| {
            KeySchemaElement::builder()
                .attribute_name(name)
                .key_type(kind)
                .build()
                .map_err(|e| StoreError::dynamo("CreateTable", e))
        })
        .collect()
}

fn projection(index: &IndexDefinition) -> Projection {
    Projection::builder()
        .projection_type(ProjectionType::from(index.projection.as_str()))
        .build()
}

#[derive(Deserialize)]
struct Definitions {
    tables: Vec<TableDefinition>,
}

/// Every table definition, from `infra/tables.json`.
pub fn definitions() -> Vec<TableDefinition> {
    // The file is compiled in and checked by this crate's tests: it cannot be malformed at run time.
    serde_json::from_str::<Definitions>(DEFINITIONS)
        .map(|d| d.tables)
        .unwrap_or_default()
}

fn physical_name<'a>(tables: &'a Tables, logical: &str) -> Option<&'a str> {
    match logical {
        "approvals" => Some(&tables.approvals),
        "idempotency_keys" => Some(&tables.idempotency_keys),
        "webhook_inbox" => Some(&tables.webhook_inbox),
        "execution_ledger" => Some(&tables.execution_ledger),
        "events" => Some(&tables.events),
        "approval_index" => Some(&tables.approval_index),
        "api_keys" => Some(&tables.api_keys),
        _ => None,
    }
}

impl Store {
    /// Creates every table that does not exist yet (on-demand billing, TTL and stream as
    /// defined). Safe to run again: existing tables are left as they are.
    pub async fn ensure_tables(&self) -> Result<(), StoreError> {
        for def in definitions() {
            let name = physical_name(&self.tables, &def.name)
                .ok_or(StoreError::Corrupt("infra/tables.json"))?;
            let mut create = self
                .client
                .create_table()
                .table_name(name)
                .billing_mode(BillingMode::PayPerRequest)
                .set_key_schema(Some(key_schema(
                    &def.partition_key,
                    def.sort_key.as_deref(),
                )?));
            for (attribute, kind) in def.key_attributes() {
                create = create.attribute_definitions(
                    AttributeDefinition::builder()
                        .attribute_name(attribute)
                        .attribute_type(ScalarAttributeType::from(kind.as_str()))
                        .build()
                        .map_err(|e| StoreError::dynamo("CreateTable", e))?,
                );
            }
            for index in &def.indexes {
                let keys = key_schema(&index.partition_key, Some(&index.sort_key))?;
                if index.kind == "local" {
                    create = create.local_secondary_indexes(
                        LocalSecondaryIndex::builder()
                            .index_name(&index.name)
                            .set_key_schema(Some(keys))
                            .projection(projection(index))
                            .build()
                            .map_err(|e| StoreError::dynamo("CreateTable", e))?,
                    );
                } else {
                    create = create.global_secondary_indexes(
                        GlobalSecondaryIndex::builder()
                            .index_name(&index.name)
                            .set_key_schema(Some(keys))
                            .projection(projection(index))
                            .build()
                            .map_err(|e| StoreError::dynamo("CreateTable", e))?,
                    );
                }
            }
            if let Some(view) = &def.stream {
                create = create.stream_specification(
                    StreamSpecification::builder()
                        .stream_enabled(true)
                        .stream_view_type(StreamViewType::from(view.as_str()))
                        .build()
                        .map_err(|e| StoreError::dynamo("CreateTable", e))?,
                );
            }
            match create.send().await.map_err(|e| e.into_service_error()) {
                Ok(_) => {}
                Err(CreateTableError::ResourceInUseException(_)) => {}
                Err(e) => return Err(StoreError::dynamo("CreateTable", e)),
            }
            // Real DynamoDB creates tables asynchronously; TTL and writes need an active table.
            self.client
                .wait_until_table_exists()
                .table_name(name)
                .wait(Duration::from_secs(300))
                .await
                .map_err(|e| StoreError::dynamo("DescribeTable", e))?;
            if let Some(attribute) = &def.ttl_attribute {
                // Also for a table that already existed: an earlier run may have stopped between
                // creating it and enabling TTL.
                let ttl = self
                    .client
                    .describe_time_to_live()
                    .table_name(name)
                    .send()
                    .await
                    .map_err(|e| StoreError::dynamo("DescribeTimeToLive", e))?;
                let status = ttl
                    .time_to_live_description()
                    .and_then(|d| d.time_to_live_status());
                if matches!(
                    status,
                    Some(TimeToLiveStatus::Enabled | TimeToLiveStatus::Enabling)
                ) {
                    continue;
                }
                self.client
                    .update_time_to_live()
                    .table_name(name)
                    .time_to_live_specification(
                        TimeToLiveSpecification::builder()
                            .enabled(true)
                            .attribute_name(attribute)
                            .build()
                            .map_err(|e| StoreError::dynamo("UpdateTimeToLive", e))?,
                    )
                    .send()
                    .await
                    .map_err(|e| StoreError::dynamo("UpdateTimeToLive", e))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_definitions_name_every_table_once() {
        let defs = definitions();
        let names: Vec<_> = defs.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "approvals",
                "idempotency_keys",
                "webhook_inbox",
                "execution_ledger",
                "events",
                "approval_index",
                "api_keys"
            ]
        );
        let tables = Tables::with_prefix("x");
        assert!(
            defs.iter()
                .all(|d| physical_name(&tables, &d.name).is_some())
        );
        assert_eq!(defs[0].stream.as_deref(), Some("NEW_AND_OLD_IMAGES"));
    }
}
