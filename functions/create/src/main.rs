//! The create Lambda: configuration and AWS clients are built once per execution environment, then
//! API Gateway's requests are served by the shared router.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    countersign::telemetry::init();
    let app = countersign::App::for_function(countersign::Function::Create).await?;
    lambda_http::run(countersign::http::create_router(app)).await
}
