//! The secret-bearing variables (docs/KEYS.md): `API_KEYS`, `WEBHOOK_SOURCES`,
//! `EVENT_SUBSCRIPTIONS`, `SLACK` and `SLACK_BOT_TOKENS`, `GITHUB` and `GITHUB_PRIVATE_KEYS`,
//! `DECISION_TOKEN_SECRET`, `OIDC` (client secrets), and `ACTION_TARGETS` and `NOTIFIER_URL`
//! (their URLs often carry credentials). Each may come from the variable or
//! from a Secrets Manager secret named by `<NAME>_SECRET_ARN` (never both). Secrets are read at
//! start in one `BatchGetSecretValue`, kept in memory, and refreshed every
//! `SECRETS_REFRESH_SECONDS` — and early, at most once every 30 s, when a signature or token
//! fails under every known secret — so a rotation reaches every warm function without a deploy.
//! A failed refresh keeps the last good values.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};

use aws_sdk_secretsmanager::error::DisplayErrorContext;

use super::oidc::{OidcTenant, parse_oidc};
use super::sources::parse_webhook_sources;
use super::subscriptions::parse_subscriptions;
use super::targets::parse_action_targets;
use super::{ActionTarget, ConfigError, Subscription, WebhookSource, http_url};
use crate::auth::ApiKeys;
use crate::domain::{EpochSeconds, TenantId};
use crate::github::{GithubApp, parse_github, parse_github_private_keys};
use crate::review_token::TokenSecret;
use crate::slack::{SlackApp, parse_slack, parse_slack_bot_tokens};

/// Every variable that may hold a secret, and so may come from Secrets Manager instead.
pub const SECRET_VARIABLES: [&str; 11] = [
    "API_KEYS",
    "WEBHOOK_SOURCES",
    "EVENT_SUBSCRIPTIONS",
    "SLACK",
    "SLACK_BOT_TOKENS",
    "GITHUB",
    "GITHUB_PRIVATE_KEYS",
    "DECISION_TOKEN_SECRET",
    "ACTION_TARGETS",
    "NOTIFIER_URL",
    "OIDC",
];

/// The shortest time between two early refreshes.
pub const EARLY_REFRESH_SECONDS: EpochSeconds = 30;

/// `BatchGetSecretValue` takes at most 20 secret ids per call.
const MAX_SECRETS_PER_CALL: usize = 20;

/// The configuration that holds secrets, parsed.
#[derive(Debug, Clone, Default)]
pub struct Secrets {
    /// API keys → tenants (the `API_KEYS` forms; the keys table holds the rest).
    pub api_keys: Option<ApiKeys>,
    /// By source name (the `{source}` of `POST /webhooks/{source}`).
    pub webhook_sources: BTreeMap<String, WebhookSource>,
    /// Where each tenant's lifecycle events are delivered.
    pub event_subscriptions: BTreeMap<TenantId, Subscription>,
    /// Each tenant's Slack app, for the tenants that decide in Slack.
    pub slack: BTreeMap<TenantId, SlackApp>,
    /// Each tenant's GitHub App, for the tenants that gate deployments through Countersign.
    pub github: BTreeMap<TenantId, GithubApp>,
    pub decision_token_secret: Option<TokenSecret>,
    /// Where each action type's approved actions go (`ACTION_TARGETS`).
    pub action_targets: BTreeMap<String, ActionTarget>,
    /// Where notify jobs are POSTed (`NOTIFIER_URL`).
    pub notifier_url: Option<String>,
    /// Each tenant's identity provider, for the tenants whose approvers sign in (`OIDC`).
    pub oidc: BTreeMap<TenantId, OidcTenant>,
}

impl Secrets {
    /// Parses the secret-bearing variables through `get` (blank counts as unset).
    pub fn from_lookup(get: &impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let api_keys = get("API_KEYS")
            .map(|raw| ApiKeys::parse(&raw).map_err(|e| ConfigError::new("API_KEYS", e)))
            .transpose()?;
        let webhook_sources = match get("WEBHOOK_SOURCES") {
            Some(raw) => {
                parse_webhook_sources(&raw).map_err(|e| ConfigError::new("WEBHOOK_SOURCES", e))?
            }
            None => BTreeMap::new(),
        };
        let event_subscriptions = match get("EVENT_SUBSCRIPTIONS") {
            Some(raw) => {
                parse_subscriptions(&raw).map_err(|e| ConfigError::new("EVENT_SUBSCRIPTIONS", e))?
            }
            None => BTreeMap::new(),
        };
        let mut slack = match get("SLACK") {
            Some(raw) => parse_slack(&raw).map_err(|e| ConfigError::new("SLACK", e))?,
            None => BTreeMap::new(),
        };
        if let Some(raw) = get("SLACK_BOT_TOKENS") {
            let tokens = parse_slack_bot_tokens(&raw)
                .map_err(|e| ConfigError::new("SLACK_BOT_TOKENS", e))?;
            lay_over(&mut slack, tokens, "SLACK_BOT_TOKENS", "SLACK", |app| {
                &mut app.bot_token
            })?;
        }
        let mut github = match get("GITHUB") {
            Some(raw) => parse_github(&raw).map_err(|e| ConfigError::new("GITHUB", e))?,
            None => BTreeMap::new(),
        };
        if let Some(raw) = get("GITHUB_PRIVATE_KEYS") {
            let keys = parse_github_private_keys(&raw)
                .map_err(|e| ConfigError::new("GITHUB_PRIVATE_KEYS", e))?;
            lay_over(&mut github, keys, "GITHUB_PRIVATE_KEYS", "GITHUB", |app| {
                &mut app.private_key
            })?;
        }
        let decision_token_secret = get("DECISION_TOKEN_SECRET")
            .map(|raw| {
                TokenSecret::parse(&raw).map_err(|e| ConfigError::new("DECISION_TOKEN_SECRET", e))
            })
            .transpose()?;
        let action_targets = match get("ACTION_TARGETS") {
            Some(raw) => parse_action_targets(&raw)?,
            None => BTreeMap::new(),
        };
        let notifier_url = get("NOTIFIER_URL")
            .map(|raw| http_url(&raw).map_err(|e| ConfigError::new("NOTIFIER_URL", e)))
            .transpose()?;
        let oidc = match get("OIDC") {
            Some(raw) => parse_oidc(&raw).map_err(|e| ConfigError::new("OIDC", e))?,
            None => BTreeMap::new(),
        };
        Ok(Self {
            oidc,
            api_keys,
            webhook_sources,
            event_subscriptions,
            slack,
            github,
            decision_token_secret,
            action_targets,
            notifier_url,
        })
    }

    pub fn is_action_type(&self, kind: &str) -> bool {
        self.action_targets.contains_key(kind)
    }

    /// The reminders of an approval of `kind` whose create names none (`ACTION_TARGETS`).
    pub fn default_reminders(&self, kind: &str) -> Option<crate::domain::stall::Reminders> {
        self.action_targets.get(kind)?.default_reminders()
    }

    /// Whether Countersign executes approved actions of `kind` (false: approval-only).
    pub fn executes(&self, kind: &str) -> bool {
        self.action_targets.get(kind).is_none_or(|t| t.executes)
    }
}

/// Each tenant's credential from `variable` into its app of `apps` (from `apps_variable`): a
/// tenant `apps` lacks, or one whose credential is given in both, is a start-up error.
fn lay_over<A, C>(
    apps: &mut BTreeMap<TenantId, A>,
    credentials: BTreeMap<TenantId, C>,
    variable: &'static str,
    apps_variable: &str,
    field: impl Fn(&mut A) -> &mut Option<C>,
) -> Result<(), ConfigError> {
    for (tenant, credential) in credentials {
        let app = apps.get_mut(&tenant).ok_or_else(|| {
            ConfigError::new(
                variable,
                format!("{tenant}: no such tenant in {apps_variable}"),
            )
        })?;
        let slot = field(app);
        if slot.is_some() {
            return Err(ConfigError::new(
                variable,
                format!("{tenant}: given in {apps_variable} too; give it in {variable} only"),
            ));
        }
        *slot = Some(credential);
    }
    Ok(())
}

/// The `<NAME>_SECRET_ARN` variables set, by variable; both forms of one variable set is a
/// start-up error naming it.
pub fn secret_arns(
    get: &impl Fn(&str) -> Option<String>,
) -> Result<Vec<(&'static str, String)>, ConfigError> {
    let mut arns = Vec::new();
    for variable in SECRET_VARIABLES {
        let Some(arn) = get(&format!("{variable}_SECRET_ARN")) else {
            continue;
        };
        if get(variable).is_some() {
            return Err(ConfigError::new(
                variable,
                format!("set either {variable} or {variable}_SECRET_ARN, not both"),
            ));
        }
        arns.push((variable, arn.trim().to_owned()));
    }
    Ok(arns)
}

/// Where a function's secrets come from: its variables, and Secrets Manager for those named by
/// `<NAME>_SECRET_ARN`.
#[derive(Debug, Clone)]
pub struct SecretSource {
    client: aws_sdk_secretsmanager::Client,
    arns: Vec<(&'static str, String)>,
    /// The process's variables as read at start (the secrets' values are laid over them).
    variables: HashMap<String, String>,
    /// The secret-bearing variables' values the start read (a refresh's fallback).
    read_at_start: HashMap<String, String>,
}

/// The secret-bearing variables among `values`.
fn secret_values(values: &HashMap<String, String>) -> HashMap<String, String> {
    values
        .iter()
        .filter(|(name, _)| SECRET_VARIABLES.contains(&name.as_str()))
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect()
}

impl SecretSource {
    /// `None` when no variable names a secret (nothing to read, nothing to refresh).
    pub fn new(
        client: aws_sdk_secretsmanager::Client,
        variables: HashMap<String, String>,
    ) -> Result<Option<Self>, ConfigError> {
        let get = |name: &str| {
            variables
                .get(name)
                .filter(|v| !v.trim().is_empty())
                .cloned()
        };
        let arns = secret_arns(&get)?;
        Ok((!arns.is_empty()).then_some(Self {
            client,
            arns,
            variables,
            read_at_start: HashMap::new(),
        }))
    }

    /// The variables with every secret's current value laid over them: one
    /// `BatchGetSecretValue` (for up to 20 secrets). Any secret that cannot be read — unknown,
    /// deleted or scheduled for deletion, not a string, not allowed — fails the whole read,
    /// naming its variable and never its value (a function's start).
    pub async fn read(&self) -> Result<HashMap<String, String>, ConfigError> {
        let (values, mut unread) = self.read_each().await?;
        match unread.is_empty() {
            true => Ok(values),
            false => Err(unread.remove(0)),
        }
    }

    /// As [`SecretSource::read`], but a secret that cannot be read is left out (its variable
    /// keeps no value here) and named in the second part, so the others still refresh. Bounded
    /// by [`READ_TIMEOUT`]: a hung read fails rather than holding the refresh for good.
    async fn read_each(&self) -> Result<(HashMap<String, String>, Vec<ConfigError>), ConfigError> {
        let first = self
            .arns
            .first()
            .map_or("SECRETS", |(variable, _)| *variable);
        tokio::time::timeout(READ_TIMEOUT, self.read_all())
            .await
            .map_err(|_| {
                ConfigError::new(
                    first,
                    format!(
                        "Secrets Manager BatchGetSecretValue did not answer within {} s",
                        READ_TIMEOUT.as_secs()
                    ),
                )
            })?
    }

    async fn read_all(&self) -> Result<(HashMap<String, String>, Vec<ConfigError>), ConfigError> {
        let mut values = self.variables.clone();
        let mut unread = Vec::new();
        for chunk in self.arns.chunks(MAX_SECRETS_PER_CALL) {
            let answer = self
                .client
                .batch_get_secret_value()
                .set_secret_id_list(Some(chunk.iter().map(|(_, arn)| arn.clone()).collect()))
                .send()
                .await
                .map_err(|e| {
                    ConfigError::new(
                        chunk[0].0,
                        format!(
                            "Secrets Manager BatchGetSecretValue: {}",
                            DisplayErrorContext(&e)
                        ),
                    )
                })?;
            // The answer names secrets by ARN and name; a variable may give either.
            let names = |arn: &str| {
                chunk
                    .iter()
                    .find(|(_, given)| given == arn || arn_names(arn, given))
                    .map(|(variable, _)| *variable)
            };
            let mut failed: Vec<&'static str> = Vec::new();
            for error in answer.errors() {
                let variable = error.secret_id().and_then(names).unwrap_or(chunk[0].0);
                failed.push(variable);
                unread.push(ConfigError::new(
                    variable,
                    format!(
                        "the secret cannot be read: {} {}",
                        error.error_code().unwrap_or("error"),
                        error.message().unwrap_or_default()
                    ),
                ));
            }
            for (variable, _) in chunk {
                values.remove(&format!("{variable}_SECRET_ARN"));
                if failed.contains(variable) {
                    continue;
                }
                let value = answer.secret_values().iter().find(|v| {
                    v.arn().and_then(names) == Some(*variable)
                        || v.name().and_then(names) == Some(*variable)
                });
                let text = match value {
                    None => Err(ConfigError::new(
                        variable,
                        "Secrets Manager did not return the secret",
                    )),
                    Some(value) => value.secret_string().ok_or_else(|| {
                        ConfigError::new(variable, "the secret holds no SecretString")
                    }),
                };
                match text {
                    // The value stands for the variable now: as if it had been set itself.
                    Ok(text) => {
                        values.insert((*variable).to_owned(), text.to_owned());
                    }
                    Err(e) => unread.push(e),
                }
            }
        }
        Ok((values, unread))
    }
}

/// The longest a read of the secrets may take before it counts as failed.
const READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Whether the secret `arn` is the one a variable gave as `given`: its ARN, or its name (an
/// ARN's last part is `secret:<name>-<6 random characters>`).
fn arn_names(arn: &str, given: &str) -> bool {
    arn.rsplit_once(":secret:")
        .map(|(_, name)| name)
        .and_then(|name| name.rsplit_once('-'))
        .is_some_and(|(name, suffix)| name == given && suffix.len() == 6)
}

/// The configuration of a function's start: `variables`, with every secret that a
/// `<NAME>_SECRET_ARN` names read from Secrets Manager first (one call), and where they came
/// from, for refreshes.
pub async fn load(
    variables: HashMap<String, String>,
    secretsmanager: aws_sdk_secretsmanager::Client,
) -> Result<(super::Config, Option<SecretSource>), ConfigError> {
    let source = SecretSource::new(secretsmanager, variables.clone())?;
    let mut source = source;
    let values = match &mut source {
        Some(source) => {
            let values = source.read().await?;
            source.read_at_start = secret_values(&values);
            values
        }
        None => variables,
    };
    let config = super::Config::from_lookup(|name| values.get(name).cloned())?;
    Ok((config, source))
}

/// The secrets in force, swapped whole by a refresh.
#[derive(Debug)]
pub struct LiveSecrets {
    current: RwLock<Arc<Secrets>>,
    /// The secret-bearing variables' values the secrets in force were parsed from: what a
    /// variable falls back to when its own refresh fails.
    last_good: Mutex<HashMap<String, String>>,
    source: Option<SecretSource>,
    refresh_seconds: EpochSeconds,
    state: Mutex<RefreshState>,
}

#[derive(Debug, Default)]
struct RefreshState {
    refreshed_at: EpochSeconds,
    early_at: Option<EpochSeconds>,
    in_flight: bool,
}

/// Why [`LiveSecrets::claim_refresh`] was asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefreshReason {
    /// `SECRETS_REFRESH_SECONDS` have passed.
    Periodic,
    /// A signature or token failed under every known secret.
    Early,
}

impl LiveSecrets {
    pub fn new(
        secrets: Secrets,
        source: Option<SecretSource>,
        refresh_seconds: EpochSeconds,
        now: EpochSeconds,
    ) -> Self {
        Self {
            current: RwLock::new(Arc::new(secrets)),
            last_good: Mutex::new(
                source
                    .as_ref()
                    .map(|s| s.read_at_start.clone())
                    .unwrap_or_default(),
            ),
            source,
            refresh_seconds,
            state: Mutex::new(RefreshState {
                refreshed_at: now,
                ..RefreshState::default()
            }),
        }
    }

    /// The secrets in force now.
    pub fn get(&self) -> Arc<Secrets> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Whether a refresh is due for `reason` at `now`; if so it is claimed (no other starts
    /// until [`LiveSecrets::refresh`] ends it). Never for secrets that come from variables.
    pub fn claim_refresh(&self, reason: RefreshReason, now: EpochSeconds) -> bool {
        if self.source.is_none() {
            return false;
        }
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.in_flight {
            return false;
        }
        let due = match reason {
            RefreshReason::Periodic => now >= state.refreshed_at + self.refresh_seconds,
            RefreshReason::Early => state
                .early_at
                .is_none_or(|at| now >= at + EARLY_REFRESH_SECONDS),
        };
        if due {
            state.in_flight = true;
            if reason == RefreshReason::Early {
                state.early_at = Some(now);
            }
        }
        due
    }

    /// Reads and parses the secrets again and puts them in force. Each variable stands alone:
    /// one whose secret cannot be read or no longer parses keeps its last good value, and the
    /// others are refreshed; the first such failure is returned (and counted by the caller).
    /// Ends the claim either way.
    pub async fn refresh(&self, now: EpochSeconds) -> Result<(), ConfigError> {
        let result = match &self.source {
            Some(source) => self.read_variable_by_variable(source).await,
            None => Ok((self.get().as_ref().clone(), None)),
        };
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.in_flight = false;
        state.refreshed_at = now;
        drop(state);
        let (secrets, failure) = result?;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(secrets);
        failure.map_or(Ok(()), Err)
    }

    async fn read_variable_by_variable(
        &self,
        source: &SecretSource,
    ) -> Result<(Secrets, Option<ConfigError>), ConfigError> {
        let (mut values, unread) = source.read_each().await?;
        let last_good = self
            .last_good
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let mut failures = Vec::new();
        for error in unread {
            if let Some(good) = last_good.get(error.variable) {
                values.insert(error.variable.to_owned(), good.clone());
            }
            failures.push(error);
        }
        // A value that no longer parses: that variable's last good one instead, then again.
        let secrets = loop {
            let get = |name: &str| values.get(name).filter(|v| !v.trim().is_empty()).cloned();
            match Secrets::from_lookup(&get) {
                Ok(secrets) => break secrets,
                Err(error) => {
                    let good = last_good.get(error.variable);
                    if good.is_none() || values.get(error.variable) == good {
                        return Err(error);
                    }
                    if let Some(good) = good {
                        values.insert(error.variable.to_owned(), good.clone());
                    }
                    failures.push(error);
                }
            }
        };
        *self.last_good.lock().unwrap_or_else(|e| e.into_inner()) = secret_values(&values);
        Ok((secrets, failures.into_iter().next()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn both_forms_of_one_variable_are_refused_naming_it() {
        let get = lookup(&[
            ("SLACK", "{}"),
            ("SLACK_SECRET_ARN", "arn:aws:secretsmanager:x"),
        ]);
        let error = secret_arns(&get).unwrap_err();
        assert_eq!(error.variable, "SLACK");
        let get = lookup(&[("SLACK_SECRET_ARN", "a"), ("API_KEYS_SECRET_ARN", "b")]);
        assert_eq!(
            secret_arns(&get).unwrap(),
            [("API_KEYS", "b".to_owned()), ("SLACK", "a".to_owned())]
        );
    }

    #[test]
    fn bot_tokens_and_app_keys_given_apart_are_laid_over_their_apps() {
        let slack = r#"{"acme": {"signing_secret": "s3cr3t", "channel": "C0123ABC", "users": {"U1X": "a@x.io"}}}"#;
        let secrets = Secrets::from_lookup(&lookup(&[
            ("SLACK", slack),
            ("SLACK_BOT_TOKENS", r#"{"acme": "xoxb-1-SECRETTOKEN"}"#),
        ]))
        .unwrap();
        let app = secrets.slack.values().next().unwrap();
        assert_eq!(
            app.bot_token.as_ref().map(|t| t.expose()),
            Some("xoxb-1-SECRETTOKEN")
        );
        // Without it, the app has none (the webhook function's view).
        let alone = Secrets::from_lookup(&lookup(&[("SLACK", slack)])).unwrap();
        assert!(alone.slack.values().all(|a| a.bot_token.is_none()));
        // A tenant SLACK lacks, or a token given twice: refused, naming the variable, never the
        // token.
        for (tokens, with_inline) in [
            (r#"{"other": "xoxb-2-SECRETTOKEN"}"#, false),
            (r#"{"acme": "xoxb-3-SECRETTOKEN"}"#, true),
        ] {
            let inline = slack.replace(
                "\"signing_secret\"",
                "\"bot_token\": \"xoxb-0-SECRETTOKEN\", \"signing_secret\"",
            );
            let error = Secrets::from_lookup(&lookup(&[
                ("SLACK", if with_inline { &inline } else { slack }),
                ("SLACK_BOT_TOKENS", tokens),
            ]))
            .unwrap_err();
            assert_eq!(error.variable, "SLACK_BOT_TOKENS");
            assert!(!error.to_string().contains("SECRETTOKEN"), "{error}");
        }
        let keys = Secrets::from_lookup(&lookup(&[(
            "GITHUB_PRIVATE_KEYS",
            r#"{"acme": "not a key"}"#,
        )]))
        .unwrap_err();
        assert_eq!(keys.variable, "GITHUB_PRIVATE_KEYS");
    }

    #[test]
    fn an_arn_names_its_secret_by_name_too() {
        let arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:countersign/slack-AbC123";
        assert!(arn_names(arn, "countersign/slack"));
        assert!(!arn_names(arn, "countersign/sla"));
        assert!(!arn_names(arn, "countersign/slack-AbC123"));
    }

    #[test]
    fn without_a_source_nothing_is_ever_refreshed() {
        let live = LiveSecrets::new(Secrets::default(), None, 1, 0);
        assert!(!live.claim_refresh(RefreshReason::Periodic, 1_000));
        assert!(!live.claim_refresh(RefreshReason::Early, 1_000));
    }
}
