//! Configuration, read and validated once at start. The same variable names in Lambda and
//! locally; a bad value fails the start with a message naming the variable.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::domain::trail::EventType;
use crate::domain::{OneOrMany, TenantId, parse_config_json};
use crate::observe::MetricsConfig;
use crate::store::{SeatCaps, Tables};
use crate::webhook::WebhookSecret;

mod functions;
pub mod secrets;
mod targets;

pub use functions::{Function, JobsConfig};

pub use secrets::{LiveSecrets, RefreshReason, SecretSource, Secrets};
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

/// A webhook source: the tenant its events belong to and its signing secrets (several while a
/// secret is rotated).
#[derive(Debug, Clone)]
pub struct WebhookSource {
    pub tenant: TenantId,
    pub secrets: Vec<WebhookSecret>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWebhookSource {
    tenant: String,
    secrets: Vec<String>,
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
}

/// A tenant's callback subscription: its URL, signing secret and the event types it receives.
#[derive(Debug, Clone)]
pub struct Subscription {
    pub url: String,
    /// Its signing secrets: one, or several while it is rotated (each delivery is signed with
    /// every one of them, Standard Webhooks' space-separated signatures).
    pub secrets: Vec<WebhookSecret>,
    /// `None`: every type.
    pub types: Option<Vec<EventType>>,
}

impl Subscription {
    pub fn wants(&self, kind: EventType) -> bool {
        kind.is_deliverable() && self.types.as_ref().is_none_or(|t| t.contains(&kind))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSubscription {
    url: String,
    secret: OneOrMany,
    types: Option<Vec<String>>,
}

fn parse_subscriptions(raw: &str) -> Result<BTreeMap<TenantId, Subscription>, String> {
    let raw: BTreeMap<String, RawSubscription> = parse_config_json(
        raw,
        "each tenant maps to {\"url\", \"secret\" (a string or a list of strings), \"types\"?}",
    )?;
    let mut parsed = BTreeMap::new();
    for (tenant, sub) in raw {
        let tenant_id = TenantId::parse(&tenant).map_err(|e| {
            format!(
                "a key that is not a tenant id (never quoted: it may be a value put there): {e}"
            )
        })?;
        let url = http_url(&sub.url).map_err(|e| format!("{tenant}: url: {e}"))?;
        let secrets = sub
            .secret
            .into_vec()
            .iter()
            .enumerate()
            .map(|(i, s)| {
                WebhookSecret::parse(s).map_err(|e| format!("{tenant}: secret[{i}]: {e}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if secrets.is_empty() {
            return Err(format!("{tenant}: secret: at least one"));
        }
        let types = sub
            .types
            .map(|types| {
                types
                    .iter()
                    .map(|t| match EventType::parse(t) {
                        Some(kind) if kind.is_deliverable() => Ok(kind),
                        Some(_) => Err(format!(
                            "{tenant}: types: {t} is recorded in the trail but not delivered as a callback"
                        )),
                        None => Err(format!("{tenant}: types: an entry is not an event type")),
                    })
                    .collect::<Result<Vec<_>, _>>()
            })
            .transpose()?;
        parsed.insert(
            tenant_id,
            Subscription {
                url,
                secrets,
                types,
            },
        );
    }
    Ok(parsed)
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
        let defaults = Tables::with_prefix("countersign");
        let tables = Tables {
            approvals: get("APPROVALS_TABLE").unwrap_or(defaults.approvals),
            idempotency_keys: get("IDEMPOTENCY_TABLE").unwrap_or(defaults.idempotency_keys),
            webhook_inbox: get("INBOX_TABLE").unwrap_or(defaults.webhook_inbox),
            execution_ledger: get("LEDGER_TABLE").unwrap_or(defaults.execution_ledger),
            events: get("EVENTS_TABLE").unwrap_or(defaults.events),
            approval_index: get("APPROVAL_INDEX_TABLE").unwrap_or(defaults.approval_index),
            api_keys: get("KEYS_TABLE").unwrap_or(defaults.api_keys),
        };

        // Both forms of one secret-bearing variable: refused before anything else is read.
        secrets::secret_arns(&get)?;
        let secrets = Secrets::from_lookup(&get)?;

        let public_base_url = get("PUBLIC_BASE_URL")
            .map(|raw| http_url(&raw).map_err(|e| ConfigError::new("PUBLIC_BASE_URL", e)))
            .transpose()?
            .map(|url| url.trim_end_matches('/').to_owned());
        let job_visibility_timeout_seconds = number(&get, "JOB_VISIBILITY_TIMEOUT_SECONDS", 30, 1)?;
        let job_max_attempts = number(&get, "JOB_MAX_ATTEMPTS", 5, 1)?;
        // The job's whole retry budget: every receive the redrive policy allows, each a
        // visibility timeout long.
        let retry_budget = job_visibility_timeout_seconds * (i64::from(job_max_attempts) + 3);

        let held_read_seats = held_read_seats(&get)?;

        Ok(Self {
            tables,
            secrets,
            secrets_refresh_seconds: at_most(
                number(&get, "SECRETS_REFRESH_SECONDS", 300, 1)?,
                3600,
                "SECRETS_REFRESH_SECONDS",
            )?,
            jobs_queue_url: get("JOBS_QUEUE_URL"),
            public_base_url,
            // The contract keeps keys at least 24 h, and event ids longer than providers
            // redeliver automatically (3 days).
            idempotency_ttl_seconds: number(&get, "IDEMPOTENCY_TTL_SECONDS", 86_400, 86_400)?,
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
            metrics: MetricsConfig {
                namespace: get("METRICS_NAMESPACE")
                    .map(|raw| {
                        metrics_namespace(&raw)
                            .map_err(|e| ConfigError::new("METRICS_NAMESPACE", e))
                    })
                    .transpose()?
                    .unwrap_or_else(|| MetricsConfig::default().namespace),
                tenant_dimension: match get("METRICS_TENANT_DIMENSION").as_deref() {
                    None | Some("false") => false,
                    Some("true") => true,
                    Some(_) => {
                        return Err(ConfigError::new(
                            "METRICS_TENANT_DIMENSION",
                            "must be true or false",
                        ));
                    }
                },
            },
        })
    }
}

/// CloudWatch's rule for a namespace: 1 to 255 of letters, digits and `.-_/#: `, not `AWS/…`.
fn metrics_namespace(raw: &str) -> Result<String, String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || ".-_/#: ".contains(c);
    if raw.len() > 255 || !raw.chars().all(allowed) {
        Err("1 to 255 letters, digits and . - _ / # : or space".to_owned())
    } else if raw.starts_with("AWS/") {
        Err("the AWS/ namespaces are AWS's own".to_owned())
    } else {
        Ok(raw.to_owned())
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

fn parse_webhook_sources(raw: &str) -> Result<BTreeMap<String, WebhookSource>, String> {
    let sources: BTreeMap<String, RawWebhookSource> = parse_config_json(
        raw,
        "each source maps to {\"tenant\", \"secrets\": [strings]}",
    )?;
    let mut parsed = BTreeMap::new();
    for (name, source) in sources {
        let valid_name = !name.is_empty()
            && name.len() <= 64
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'));
        if !valid_name {
            return Err(
                "a key that is not a source name (never quoted): source names are 1-64 characters \
                 of A-Z a-z 0-9 _ -"
                    .to_owned(),
            );
        }
        let tenant = TenantId::parse(&source.tenant).map_err(|e| format!("{name}: tenant: {e}"))?;
        if source.secrets.is_empty() {
            return Err(format!("{name}: at least one secret is required"));
        }
        let secrets = source
            .secrets
            .iter()
            .enumerate()
            .map(|(i, s)| WebhookSecret::parse(s).map_err(|e| format!("{name}: secrets[{i}]: {e}")))
            .collect::<Result<Vec<_>, _>>()?;
        parsed.insert(name, WebhookSource { tenant, secrets });
    }
    Ok(parsed)
}

/// `HELD_READ_CONCURRENCY` (1–200, default 50) less `HELD_READ_HEADROOM` (default 0): on AWS
/// the first is the read function's reserved concurrency and the second what of it is kept for
/// reads that answer at once (plain reads, refusals), so that a held read beyond the seats is
/// answered 429 by the function rather than throttled by Lambda (which HTTP API answers 500).
/// At most 200: the seats are one item, and each of its writes costs write units in proportion
/// to the leases it holds (200 × ~37 bytes: 8 units), one item taking at most 1,000 a second.
fn held_read_seats(get: &impl Fn(&str) -> Option<String>) -> Result<SeatCaps, ConfigError> {
    let concurrency = at_most(
        number(get, "HELD_READ_CONCURRENCY", 50, 1)?,
        200,
        "HELD_READ_CONCURRENCY",
    )?;
    let headroom = number(get, "HELD_READ_HEADROOM", 0, 0)?;
    if headroom >= concurrency {
        return Err(ConfigError::new(
            "HELD_READ_HEADROOM",
            format!("must be less than HELD_READ_CONCURRENCY ({concurrency})"),
        ));
    }
    let all = u32::try_from(concurrency - headroom)
        .map_err(|_| ConfigError::new("HELD_READ_CONCURRENCY", "must be at most 200"))?;
    let per_tenant = number(get, "HELD_READS_PER_TENANT", all.div_ceil(2), 1)?;
    if per_tenant > all {
        return Err(ConfigError::new(
            "HELD_READS_PER_TENANT",
            format!(
                "must be at most the seats ({all}: HELD_READ_CONCURRENCY less HELD_READ_HEADROOM)"
            ),
        ));
    }
    Ok(SeatCaps { all, per_tenant })
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
    fn held_reads_get_their_concurrency_less_its_headroom() {
        let caps = |all, per_tenant| SeatCaps { all, per_tenant };
        assert_eq!(
            config(&[KEYS, TARGETS]).unwrap().held_read_seats,
            caps(50, 25)
        );
        let seats = |pairs: &[(&str, &str)]| {
            let mut all = vec![KEYS, TARGETS];
            all.extend_from_slice(pairs);
            config(&all).map(|c| c.held_read_seats)
        };
        assert_eq!(
            seats(&[("HELD_READ_CONCURRENCY", "21")]).unwrap(),
            caps(21, 11),
            "half the seats, rounded up"
        );
        assert_eq!(
            seats(&[
                ("HELD_READ_CONCURRENCY", "50"),
                ("HELD_READ_HEADROOM", "10"),
                ("HELD_READS_PER_TENANT", "40")
            ])
            .unwrap(),
            caps(40, 40)
        );
        for (pairs, variable) in [
            (
                &[
                    ("HELD_READ_CONCURRENCY", "10"),
                    ("HELD_READ_HEADROOM", "10"),
                ][..],
                "HELD_READ_HEADROOM",
            ),
            (
                &[("HELD_READ_CONCURRENCY", "0")][..],
                "HELD_READ_CONCURRENCY",
            ),
            (
                &[("HELD_READ_CONCURRENCY", "201")][..],
                "HELD_READ_CONCURRENCY",
            ),
            (&[("HELD_READ_HEADROOM", "-1")][..], "HELD_READ_HEADROOM"),
            (
                &[("HELD_READS_PER_TENANT", "51")][..],
                "HELD_READS_PER_TENANT",
            ),
            (
                &[("HELD_READS_PER_TENANT", "0")][..],
                "HELD_READS_PER_TENANT",
            ),
        ] {
            assert_eq!(seats(pairs).unwrap_err().variable, variable, "{pairs:?}");
        }
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
    fn webhook_sources_are_bound_to_a_tenant_with_valid_secrets() {
        let sources = (
            "WEBHOOK_SOURCES",
            r#"{"github": {"tenant": "acme", "secrets": ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]}}"#,
        );
        let parsed = config(&[KEYS, TARGETS, sources]).unwrap();
        assert_eq!(
            parsed.secrets.webhook_sources["github"].tenant.as_str(),
            "acme"
        );
        assert!(
            config(&[KEYS, TARGETS])
                .unwrap()
                .secrets
                .webhook_sources
                .is_empty()
        );
        for bad in [
            r#"{"github": {"tenant": "acme", "secrets": []}}"#,
            r#"{"github": {"tenant": "acme", "secrets": ["whsec_"]}}"#,
            r#"{"git hub": {"tenant": "acme", "secrets": ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]}}"#,
            r#"{"github": {"tenant": "a#b", "secrets": ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]}}"#,
            "[]",
        ] {
            let err = config(&[KEYS, TARGETS, ("WEBHOOK_SOURCES", bad)]).unwrap_err();
            assert_eq!(err.variable, "WEBHOOK_SOURCES", "{bad}");
        }
    }

    #[test]
    fn the_status_delay_defaults_to_ten_seconds_and_is_at_least_one() {
        let target = |delay: &str| {
            format!(
                r#"{{"pay": {{"url": "https://pay.example.com/charge", "status_url": "https://pay.example.com/s/{{idempotency_key}}"{delay}}}}}"#
            )
        };
        let default = config(&[KEYS, ("ACTION_TARGETS", &target(""))]).unwrap();
        assert_eq!(
            default.secrets.action_targets["pay"].status_delay_seconds,
            10
        );
        let set = target(r#", "status_delay_seconds": 3"#);
        let set = config(&[KEYS, ("ACTION_TARGETS", &set)]).unwrap();
        assert_eq!(set.secrets.action_targets["pay"].status_delay_seconds, 3);
        for bad in ["0", "-1", "901", "1.5", "\"10\""] {
            let raw = target(&format!(r#", "status_delay_seconds": {bad}"#));
            let err = config(&[KEYS, ("ACTION_TARGETS", &raw)]).unwrap_err();
            assert_eq!(err.variable, "ACTION_TARGETS", "{bad}");
        }
    }

    #[test]
    fn a_status_url_is_an_http_url_with_the_key_placeholder() {
        let target = |status: &str| {
            format!(
                r#"{{"pay": {{"url": "https://pay.example.com/charge", "status_url": "{status}"}}}}"#
            )
        };
        let ok = target("https://pay.example.com/status/{idempotency_key}");
        let parsed = config(&[KEYS, ("ACTION_TARGETS", &ok)]).unwrap();
        assert_eq!(
            parsed.secrets.action_targets["pay"].status_url.as_deref(),
            Some("https://pay.example.com/status/{idempotency_key}")
        );
        assert_eq!(
            config(&[KEYS, TARGETS]).unwrap().secrets.action_targets["deploy"].status_url,
            None
        );
        for bad in [
            "https://pay.example.com/status",
            "ftp://pay.example.com/{idempotency_key}",
            "{idempotency_key}",
        ] {
            let err = config(&[KEYS, ("ACTION_TARGETS", &target(bad))]).unwrap_err();
            assert_eq!(err.variable, "ACTION_TARGETS", "{bad}");
            assert!(
                err.problem.starts_with("pay: status_url"),
                "{}",
                err.problem
            );
        }
    }

    #[test]
    fn subscriptions_name_a_url_a_secret_and_deliverable_types() {
        let sub = |types: &str| {
            (
                "EVENT_SUBSCRIPTIONS",
                format!(
                    r#"{{"acme": {{"url": "https://hooks.example.com/cs", "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"{types}}}}}"#
                ),
            )
        };
        let (name, all) = sub("");
        let parsed = config(&[KEYS, TARGETS, (name, &all)]).unwrap();
        let acme = &parsed.secrets.event_subscriptions[&TenantId::parse("acme").unwrap()];
        assert!(acme.wants(EventType::Approved) && acme.wants(EventType::Expired));
        assert!(
            !acme.wants(EventType::CallbackDelivered) && !acme.wants(EventType::NotificationSent)
        );
        let (name, some) = sub(r#", "types": ["approval.approved"]"#);
        let parsed = config(&[KEYS, TARGETS, (name, &some)]).unwrap();
        let acme = &parsed.secrets.event_subscriptions[&TenantId::parse("acme").unwrap()];
        assert!(acme.wants(EventType::Approved) && !acme.wants(EventType::Succeeded));
        for bad in [
            r#", "types": ["approval.aproved"]"#,
            r#", "types": ["callback.failed"]"#,
            r#", "types": ["notification.sent"]"#,
            r#", "colour": "red""#,
        ] {
            let (name, value) = sub(bad);
            let err = config(&[KEYS, TARGETS, (name, &value)]).unwrap_err();
            assert_eq!(err.variable, "EVENT_SUBSCRIPTIONS", "{bad}");
            assert!(!err.problem.contains("MfKQ9r8"), "no secret in the message");
        }
        let err = config(&[KEYS, TARGETS, ("EVENT_SUBSCRIPTIONS", r#"{"acme": {"url": "ftp://x", "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}}"#)]).unwrap_err();
        assert_eq!(err.variable, "EVENT_SUBSCRIPTIONS");
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
