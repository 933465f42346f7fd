//! Where the poller hands what it read: the [`StreamSink`] (dispatch a batch; load and save a
//! shard's position), and that sink in the runner (the dispatcher, and an item of the ledger
//! table per shard).

use std::future::Future;

use crate::jobs::{Dispatcher, StreamChange};
use crate::store::{Store, StoreError};

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

/// The runner's sink: the dispatcher, and the positions `store` keeps (as the event source
/// mapping, not as the dispatch function).
pub(crate) struct DispatchSink {
    pub store: Store,
    pub dispatcher: Dispatcher,
}

fn error(e: StoreError) -> SinkError {
    SinkError::Position(e.to_string())
}

impl StreamSink for DispatchSink {
    async fn load_position(
        &self,
        stream_arn: &str,
        shard: &str,
    ) -> Result<Option<String>, SinkError> {
        self.store
            .stream_position(stream_arn, shard)
            .await
            .map_err(error)
    }

    async fn save_position(
        &self,
        stream_arn: &str,
        shard: &str,
        sequence: &str,
    ) -> Result<(), SinkError> {
        self.store
            .save_stream_position(stream_arn, shard, sequence)
            .await
            .map_err(error)
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
