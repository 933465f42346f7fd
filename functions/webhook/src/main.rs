//! The webhook Lambda: configuration and AWS clients are built once per execution environment, then
//! API Gateway's requests are served by the shared router.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    countersign::telemetry::init()?;
    let app = countersign::App::for_function(countersign::Function::Webhook).await?;
    lambda_http::run(countersign::http::webhook_router(app)).await
}
