//! The approvals stream poller: DynamoDB Streams → the dispatcher, with the position of each
//! shard saved after its records were dispatched. On AWS, Lambda's event source mapping does
//! this job; this poller is the local runner's.
//!
//! It trusts no iterator for long. An iterator that returned records is followed; one that
//! returned none is followed through a bounded number of empty reads (DynamoDB Streams may need
//! several calls to reach a shard's records) and then replaced by a fresh one at the saved
//! position (iterators expire after 15 minutes, and moto 5.2.5 left iterators reading a dead
//! copy of the shard after any cancelled transaction). An error in one shard is that shard's: it
//! is reopened after a pause, at its saved position (or at TRIM_HORIZON when that position was
//! trimmed), and the other shards read on. Shards are read parent before child, as Lambda's
//! event source mapping does, so the changes of one item are dispatched in order across a split.
//!
//! The logic ([`reader`]) reads through two seams, the stream ([`source`]) and where its records
//! go ([`sink`]), so that it is tested against scripted streams (`tests.rs`).

mod reader;
mod sink;
mod source;
#[cfg(test)]
mod tests;

use std::time::Instant;

use super::IDLE;
use crate::jobs::Dispatcher;
use crate::store::Store;
use reader::StreamReader;
use sink::DispatchSink;
use source::TableStream;

/// `esm`: the event source mapping's own store (the stream's ARN, each shard's position);
/// `streams` reads the stream as the dispatch function's role.
pub(super) async fn poll(
    esm: Store,
    streams: aws_sdk_dynamodbstreams::Client,
    dispatcher: Dispatcher,
) {
    let source = TableStream {
        store: esm.clone(),
        streams,
    };
    let sink = DispatchSink {
        store: esm,
        dispatcher,
    };
    let mut reader = StreamReader::default();
    loop {
        match reader.poll_once(&source, &sink, Instant::now()).await {
            Ok(0) => tokio::time::sleep(IDLE).await,
            Ok(_) => {}
            Err(e) => {
                // Nothing per shard to go on with: the stream or its shard list is unknown.
                tracing::warn!(error = %e, "stream poll failed; describing the stream again");
                reader.refresh_stream();
                tokio::time::sleep(IDLE * 5).await;
            }
        }
    }
}
