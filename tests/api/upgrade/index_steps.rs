//! The template's upgrade of the old tables' global indexes, one per deploy as CloudFormation
//! applies it (created first, then deleted), and whether an index has finished backfilling.
//! Apart from the old stack's set-up (`old_stack.rs`): these are the deploys the test takes.

use std::collections::BTreeSet;

use aws_sdk_dynamodb::types::{
    CreateGlobalSecondaryIndexAction, DeleteGlobalSecondaryIndexAction, GlobalSecondaryIndexUpdate,
    KeySchemaElement, KeyType, Projection, ProjectionType,
};
use countersign::store::Tables;
use countersign_tests::TestApp;
use serde_json::Value;

use super::old_stack::{attribute, physical};

/// One update of a table's global indexes, as one deploy of the template makes it.
pub(super) enum IndexStep {
    Create {
        table: String,
        def: Box<countersign::store::schema::TableDefinition>,
        index: countersign::store::schema::IndexDefinition,
    },
    Delete {
        table: String,
        logical: String,
        index: String,
    },
}

impl IndexStep {
    pub(super) fn name(&self) -> String {
        match self {
            IndexStep::Create { def, index, .. } => format!("{}: create {}", def.name, index.name),
            IndexStep::Delete { logical, index, .. } => format!("{logical}: delete {index}"),
        }
    }

    pub(super) async fn apply(&self, t: &TestApp) {
        let update = t.dynamodb.update_table();
        let update = match self {
            IndexStep::Create { table, def, index } => {
                let mut update = update.table_name(table);
                for (attribute_name, kind) in def.key_attributes() {
                    update = update.attribute_definitions(attribute(&attribute_name, &kind));
                }
                let key = |name: &str, kind| {
                    KeySchemaElement::builder()
                        .attribute_name(name)
                        .key_type(kind)
                        .build()
                        .expect("a key")
                };
                update.global_secondary_index_updates(
                    GlobalSecondaryIndexUpdate::builder()
                        .create(
                            CreateGlobalSecondaryIndexAction::builder()
                                .index_name(&index.name)
                                .key_schema(key(&index.partition_key, KeyType::Hash))
                                .key_schema(key(&index.sort_key, KeyType::Range))
                                .projection(
                                    Projection::builder()
                                        .projection_type(ProjectionType::from(
                                            index.projection.as_str(),
                                        ))
                                        .build(),
                                )
                                .build()
                                .expect("a GSI"),
                        )
                        .build(),
                )
            }
            IndexStep::Delete { table, index, .. } => {
                update.table_name(table).global_secondary_index_updates(
                    GlobalSecondaryIndexUpdate::builder()
                        .delete(
                            DeleteGlobalSecondaryIndexAction::builder()
                                .index_name(index)
                                .build()
                                .expect("a delete"),
                        )
                        .build(),
                )
            }
        };
        update.send().await.expect("update a global index");
    }
}

/// The template's upgrade, as CloudFormation applies it: one global index created or deleted
/// per update of a table (`ApprovalsIndexesStep` 1, 2, then final for the approvals table),
/// from the old definitions to `infra/tables.json`'s; created first, then deleted, so a listing
/// always has an index to read. Local indexes cannot change in place: both sides keep them.
pub(super) fn index_steps(tables: &Tables, state: &Value) -> Vec<IndexStep> {
    let mut steps = Vec::new();
    for def in countersign::store::schema::definitions() {
        let table = physical(tables, &def.name).to_owned();
        // In the order the old stack made them (the template drops them in that order too).
        let old: Vec<String> = state["tables"][&def.name]["definition"]["GlobalSecondaryIndexes"]
            .as_array()
            .expect("GSIs")
            .iter()
            .map(|i| i["IndexName"].as_str().expect("a name").to_owned())
            .collect();
        let old_locals: BTreeSet<String> =
            state["tables"][&def.name]["definition"]["LocalSecondaryIndexes"]
                .as_array()
                .expect("LSIs")
                .iter()
                .map(|i| i["IndexName"].as_str().expect("a name").to_owned())
                .collect();
        let new_locals: BTreeSet<String> = def
            .indexes
            .iter()
            .filter(|i| i.kind == "local")
            .map(|i| i.name.clone())
            .collect();
        assert_eq!(
            old_locals, new_locals,
            "{}: local indexes never change",
            def.name
        );
        let globals: Vec<_> = def.indexes.iter().filter(|i| i.kind != "local").collect();
        for index in globals.iter().filter(|i| !old.contains(&i.name)) {
            steps.push(IndexStep::Create {
                table: table.clone(),
                def: Box::new(def.clone()),
                index: (*index).clone(),
            });
        }
        for gone in old
            .iter()
            .filter(|o| !globals.iter().any(|i| &i.name == *o))
        {
            steps.push(IndexStep::Delete {
                table: table.clone(),
                logical: def.name.clone(),
                index: gone.clone(),
            });
        }
    }
    steps
}

/// Whether the approvals table's `index` is ACTIVE (not backfilling).
pub(super) async fn active(t: &TestApp, index: &str) -> bool {
    let described = t
        .dynamodb
        .describe_table()
        .table_name(&t.app.config.tables.approvals)
        .send()
        .await
        .expect("describe the table");
    described
        .table()
        .map(|t| t.global_secondary_indexes())
        .unwrap_or_default()
        .iter()
        .any(|i| {
            i.index_name() == Some(index)
                && i.index_status() == Some(&aws_sdk_dynamodb::types::IndexStatus::Active)
        })
}
