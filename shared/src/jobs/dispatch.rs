//! The dispatcher: committed approval changes (the approvals table's stream) → jobs on SQS.
//! Handlers only write DynamoDB; this is the only place jobs are made, so a crash between a
//! commit and an enqueue cannot lose a job (the stream redelivers the change).

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_sqs::types::SendMessageBatchRequestEntry;

use super::job::{Job, jobs_for_change};
use crate::store::items_to_approval;

/// One change of one approval item, from whichever source delivers the stream.
#[derive(Debug, Clone, Default)]
pub struct StreamChange {
    pub old: Option<HashMap<String, AttributeValue>>,
    pub new: Option<HashMap<String, AttributeValue>>,
}

fn non_empty(image: HashMap<String, AttributeValue>) -> Option<HashMap<String, AttributeValue>> {
    (!image.is_empty()).then_some(image)
}

impl StreamChange {
    /// From a Lambda DynamoDB stream event record.
    pub fn from_lambda(record: &aws_lambda_events::event::dynamodb::EventRecord) -> Self {
        Self {
            old: non_empty(record.change.old_image.clone().into()),
            new: non_empty(record.change.new_image.clone().into()),
        }
    }

    /// From a DynamoDB Streams `GetRecords` record (the local runner).
    pub fn from_streams(record: &aws_sdk_dynamodbstreams::types::Record) -> Self {
        let convert =
            |image: Option<&HashMap<String, aws_sdk_dynamodbstreams::types::AttributeValue>>| {
                image
                    .cloned()
                    .map(|image| {
                        HashMap::<String, AttributeValue>::from(serde_dynamo::Item::from(image))
                    })
                    .and_then(non_empty)
            };
        let change = record.dynamodb();
        Self {
            old: convert(change.and_then(|c| c.old_image.as_ref())),
            new: convert(change.and_then(|c| c.new_image.as_ref())),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DispatchError {
    #[error("SQS SendMessageBatch: {0}")]
    Send(String),
    #[error("a stream image is not an approval: {0}")]
    Unreadable(String),
}

/// Sends the jobs of committed changes to the jobs queue.
#[derive(Debug, Clone)]
pub struct Dispatcher {
    sqs: aws_sdk_sqs::Client,
    queue_url: String,
}

impl Dispatcher {
    pub fn new(sqs: aws_sdk_sqs::Client, queue_url: impl Into<String>) -> Self {
        Self {
            sqs,
            queue_url: queue_url.into(),
        }
    }

    /// The jobs of `changes`, sent in batches of ten. Any job that cannot be sent fails the
    /// whole call, so the stream delivers the batch again: jobs sent twice are harmless (the
    /// executor's ledger dedupes them), jobs never sent would be lost.
    pub async fn dispatch(&self, changes: &[StreamChange]) -> Result<usize, DispatchError> {
        let mut jobs = Vec::new();
        for change in changes {
            let old = change.old.as_ref().map(items_to_approval).transpose();
            let new = change.new.as_ref().map(items_to_approval).transpose();
            match (old, new) {
                (Ok(old), Ok(new)) => jobs.extend(jobs_for_change(old.as_ref(), new.as_ref())),
                // Not an approval this version understands (a deploy in progress?). Skipping it
                // could lose an execute job: fail, so the stream retries and, past its retry
                // limit, bisects the batch and sends the record to the on-failure destination.
                (Err(e), _) | (_, Err(e)) => return Err(DispatchError::Unreadable(e.to_string())),
            }
        }
        for chunk in jobs.chunks(10) {
            self.send(chunk).await?;
        }
        fail::fail_point!("dispatch::after_send");
        Ok(jobs.len())
    }

    async fn send(&self, jobs: &[Job]) -> Result<(), DispatchError> {
        let mut entries = Vec::with_capacity(jobs.len());
        for (i, job) in jobs.iter().enumerate() {
            let body =
                serde_json::to_string(job).map_err(|e| DispatchError::Send(e.to_string()))?;
            let entry = SendMessageBatchRequestEntry::builder()
                .id(format!("job{i}"))
                .message_body(body)
                .build()
                .map_err(|e| DispatchError::Send(e.to_string()))?;
            entries.push(entry);
        }
        let output = self
            .sqs
            .send_message_batch()
            .queue_url(&self.queue_url)
            .set_entries(Some(entries))
            .send()
            .await
            .map_err(|e| {
                DispatchError::Send(aws_sdk_sqs::error::DisplayErrorContext(&e).to_string())
            })?;
        if let Some(failed) = output.failed().first() {
            return Err(DispatchError::Send(format!(
                "{} of {} jobs not sent, first: {} {}",
                output.failed().len(),
                jobs.len(),
                failed.code(),
                failed.message().unwrap_or_default()
            )));
        }
        for job in jobs {
            tracing::info!(job = job.id(), kind = job.kind(), "job sent");
        }
        Ok(())
    }
}
