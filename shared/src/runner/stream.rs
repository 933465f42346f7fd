//! The approvals stream poller: DynamoDB Streams → the dispatcher, with the position of each
//! shard saved after its records were dispatched.
//!
//! It trusts nothing it cannot check. A shard iterator is only followed while it keeps returning
//! records; after an empty read or any error, the next read starts from a fresh iterator at the
//! saved position. (On AWS iterators expire after 15 minutes and shards close and split; moto
//! 5.2.5 left iterators reading a dead copy of the shard after any cancelled transaction.) Shards
//! are read parent before child, as Lambda's event source mapping does, so the changes of one
//! item are dispatched in order across a split.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodbstreams::types::{Shard, ShardIteratorType};

use super::IDLE;
use crate::App;
use crate::jobs::{Dispatcher, StreamChange};

fn error<E: std::error::Error + 'static>(e: E) -> String {
    aws_sdk_dynamodb::error::DisplayErrorContext(&e).to_string()
}

/// How often the list of shards is read again while no shard has ended (shards end, and their
/// children appear, every few hours on AWS).
const SHARD_LIST_REFRESH: Duration = Duration::from_secs(10);

/// Where the runner keeps its position in a shard: an item of the ledger table (never of the
/// approvals table, whose writes would feed the stream itself).
fn position_key(stream_arn: &str, shard_id: &str) -> String {
    format!("_local_runner#stream#{stream_arn}#{shard_id}")
}

/// A shard as the poller needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ShardInfo {
    pub id: String,
    pub parent: Option<String>,
}

impl ShardInfo {
    fn from_sdk(shard: &Shard) -> Option<Self> {
        Some(Self {
            id: shard.shard_id()?.to_owned(),
            parent: shard.parent_shard_id().map(str::to_owned),
        })
    }
}

/// The shards to read now, in the order given: every shard not read to its end yet whose parent
/// is read to its end, or is no longer listed (trimmed after 24 h, so long read).
pub(crate) fn readable_shards<'a>(
    shards: &'a [ShardInfo],
    ended: &HashSet<String>,
) -> Vec<&'a ShardInfo> {
    let listed: HashSet<&str> = shards.iter().map(|s| s.id.as_str()).collect();
    shards
        .iter()
        .filter(|s| !ended.contains(&s.id))
        .filter(|s| {
            s.parent
                .as_deref()
                .is_none_or(|parent| ended.contains(parent) || !listed.contains(parent))
        })
        .collect()
}

/// What the poller knows between rounds.
#[derive(Default)]
struct StreamReader {
    stream_arn: Option<String>,
    shards: Vec<ShardInfo>,
    shards_read_at: Option<Instant>,
    /// Shards read to their end (closed, and nothing left after the saved position).
    ended: HashSet<String>,
    /// The saved position of each shard seen (`None`: nothing dispatched from it yet).
    positions: HashMap<String, Option<String>>,
    /// Iterators handed on by a read that returned records: the only ones worth following.
    iterators: HashMap<String, String>,
}

pub(super) async fn poll(
    app: Arc<App>,
    streams: aws_sdk_dynamodbstreams::Client,
    dispatcher: Dispatcher,
) {
    let mut reader = StreamReader::default();
    loop {
        match reader.poll_once(&app, &streams, &dispatcher).await {
            Ok(0) => tokio::time::sleep(IDLE).await,
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(
                    error = e,
                    "stream poll failed; retrying from the saved position"
                );
                // Trust nothing learnt before the error: iterators, the shard list, the stream.
                reader.iterators.clear();
                reader.shards_read_at = None;
                reader.stream_arn = None;
                tokio::time::sleep(IDLE * 5).await;
            }
        }
    }
}

impl StreamReader {
    /// One round over the readable shards; returns how many records were dispatched.
    async fn poll_once(
        &mut self,
        app: &App,
        streams: &aws_sdk_dynamodbstreams::Client,
        dispatcher: &Dispatcher,
    ) -> Result<usize, String> {
        let Some(stream_arn) = self.stream_arn(app).await? else {
            return Ok(0);
        };
        if self
            .shards_read_at
            .is_none_or(|at| at.elapsed() >= SHARD_LIST_REFRESH)
        {
            self.shards = list_shards(streams, &stream_arn).await?;
            self.shards_read_at = Some(Instant::now());
            let listed: HashSet<&str> = self.shards.iter().map(|s| s.id.as_str()).collect();
            self.ended.retain(|id| listed.contains(id.as_str()));
        }
        let readable: Vec<String> = readable_shards(&self.shards, &self.ended)
            .into_iter()
            .map(|s| s.id.clone())
            .collect();
        let mut dispatched = 0;
        for shard in readable {
            dispatched += self
                .read_shard(app, streams, dispatcher, &stream_arn, &shard)
                .await?;
        }
        Ok(dispatched)
    }

    async fn stream_arn(&mut self, app: &App) -> Result<Option<String>, String> {
        if self.stream_arn.is_none() {
            let table = app
                .store
                .client()
                .describe_table()
                .table_name(&app.config.tables.approvals)
                .send()
                .await
                .map_err(error)?;
            self.stream_arn = table
                .table()
                .and_then(|t| t.latest_stream_arn())
                .map(str::to_owned);
        }
        Ok(self.stream_arn.clone())
    }

    /// Reads one batch of a shard, dispatches it, and saves the position after it.
    async fn read_shard(
        &mut self,
        app: &App,
        streams: &aws_sdk_dynamodbstreams::Client,
        dispatcher: &Dispatcher,
        stream_arn: &str,
        shard: &str,
    ) -> Result<usize, String> {
        let iterator = match self.iterators.remove(shard) {
            Some(iterator) => iterator,
            None => {
                let saved = match self.positions.get(shard) {
                    Some(saved) => saved.clone(),
                    None => {
                        let saved = load_position(app, stream_arn, shard).await?;
                        self.positions.insert(shard.to_owned(), saved.clone());
                        saved
                    }
                };
                open_iterator(streams, stream_arn, shard, saved.as_deref()).await?
            }
        };
        let read = streams
            .get_records()
            .shard_iterator(&iterator)
            .limit(100)
            .send()
            .await
            .map_err(error)?;
        let records = read.records();
        let Some(next) = read.next_shard_iterator() else {
            // Closed, and read to its end: its children may start.
            if records.is_empty() {
                self.ended.insert(shard.to_owned());
                self.shards_read_at = None;
                return Ok(0);
            }
            // The last records of a closed shard: dispatch them; the next round finds the end.
            return self
                .dispatch(app, dispatcher, stream_arn, shard, records)
                .await;
        };
        if records.is_empty() {
            // Nothing new. Do not follow `next`: the next round reopens at the saved position.
            return Ok(0);
        }
        let dispatched = self
            .dispatch(app, dispatcher, stream_arn, shard, records)
            .await?;
        self.iterators.insert(shard.to_owned(), next.to_owned());
        Ok(dispatched)
    }

    async fn dispatch(
        &mut self,
        app: &App,
        dispatcher: &Dispatcher,
        stream_arn: &str,
        shard: &str,
        records: &[aws_sdk_dynamodbstreams::types::Record],
    ) -> Result<usize, String> {
        let Some(last_sequence) = records
            .last()
            .and_then(|r| r.dynamodb())
            .and_then(|d| d.sequence_number())
            .map(str::to_owned)
        else {
            return Err("a stream record without a sequence number".to_owned());
        };
        let changes: Vec<StreamChange> = records.iter().map(StreamChange::from_streams).collect();
        let handler = dispatcher.clone();
        // Its own task: a panic (the dispatch::after_send failpoint) is a crashed Lambda. The
        // position is not saved, so the same records are dispatched again.
        match tokio::spawn(async move { handler.dispatch(&changes).await }).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Err(e.to_string()),
            Err(e) => return Err(format!("dispatcher crashed: {e}")),
        }
        save_position(app, stream_arn, shard, &last_sequence).await?;
        self.positions
            .insert(shard.to_owned(), Some(last_sequence.clone()));
        Ok(records.len())
    }
}

/// Every shard of the stream (DescribeStream pages through them), oldest first.
async fn list_shards(
    streams: &aws_sdk_dynamodbstreams::Client,
    stream_arn: &str,
) -> Result<Vec<ShardInfo>, String> {
    let mut shards = Vec::new();
    let mut start: Option<String> = None;
    loop {
        let page = streams
            .describe_stream()
            .stream_arn(stream_arn)
            .set_exclusive_start_shard_id(start.take())
            .send()
            .await
            .map_err(error)?;
        let Some(description) = page.stream_description() else {
            return Ok(shards);
        };
        shards.extend(description.shards().iter().filter_map(ShardInfo::from_sdk));
        match description.last_evaluated_shard_id() {
            Some(last) => start = Some(last.to_owned()),
            None => return Ok(shards),
        }
    }
}

async fn open_iterator(
    streams: &aws_sdk_dynamodbstreams::Client,
    stream_arn: &str,
    shard: &str,
    saved: Option<&str>,
) -> Result<String, String> {
    let request = streams
        .get_shard_iterator()
        .stream_arn(stream_arn)
        .shard_id(shard);
    let request = match saved {
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

async fn load_position(app: &App, stream_arn: &str, shard: &str) -> Result<Option<String>, String> {
    Ok(app
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
        }))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn shard(id: &str, parent: Option<&str>) -> ShardInfo {
        ShardInfo {
            id: id.to_owned(),
            parent: parent.map(str::to_owned),
        }
    }

    fn ids(shards: Vec<&ShardInfo>) -> Vec<&str> {
        shards.into_iter().map(|s| s.id.as_str()).collect()
    }

    #[test]
    fn a_child_waits_until_its_parent_is_read_to_its_end() {
        let shards = [
            shard("p", None),
            shard("c1", Some("p")),
            shard("c2", Some("p")),
        ];
        assert_eq!(ids(readable_shards(&shards, &HashSet::new())), ["p"]);
        let ended = HashSet::from(["p".to_owned()]);
        assert_eq!(ids(readable_shards(&shards, &ended)), ["c1", "c2"]);
    }

    #[test]
    fn a_child_whose_parent_was_trimmed_is_readable() {
        let shards = [shard("c", Some("gone")), shard("g", Some("c"))];
        assert_eq!(ids(readable_shards(&shards, &HashSet::new())), ["c"]);
    }

    #[test]
    fn generations_are_read_one_after_the_other() {
        let shards = [
            shard("a", None),
            shard("b", Some("a")),
            shard("c", Some("b")),
        ];
        let mut ended = HashSet::new();
        let mut order = Vec::new();
        while let Some(next) = readable_shards(&shards, &ended)
            .first()
            .map(|s| s.id.clone())
        {
            order.push(next.clone());
            ended.insert(next);
        }
        assert_eq!(order, ["a", "b", "c"]);
    }
}
