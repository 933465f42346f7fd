//! The read Lambda: `GET /approvals/{id}`, and the held reads (`?wait=N`) that may keep it up to
//! 20 s. It is a function of its own so that its reserved concurrency bounds what held reads can
//! take from the account: they never starve votes, creates, webhooks or jobs. Configuration and
//! AWS clients are built once per execution environment.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    countersign::telemetry::init()?;
    let app = countersign::App::for_function(countersign::Function::Read).await?;
    lambda_http::run(countersign::http::read_router(app)).await
}
