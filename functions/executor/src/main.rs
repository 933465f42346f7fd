//! The executor Lambda: jobs from SQS, each guarded by the execution ledger; the messages to
//! retry are reported as batch item failures.

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use countersign::jobs::{Executor, JobMessage};
use lambda_runtime::{LambdaEvent, service_fn};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    countersign::telemetry::init()?;
    let _failpoints = countersign::failpoints();
    let app = countersign::App::for_function(countersign::Function::Executor).await?;
    // Its role and the SDK's endpoints, for the workflows' calls (Step Functions, Lambda).
    let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .load()
        .await;
    let executor = &Executor::new(app, &sdk)?;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| async move {
        let messages: Vec<_> = event
            .payload
            .records
            .iter()
            .map(JobMessage::from_lambda)
            .collect();
        // Lambda ends the invocation at its deadline: no call may run past it.
        let remaining = event
            .context
            .deadline()
            .duration_since(std::time::SystemTime::now());
        let deadline = std::time::Instant::now() + remaining.unwrap_or_default();
        let mut response = SqsBatchResponse::default();
        for message_id in executor.handle_batch(&messages, Some(deadline)).await {
            response.add_failure(message_id);
        }
        Ok::<_, lambda_runtime::Error>(response)
    }))
    .await
}
