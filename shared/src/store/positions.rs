//! The approvals table's stream, as the local runner reads it: where the stream is, and the
//! position it saved in each shard (so nothing committed while it was down is lost). On AWS,
//! Lambda's event source mapping keeps both.

use super::attr::s;
use super::client::Store;
use super::error::StoreError;
use super::keys::stream_position_key;

impl Store {
    /// The approvals table's latest stream, if it has one.
    pub async fn approvals_stream_arn(&self) -> Result<Option<String>, StoreError> {
        let table = self
            .client
            .describe_table()
            .table_name(&self.tables.approvals)
            .send()
            .await
            .map_err(|e| StoreError::from_sdk("DescribeTable", e))?;
        Ok(table
            .table()
            .and_then(|t| t.latest_stream_arn())
            .map(str::to_owned))
    }

    /// The sequence number of the last record dispatched from `shard` (`None`: nothing yet).
    pub async fn stream_position(
        &self,
        stream_arn: &str,
        shard: &str,
    ) -> Result<Option<String>, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.tables.execution_ledger)
            .key("pk", s(stream_position_key(stream_arn, shard)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| StoreError::from_sdk("GetItem", e))?;
        Ok(output.item.and_then(|item| {
            item.get("sequence_number")
                .and_then(|v| v.as_s().ok())
                .cloned()
        }))
    }

    /// Saves `sequence` as the last record dispatched from `shard`.
    pub async fn save_stream_position(
        &self,
        stream_arn: &str,
        shard: &str,
        sequence: &str,
    ) -> Result<(), StoreError> {
        self.client
            .put_item()
            .table_name(&self.tables.execution_ledger)
            .item("pk", s(stream_position_key(stream_arn, shard)))
            .item("sequence_number", s(sequence))
            .send()
            .await
            .map_err(|e| StoreError::from_sdk("PutItem", e))?;
        Ok(())
    }
}
