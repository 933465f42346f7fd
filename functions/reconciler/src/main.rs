//! The stuck-execution reconciler Lambda, run on a schedule (rate 1 minute): executions queued
//! or running past `STUCK_EXECUTION_SECONDS` with their job lost are re-queued, or ended for an
//! operator.

use countersign::jobs::Reconciler;
use lambda_runtime::{LambdaEvent, service_fn};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    countersign::telemetry::init()?;
    let app = countersign::App::for_function(countersign::Function::Reconciler).await?;
    let reconciler = &Reconciler::new(app);
    lambda_runtime::run(service_fn(
        move |_: LambdaEvent<serde_json::Value>| async move {
            // An error once every candidate was tried, if any failed: the Errors alarm sees it.
            let report = reconciler.run().await?.into_result()?;
            Ok::<_, lambda_runtime::Error>(serde_json::json!({
                "requeued": report.requeued,
                "ended": report.ended,
            }))
        },
    ))
    .await
}
