//! The expiry sweeper Lambda, run on a schedule (rate 1 minute): pending approvals past their
//! expiry become `expired` in the table (found through the `due` index, never a scan).

use countersign::jobs::Expirer;
use lambda_runtime::{LambdaEvent, service_fn};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    countersign::telemetry::init()?;
    let app = countersign::App::for_function(countersign::Function::Sweeper).await?;
    let expirer = &Expirer::new(app);
    lambda_runtime::run(service_fn(
        move |_: LambdaEvent<serde_json::Value>| async move {
            // An error once every candidate was tried, if any failed: the Errors alarm sees it.
            let report = expirer.run().await?.into_result()?;
            Ok::<_, lambda_runtime::Error>(serde_json::json!({ "expired": report.expired }))
        },
    ))
    .await
}
