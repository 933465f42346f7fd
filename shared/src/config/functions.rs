//! What each function needs and holds: the functions, the check at each one's start that it
//! has every variable it uses (each is deployed with only its own), and what it would hold
//! without needing it.

use super::{Config, ConfigError};

impl Config {
    /// Checks, at start, that `function` has every variable it needs: each function is
    /// deployed with only the configuration (and secrets) it uses.
    pub fn check_for(&self, function: Function) -> Result<(), ConfigError> {
        let require = |present: bool, variable: &'static str| {
            if present {
                Ok(())
            } else {
                Err(ConfigError::new(
                    variable,
                    format!("required by the {function:?} function"),
                ))
            }
        };
        match function {
            // API keys are optional: the keys table holds them (`API_KEYS` adds to it).
            Function::Api => {
                // Page cursors are signed with a key derived from it.
                require(
                    self.secrets.decision_token_secret.is_some(),
                    "DECISION_TOKEN_SECRET",
                )?;
                require(!self.secrets.action_targets.is_empty(), "ACTION_TARGETS")
            }
            Function::Decide => {
                require(
                    self.secrets.decision_token_secret.is_some(),
                    "DECISION_TOKEN_SECRET",
                )?;
                // Sign-in's redirect URI, and the origin a form post must come from; https,
                // as browsers keep the session's Secure cookie only there (and on loopback).
                require(
                    self.secrets.oidc.is_empty() || self.public_base_url.is_some(),
                    "PUBLIC_BASE_URL",
                )?;
                match &self.public_base_url {
                    Some(base) if !self.secrets.oidc.is_empty() && !secure_origin(base) => {
                        Err(ConfigError::new(
                            "PUBLIC_BASE_URL",
                            "must be https once a tenant signs in (OIDC): browsers keep the \
                             session's Secure cookie only on https (and loopback)",
                        ))
                    }
                    _ => Ok(()),
                }
            }
            // Provider webhooks, Slack's clicks, GitHub's events, any of them or none (a
            // deployment that takes no webhook answers every source 404).
            Function::Webhook => Ok(()),
            // It signs passkey-only approvals' certificates.
            Function::Dispatch => {
                require(self.jobs_queue_url.is_some(), "JOBS_QUEUE_URL")?;
                require(self.certificate_key_arn.is_some(), "CERTIFICATE_KEY_ARN")
            }
            // It acts as each tenant's Slack app and GitHub App.
            Function::Executor => {
                self.jobs()?;
                require(!self.secrets.action_targets.is_empty(), "ACTION_TARGETS")?;
                self.slack_tokens_present()?;
                self.github_keys_present()?;
                self.senders_allowed()
            }
            // The redelivery sweep asks GitHub as each App.
            Function::Sweeper => self.github_keys_present(),
            // An execution is stuck only once its job's whole retry budget has passed.
            Function::Reconciler => {
                let budget =
                    self.job_visibility_timeout_seconds * (i64::from(self.job_max_attempts) + 3);
                if self.stuck_execution_seconds < budget {
                    return Err(ConfigError::new(
                        "STUCK_EXECUTION_SECONDS",
                        format!(
                            "must be an integer of at least {budget} (the retry budget: \
                             JOB_VISIBILITY_TIMEOUT_SECONDS x (JOB_MAX_ATTEMPTS + 3))"
                        ),
                    ));
                }
                Ok(())
            }
            // Tables only (every setting they read has a default; keys are optional, as above).
            Function::Read => Ok(()),
        }
    }

    fn slack_tokens_present(&self) -> Result<(), ConfigError> {
        match self
            .secrets
            .slack
            .iter()
            .find(|(_, app)| app.bot_token.is_none())
        {
            Some((tenant, _)) => Err(ConfigError::new(
                "SLACK_BOT_TOKENS",
                format!("{tenant}: no bot token (in SLACK_BOT_TOKENS, or SLACK's bot_token)"),
            )),
            None => Ok(()),
        }
    }

    /// Every sender of `EMAIL` is a From address the executor's role may send with
    /// (`EMAIL_SENDERS`, the template's `EmailSenders`): otherwise IAM would refuse each of its
    /// emails.
    fn senders_allowed(&self) -> Result<(), ConfigError> {
        match crate::email::config::uncovered(&self.email, &self.email_senders) {
            Some((tenant, from)) => Err(ConfigError::new(
                "EMAIL_SENDERS",
                format!(
                    "{tenant}: its sender {from} matches none of the From addresses the \
                     executor may send with (template parameter EmailSenders)"
                ),
            )),
            None => Ok(()),
        }
    }

    fn github_keys_present(&self) -> Result<(), ConfigError> {
        match self
            .secrets
            .github
            .iter()
            .find(|(_, app)| app.private_key.is_none())
        {
            Some((tenant, _)) => Err(ConfigError::new(
                "GITHUB_PRIVATE_KEYS",
                format!(
                    "{tenant}: no private key (in GITHUB_PRIVATE_KEYS, or GITHUB's private_key)"
                ),
            )),
            None => Ok(()),
        }
    }

    /// What `function` holds and never uses, said at its start: the webhook function needs
    /// Slack's signing secrets and GitHub's webhook secrets, never a bot token or an App's key.
    pub fn start_warnings(&self, function: Function) -> Vec<String> {
        let mut warnings = Vec::new();
        if function == Function::Decide {
            warnings.extend(self.bearer_link_warnings());
        }
        if function == Function::Webhook {
            for (tenant, _) in self
                .secrets
                .slack
                .iter()
                .filter(|(_, a)| a.bot_token.is_some())
            {
                warnings.push(format!(
                    "SLACK: the webhook function holds {tenant}'s bot token, which it never uses: \
                     give it in SLACK_BOT_TOKENS (the SlackBotTokens parameter) instead"
                ));
            }
            for (tenant, _) in self
                .secrets
                .github
                .iter()
                .filter(|(_, a)| a.private_key.is_some())
            {
                warnings.push(format!(
                    "GITHUB: the webhook function holds {tenant}'s App private key, which it never \
                     uses: give it in GITHUB_PRIVATE_KEYS (the GithubPrivateKeys parameter) instead"
                ));
            }
        }
        warnings
    }

    /// The review page's tenants without `OIDC`, named: their review links are bearer
    /// credentials (whoever holds one decides as its approver). The tenants the configuration
    /// names; a tenant known only from the keys table is covered by the last line.
    fn bearer_link_warnings(&self) -> Vec<String> {
        let secrets = &self.secrets;
        let named: std::collections::BTreeSet<&crate::domain::TenantId> = secrets
            .api_keys
            .iter()
            .flat_map(|keys| keys.tenants())
            .chain(secrets.slack.keys())
            .chain(secrets.github.keys())
            .chain(secrets.event_subscriptions.keys())
            .collect();
        let mut warnings: Vec<String> = named
            .into_iter()
            .filter(|tenant| !secrets.oidc.contains_key(*tenant))
            .map(|tenant| {
                format!(
                    "review links for tenant {tenant} are bearer credentials: configure OIDC \
                     (docs/SIGN-IN.md)"
                )
            })
            .collect();
        for (tenant, oidc) in &secrets.oidc {
            if oidc.settings.identity_claim == "preferred_username" {
                warnings.push(format!(
                    "OIDC: tenant {tenant} takes preferred_username as approvers' identity: many \
                     providers let a person change it, so check that {} does not",
                    oidc.settings.issuer
                ));
            }
        }
        warnings.push(match secrets.oidc.len() {
            0 => "review links are bearer credentials for every tenant: configure OIDC \
                  (docs/SIGN-IN.md)"
                .to_owned(),
            _ => "review links are bearer credentials for every tenant not in OIDC".to_owned(),
        });
        warnings
    }

    /// What the dispatcher and the executor need beyond the common configuration; a Lambda that
    /// needs it calls this at start, so a missing variable fails the start, not a job.
    pub fn jobs(&self) -> Result<JobsConfig<'_>, ConfigError> {
        let missing = |variable| {
            ConfigError::new(variable, "required by the dispatch and executor functions")
        };
        Ok(JobsConfig {
            queue_url: self
                .jobs_queue_url
                .as_deref()
                .ok_or_else(|| missing("JOBS_QUEUE_URL"))?,
            // Present at start; read through `App::secrets` when used (it may be rotated).
            token_secret: self
                .secrets
                .decision_token_secret
                .as_ref()
                .map(|_| ())
                .ok_or_else(|| missing("DECISION_TOKEN_SECRET"))?,
            public_base_url: self
                .public_base_url
                .as_deref()
                .ok_or_else(|| missing("PUBLIC_BASE_URL"))?,
        })
    }
}

/// Countersign's functions, for [`Config::check_for`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Function {
    /// The HTTP API's approvals routes (functions/api).
    Api,
    /// `GET /approvals/{id}`, held or not (functions/read): its own function, so that held
    /// reads can never take the concurrency the other routes and the jobs need.
    Read,
    Decide,
    Webhook,
    Dispatch,
    Executor,
    Sweeper,
    Reconciler,
}

impl Function {
    /// Every function the template deploys.
    pub const ALL: [Function; 8] = [
        Self::Api,
        Self::Read,
        Self::Decide,
        Self::Webhook,
        Self::Dispatch,
        Self::Executor,
        Self::Sweeper,
        Self::Reconciler,
    ];

    /// Its name as the `Function` dimension of its metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Api => "api",
            Self::Read => "read",
            Self::Decide => "decide",
            Self::Webhook => "webhook",
            Self::Dispatch => "dispatch",
            Self::Executor => "executor",
            Self::Sweeper => "sweeper",
            Self::Reconciler => "reconciler",
        }
    }
}

/// Whether `url` is https, or http on loopback (a browser's secure contexts).
fn secure_origin(url: &str) -> bool {
    let Ok(url) = url::Url::parse(url) else {
        return false;
    };
    match (url.scheme(), url.host()) {
        ("https", _) => true,
        ("http", Some(url::Host::Ipv4(ip))) => ip.is_loopback(),
        ("http", Some(url::Host::Ipv6(ip))) => ip.is_loopback(),
        ("http", Some(url::Host::Domain(name))) => name == "localhost",
        _ => false,
    }
}

/// The configuration of jobs: where they queue and where review links point. `NOTIFIER_URL`
/// is optional: without it, no notify job is made (see the dispatcher).
#[derive(Debug, Clone, Copy)]
pub struct JobsConfig<'a> {
    pub queue_url: &'a str,
    /// `DECISION_TOKEN_SECRET` is set (its value is read through `App::secrets`).
    pub token_secret: (),
    pub public_base_url: &'a str,
}

#[cfg(test)]
mod tests {
    use super::super::tests::{KEYS, TARGETS, config};
    use super::*;

    #[test]
    fn each_function_requires_only_what_it_uses() {
        let bare = config(&[]).unwrap();
        let missing = |f| bare.check_for(f).unwrap_err().variable;
        assert_eq!(missing(Function::Api), "DECISION_TOKEN_SECRET");
        assert_eq!(missing(Function::Decide), "DECISION_TOKEN_SECRET");
        assert!(
            bare.check_for(Function::Webhook).is_ok(),
            "a deployment without webhooks starts"
        );
        assert_eq!(missing(Function::Dispatch), "JOBS_QUEUE_URL");
        assert_eq!(missing(Function::Executor), "JOBS_QUEUE_URL");
        let keys = config(&[KEYS]).unwrap();
        assert_eq!(
            keys.check_for(Function::Api).unwrap_err().variable,
            "DECISION_TOKEN_SECRET",
            "page cursors are signed"
        );
        let secret = ("DECISION_TOKEN_SECRET", "s".repeat(32));
        let secret = (secret.0, secret.1.as_str());
        assert_eq!(
            config(&[KEYS, secret])
                .unwrap()
                .check_for(Function::Api)
                .unwrap_err()
                .variable,
            "ACTION_TARGETS"
        );
        assert_eq!(
            keys.check_for(Function::Decide).unwrap_err().variable,
            "DECISION_TOKEN_SECRET"
        );
        assert!(
            config(&[KEYS, TARGETS, secret])
                .unwrap()
                .check_for(Function::Api)
                .is_ok()
        );
        let queue = ("JOBS_QUEUE_URL", "http://localhost/q");
        let key = (
            "CERTIFICATE_KEY_ARN",
            "arn:aws:kms:us-east-1:123456789012:key/2f1d8e63-5a8f-4a6c-9d0e-1b2c3d4e5f60",
        );
        assert!(
            config(&[queue, key])
                .unwrap()
                .check_for(Function::Dispatch)
                .is_ok()
        );
        assert_eq!(
            config(&[queue])
                .unwrap()
                .check_for(Function::Dispatch)
                .unwrap_err()
                .variable,
            "CERTIFICATE_KEY_ARN",
            "the dispatch function signs certificates"
        );
        assert_eq!(
            config(&[("CERTIFICATE_KEY_ARN", "alias/countersign")])
                .unwrap_err()
                .variable,
            "CERTIFICATE_KEY_ARN"
        );
        assert_eq!(
            config(&[queue])
                .unwrap()
                .check_for(Function::Executor)
                .unwrap_err()
                .variable,
            "DECISION_TOKEN_SECRET",
            "NOTIFIER_URL is optional (a Slack- or GitHub-only deployment)"
        );
    }

    #[test]
    fn the_executor_and_the_sweeper_require_what_they_act_with() {
        let slack = r#"{"acme": {"signing_secret": "s3cr3t", "channel": "C0123ABC", "users": {"U1X": "a@x.io"}}}"#;
        let jobs = [
            ("JOBS_QUEUE_URL", "http://localhost/q"),
            ("NOTIFIER_URL", "http://localhost/n"),
            ("PUBLIC_BASE_URL", "https://x.example"),
            ("DECISION_TOKEN_SECRET", "0123456789abcdef0123456789abcdef"),
            TARGETS,
        ];
        let without = config(&[jobs.as_slice(), &[("SLACK", slack)]].concat()).unwrap();
        assert_eq!(
            without.check_for(Function::Executor).unwrap_err().variable,
            "SLACK_BOT_TOKENS"
        );
        // The webhook function needs no token: it only verifies clicks.
        let webhook = config(&[("SLACK", slack)]).unwrap();
        assert!(webhook.check_for(Function::Webhook).is_ok());
        assert!(webhook.start_warnings(Function::Webhook).is_empty());
        let tokens = ("SLACK_BOT_TOKENS", r#"{"acme": "xoxb-1-2"}"#);
        let with = config(&[jobs.as_slice(), &[("SLACK", slack), tokens]].concat()).unwrap();
        assert!(with.check_for(Function::Executor).is_ok());
        assert!(
            with.check_for(Function::Sweeper).is_ok(),
            "no GitHub tenant"
        );
    }

    #[test]
    fn the_decide_function_names_each_tenant_whose_links_are_bearer_credentials() {
        let secret = ("DECISION_TOKEN_SECRET", "s".repeat(32));
        let secret = (secret.0, secret.1.as_str());
        let keys = (
            "API_KEYS",
            "acme=k_acme_0123456789abcdef,globex=k_globex_0123456789abcdef",
        );
        let oidc = (
            "OIDC",
            r#"{"acme": {"issuer": "https://idp.acme.example", "client_id": "c",
                         "client_secret": "a-client-secret"}}"#,
        );
        let without = config(&[keys, secret]).unwrap();
        let warnings = without.start_warnings(Function::Decide);
        assert!(warnings.iter().any(|w| {
            w.starts_with("review links for tenant acme are bearer credentials: configure OIDC")
        }));
        assert!(warnings.iter().any(|w| w.contains("tenant globex")));
        let with = config(&[keys, secret, oidc]).unwrap();
        assert_eq!(
            with.check_for(Function::Decide).unwrap_err().variable,
            "PUBLIC_BASE_URL",
            "sign-in's redirect URI"
        );
        let warnings = with.start_warnings(Function::Decide);
        assert!(
            !warnings.iter().any(|w| w.contains("tenant acme")),
            "{warnings:?}"
        );
        assert!(warnings.iter().any(|w| w.contains("tenant globex")));
        let plain = ("PUBLIC_BASE_URL", "http://approvals.example.com");
        assert_eq!(
            config(&[keys, secret, oidc, plain])
                .unwrap()
                .check_for(Function::Decide)
                .unwrap_err()
                .variable,
            "PUBLIC_BASE_URL",
            "the session cookie is Secure"
        );
        let loopback = ("PUBLIC_BASE_URL", "http://127.0.0.1:3000");
        assert!(
            config(&[keys, secret, oidc, loopback])
                .unwrap()
                .check_for(Function::Decide)
                .is_ok()
        );
        let base = ("PUBLIC_BASE_URL", "https://approvals.example.com");
        assert!(
            config(&[keys, secret, oidc, base])
                .unwrap()
                .check_for(Function::Decide)
                .is_ok()
        );
        assert!(without.start_warnings(Function::Api).is_empty());
        // preferred_username, opted into, is named at every start (review of v6, finding 9).
        let mutable = (
            "OIDC",
            r#"{"acme": {"issuer": "https://idp.acme.example", "client_id": "c",
                         "client_secret": "a-client-secret", "identity_claim": "preferred_username",
                         "allow_preferred_username": true}}"#,
        );
        let warnings = config(&[keys, secret, mutable, base])
            .unwrap()
            .start_warnings(Function::Decide);
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("tenant acme takes preferred_username")),
            "{warnings:?}"
        );
    }
}
