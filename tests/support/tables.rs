//! A test's own look at its tables and stream, through the uncounted client (never the app's):
//! items by key, counts, the whole approvals stream, and the odd item written by hand. Apart
//! from the HTTP helpers (`client.rs`): what the store holds, not what the API answers.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::{AttributeValue, Select};

use crate::{TENANT_A, TestApp};

impl TestApp {
    /// The inbox item of `source`'s event `id`.
    pub async fn inbox_item(
        &self,
        source: &str,
        id: &str,
    ) -> Option<HashMap<String, AttributeValue>> {
        self.item(
            &self.app.config.tables.webhook_inbox,
            &format!("{source}#{id}"),
        )
        .await
    }

    /// Every item of a table, by a strongly consistent scan with the test's own (unmetered)
    /// client.
    pub async fn scan_items(&self, table: &str) -> Vec<HashMap<String, AttributeValue>> {
        self.dynamodb
            .scan()
            .table_name(table)
            .consistent_read(true)
            .into_paginator()
            .items()
            .send()
            .collect::<Result<Vec<_>, _>>()
            .await
            .expect("scan a table")
    }

    /// Items in a table, counted by a strongly consistent scan.
    pub async fn count_items(&self, table: &str) -> usize {
        let mut total = 0;
        let mut start = None;
        loop {
            let page = self
                .dynamodb
                .scan()
                .table_name(table)
                .select(Select::Count)
                .consistent_read(true)
                .set_exclusive_start_key(start)
                .send()
                .await
                .expect("scan");
            total += page.count() as usize;
            match page.last_evaluated_key() {
                Some(key) => start = Some(key.clone()),
                None => return total,
            }
        }
    }

    /// An approval item this version cannot read (no `execution`, no `approvers`), as a botched
    /// migration or a later version could leave one, due since 1000 s ago as `due_kind`.
    pub async fn put_unreadable_approval(&self, id: &str, due_kind: &str, status: &str) {
        let now = self.clock.now();
        self.dynamodb
            .put_item()
            .table_name(&self.app.config.tables.approvals)
            .item("pk", AttributeValue::S(format!("tenant-a#{id}")))
            .item("tenant", AttributeValue::S("tenant-a".into()))
            .item("id", AttributeValue::S(id.into()))
            .item("status", AttributeValue::S(status.into()))
            .item("expires_at", AttributeValue::N((now - 10).to_string()))
            .item("due_kind", AttributeValue::S(due_kind.into()))
            .item("due_at", AttributeValue::N((now - 1_000).to_string()))
            .send()
            .await
            .expect("the unreadable item");
    }

    pub async fn approval_count(&self) -> usize {
        self.count_items(&self.app.config.tables.approvals).await
    }

    /// Every record of the test's approvals stream, from its start.
    pub async fn whole_stream(&self) -> Vec<countersign::jobs::StreamChange> {
        let streams = aws_sdk_dynamodbstreams::Client::new(&self.sdk);
        let table = self
            .dynamodb
            .describe_table()
            .table_name(&self.app.config.tables.approvals)
            .send()
            .await
            .expect("describe table");
        let arn = table
            .table()
            .and_then(|t| t.latest_stream_arn())
            .expect("a stream")
            .to_owned();
        let stream = streams
            .describe_stream()
            .stream_arn(&arn)
            .send()
            .await
            .expect("describe stream");
        let mut changes = Vec::new();
        for shard in stream
            .stream_description()
            .map(|d| d.shards())
            .unwrap_or_default()
        {
            let mut iterator = streams
                .get_shard_iterator()
                .stream_arn(&arn)
                .shard_id(shard.shard_id().expect("shard id"))
                .shard_iterator_type(aws_sdk_dynamodbstreams::types::ShardIteratorType::TrimHorizon)
                .send()
                .await
                .expect("iterator")
                .shard_iterator
                .expect("an iterator");
            loop {
                let records = streams
                    .get_records()
                    .shard_iterator(&iterator)
                    .send()
                    .await
                    .expect("records");
                if records.records().is_empty() {
                    break;
                }
                changes.extend(
                    records
                        .records()
                        .iter()
                        .map(countersign::jobs::StreamChange::from_streams),
                );
                match records.next_shard_iterator() {
                    Some(next) => iterator = next.to_owned(),
                    None => break,
                }
            }
        }
        changes
    }

    /// Tenant A's approval `id`'s item, attribute by attribute, read with the uncounted client.
    pub async fn approval_item(&self, id: &str) -> HashMap<String, AttributeValue> {
        self.item(
            &self.app.config.tables.approvals,
            &format!("{TENANT_A}#{id}"),
        )
        .await
        .expect("the approval")
    }

    /// Tenant A's approval `id` as stored, read with the uncounted client.
    pub async fn stored_approval(&self, id: &str) -> countersign::domain::Approval {
        let item = self.approval_item(id).await;
        countersign::store::items_to_approval(&item).expect("an approval")
    }

    /// An item as stored, by its `pk`.
    pub async fn item(&self, table: &str, pk: &str) -> Option<HashMap<String, AttributeValue>> {
        self.dynamodb
            .get_item()
            .table_name(table)
            .key("pk", AttributeValue::S(pk.to_owned()))
            .consistent_read(true)
            .send()
            .await
            .expect("get item")
            .item
    }
}

/// A string attribute of a stored item.
pub fn attr_s<'a>(item: &'a HashMap<String, AttributeValue>, name: &str) -> &'a str {
    item.get(name)
        .and_then(|v| v.as_s().ok())
        .unwrap_or_else(|| panic!("no string attribute {name}"))
}
