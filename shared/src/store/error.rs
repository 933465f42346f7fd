//! The store's one error type, and which SDK errors mean "unavailable for now".

use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;

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
