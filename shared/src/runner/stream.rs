//! The approvals stream poller: DynamoDB Streams → the dispatcher, with the position of each
//! shard saved after its records were dispatched.

use std::collections::HashMap;
use std::sync::Arc;

use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodbstreams::types::ShardIteratorType;

use super::IDLE;
use crate::App;
use crate::jobs::{Dispatcher, StreamChange};

fn error<E: std::error::Error + 'static>(e: E) -> String {
    aws_sdk_dynamodb::error::DisplayErrorContext(&e).to_string()
}

/// Where the runner keeps its position in a shard: an item of the ledger table (never of the
/// approvals table, whose writes would feed the stream itself).
fn position_key(stream_arn: &str, shard_id: &str) -> String {
    format!("_local_runner#stream#{stream_arn}#{shard_id}")
}

pub(super) async fn poll(
    app: Arc<App>,
    streams: aws_sdk_dynamodbstreams::Client,
    dispatcher: Dispatcher,
) {
    let mut iterators: HashMap<String, String> = HashMap::new();
    let mut stream_arn = None;
    loop {
        if stream_arn.is_none() {
            stream_arn = latest_stream(&app).await;
            if stream_arn.is_none() {
                tokio::time::sleep(IDLE * 10).await;
                continue;
            }
        }
        let arn = stream_arn.clone().unwrap_or_default();
        match poll_once(&app, &streams, &dispatcher, &arn, &mut iterators).await {
            Ok(0) => tokio::time::sleep(IDLE).await,
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(
                    error = e,
                    "stream poll failed; retrying from the saved position"
                );
                iterators.clear();
                tokio::time::sleep(IDLE * 5).await;
            }
        }
    }
}

async fn latest_stream(app: &App) -> Option<String> {
    let table = app
        .store
        .client()
        .describe_table()
        .table_name(&app.config.tables.approvals)
        .send()
        .await
        .ok()?;
    table.table()?.latest_stream_arn().map(str::to_owned)
}

/// One round over the shards; returns how many records were dispatched.
async fn poll_once(
    app: &App,
    streams: &aws_sdk_dynamodbstreams::Client,
    dispatcher: &Dispatcher,
    stream_arn: &str,
    iterators: &mut HashMap<String, String>,
) -> Result<usize, String> {
    let description = streams
        .describe_stream()
        .stream_arn(stream_arn)
        .send()
        .await
        .map_err(error)?;
    let shards: Vec<String> = description
        .stream_description()
        .map(|d| {
            d.shards()
                .iter()
                .filter_map(|s| s.shard_id().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let mut dispatched = 0;
    for shard in shards {
        let iterator = match iterators.get(&shard) {
            Some(iterator) => iterator.clone(),
            None => start_iterator(app, streams, stream_arn, &shard).await?,
        };
        let records = streams
            .get_records()
            .shard_iterator(&iterator)
            .limit(100)
            .send()
            .await
            .map_err(error)?;
        let last_sequence = records
            .records()
            .last()
            .and_then(|r| r.dynamodb())
            .and_then(|d| d.sequence_number())
            .map(str::to_owned);
        if let Some(sequence) = last_sequence {
            let changes: Vec<StreamChange> = records
                .records()
                .iter()
                .map(StreamChange::from_streams)
                .collect();
            let handler = dispatcher.clone();
            // Its own task: a panic (the dispatch::after_send failpoint) is a crashed Lambda.
            // The position is not saved, so the same records are dispatched again.
            match tokio::spawn(async move { handler.dispatch(&changes).await }).await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => return Err(e.to_string()),
                Err(e) => return Err(format!("dispatcher crashed: {e}")),
            }
            save_position(app, stream_arn, &shard, &sequence).await?;
            dispatched += records.records().len();
        }
        match records.next_shard_iterator() {
            Some(next) => iterators.insert(shard, next.to_owned()),
            None => iterators.remove(&shard),
        };
    }
    Ok(dispatched)
}

async fn start_iterator(
    app: &App,
    streams: &aws_sdk_dynamodbstreams::Client,
    stream_arn: &str,
    shard: &str,
) -> Result<String, String> {
    let saved = app
        .store
        .client()
        .get_item()
        .table_name(&app.config.tables.execution_ledger)
        .key("pk", AttributeValue::S(position_key(stream_arn, shard)))
        .consistent_read(true)
        .send()
        .await
        .map_err(error)?
        .item
        .and_then(|item| {
            item.get("sequence_number")
                .and_then(|v| v.as_s().ok())
                .cloned()
        });
    let request = streams
        .get_shard_iterator()
        .stream_arn(stream_arn)
        .shard_id(shard);
    let request = match &saved {
        Some(sequence) => request
            .shard_iterator_type(ShardIteratorType::AfterSequenceNumber)
            .sequence_number(sequence),
        None => request.shard_iterator_type(ShardIteratorType::TrimHorizon),
    };
    request
        .send()
        .await
        .map_err(error)?
        .shard_iterator
        .ok_or_else(|| "GetShardIterator returned no iterator".to_owned())
}

async fn save_position(
    app: &App,
    stream_arn: &str,
    shard: &str,
    sequence: &str,
) -> Result<(), String> {
    app.store
        .client()
        .put_item()
        .table_name(&app.config.tables.execution_ledger)
        .item("pk", AttributeValue::S(position_key(stream_arn, shard)))
        .item("sequence_number", AttributeValue::S(sequence.to_owned()))
        .send()
        .await
        .map_err(error)?;
    Ok(())
}
