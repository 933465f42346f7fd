//! Where the poller reads the stream from: the [`StreamSource`] it needs (the stream's ARN, its
//! shards, an iterator at a position, a batch of records), and that source on AWS (DynamoDB
//! for the table's stream ARN, DynamoDB Streams for the rest).

use std::future::Future;

use aws_sdk_dynamodbstreams::error::ProvideErrorMetadata;
use aws_sdk_dynamodbstreams::error::SdkError;
use aws_sdk_dynamodbstreams::types::{Shard, ShardIteratorType};

use crate::jobs::StreamChange;
use crate::store::Store;

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

/// Where a new iterator starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Start<'a> {
    /// Just after this sequence number (the saved position).
    After(&'a str),
    /// At the oldest record the shard still keeps.
    TrimHorizon,
}

/// What one GetRecords returned.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    pub changes: Vec<StreamChange>,
    /// `None`: the shard is closed and read to its end.
    pub next: Option<String>,
}

/// What the poller must tell apart, because each asks for a different recovery.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SourceError {
    /// The iterator is older than 15 minutes: a fresh one at the saved position reads on.
    #[error("the shard iterator expired: {0}")]
    ExpiredIterator(String),
    /// The position asked for is older than the stream's 24-hour retention.
    #[error("the position was trimmed from the stream: {0}")]
    Trimmed(String),
    /// The stream or the shard is gone (the stream was replaced, or the shard aged out).
    #[error("the stream or shard was not found: {0}")]
    NotFound(String),
    #[error("{0}")]
    Other(String),
}

impl SourceError {
    fn from_sdk<E, R>(e: SdkError<E, R>) -> Self
    where
        E: ProvideErrorMetadata + std::error::Error + 'static,
        R: std::fmt::Debug,
    {
        let code = e.code().map(str::to_owned);
        let text = aws_sdk_dynamodbstreams::error::DisplayErrorContext(&e).to_string();
        // The error codes, not the operations' error enums: one classification for the three
        // operations, and the same codes whichever operation answered them.
        match code.as_deref() {
            Some("ExpiredIteratorException") => Self::ExpiredIterator(text),
            Some("TrimmedDataAccessException") => Self::Trimmed(text),
            Some("ResourceNotFoundException") => Self::NotFound(text),
            _ => Self::Other(text),
        }
    }
}

/// The stream as the poller reads it. The futures are `Send`: the poller runs on its own task.
pub(crate) trait StreamSource {
    /// The table's current stream (`None`: the table has no stream).
    fn stream_arn(&self) -> impl Future<Output = Result<Option<String>, SourceError>> + Send;

    /// Every shard of the stream, oldest first.
    fn shards(
        &self,
        stream_arn: &str,
    ) -> impl Future<Output = Result<Vec<ShardInfo>, SourceError>> + Send;

    /// A fresh iterator into `shard`.
    fn open(
        &self,
        stream_arn: &str,
        shard: &str,
        start: Start<'_>,
    ) -> impl Future<Output = Result<String, SourceError>> + Send;

    /// One batch read from `iterator`.
    fn records(&self, iterator: &str) -> impl Future<Output = Result<Batch, SourceError>> + Send;
}

/// The approvals table's stream on AWS (or on whatever the SDK's endpoint variables name).
pub(crate) struct TableStream {
    pub store: Store,
    pub streams: aws_sdk_dynamodbstreams::Client,
}

impl StreamSource for TableStream {
    async fn stream_arn(&self) -> Result<Option<String>, SourceError> {
        self.store
            .approvals_stream_arn()
            .await
            .map_err(|e| SourceError::Other(e.to_string()))
    }

    /// DescribeStream pages through the shards.
    async fn shards(&self, stream_arn: &str) -> Result<Vec<ShardInfo>, SourceError> {
        let mut shards = Vec::new();
        let mut start: Option<String> = None;
        loop {
            let page = self
                .streams
                .describe_stream()
                .stream_arn(stream_arn)
                .set_exclusive_start_shard_id(start.take())
                .send()
                .await
                .map_err(SourceError::from_sdk)?;
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

    async fn open(
        &self,
        stream_arn: &str,
        shard: &str,
        start: Start<'_>,
    ) -> Result<String, SourceError> {
        let request = self
            .streams
            .get_shard_iterator()
            .stream_arn(stream_arn)
            .shard_id(shard);
        let request = match start {
            Start::After(sequence) => request
                .shard_iterator_type(ShardIteratorType::AfterSequenceNumber)
                .sequence_number(sequence),
            Start::TrimHorizon => request.shard_iterator_type(ShardIteratorType::TrimHorizon),
        };
        request
            .send()
            .await
            .map_err(SourceError::from_sdk)?
            .shard_iterator
            .ok_or_else(|| SourceError::Other("GetShardIterator returned no iterator".to_owned()))
    }

    async fn records(&self, iterator: &str) -> Result<Batch, SourceError> {
        let read = self
            .streams
            .get_records()
            .shard_iterator(iterator)
            .limit(100)
            .send()
            .await
            .map_err(SourceError::from_sdk)?;
        Ok(Batch {
            changes: read
                .records()
                .iter()
                .map(StreamChange::from_streams)
                .collect(),
            next: read.next_shard_iterator,
        })
    }
}
