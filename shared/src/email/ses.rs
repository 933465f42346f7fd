//! The call to SES (API v2 `SendEmail`): one request per email, the SDK's own retries off (a
//! retried 5xx could send it twice), and what its answer means for the job: throttling and a
//! connection refused never sent it (tried again); a refusal (`MessageRejected`, an unverified
//! address, a paused account) ends it failed with SES's reason; anything else after the request
//! left (a timeout, a 5xx) may have sent it, and is not sent again.

use std::time::Duration;

use aws_sdk_sesv2::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_sesv2::types::{Body, Content, Destination, EmailContent, Message};

use super::{Composed, EmailSender};

/// What SES's answer means for the email.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sent {
    Sent,
    /// Not sent; trying again may send it.
    NotSent(String),
    /// Refused: it will not be sent.
    Refused(String),
    /// It may have been sent.
    Unknown(String),
}

/// SES's throttling codes: the request was refused before anything was sent.
const THROTTLED: &[&str] = &[
    "TooManyRequestsException",
    "Throttling",
    "ThrottlingException",
];

/// The SES client, built once per process.
#[derive(Debug, Clone)]
pub struct Ses {
    client: aws_sdk_sesv2::Client,
}

impl Ses {
    pub fn new(sdk: &aws_config::SdkConfig) -> Self {
        Self {
            client: aws_sdk_sesv2::Client::from_conf(
                aws_sdk_sesv2::config::Builder::from(sdk)
                    .retry_config(aws_config::retry::RetryConfig::disabled())
                    .build(),
            ),
        }
    }

    /// Sends `email` from `sender` to `to`, within `budget`.
    pub async fn send(
        &self,
        sender: &EmailSender,
        to: &str,
        email: &Composed,
        budget: Duration,
    ) -> Sent {
        let content = |text: &str| {
            Content::builder()
                .data(text)
                .charset("UTF-8")
                .build()
                .map_err(|e| e.to_string())
        };
        let message = (|| -> Result<Message, String> {
            Ok(Message::builder()
                .subject(content(&email.subject)?)
                .body(
                    Body::builder()
                        .text(content(&email.text)?)
                        .html(content(&email.html)?)
                        .build(),
                )
                .build())
        })();
        let message = match message {
            Ok(message) => message,
            Err(e) => return Sent::Refused(format!("not sent: {e}")),
        };
        let request = self
            .client
            .send_email()
            .from_email_address(&sender.from)
            .destination(Destination::builder().to_addresses(to).build())
            .set_reply_to_addresses(sender.reply_to.clone().map(|r| vec![r]))
            .set_configuration_set_name(sender.configuration_set.clone())
            .content(EmailContent::builder().simple(message).build())
            .send();
        match tokio::time::timeout(budget, request).await {
            Ok(Ok(_)) => Sent::Sent,
            Ok(Err(error)) => classify(&error),
            Err(_) => Sent::Unknown("no answer from SES within the timeout".to_owned()),
        }
    }
}

/// What an SDK error means for the email.
fn classify<E: ProvideErrorMetadata + std::error::Error + 'static>(
    error: &SdkError<E, aws_smithy_runtime_api::http::Response>,
) -> Sent {
    match error {
        SdkError::ServiceError(context) => {
            let status = context.raw().status().as_u16();
            let code = context.err().code().unwrap_or("").to_owned();
            let why = format!(
                "{} (HTTP {status}): {}",
                if code.is_empty() { "error" } else { &code },
                context.err().message().unwrap_or("no message")
            );
            if THROTTLED.contains(&code.as_str()) || status == 429 {
                Sent::NotSent(format!("not sent: {why}"))
            } else if status >= 500 {
                // SES failed it after taking it: it may have gone out.
                Sent::Unknown(why)
            } else {
                Sent::Refused(why)
            }
        }
        SdkError::ConstructionFailure(_) => Sent::Refused(format!(
            "not sent: {}",
            aws_sdk_sesv2::error::DisplayErrorContext(error)
        )),
        // A connection refused never carried the request.
        SdkError::DispatchFailure(_) if refused_connection(error) => Sent::NotSent(format!(
            "not sent: {}",
            aws_sdk_sesv2::error::DisplayErrorContext(error)
        )),
        _ => Sent::Unknown(format!(
            "{}",
            aws_sdk_sesv2::error::DisplayErrorContext(error)
        )),
    }
}

/// Whether `error`'s causes include a connection the peer refused.
fn refused_connection(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = cause {
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::ConnectionRefused
        {
            return true;
        }
        cause = e.source();
    }
    false
}
