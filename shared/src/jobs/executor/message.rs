//! The executor's side of the queue: a message as Lambda or the local runner delivers it, what
//! becomes of it, and when it comes back.

/// An SQS message, from Lambda's event or from the local runner's `ReceiveMessage`.
#[derive(Debug, Clone)]
pub struct JobMessage {
    pub message_id: String,
    pub receipt_handle: String,
    pub body: String,
    /// `ApproximateReceiveCount`: the same count the queue's redrive policy uses.
    pub receive_count: u32,
}

impl JobMessage {
    pub fn from_lambda(message: &aws_lambda_events::event::sqs::SqsMessage) -> Self {
        Self {
            message_id: message.message_id.clone().unwrap_or_default(),
            receipt_handle: message.receipt_handle.clone().unwrap_or_default(),
            body: message.body.clone().unwrap_or_default(),
            receive_count: message
                .attributes
                .get("ApproximateReceiveCount")
                .and_then(|c| c.parse().ok())
                .unwrap_or(1),
        }
    }

    pub fn from_sdk(message: &aws_sdk_sqs::types::Message) -> Self {
        Self {
            message_id: message.message_id().unwrap_or_default().to_owned(),
            receipt_handle: message.receipt_handle().unwrap_or_default().to_owned(),
            body: message.body().unwrap_or_default().to_owned(),
            receive_count: message
                .attributes()
                .and_then(|a| {
                    a.get(&aws_sdk_sqs::types::MessageSystemAttributeName::ApproximateReceiveCount)
                })
                .and_then(|c| c.parse().ok())
                .unwrap_or(1),
        }
    }
}

/// What becomes of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Disposition {
    /// Done (succeeded, failed for good, handed to an operator, or nothing left to do): delete.
    Ack,
    /// Report a batch item failure: the message comes back after its visibility timeout.
    Retry,
}

/// The jobs queue, for making a message come back sooner or later than its visibility timeout.
pub(super) struct JobQueue {
    pub sqs: aws_sdk_sqs::Client,
    pub url: String,
}

impl JobQueue {
    /// Sends the job again as a new message, delivered in `seconds` (at most SQS's 15 minutes),
    /// and lets this one go: a job that waits (for another worker, for Slack's `Retry-After`)
    /// spends none of its attempts. If the send fails, this message comes back instead.
    pub async fn send_again(&self, message: &JobMessage, seconds: i32) -> Disposition {
        let sent = self
            .sqs
            .send_message()
            .queue_url(&self.url)
            .message_body(&message.body)
            .delay_seconds(seconds.clamp(0, 900))
            .send()
            .await;
        match sent {
            Ok(_) => Disposition::Ack,
            Err(e) => {
                tracing::warn!(error = %aws_sdk_sqs::error::DisplayErrorContext(&e), "job not sent again; it comes back instead");
                self.come_back_in(message, seconds).await;
                Disposition::Retry
            }
        }
    }

    /// Sends `job` (a new form of `message`'s, e.g. with its first try's time) as a new
    /// message delivered in `seconds`, and lets `message` go; if the send fails, `message`
    /// comes back instead.
    pub async fn send_job_again(
        &self,
        message: &JobMessage,
        job: &crate::jobs::Job,
        seconds: i32,
    ) -> Disposition {
        let Ok(body) = job.to_body() else {
            self.come_back_in(message, seconds).await;
            return Disposition::Retry;
        };
        self.send_again(
            &JobMessage {
                body,
                ..message.clone()
            },
            seconds,
        )
        .await
    }

    /// Makes `message` come back in `seconds` (0: now).
    pub async fn come_back_in(&self, message: &JobMessage, seconds: i32) {
        let result = self
            .sqs
            .change_message_visibility()
            .queue_url(&self.url)
            .receipt_handle(&message.receipt_handle)
            .visibility_timeout(seconds)
            .send()
            .await;
        if let Err(e) = result {
            // The message still comes back, after the queue's own visibility timeout.
            tracing::warn!(error = %aws_sdk_sqs::error::DisplayErrorContext(&e), "visibility not changed");
        }
    }
}
