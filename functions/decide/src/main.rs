//! The decide Lambda: decisions (JSON with an API key, or the review page's form post) and the
//! approver's review page. Configuration and AWS clients are built once per execution
//! environment, then API Gateway's requests are served by the shared router.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    countersign::telemetry::init()?;
    let app = countersign::App::for_function(countersign::Function::Decide).await?;
    lambda_http::run(countersign::http::decide_router(app)).await
}
