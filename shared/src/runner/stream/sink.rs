//! Where the poller hands what it read: the [`StreamSink`] (dispatch a batch; load and save a
//! shard's position), and that sink in the runner (the dispatcher, and an item of the ledger
//! table per shard).

use std::future::Future;
use std::sync::Arc;

use aws_sdk_dynamodb::types::AttributeValue;

use crate::App;
use crate::jobs::{Dispatcher, StreamChange};

#[derive(Debug, thiserror::Error)]
pub(crate) enum SinkError {
    #[error("dispatch failed: {0}")]
    Dispatch(String),
    #[error("the shard's position could not be read or saved: {0}")]
    Position(String),
}

/// The futures are `Send`: the poller runs on its own task.
pub(crate) trait StreamSink {
    /// The position saved for `shard` (`None`: nothing dispatched from it yet).
    fn load_position(
        &self,
        stream_arn: &str,
        shard: &str,
    ) -> impl Future<Output = Result<Option<String>, SinkError>> + Send;

    fn save_position(
        &self,
        stream_arn: &str,
        shard: &str,
        sequence: &str,
    ) -> impl Future<Output = Result<(), SinkError>> + Send;

    /// Dispatches one batch, whole or not at all (a failure delivers it again).
    fn dispatch(
        &self,
        changes: Vec<StreamChange>,
    ) -> impl Future<Output = Result<(), SinkError>> + Send;
}

/// The runner's sink: the dispatcher, and the positions in the ledger table.
pub(crate) struct DispatchSink {
    pub app: Arc<App>,
    pub dispatcher: Dispatcher,
}

fn error<E: std::error::Error + 'static>(e: E) -> SinkError {
    SinkError::Position(aws_sdk_dynamodb::error::DisplayErrorContext(&e).to_string())
}

/// Where the runner keeps its position in a shard: an item of the ledger table (never of the
/// approvals table, whose writes would feed the stream itself).
fn position_key(stream_arn: &str, shard_id: &str) -> String {
    format!("_local_runner#stream#{stream_arn}#{shard_id}")
}

impl StreamSink for DispatchSink {
    async fn load_position(
        &self,
        stream_arn: &str,
        shard: &str,
    ) -> Result<Option<String>, SinkError> {
        Ok(self
            .app
            .store
            .client()
            .get_item()
            .table_name(&self.app.config.tables.execution_ledger)
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
        &self,
        stream_arn: &str,
        shard: &str,
        sequence: &str,
    ) -> Result<(), SinkError> {
        self.app
            .store
            .client()
            .put_item()
            .table_name(&self.app.config.tables.execution_ledger)
            .item("pk", AttributeValue::S(position_key(stream_arn, shard)))
            .item("sequence_number", AttributeValue::S(sequence.to_owned()))
            .send()
            .await
            .map_err(error)?;
        Ok(())
    }

    async fn dispatch(&self, changes: Vec<StreamChange>) -> Result<(), SinkError> {
        let handler = self.dispatcher.clone();
        // Its own task: a panic (the dispatch::after_send failpoint) is a crashed Lambda. The
        // position is not saved, so the same records are dispatched again.
        match tokio::spawn(async move { handler.dispatch(&changes).await }).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(SinkError::Dispatch(e.to_string())),
            Err(e) => Err(SinkError::Dispatch(format!("dispatcher crashed: {e}"))),
        }
    }
}
