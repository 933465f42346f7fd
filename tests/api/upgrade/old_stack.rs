//! The stack from before v5, made again: its tables created under a test's names as they were
//! defined (indexes, TTL, the approvals table's stream), its items put back from the fixture,
//! and its stream carried past the old one's positions. Apart from the test (`upgrade.rs`):
//! the set-up of the old state, not what today's code does with it.

use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType,
    LocalSecondaryIndex, Projection, ProjectionType, PutRequest, ScalarAttributeType,
    StreamSpecification, StreamViewType, TimeToLiveSpecification, WriteRequest,
};
use countersign::store::Tables;
use countersign_tests::capacity::json_item;
use countersign_tests::{TestApp, workspace_root};
use serde_json::Value;

pub(super) fn fixture() -> Value {
    let path = workspace_root().join("tests/fixtures/before-v5/state.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("the fixture")).expect("JSON")
}

pub(super) fn physical<'a>(tables: &'a Tables, logical: &str) -> &'a str {
    match logical {
        "approvals" => &tables.approvals,
        "idempotency_keys" => &tables.idempotency_keys,
        "webhook_inbox" => &tables.webhook_inbox,
        "execution_ledger" => &tables.execution_ledger,
        "events" => &tables.events,
        "approval_index" => &tables.approval_index,
        "api_keys" => &tables.api_keys,
        other => panic!("a table of the fixture the code does not know: {other}"),
    }
}

fn key_schema(keys: &Value) -> Vec<KeySchemaElement> {
    keys.as_array()
        .expect("a key schema")
        .iter()
        .map(|k| {
            KeySchemaElement::builder()
                .attribute_name(k["AttributeName"].as_str().expect("a name"))
                .key_type(KeyType::from(k["KeyType"].as_str().expect("a type")))
                .build()
                .expect("a key")
        })
        .collect()
}

fn projection(index: &Value) -> Projection {
    Projection::builder()
        .projection_type(ProjectionType::from(
            index["Projection"]["ProjectionType"]
                .as_str()
                .expect("a projection"),
        ))
        .build()
}

pub(super) fn attribute(name: &str, kind: &str) -> AttributeDefinition {
    AttributeDefinition::builder()
        .attribute_name(name)
        .attribute_type(ScalarAttributeType::from(kind))
        .build()
        .expect("an attribute")
}

/// Creates the old stack's tables under `tables`' names, as they were defined (the approvals
/// table with its stream), and puts their items.
pub(super) async fn create_as_before(t: &TestApp, tables: &Tables, state: &Value) {
    let client = &t.dynamodb;
    for (logical, table) in state["tables"].as_object().expect("tables") {
        let name = physical(tables, logical);
        let definition = &table["definition"];
        let mut create = client
            .create_table()
            .table_name(name)
            .billing_mode(BillingMode::PayPerRequest)
            .set_key_schema(Some(key_schema(&definition["KeySchema"])));
        for a in definition["AttributeDefinitions"]
            .as_array()
            .expect("attributes")
        {
            create = create.attribute_definitions(attribute(
                a["AttributeName"].as_str().expect("a name"),
                a["AttributeType"].as_str().expect("a type"),
            ));
        }
        for index in definition["GlobalSecondaryIndexes"]
            .as_array()
            .expect("GSIs")
        {
            create = create.global_secondary_indexes(
                GlobalSecondaryIndex::builder()
                    .index_name(index["IndexName"].as_str().expect("a name"))
                    .set_key_schema(Some(key_schema(&index["KeySchema"])))
                    .projection(projection(index))
                    .build()
                    .expect("a GSI"),
            );
        }
        for index in definition["LocalSecondaryIndexes"]
            .as_array()
            .expect("LSIs")
        {
            create = create.local_secondary_indexes(
                LocalSecondaryIndex::builder()
                    .index_name(index["IndexName"].as_str().expect("a name"))
                    .set_key_schema(Some(key_schema(&index["KeySchema"])))
                    .projection(projection(index))
                    .build()
                    .expect("an LSI"),
            );
        }
        create.send().await.expect("create the old table");
        if let Some(attribute) = definition["TimeToLiveAttribute"].as_str() {
            client
                .update_time_to_live()
                .table_name(name)
                .time_to_live_specification(
                    TimeToLiveSpecification::builder()
                        .enabled(true)
                        .attribute_name(attribute)
                        .build()
                        .expect("TTL"),
                )
                .send()
                .await
                .expect("TTL on");
        }
        if let Some(view) = definition["StreamViewType"].as_str() {
            client
                .update_table()
                .table_name(name)
                .stream_specification(
                    StreamSpecification::builder()
                        .stream_enabled(true)
                        .stream_view_type(StreamViewType::from(view))
                        .build()
                        .expect("a stream"),
                )
                .send()
                .await
                .expect("the stream on");
        }
        let items = table["items"].as_array().expect("items");
        for chunk in items.chunks(25) {
            let writes: Vec<WriteRequest> = chunk
                .iter()
                .map(|item| {
                    WriteRequest::builder()
                        .put_request(
                            PutRequest::builder()
                                .set_item(Some(json_item(item)))
                                .build()
                                .expect("a put"),
                        )
                        .build()
                })
                .collect();
            let out = client
                .batch_write_item()
                .request_items(name, writes)
                .send()
                .await
                .expect("load the old items");
            assert!(out.unprocessed_items().is_none_or(|u| u.is_empty()));
        }
    }
}

/// The approvals table's stream goes on where the old stack's left off. On AWS it is one stream
/// whose numbers keep rising, and the event source mapping resumes after the last record it
/// dispatched; moto numbers a new stream from the same start as the old one's, so writes that
/// are no approval's (a put and a delete of one key) carry it past every number the old events
/// were ordered by, and the runner's position is saved at its last record, as the old runner's
/// was at its own.
pub(super) async fn continue_the_old_stream(t: &TestApp, state: &Value) {
    let last_old: u128 = state["tables"]["events"]["items"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e["trail_order"]["S"].as_str())
        .map(|order| order[..40].parse::<u128>().expect("a position"))
        .max()
        .expect("old events");
    let last = loop {
        let stream = t.whole_stream().await;
        let last: u128 = stream
            .last()
            .map_or(0, |c| c.sequence_number.parse().expect("a sequence number"));
        if last > last_old {
            break last;
        }
        let filler = aws_sdk_dynamodb::types::AttributeValue::S("upgrade-filler".to_owned());
        t.dynamodb
            .put_item()
            .table_name(&t.app.config.tables.approvals)
            .item("pk", filler.clone())
            .send()
            .await
            .expect("a filler put");
        t.dynamodb
            .delete_item()
            .table_name(&t.app.config.tables.approvals)
            .key("pk", filler)
            .send()
            .await
            .expect("a filler delete");
    };
    let store = &t.app.store;
    let arn = store
        .approvals_stream_arn()
        .await
        .expect("describe")
        .expect("a stream");
    let streams = aws_sdk_dynamodbstreams::Client::new(&t.sdk);
    let described = streams
        .describe_stream()
        .stream_arn(&arn)
        .send()
        .await
        .expect("describe the stream");
    let shards = described
        .stream_description()
        .map(|d| d.shards())
        .unwrap_or_default();
    assert_eq!(shards.len(), 1, "moto's stream is one shard");
    let shard = shards[0].shard_id().expect("a shard id");
    store
        .save_stream_position(&arn, shard, &last.to_string())
        .await
        .expect("the runner's position");
}
