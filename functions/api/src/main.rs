//! The API Lambda: creating, reading and listing approvals, their trail, cancel, and the
//! operator's retry and resolve. Configuration and AWS clients are built once per execution
//! environment, then API Gateway's requests are served by the shared router.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    countersign::telemetry::init()?;
    let app = countersign::App::for_function(countersign::Function::Api).await?;
    lambda_http::run(countersign::http::api_router(app)).await
}
