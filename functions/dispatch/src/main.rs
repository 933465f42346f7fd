//! The dispatch Lambda: the approvals table's stream → jobs on SQS. A batch whose jobs cannot
//! all be sent fails, and the stream delivers it again.

use aws_lambda_events::event::dynamodb::Event;
use countersign::jobs::{Dispatcher, StreamChange};
use lambda_runtime::{LambdaEvent, service_fn};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    countersign::telemetry::init()?;
    let _failpoints = countersign::failpoints();
    let app = countersign::App::for_function(countersign::Function::Dispatch).await?;
    let dispatcher = &Dispatcher::new(app);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Event>| async move {
        let changes: Vec<_> = event
            .payload
            .records
            .iter()
            .map(StreamChange::from_lambda)
            .collect();
        dispatcher
            .dispatch(&changes)
            .await
            .map(|_| ())
            .map_err(lambda_runtime::Error::from)
    }))
    .await
}
