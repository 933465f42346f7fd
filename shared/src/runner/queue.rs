//! The jobs queue: its local creation (with the DLQ and redrive policy) and its poller.

use std::sync::Arc;

use aws_sdk_sqs::types::{
    DeleteMessageBatchRequestEntry, MessageSystemAttributeName, QueueAttributeName,
};

use super::IDLE;
use crate::jobs::{Executor, JobMessage};

/// The jobs queue and its dead-letter queue.
#[derive(Debug, Clone)]
pub struct JobQueues {
    pub queue_url: String,
    pub dlq_url: String,
}

fn sqs_error<E: std::error::Error + 'static>(e: E) -> String {
    aws_sdk_sqs::error::DisplayErrorContext(&e).to_string()
}

/// Receives a job may have beyond its attempts before it moves to the DLQ: they let the executor
/// record the outcome of a job whose last attempt died with its worker.
pub const REDRIVE_HEADROOM: u32 = 3;

/// Creates (or finds) `{name}` and `{name}-dlq`: the visibility timeout is the job lease, and a
/// message received more than `max_attempts + REDRIVE_HEADROOM` times moves to the DLQ.
pub async fn ensure_queues(
    sqs: &aws_sdk_sqs::Client,
    name: &str,
    visibility_timeout_seconds: i64,
    max_attempts: u32,
) -> Result<JobQueues, String> {
    let dlq_url = sqs
        .create_queue()
        .queue_name(format!("{name}-dlq"))
        .attributes(QueueAttributeName::MessageRetentionPeriod, "1209600")
        .send()
        .await
        .map_err(sqs_error)?
        .queue_url
        .ok_or("CreateQueue returned no URL")?;
    let dlq_arn = sqs
        .get_queue_attributes()
        .queue_url(&dlq_url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .map_err(sqs_error)?
        .attributes
        .and_then(|mut a| a.remove(&QueueAttributeName::QueueArn))
        .ok_or("GetQueueAttributes returned no ARN")?;
    let redrive =
        serde_json::json!({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": max_attempts + REDRIVE_HEADROOM})
            .to_string();
    let queue_url = sqs
        .create_queue()
        .queue_name(name)
        .attributes(
            QueueAttributeName::VisibilityTimeout,
            visibility_timeout_seconds.to_string(),
        )
        .attributes(QueueAttributeName::RedrivePolicy, redrive)
        .send()
        .await
        .map_err(sqs_error)?
        .queue_url
        .ok_or("CreateQueue returned no URL")?;
    Ok(JobQueues { queue_url, dlq_url })
}

/// Receives up to 10 messages at a time and hands them to the executor as Lambda would.
pub(super) async fn poll(sqs: aws_sdk_sqs::Client, queue_url: String, executor: Arc<Executor>) {
    loop {
        let received = sqs
            .receive_message()
            .queue_url(&queue_url)
            .max_number_of_messages(10)
            .wait_time_seconds(0)
            .message_system_attribute_names(MessageSystemAttributeName::ApproximateReceiveCount)
            .send()
            .await;
        let messages: Vec<JobMessage> = match received {
            Ok(output) => output.messages().iter().map(JobMessage::from_sdk).collect(),
            Err(e) => {
                tracing::warn!(error = sqs_error(e), "ReceiveMessage failed");
                tokio::time::sleep(IDLE * 10).await;
                continue;
            }
        };
        if messages.is_empty() {
            tokio::time::sleep(IDLE).await;
            continue;
        }
        let handler = executor.clone();
        let batch = messages.clone();
        // Its own task, so that a panic (a failpoint, a bug) is caught like a crashed Lambda:
        // the whole batch is left to come back.
        let failed = match tokio::spawn(async move { handler.handle_batch(&batch, None).await })
            .await
        {
            Ok(failed) => failed,
            Err(e) => {
                tracing::error!(error = %e, "executor crashed; its batch comes back after the visibility timeout");
                continue;
            }
        };
        let done: Vec<_> = messages
            .iter()
            .filter(|m| !failed.contains(&m.message_id))
            .enumerate()
            .filter_map(|(i, m)| {
                DeleteMessageBatchRequestEntry::builder()
                    .id(format!("m{i}"))
                    .receipt_handle(&m.receipt_handle)
                    .build()
                    .ok()
            })
            .collect();
        if !done.is_empty() {
            let deleted = sqs
                .delete_message_batch()
                .queue_url(&queue_url)
                .set_entries(Some(done))
                .send()
                .await;
            if let Err(e) = deleted {
                // Their ledger entries are final: when they come back, they are acknowledged.
                tracing::warn!(error = sqs_error(e), "DeleteMessageBatch failed");
            }
        }
    }
}
