//! Every DynamoDB expression lives here, next to the guarantee it provides.

mod approvals;
mod items;
pub mod schema;

use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::DisplayErrorContext;

pub use approvals::{CreateOutcome, DecideOutcome, IdempotencyRecord, SavedResponse};

use crate::config::Tables;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("DynamoDB {operation}: {message}")]
    Dynamo {
        operation: &'static str,
        message: String,
    },
    #[error("stored item is malformed: {0}")]
    Corrupt(&'static str),
    #[error("DynamoDB {0}: still conflicting after retries")]
    Contention(&'static str),
}

impl StoreError {
    pub(crate) fn corrupt(attribute: &'static str) -> Self {
        Self::Corrupt(attribute)
    }

    pub(crate) fn dynamo<E>(operation: &'static str, err: E) -> Self
    where
        E: std::error::Error + 'static,
    {
        // The SDK's Display of a service error is only "service error": show the whole chain.
        Self::Dynamo {
            operation,
            message: DisplayErrorContext(&err).to_string(),
        }
    }
}

/// The DynamoDB store: one client (built once per process) and the table names.
#[derive(Debug, Clone)]
pub struct Store {
    client: Client,
    tables: Tables,
}

impl Store {
    pub fn new(client: Client, tables: Tables) -> Self {
        Self { client, tables }
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn tables(&self) -> &Tables {
        &self.tables
    }

    /// Whether the tables answer: one DescribeTable each, for `/health`.
    pub async fn check(&self) -> Result<(), StoreError> {
        for table in [&self.tables.approvals, &self.tables.idempotency_keys] {
            self.client
                .describe_table()
                .table_name(table)
                .send()
                .await
                .map_err(|e| StoreError::dynamo("DescribeTable", e))?;
        }
        Ok(())
    }
}

/// How many times a transaction cancelled by `TransactionConflict` (another transaction on the
/// same item, in flight) is tried in all, and the jitter between tries.
const TRANSACTION_TRIES: u32 = 5;

fn conflict_backoff(attempt: u32) -> Duration {
    let base = 10u64 << attempt.min(4);
    Duration::from_millis(base + rand::random_range(0..base))
}
