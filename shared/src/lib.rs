//! Countersign: human approval in front of actions that must run exactly once.
//!
//! The library behind every Lambda and the local runner: the domain (pure rules), the DynamoDB
//! store (every guarantee is a condition or a transaction there), the HTTP routers, the
//! configuration and the API-key check.
// The OpenAPI document (`http/openapi/`) is one large `json!`.
#![recursion_limit = "512"]

pub mod auth;
pub mod certificate_key;
pub mod clock;
pub mod config;
pub mod cursor;
pub mod domain;
pub mod email;
pub mod github;
pub mod http;
pub mod jobs;
#[cfg(test)]
mod layering;
pub mod observe;
pub mod oidc;
pub mod policy_cache;
pub mod review_token;
pub mod runner;
pub mod session;
pub mod slack;
pub mod store;
pub mod telemetry;
pub mod webhook;

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

pub use clock::Clock;
pub use config::{Config, ConfigError, Function};
pub use store::Store;

/// What every request handler shares: built once per process, outside the handler.
#[derive(Debug)]
pub struct App {
    pub config: Config,
    pub store: Store,
    pub sqs: aws_sdk_sqs::Client,
    pub clock: Clock,
    /// Each invocation's metrics, written when it ends.
    pub metrics: observe::Emitter,
    /// Table keys' items, for `KEY_CACHE_SECONDS`.
    pub key_cache: auth::KeyCache,
    /// Each tenant's approval policy and groups, for `KEY_CACHE_SECONDS`.
    pub policies: policy_cache::PolicyCache,
    /// Each signing-in tenant's identity provider, once discovered.
    pub relying_parties: oidc::RelyingParties,
    /// The secret-bearing configuration in force (read it through [`App::secrets`]).
    secrets: Arc<config::LiveSecrets>,
    /// The function this process is, once known (the `Function` of a refresh's metrics).
    function: OnceLock<&'static str>,
    /// `CERTIFICATE_KEY_ARN`'s key, with a KMS client of this function's credentials.
    certificate_key: OnceLock<certificate_key::CertificateKey>,
}

impl App {
    pub fn new(
        config: Config,
        dynamodb: aws_sdk_dynamodb::Client,
        sqs: aws_sdk_sqs::Client,
        clock: Clock,
    ) -> Arc<Self> {
        Self::with_metrics_sink(config, dynamodb, sqs, clock, observe::Sink::Stdout)
    }

    /// [`App::new`], with its metrics written to `sink` (the tests read them from memory).
    pub fn with_metrics_sink(
        config: Config,
        dynamodb: aws_sdk_dynamodb::Client,
        sqs: aws_sdk_sqs::Client,
        clock: Clock,
        sink: observe::Sink,
    ) -> Arc<Self> {
        Self::with_secret_source(config, None, dynamodb, sqs, clock, sink)
    }

    /// [`App::with_metrics_sink`], with secrets that `source` refreshes (see
    /// [`config::secrets`]).
    pub fn with_secret_source(
        config: Config,
        source: Option<config::SecretSource>,
        dynamodb: aws_sdk_dynamodb::Client,
        sqs: aws_sdk_sqs::Client,
        clock: Clock,
        sink: observe::Sink,
    ) -> Arc<Self> {
        // `config.secrets` stays as read at start (what `check_for` checks); requests read the
        // live copy through `App::secrets`.
        let secrets = config.secrets.clone();
        if let Some(keys) = &secrets.api_keys {
            for warning in keys.development_key_warnings() {
                tracing::warn!("{warning}");
            }
        }
        let store = Store::new(dynamodb, config.tables.clone())
            .guarding_v4_executors(config.guard_v4_executors)
            .retaining(config.retention);
        let metrics = observe::Emitter::new(config.metrics.clone(), sink);
        let key_cache = auth::KeyCache::new(config.key_cache_seconds);
        let policies = policy_cache::PolicyCache::new(config.key_cache_seconds);
        let secrets = Arc::new(config::LiveSecrets::new(
            secrets,
            source,
            config.secrets_refresh_seconds,
            clock.now(),
        ));
        Arc::new(Self {
            key_cache,
            policies,
            relying_parties: oidc::RelyingParties::new(),
            secrets,
            function: OnceLock::new(),
            certificate_key: OnceLock::new(),
            config,
            store,
            sqs,
            clock,
            metrics,
        })
    }

    /// The Lambda start-up: configuration from the environment, AWS clients from the SDK's
    /// default chain (which honours `AWS_ENDPOINT_URL*`).
    pub async fn from_env() -> Result<Arc<Self>, ConfigError> {
        let aws = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .load()
            .await;
        let (config, source) =
            config::secrets::load(environment(), aws_sdk_secretsmanager::Client::new(&aws)).await?;
        let app = Self::with_secret_source(
            config,
            source,
            aws_sdk_dynamodb::Client::new(&aws),
            aws_sdk_sqs::Client::new(&aws),
            Clock::system(),
            observe::Sink::Stdout,
        );
        app.use_sdk(&aws);
        Ok(app)
    }

    /// The secret-bearing configuration in force. When `SECRETS_REFRESH_SECONDS` have passed,
    /// a refresh starts in the background (this request goes on with what is in force).
    pub fn secrets(&self) -> Arc<config::Secrets> {
        self.start_refresh(config::RefreshReason::Periodic);
        self.secrets.get()
    }

    /// A signature or token failed under every known secret: the secrets may have been
    /// rotated, so they are read again early (at most once every 30 s), in the background.
    pub fn secret_failed(&self) {
        self.start_refresh(config::RefreshReason::Early);
    }

    fn start_refresh(&self, reason: config::RefreshReason) {
        let now = self.clock.now();
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if !self.secrets.claim_refresh(reason, now) {
            return;
        }
        let secrets = self.secrets.clone();
        let metrics = self.metrics.clone();
        let function = self.function.get().copied().unwrap_or("local");
        runtime.spawn(metrics.clone().invocation_owned(function, async move {
            if let Err(error) = secrets.refresh(now).await {
                // The error names the variable and the service's reason, never a value.
                tracing::warn!(%error, ?reason, "secrets not refreshed; the last good values stay");
                observe::count(observe::Metric::SecretRefreshFailed, &[]);
            }
        }));
    }

    /// The groups `place` is in now (from the cached groups), for a vote on approval `id`: only
    /// an approval whose id says a deployment's policy put a group's rule on it needs them, so
    /// no other vote reads them.
    pub async fn place_groups(
        &self,
        tenant: &domain::TenantId,
        id: &domain::ApprovalId,
        place: &domain::Approver,
    ) -> Result<Vec<domain::approval_policy::GroupName>, store::StoreError> {
        if !id.group_rules_hint() {
            return Ok(Vec::new());
        }
        let policy = self
            .policies
            .get(&self.store, tenant, self.clock.now())
            .await?;
        let mut groups: Vec<_> = policy.groups.of(place).into_iter().cloned().collect();
        // The groups the policy in force requires first: the vote's condition names at most
        // `MAX_GROUPS_OF_ONE` (its expression must stay within DynamoDB's 4 KB).
        let required = |g: &domain::approval_policy::GroupName| {
            policy
                .current
                .as_ref()
                .and_then(|c| c.set.as_ref().ok())
                .is_some_and(|set| set.requires(g))
        };
        groups.sort_by_key(|g| !required(g));
        groups.truncate(store::MAX_GROUPS_OF_ONE);
        Ok(groups)
    }

    /// A Lambda's start-up: [`App::from_env`], then the check that `function` has all the
    /// configuration it needs, so a missing variable fails the start, not a request.
    pub async fn for_function(function: Function) -> Result<Arc<Self>, ConfigError> {
        let app = Self::from_env().await?;
        app.set_function(function);
        app.config.check_for(function)?;
        for warning in app.config.start_warnings(function) {
            tracing::warn!("{warning}");
        }
        Ok(app)
    }

    /// Makes the clients beyond the tables and the queue from `sdk` (this function's
    /// credentials): the certificate key's KMS client.
    pub fn use_sdk(&self, sdk: &aws_config::SdkConfig) {
        if let Some(arn) = &self.config.certificate_key_arn {
            let _ = self
                .certificate_key
                .set(certificate_key::CertificateKey::new(sdk, arn));
        }
    }

    /// The certificate key, where `CERTIFICATE_KEY_ARN` names one.
    pub fn certificate_key(&self) -> Option<&certificate_key::CertificateKey> {
        self.certificate_key.get()
    }

    /// Marks this process as `function` (the `Function` of its secrets refreshes' metrics).
    pub fn set_function(&self, function: Function) {
        let _ = self.function.set(function.as_str());
    }

    /// Whether the tables (and the jobs queue, where configured) answer.
    pub async fn check(&self) -> Result<(), String> {
        self.store.check().await.map_err(|e| e.to_string())?;
        if let Some(queue_url) = &self.config.jobs_queue_url {
            self.sqs
                .get_queue_attributes()
                .queue_url(queue_url)
                .attribute_names(aws_sdk_sqs::types::QueueAttributeName::QueueArn)
                .send()
                .await
                .map_err(|e| aws_sdk_sqs::error::DisplayErrorContext(&e).to_string())?;
        }
        Ok(())
    }
}

/// The process's environment variables (those whose name and value are Unicode).
fn environment() -> HashMap<String, String> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}

/// Failpoints (the `failpoints` feature): configured from `FAILPOINTS` in the fail crate's
/// syntax, e.g. `execute::after_downstream=1*panic`. Keep the returned guard for the life of
/// the process. Without the feature, nothing.
#[cfg(feature = "failpoints")]
pub fn failpoints() -> fail::FailScenario<'static> {
    fail::FailScenario::setup()
}

/// Failpoints are compiled out of this build (no `failpoints` feature): a guard that guards
/// nothing, so that callers hold it the same way in both builds.
#[cfg(not(feature = "failpoints"))]
pub fn failpoints() -> NoFailpoints {
    NoFailpoints
}

/// What [`failpoints`] returns in a build without failpoints.
#[cfg(not(feature = "failpoints"))]
pub struct NoFailpoints;
