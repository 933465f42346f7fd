//! Countersign: human approval in front of actions that must run exactly once.
//!
//! The library behind every Lambda and the local runner: the domain (pure rules), the DynamoDB
//! store (every guarantee is a condition or a transaction there), the HTTP routers, the
//! configuration and the API-key check.

pub mod auth;
pub mod clock;
pub mod config;
pub mod domain;
pub mod http;
pub mod store;
pub mod telemetry;
pub mod webhook;

use std::sync::Arc;

pub use clock::Clock;
pub use config::{Config, ConfigError};
pub use store::Store;

/// What every request handler shares: built once per process, outside the handler.
#[derive(Debug)]
pub struct App {
    pub config: Config,
    pub store: Store,
    pub clock: Clock,
}

impl App {
    pub fn new(config: Config, dynamodb: aws_sdk_dynamodb::Client, clock: Clock) -> Arc<Self> {
        let store = Store::new(dynamodb, config.tables.clone());
        Arc::new(Self {
            config,
            store,
            clock,
        })
    }

    /// The Lambda start-up: configuration from the environment, AWS clients from the SDK's
    /// default chain (which honours `AWS_ENDPOINT_URL*`).
    pub async fn from_env() -> Result<Arc<Self>, ConfigError> {
        let config = Config::from_env()?;
        let aws = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .load()
            .await;
        Ok(Self::new(
            config,
            aws_sdk_dynamodb::Client::new(&aws),
            Clock::system(),
        ))
    }
}
