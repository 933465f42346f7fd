//! Test support: a real AWS wire protocol (moto from PyPI, started serialized on a free port, or
//! whatever `AWS_ENDPOINT_URL` names), the real router served over loopback HTTP, fresh tables per
//! test, and a DynamoDB call counter installed as an SDK interceptor.
//!
//! Here: [`TestApp`] and how it starts. Its deployment is in `stack`, the requests it sends in
//! `client` ([`Reply`]), its own look at its tables in `tables`; the fixtures of each concern
//! (jobs, Slack, GitHub, the local AWS, …) in their modules below.

pub mod browser;
pub mod capacity;
pub mod chain;
mod client;
pub mod email;
pub mod fault_proxy;
pub mod fixtures;
pub mod github;
pub mod jobs;
pub mod local_aws;
pub mod local_runner;
pub mod meter;
pub mod oidc;
pub mod passkeys;
pub mod policy;
pub mod receiver;
pub mod runtime_api;
pub mod sign_in;
pub mod slack;
mod stack;
mod tables;
pub mod workflows;

pub use client::{Reply, event_types, events_of_type, signed_delivery};
pub use fixtures::*;
pub use meter::CallCounter;
pub use tables::attr_s;

/// `infra/template.yaml`, parsed.
pub fn template() -> serde_norway::Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../infra/template.yaml");
    let text = std::fs::read_to_string(path).expect("infra/template.yaml");
    serde_norway::from_str(&text).expect("the template is YAML")
}
pub use local_aws::{aws_endpoint, moto_resident_bytes, python, sdk_config, workspace_root};

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use countersign::runner::{Deployment, Functions};
use countersign::{App, Clock};

/// The `Idempotency-Key` an execution of tenant A's approval `id`, created with `create_key`,
/// sends downstream: `{tenant}:{create key}:{approval id}`.
pub fn execute_key(create_key: &str, id: &str) -> String {
    format!("{TENANT_A}:{create_key}:{id}")
}

/// One test's Countersign: its own tables, the real router on a loopback port.
pub struct TestApp {
    pub base: String,
    pub http: reqwest::Client,
    /// The deployer's app: every variable, the administrator's credentials. The test's own
    /// reads and writes of the store go through it; the routes, jobs and sweeps never do.
    pub app: Arc<App>,
    /// Each function as deployed: the routes, the pollers, the jobs and the sweeps.
    pub functions: Functions,
    /// The app's DynamoDB calls.
    pub calls: CallCounter,
    /// The app's DynamoDB and SQS requests with their bodies, once started (see [`meter`]).
    pub meter: meter::Meter,
    /// An uncounted client for the test's own inspection of the tables.
    pub dynamodb: aws_sdk_dynamodb::Client,
    pub clock: Clock,
    pub sdk: aws_config::SdkConfig,
    /// Set by [`TestApp::start_jobs`]: the queues, the downstream and the running pollers.
    pub jobs: Option<jobs::JobsEnv>,
    /// Every request the app received: (method, path).
    pub requests: RequestLog,
    /// The EMF documents the app wrote (to standard output, in Lambda and the runner).
    pub metrics: MetricLines,
    /// The app's Secrets Manager calls.
    pub secret_calls: CallCounter,
    /// The secrets [`TestApp::start_with_secrets`] made, by variable.
    pub secret_arns: HashMap<String, String>,
}

/// EMF documents, one JSON text each, as written.
#[derive(Clone, Default)]
pub struct MetricLines(pub Arc<Mutex<Vec<String>>>);

impl MetricLines {
    /// The documents written since the last take.
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().expect("metrics lock"))
    }
}

impl TestApp {
    pub async fn start() -> Self {
        Self::start_with(&[]).await
    }

    /// Starts with the test defaults plus `overrides` (variable name → value).
    pub async fn start_with(overrides: &[(&str, &str)]) -> Self {
        let app = Self::build(overrides).await;
        app.app
            .store
            .ensure_tables()
            .await
            .expect("create the test tables");
        app.calls.take(); // count the app's requests, not the set-up
        app
    }

    /// Like [`TestApp::start_with`], without creating the tables.
    pub async fn build(overrides: &[(&str, &str)]) -> Self {
        Self::build_via(overrides, None).await
    }

    /// [`TestApp::build`], with the app's AWS clients (router and runner) configured by `via`
    /// (a fault-injecting proxy's endpoint) instead of the local AWS's; the test's own clients
    /// still reach the local AWS directly.
    pub async fn build_via(overrides: &[(&str, &str)], via: Option<aws_config::SdkConfig>) -> Self {
        Self::build_inner(overrides, via, &[]).await
    }

    /// [`TestApp::start_with`], with each of `secrets` (variable → value) put in a Secrets
    /// Manager secret of its own and given as `<NAME>_SECRET_ARN` instead of the variable. The
    /// secrets' ARNs are in [`TestApp::secret_arns`].
    pub async fn start_with_secrets(overrides: &[(&str, &str)], secrets: &[(&str, &str)]) -> Self {
        let app = Self::build_inner(overrides, None, secrets).await;
        app.app
            .store
            .ensure_tables()
            .await
            .expect("create the test tables");
        app.calls.take();
        app
    }

    /// A Secrets Manager client of the local AWS (uncounted).
    pub fn secretsmanager(&self) -> aws_sdk_secretsmanager::Client {
        aws_sdk_secretsmanager::Client::new(&self.sdk)
    }

    /// Puts a new value in the secret of `variable` (as `aws secretsmanager put-secret-value`).
    pub async fn rotate_secret(&self, variable: &str, value: &str) {
        self.secretsmanager()
            .put_secret_value()
            .secret_id(&self.secret_arns[variable])
            .secret_string(value)
            .send()
            .await
            .expect("put the secret's new value");
    }

    async fn build_inner(
        overrides: &[(&str, &str)],
        via: Option<aws_config::SdkConfig>,
        secrets: &[(&str, &str)],
    ) -> Self {
        Self::build_deployed(overrides, via, secrets, Deployment::default()).await
    }
}

/// The requests an app received, for tests that count them (a browser's POSTs).
#[derive(Debug, Clone, Default)]
pub struct RequestLog(Arc<Mutex<Vec<(String, String)>>>);

impl RequestLog {
    fn record(&self, method: &str, path: &str) {
        self.0
            .lock()
            .expect("request log")
            .push((method.to_owned(), path.to_owned()));
    }

    /// How many `method` requests reached `path`.
    pub fn count(&self, method: &str, path: &str) -> usize {
        self.0
            .lock()
            .expect("request log")
            .iter()
            .filter(|(m, p)| m == method && p == path)
            .count()
    }

    /// How many `method` requests reached a path ending with `suffix`.
    pub fn count_ending(&self, method: &str, suffix: &str) -> usize {
        self.0
            .lock()
            .expect("request log")
            .iter()
            .filter(|(m, p)| m == method && p.ends_with(suffix))
            .count()
    }
}

/// Waits until `done` holds (polling every 100 ms), or fails the test with `what` after 30 s.
pub async fn eventually<F, Fut>(what: &str, mut done: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done().await {
        assert!(Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
