//! Configuration, read and validated once at start. The same variable names in Lambda and
//! locally; a bad value fails the start with a message naming the variable.
//!
//! This module holds the [`Config`] it assembles from the environment and the helpers every
//! variable's parser shares; a variable (or a family read together) with more than a line of
//! parsing has its own file.

use std::collections::BTreeMap;

use crate::domain::Retention;
use crate::observe::MetricsConfig;
use crate::store::{SeatCaps, Tables};

mod functions;
mod held_reads;
mod metrics;
mod oidc;
pub mod secrets;
mod sources;
mod subscriptions;
mod tables;
mod targets;

pub use functions::{Function, JobsConfig};
pub use oidc::{OidcTenant, parse_oidc};

pub use secrets::{LiveSecrets, RefreshReason, SecretSource, Secrets};
pub use sources::WebhookSource;
pub use subscriptions::Subscription;
pub use targets::{ActionTarget, KEY_PLACEHOLDER};

#[derive(Debug, thiserror::Error)]
#[error("configuration: {variable}: {problem}")]
pub struct ConfigError {
    pub variable: &'static str,
    pub problem: String,
}

impl ConfigError {
    fn new(variable: &'static str, problem: impl Into<String>) -> Self {
        Self {
            variable,
            problem: problem.into(),
        }
    }

    /// The same error, saying which function's configuration it is (where one process builds
    /// several: the local runner).
    pub fn for_function(mut self, function: Function) -> Self {
        self.problem = format!("{} (the {} function)", self.problem, function.as_str());
        self
    }
}

#[derive(Debug, Clone)]
pub struct Config {
    pub tables: Tables,
    /// The secret-bearing variables, as read at start (checked by [`Config::check_for`]). A
    /// running function reads them through `App::secrets`, which a refresh keeps current:
    /// nothing serving a request reads them here.
    pub secrets: Secrets,
    /// `SECRETS_REFRESH_SECONDS` (1–3600).
    pub secrets_refresh_seconds: i64,
    /// The jobs queue (dispatch sends to it; the executor changes its messages' visibility).
    pub jobs_queue_url: Option<String>,
    /// Base of review links, e.g. `https://approvals.example.com`.
    pub public_base_url: Option<String>,
    /// `CERTIFICATE_KEY_ARN`: the KMS key (`ECC_NIST_P256`) that signs passkey-only approvals'
    /// certificates (the dispatch function signs, the read function publishes its public key).
    pub certificate_key_arn: Option<String>,
    pub idempotency_ttl_seconds: i64,
    pub inbox_ttl_seconds: i64,
    pub job_visibility_timeout_seconds: i64,
    pub job_max_attempts: u32,
    /// How often the expiry sweeper and the execution reconciler run.
    pub sweep_interval_seconds: i64,
    /// How long an execution may sit queued or running before the reconciler acts.
    pub stuck_execution_seconds: i64,
    /// `METRICS_NAMESPACE`, `METRICS_TENANT_DIMENSION`.
    pub metrics: MetricsConfig,
    /// How long a warm function keeps a table key's item (`KEY_CACHE_SECONDS`, 0–300).
    pub key_cache_seconds: i64,
    /// How many held reads may hold at once: `HELD_READ_CONCURRENCY` (the read function's
    /// reserved concurrency on AWS) less `HELD_READ_HEADROOM` (the instances kept for plain
    /// reads and refusals, which a held read never takes); and of them, how many one tenant's
    /// (`HELD_READS_PER_TENANT`, default half, so no tenant can take every seat).
    pub held_read_seats: SeatCaps,
    /// `GUARD_V4_EXECUTORS` (default false): while an executor from before v5 may still run
    /// (the first deploy of an upgrade, `ApprovalsIndexesStep` 1), an execution's begin also
    /// writes the ledger item that executor checks, so it cannot begin the execution again.
    pub guard_v4_executors: bool,
    /// How often the scheduled sweep asks GitHub for the App's failed deliveries
    /// (`GITHUB_REDELIVERY_SECONDS`, 1–3600, default 300).
    pub github_redelivery_seconds: i64,
    /// `RETENTION_DAYS` (default 400; 0 keeps everything): how long an ended approval's items
    /// are kept before DynamoDB's TTL deletes them.
    pub retention: Retention,
    /// `SESSION_SECONDS` (60–604800, default 28800): how long a sign-in lasts.
    pub session_seconds: i64,
    /// `RESUME_TYPES` (none by default): the kinds of waiting AWS workflow a create may name.
    pub resume_types: crate::domain::resume::ResumeTypes,
    /// `RESUME_RETRY_SECONDS` (60–86400, default 21600): how long a workflow's answer is tried
    /// again, with backoff, through throttling and 5xx before it ends `failed` — hours, not the
    /// seconds of a job's attempts, so a short brownout of Step Functions or Lambda strands no
    /// workflow.
    pub resume_retry_seconds: i64,
    /// `EMAIL` (none by default): the tenants whose approvers are emailed, with their senders.
    pub email: BTreeMap<crate::domain::TenantId, crate::email::EmailSender>,
    /// `EMAIL_SENDERS`: the From addresses (or patterns) the executor may send with (checked by
    /// its start).
    pub email_senders: Vec<String>,
}

impl Config {
    /// Reads the process environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads configuration through `lookup` (the environment, or a map in tests: setting
    /// environment variables is unsafe in a multi-threaded test process).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let get = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        let tables = tables::tables(&get);

        // Both forms of one secret-bearing variable: refused before anything else is read.
        secrets::secret_arns(&get)?;
        let secrets = Secrets::from_lookup(&get)?;

        let public_base_url = get("PUBLIC_BASE_URL")
            .map(|raw| http_url(&raw).map_err(|e| ConfigError::new("PUBLIC_BASE_URL", e)))
            .transpose()?
            .map(|url| url.trim_end_matches('/').to_owned());
        let certificate_key_arn = get("CERTIFICATE_KEY_ARN")
            .map(
                |arn| match arn.starts_with("arn:") && arn.contains(":key/") {
                    true => Ok(arn.trim().to_owned()),
                    false => Err(ConfigError::new(
                        "CERTIFICATE_KEY_ARN",
                        "must be a KMS key's ARN (arn:aws:kms:REGION:ACCOUNT:key/ID)",
                    )),
                },
            )
            .transpose()?;
        let job_visibility_timeout_seconds = number(&get, "JOB_VISIBILITY_TIMEOUT_SECONDS", 30, 1)?;
        let job_max_attempts = number(&get, "JOB_MAX_ATTEMPTS", 5, 1)?;
        // The job's whole retry budget: every receive the redrive policy allows, each a
        // visibility timeout long.
        let retry_budget = job_visibility_timeout_seconds * (i64::from(job_max_attempts) + 3);

        let held_read_seats = held_reads::held_read_seats(&get)?;
        let idempotency_ttl_seconds = number(&get, "IDEMPOTENCY_TTL_SECONDS", 86_400, 86_400)?;
        let retention = retention(&get, idempotency_ttl_seconds)?;

        Ok(Self {
            tables,
            secrets,
            secrets_refresh_seconds: at_most(
                number(&get, "SECRETS_REFRESH_SECONDS", 300, 1)?,
                3600,
                "SECRETS_REFRESH_SECONDS",
            )?,
            session_seconds: at_most(
                number(&get, "SESSION_SECONDS", 28_800, 60)?,
                604_800,
                "SESSION_SECONDS",
            )?,
            jobs_queue_url: get("JOBS_QUEUE_URL"),
            public_base_url,
            certificate_key_arn,
            // The contract keeps keys at least 24 h, and event ids longer than providers
            // redeliver automatically (3 days).
            idempotency_ttl_seconds,
            inbox_ttl_seconds: number(&get, "INBOX_TTL_SECONDS", 2_592_000, 259_200)?,
            job_visibility_timeout_seconds,
            job_max_attempts,
            sweep_interval_seconds: number(&get, "SWEEP_INTERVAL_SECONDS", 60, 1)?,
            // At least the retry budget: checked by the reconciler's start (`check_for`), the
            // one function that reads it, with the visibility and attempts it is given.
            stuck_execution_seconds: number(&get, "STUCK_EXECUTION_SECONDS", retry_budget, 1)?,
            key_cache_seconds: at_most(
                number(&get, "KEY_CACHE_SECONDS", 60, 0)?,
                300,
                "KEY_CACHE_SECONDS",
            )?,
            held_read_seats,
            guard_v4_executors: match get("GUARD_V4_EXECUTORS").as_deref() {
                None | Some("false") => false,
                Some("true") => true,
                Some(_) => {
                    return Err(ConfigError::new(
                        "GUARD_V4_EXECUTORS",
                        "must be true or false",
                    ));
                }
            },
            github_redelivery_seconds: at_most(
                number(&get, "GITHUB_REDELIVERY_SECONDS", 300, 1)?,
                3600,
                "GITHUB_REDELIVERY_SECONDS",
            )?,
            metrics: metrics::metrics_config(&get)?,
            retention,
            resume_types: crate::domain::resume::ResumeTypes::parse(
                &get("RESUME_TYPES").unwrap_or_default(),
            )
            .map_err(|e| ConfigError::new("RESUME_TYPES", e))?,
            resume_retry_seconds: at_most(
                number(&get, "RESUME_RETRY_SECONDS", 21_600, 60)?,
                86_400,
                "RESUME_RETRY_SECONDS",
            )?,
            email: get("EMAIL")
                .map(|raw| {
                    crate::email::parse_email(&raw).map_err(|e| ConfigError::new("EMAIL", e))
                })
                .transpose()?
                .unwrap_or_default(),
            email_senders: crate::email::config::parse_senders(
                &get("EMAIL_SENDERS").unwrap_or_default(),
            ),
        })
    }
}

/// `RETENTION_DAYS`: 0 (keep everything) or 1 to 36500 days, and no shorter than an
/// idempotency record's life (a replayed create must not find its record outliving the
/// approval it names).
fn retention(
    get: &impl Fn(&str) -> Option<String>,
    idempotency_ttl_seconds: i64,
) -> Result<Retention, ConfigError> {
    let days = at_most(
        number(&get, "RETENTION_DAYS", Retention::DEFAULT_DAYS, 0)?,
        Retention::MAX_DAYS,
        "RETENTION_DAYS",
    )?;
    let retention = Retention::days(days);
    match retention.seconds() {
        Some(seconds) if seconds < idempotency_ttl_seconds => Err(ConfigError::new(
            "RETENTION_DAYS",
            "must keep an approval at least as long as IDEMPOTENCY_TTL_SECONDS keeps its \
             idempotency records (or be 0, keeping everything)",
        )),
        _ => Ok(retention),
    }
}

pub(crate) fn http_url(raw: &str) -> Result<String, String> {
    let url = url::Url::parse(raw).map_err(|e| e.to_string())?;
    if matches!(url.scheme(), "http" | "https") {
        Ok(raw.to_owned())
    } else {
        Err("must be an http or https URL".to_owned())
    }
}

/// `value`, unless it is over `max`.
fn at_most(value: i64, max: i64, variable: &'static str) -> Result<i64, ConfigError> {
    if value > max {
        Err(ConfigError::new(variable, format!("must be at most {max}")))
    } else {
        Ok(value)
    }
}

fn number<T>(
    get: &impl Fn(&str) -> Option<String>,
    variable: &'static str,
    default: T,
    min: T,
) -> Result<T, ConfigError>
where
    T: std::str::FromStr + PartialOrd + std::fmt::Display + Copy,
{
    let Some(raw) = get(variable) else {
        return Ok(default);
    };
    match raw.trim().parse::<T>() {
        Ok(n) if n >= min => Ok(n),
        _ => Err(ConfigError::new(
            variable,
            format!("must be an integer of at least {min}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    pub(super) fn config(pairs: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_lookup(|name| map.get(name).cloned())
    }

    pub(super) const KEYS: (&str, &str) = ("API_KEYS", "acme=acme-key-0123456789");
    pub(super) const TARGETS: (&str, &str) = (
        "ACTION_TARGETS",
        r#"{"deploy": {"url": "http://localhost:9/deploy"}}"#,
    );

    #[test]
    fn defaults_fill_what_is_not_set() {
        let config = config(&[KEYS, TARGETS]).unwrap();
        assert_eq!(config.tables, Tables::with_prefix("countersign"));
        assert_eq!(config.idempotency_ttl_seconds, 86_400);
        assert_eq!(config.inbox_ttl_seconds, 2_592_000);
        assert_eq!(config.job_max_attempts, 5);
        assert!(
            !config.secrets.action_targets["deploy"].idempotent,
            "a target nobody declared idempotent is not treated as one"
        );
        assert!(
            config.secrets.is_action_type("deploy") && !config.secrets.is_action_type("refund")
        );
        let declared = (
            "ACTION_TARGETS",
            r#"{"deploy": {"url": "http://localhost:9/deploy", "idempotent": true}}"#,
        );
        let declared = self::config(&[KEYS, declared]).unwrap();
        assert!(declared.secrets.action_targets["deploy"].idempotent);
    }

    #[test]
    fn retention_below_the_contract_is_refused_at_start() {
        for (variable, too_short, shortest) in [
            ("IDEMPOTENCY_TTL_SECONDS", "60", "86400"),
            ("INBOX_TTL_SECONDS", "86400", "259200"),
        ] {
            let error = config(&[KEYS, TARGETS, (variable, too_short)]).unwrap_err();
            assert_eq!(error.variable, variable);
            assert!(error.problem.contains(shortest), "{}", error.problem);
            assert!(config(&[KEYS, TARGETS, (variable, shortest)]).is_ok());
        }
    }

    #[test]
    fn retention_is_400_days_0_keeps_everything_and_it_outlasts_idempotency_records() {
        let days = |raw: &str| config(&[KEYS, TARGETS, ("RETENTION_DAYS", raw)]);
        assert_eq!(
            config(&[KEYS, TARGETS]).unwrap().retention,
            Retention::days(400)
        );
        assert_eq!(days("0").unwrap().retention, Retention::keep_everything());
        assert_eq!(days("1").unwrap().retention.seconds(), Some(86_400));
        for bad in ["-1", "forever", "36501"] {
            assert_eq!(days(bad).unwrap_err().variable, "RETENTION_DAYS", "{bad}");
        }
        let shorter = config(&[
            KEYS,
            TARGETS,
            ("RETENTION_DAYS", "1"),
            ("IDEMPOTENCY_TTL_SECONDS", "172800"),
        ])
        .unwrap_err();
        assert_eq!(shorter.variable, "RETENTION_DAYS");
    }

    #[test]
    fn a_stuck_execution_waits_at_least_the_retry_budget() {
        let stuck = config(&[KEYS, TARGETS, ("STUCK_EXECUTION_SECONDS", "10")])
            .unwrap()
            .check_for(Function::Reconciler)
            .unwrap_err();
        assert_eq!(
            stuck.variable, "STUCK_EXECUTION_SECONDS",
            "below the retry budget (240 s)"
        );
        assert_eq!(
            config(&[KEYS, TARGETS]).unwrap().stuck_execution_seconds,
            240
        );
    }

    #[test]
    fn the_key_cache_time_is_zero_to_five_minutes() {
        assert_eq!(config(&[]).unwrap().key_cache_seconds, 60);
        assert_eq!(
            config(&[("KEY_CACHE_SECONDS", "0")])
                .unwrap()
                .key_cache_seconds,
            0
        );
        assert_eq!(
            config(&[("KEY_CACHE_SECONDS", "300")])
                .unwrap()
                .key_cache_seconds,
            300
        );
        for bad in ["301", "-1", "soon"] {
            let err = config(&[("KEY_CACHE_SECONDS", bad)]).unwrap_err();
            assert_eq!(err.variable, "KEY_CACHE_SECONDS", "{bad}");
        }
        assert_eq!(
            config(&[("KEYS_TABLE", "keys")]).unwrap().tables.api_keys,
            "keys"
        );
    }

    #[test]
    fn errors_name_the_variable() {
        assert_eq!(
            config(&[("API_KEYS", "nope")]).unwrap_err().variable,
            "API_KEYS"
        );
        assert_eq!(
            config(&[("ACTION_TARGETS", "[]")]).unwrap_err().variable,
            "ACTION_TARGETS"
        );
        let bad_url = ("ACTION_TARGETS", r#"{"deploy": {"url": "ftp://x"}}"#);
        assert_eq!(
            config(&[KEYS, bad_url]).unwrap_err().variable,
            "ACTION_TARGETS"
        );
        let bad_ttl = ("IDEMPOTENCY_TTL_SECONDS", "soon");
        assert_eq!(
            config(&[KEYS, TARGETS, bad_ttl]).unwrap_err().variable,
            "IDEMPOTENCY_TTL_SECONDS"
        );
    }
}
