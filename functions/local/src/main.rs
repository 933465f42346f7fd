//! The local runner: every route of every Lambda on one port, against the local AWS (moto, or
//! whatever `AWS_ENDPOINT_URL` names). With no configuration it runs a demo and prints how to
//! use it. Lambda-only concerns (API Gateway events) are the only thing it does not exercise.

use std::net::SocketAddr;

use countersign::{App, Clock, Config};

/// Demo values for what the environment leaves unset. Printed at start: none of them is secret.
const DEMO_API_KEY: &str = "cs_demo_key_0123456789";

fn demo_default(name: &str, port: u16) -> Option<String> {
    match name {
        "API_KEYS" => Some(format!("demo={DEMO_API_KEY}")),
        "ACTION_TARGETS" => Some(format!(
            r#"{{"echo": {{"url": "http://127.0.0.1:{port}/_demo/echo", "idempotent": true}}}}"#
        )),
        _ => None,
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    countersign::telemetry::init();
    let port: u16 = match std::env::var("PORT") {
        Ok(raw) => raw
            .parse()
            .map_err(|_| "configuration: PORT: must be a port number")?,
        Err(_) => 3000,
    };
    let demo = std::env::var("API_KEYS").is_err();
    let config = Config::from_lookup(|name| {
        std::env::var(name)
            .ok()
            .or_else(|| demo_default(name, port))
    })?;

    let aws = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .load()
        .await;
    let app = App::new(config, aws_sdk_dynamodb::Client::new(&aws), Clock::system());
    app.store.ensure_tables().await?;

    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr} (PORT): {e}"))?;
    print_banner(port, demo, &app);
    axum::serve(listener, countersign::http::router(app))
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}

fn print_banner(port: u16, demo: bool, app: &App) {
    let base = format!("http://127.0.0.1:{port}");
    println!("\nCountersign is listening on {base}");
    println!("tables: {:?}", app.config.tables);
    println!(
        "action types: {:?}",
        app.config.action_targets.keys().collect::<Vec<_>>()
    );
    if demo {
        println!(
            r#"
Demo configuration (set API_KEYS and ACTION_TARGETS to use your own):
  tenant: demo    API key: {DEMO_API_KEY}

Try it:
  curl -s -X POST {base}/approvals \
    -H 'Authorization: Bearer {DEMO_API_KEY}' -H 'Content-Type: application/json' \
    -H 'Idempotency-Key: demo-1' \
    -d '{{"action": {{"type": "echo", "payload": {{"say": "hello"}}}}, "approvers": ["alice@example.com"]}}'

  curl -s -X POST {base}/approvals/<id>/decision \
    -H 'Authorization: Bearer {DEMO_API_KEY}' -H 'Content-Type: application/json' \
    -d '{{"decision": "approve", "approver": "alice@example.com"}}'

  curl -s {base}/approvals/<id> -H 'Authorization: Bearer {DEMO_API_KEY}'
"#
        );
    }
}
