//! Every DynamoDB expression lives here, next to the guarantee it provides.

mod approvals;
mod due;
mod events;
mod expr;
mod inbox;
mod items;
mod ledger;
mod listing;
pub mod schema;
pub mod size;
mod votes;

use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{CancellationReason, TransactWriteItem};

pub use approvals::{
    CreateOutcome, DecideOutcome, IdempotencyRecord, OperatorRefusal, SavedResponse,
};
pub use due::Requeue;
pub use events::EventPage;
pub use inbox::{InboxRecord, Ingested};
pub use listing::{ListPage, ListQuery, Listed};

/// An approval from a stored image (a stream record's old or new image).
pub fn items_to_approval(
    item: &std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>,
) -> Result<crate::domain::Approval, StoreError> {
    items::approval_from_item(item)
}
pub use ledger::{
    AttemptEnd, Begin, Completion, LedgerEntry, LedgerStatus, MAX_LATE_REPORTS, MAX_REPORT_CHARS,
    MAX_STATUS_CHECKS,
};

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
    /// Throttled, a 5xx, a timeout or no connection, still so after the SDK's own retries with
    /// backoff: nothing is wrong with the request, and it may well succeed later.
    #[error("DynamoDB {operation} unavailable: {message}")]
    Unavailable {
        operation: &'static str,
        message: String,
    },
}

impl StoreError {
    /// Whether the same write may well succeed if sent again shortly: the store was unavailable
    /// or the items were contended, and nothing was wrong with the request.
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Unavailable { .. } | Self::Contention(_))
    }
}

/// Error codes that say "too much, slow down" rather than "this request is wrong".
const THROTTLING_CODES: [&str; 4] = [
    "ThrottlingException",
    "ProvisionedThroughputExceededException",
    "RequestLimitExceeded",
    "LimitExceededException",
];

/// Whether an SDK error is the store being unavailable for now (and not the request being
/// refused): no connection, a timeout, a throttling code or a 5xx.
pub(crate) fn is_transient<E>(err: &SdkError<E, aws_smithy_runtime_api::http::Response>) -> bool
where
    E: ProvideErrorMetadata,
{
    match err {
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => {
            true
        }
        SdkError::ServiceError(service) => {
            service.raw().status().as_u16() >= 500
                || service
                    .err()
                    .code()
                    .is_some_and(|code| THROTTLING_CODES.contains(&code))
        }
        _ => false,
    }
}

impl StoreError {
    pub(crate) fn corrupt(attribute: &'static str) -> Self {
        Self::Corrupt(attribute)
    }

    /// A service error that is left after the retries: `TransactionInProgress` still is
    /// transient; anything else is the service's error.
    pub(crate) fn from_service(operation: &'static str, err: TransactWriteItemsError) -> Self {
        if matches!(
            err,
            TransactWriteItemsError::TransactionInProgressException(_)
        ) {
            return Self::Unavailable {
                operation,
                message: DisplayErrorContext(&err).to_string(),
            };
        }
        Self::dynamo(operation, err)
    }

    /// From an SDK error: `Unavailable` when it is transient (see [`is_transient`]), else the
    /// service's error.
    pub(crate) fn from_sdk<E>(
        operation: &'static str,
        err: SdkError<E, aws_smithy_runtime_api::http::Response>,
    ) -> Self
    where
        E: ProvideErrorMetadata + std::error::Error + 'static,
    {
        if is_transient(&err) {
            Self::Unavailable {
                operation,
                message: DisplayErrorContext(&err).to_string(),
            }
        } else {
            Self::dynamo(operation, err)
        }
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

/// A transaction's end, once conflicts with other in-flight transactions have been retried.
pub(crate) enum Transaction {
    Committed,
    /// A condition refused it: one reason per action, in order, with the item as it was where
    /// the action asked for `ALL_OLD`.
    Cancelled(Vec<CancellationReason>),
}

/// The item returned by the `index`th action's failed condition, if that is why it was cancelled.
pub(crate) fn condition_failed_item(
    reasons: &[CancellationReason],
    index: usize,
) -> Option<&items::Item> {
    reasons
        .get(index)
        .filter(|r| r.code() == Some("ConditionalCheckFailed"))
        .and_then(|r| r.item())
}

impl Store {
    /// Runs one `TransactWriteItems`. A cancellation caused only by `TransactionConflict` (another
    /// transaction on the same items in flight) is retried with jitter: once the other commits,
    /// the retry meets its result in a condition, which is answered from the returned item.
    ///
    /// `token` names this one write (at most 32 characters; a caller that sends a different
    /// write, such as the completing write of a vote after its counted write, passes another
    /// token). It makes the SDK's own retries of a transaction that did commit, but whose answer
    /// was lost, come back as committed. DynamoDB keeps a token for 10 minutes and refuses any
    /// other request with it (`IdempotentParameterMismatchException`), so each try after a
    /// cancellation — a new request, since the last one was answered — gets a token of its own
    /// ([`try_token`]); only a try still in progress is asked again with the same one.
    pub(crate) async fn transact(
        &self,
        items: Vec<TransactWriteItem>,
        token: &str,
    ) -> Result<Transaction, StoreError> {
        let mut tries = 1;
        let mut in_progress_waits = 0;
        loop {
            let result = self
                .client
                .transact_write_items()
                .set_transact_items(Some(items.clone()))
                .client_request_token(try_token(token, tries))
                .send()
                .await;
            let cancelled = match result {
                Ok(_) => return Ok(Transaction::Committed),
                Err(e) if is_transient(&e) => {
                    return Err(StoreError::from_sdk("TransactWriteItems", e));
                }
                Err(e) => match e.into_service_error() {
                    TransactWriteItemsError::TransactionCanceledException(cancelled) => cancelled,
                    // The same token's earlier try is still being applied (the SDK retried a
                    // request whose answer was lost): ask again shortly, with the same token.
                    TransactWriteItemsError::TransactionInProgressException(_)
                        if in_progress_waits < TRANSACTION_TRIES =>
                    {
                        in_progress_waits += 1;
                        tokio::time::sleep(conflict_backoff(in_progress_waits)).await;
                        continue;
                    }
                    other => return Err(StoreError::from_service("TransactWriteItems", other)),
                },
            };
            let reasons = cancelled.cancellation_reasons();
            if reasons
                .iter()
                .any(|r| r.code() == Some("ConditionalCheckFailed"))
            {
                return Ok(Transaction::Cancelled(reasons.to_vec()));
            }
            // Throttled inside the transaction: unavailable for now, like a throttled request.
            if reasons.iter().any(|r| {
                matches!(
                    r.code(),
                    Some("ThrottlingError" | "ProvisionedThroughputExceeded")
                )
            }) {
                return Err(StoreError::Unavailable {
                    operation: "TransactWriteItems",
                    message: format!("{cancelled}"),
                });
            }
            if !reasons
                .iter()
                .any(|r| r.code() == Some("TransactionConflict"))
            {
                return Err(StoreError::dynamo("TransactWriteItems", cancelled));
            }
            if tries == TRANSACTION_TRIES {
                return Err(StoreError::Contention("TransactWriteItems"));
            }
            tokio::time::sleep(conflict_backoff(tries)).await;
            tries += 1;
        }
    }
}

/// The client token of the `tries`th try of the write `token` names: the first try uses it as
/// it is, each later one (a new request after a cancellation) adds its number, so no token is
/// ever sent with two requests. At most 36 characters, as DynamoDB requires.
pub(crate) fn try_token(token: &str, tries: u32) -> String {
    debug_assert!(token.len() <= 32, "a client token of {} bytes", token.len());
    if tries <= 1 {
        token.to_owned()
    } else {
        format!("{token}~{tries}")
    }
}

/// How many times a transaction cancelled by `TransactionConflict` (another transaction on the
/// same item, in flight) is tried in all, and the jitter between tries.
const TRANSACTION_TRIES: u32 = 5;

fn conflict_backoff(attempt: u32) -> Duration {
    let base = 10u64 << attempt.min(4);
    Duration::from_millis(base + rand::random_range(0..base))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_try_of_a_write_has_its_own_token_within_36_characters() {
        let write = "req_01JD3ZZZZZZZZZZZZZZZZZZZZZ.2";
        let tokens: Vec<String> = (1..=TRANSACTION_TRIES)
            .map(|t| try_token(write, t))
            .collect();
        assert_eq!(tokens[0], write);
        let distinct: std::collections::HashSet<_> = tokens.iter().collect();
        assert_eq!(distinct.len(), tokens.len());
        assert!(tokens.iter().all(|t| t.len() <= 36), "{tokens:?}");
    }
}
