//! `GITHUB`: each tenant's GitHub App, read once at start (and again on each secrets refresh).
//! Every problem names the tenant and the field, and never quotes the private key or the
//! webhook secret.

use std::collections::BTreeMap;
use std::fmt;

use jsonwebtoken::EncodingKey;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::domain::{
    Approver, CreateRefusal, CreateRequest, Entries, GITHUB_DEPLOYMENT, OneOrMany, Policy,
    PolicyRefusal, TenantId, parse_config_json,
};

/// GitHub's REST API, unless a tenant says otherwise (GitHub Enterprise Server; tests).
pub const DEFAULT_API_URL: &str = "https://api.github.com";
/// How long a round waits for its decision unless the environment says otherwise.
pub const DEFAULT_EXPIRES_IN_SECONDS: i64 = 86_400;
/// GitHub fails a protection rule left waiting 30 days: the approval must end before, and its
/// answer reach GitHub.
pub const MAX_EXPIRES_IN_SECONDS: i64 = 29 * 86_400;

/// The App's webhook secret: never printed, never logged.
#[derive(Clone, PartialEq, Eq)]
pub struct GithubSecret(String);

impl GithubSecret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for GithubSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("GithubSecret(<redacted>)")
    }
}

/// The App's private key, parsed once: it signs the App's JWTs.
#[derive(Clone)]
pub struct AppKey(EncodingKey);

impl AppKey {
    pub fn encoding_key(&self) -> &EncodingKey {
        &self.0
    }
}

impl fmt::Debug for AppKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AppKey(<redacted>)")
    }
}

/// An environment whose waiting jobs are decided through Countersign.
#[derive(Debug, Clone, PartialEq)]
pub struct GithubEnvironment {
    pub approvers: Vec<Approver>,
    /// The quorum policy as configured: checked at start against a requester nobody is, and
    /// against each deployment's requester when its round opens.
    pub policy: Option<Value>,
    pub expires_in_seconds: i64,
    /// `"unmapped_senders": "allow"`: a round whose sender `users` does not map (a bot, a merge
    /// queue, a schedule) opens with the sender as `github:{login}`, and says so. Left out, or
    /// `"reject"`: it is answered `rejected` (no requester known, separation of duties cannot
    /// hold).
    pub allow_unmapped_senders: bool,
}

impl GithubEnvironment {
    /// The round's policy for a deployment requested by `requester` (`None`: one approve
    /// decides), or why it cannot be approved without the requester's own vote.
    pub fn policy_for(&self, requester: &Approver) -> Result<Option<Policy>, String> {
        let Some(policy) = &self.policy else {
            return Ok(None);
        };
        match Policy::parse(policy, &self.approvers, requester) {
            Ok(policy) => Ok(Some(policy)),
            Err(PolicyRefusal::Unsatisfiable(_)) => Err(format!(
                "the environment's policy can only be met with the vote of the deployment's \
                 requester ({})",
                requester.as_str()
            )),
            Err(PolicyRefusal::Invalid(errors)) => {
                Err(format!("the policy is invalid: {errors:?}"))
            }
        }
    }
}

/// One tenant's GitHub App.
#[derive(Debug, Clone)]
pub struct GithubApp {
    pub app_id: u64,
    /// From `GITHUB`, or from `GITHUB_PRIVATE_KEYS` so that the function that only verifies
    /// GitHub's deliveries (webhook) never holds it; the executor's and the sweeper's starts
    /// require it.
    pub private_key: Option<AppKey>,
    /// The webhook secrets: one, or the new and the old while it is rotated.
    pub webhook_secrets: Vec<GithubSecret>,
    /// Without a trailing slash.
    pub api_url: String,
    pub environments: BTreeMap<String, GithubEnvironment>,
    /// GitHub user id → the approver it is. Identity comes from here only.
    pub users: BTreeMap<u64, Approver>,
}

impl GithubApp {
    /// The approver a GitHub user is, if mapped.
    pub fn user(&self, github_id: u64) -> Option<&Approver> {
        self.users.get(&github_id)
    }

    /// The entry of an environment, by its name in any case (GitHub's environment names are
    /// not case-sensitive: `Production` and `production` are one environment).
    pub fn environment(&self, name: &str) -> Option<&GithubEnvironment> {
        self.environments.get(name).or_else(|| {
            let wanted = name.to_lowercase();
            self.environments
                .iter()
                .find(|(configured, _)| configured.to_lowercase() == wanted)
                .map(|(_, environment)| environment)
        })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGithubApp {
    app_id: u64,
    private_key: Option<String>,
    webhook_secret: OneOrMany,
    api_url: Option<String>,
    #[serde(default)]
    environments: Option<Entries<RawEnvironment>>,
    #[serde(default)]
    users: Option<Entries<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEnvironment {
    approvers: Value,
    policy: Option<Value>,
    expires_in_seconds: Option<Value>,
    unmapped_senders: Option<String>,
}

/// Parses `GITHUB`: `{"<tenant>": {"app_id", "private_key", "webhook_secret", "api_url"?,
/// "environments": {"<name>": {"approvers", "policy"?, "expires_in_seconds"?}}, "users":
/// {"<GitHub user id>": "<approver>"}}}`.
pub fn parse_github(raw: &str) -> Result<BTreeMap<TenantId, GithubApp>, String> {
    let tenants: Entries<RawGithubApp> = parse_config_json(
        raw,
        "each tenant maps to an object: app_id (a number), private_key, webhook_secret, \
         api_url (strings), environments and users (objects)",
    )?;
    let mut apps = BTreeMap::new();
    for (tenant, raw) in tenants.0 {
        let tenant_id = TenantId::parse(&tenant).map_err(|e| {
            format!(
                "a key that is not a tenant id (never quoted: it may be a value put there): {e}"
            )
        })?;
        let app = parse_app(raw).map_err(|e| format!("{tenant}: {e}"))?;
        apps.insert(tenant_id, app);
    }
    Ok(apps)
}

/// An App's private key, parsed. Never quoted: the message says what is wrong, not what was
/// given.
fn app_key(pem: &str) -> Result<AppKey, String> {
    EncodingKey::from_rsa_pem(pem.as_bytes())
        .map(AppKey)
        .map_err(|_| {
            "private_key: not an RSA private key in PEM (-----BEGIN RSA PRIVATE KEY----- or \
             -----BEGIN PRIVATE KEY-----, as GitHub gives it)"
                .to_owned()
        })
}

/// Parses `GITHUB_PRIVATE_KEYS`: `{"<tenant>": "-----BEGIN …"}`, each tenant's App key apart
/// from the rest of `GITHUB` (see [`GithubApp::private_key`]).
pub fn parse_github_private_keys(raw: &str) -> Result<BTreeMap<TenantId, AppKey>, String> {
    let tenants: Entries<String> =
        parse_config_json(raw, "each tenant maps to its App's private key, a string")?;
    let mut keys = BTreeMap::new();
    for (tenant, pem) in tenants.0 {
        let tenant_id = TenantId::parse(&tenant).map_err(|e| {
            format!(
                "a key that is not a tenant id (never quoted: it may be a value put there): {e}"
            )
        })?;
        keys.insert(
            tenant_id,
            app_key(&pem).map_err(|e| format!("{tenant}: {e}"))?,
        );
    }
    Ok(keys)
}

fn parse_app(raw: RawGithubApp) -> Result<GithubApp, String> {
    if raw.app_id == 0 {
        return Err("app_id: the App's id, a positive number".to_owned());
    }
    let private_key = raw.private_key.as_deref().map(app_key).transpose()?;
    let webhook_secrets = raw
        .webhook_secret
        .into_vec()
        .into_iter()
        .map(|secret| {
            if secret.is_empty() || secret.chars().any(|c| c.is_whitespace() || c.is_control()) {
                Err("webhook_secret: the App's webhook secret, without spaces".to_owned())
            } else {
                Ok(GithubSecret(secret))
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    if webhook_secrets.is_empty() {
        return Err("webhook_secret: at least one".to_owned());
    }
    let api_url = raw.api_url.unwrap_or_else(|| DEFAULT_API_URL.to_owned());
    // Installation tokens travel to it: https, but for a loopback address (a local fake).
    let loopback =
        |url: &url::Url| matches!(url.host_str(), Some("127.0.0.1" | "localhost" | "[::1]"));
    match url::Url::parse(&api_url) {
        Ok(url)
            if (url.scheme() == "https" || (url.scheme() == "http" && loopback(&url)))
                && url.query().is_none()
                && url.fragment().is_none() => {}
        _ => {
            return Err(
                "api_url: must be an https URL (http only on a loopback address)".to_owned(),
            );
        }
    }
    let mut users: BTreeMap<u64, Approver> = BTreeMap::new();
    for (user, approver) in raw.users.map(|u| u.0).unwrap_or_default() {
        let id: u64 = user
            .parse()
            .ok()
            .filter(|id| *id > 0 && !user.starts_with('0'))
            .ok_or_else(|| format!("users: {user:?} is not a GitHub user id (a number)"))?;
        let approver = Approver::parse(&approver).map_err(|e| format!("users: {user}: {e}"))?;
        if let Some((other, _)) = users
            .iter()
            .find(|(_, a)| a.identity() == approver.identity())
        {
            return Err(format!(
                "users: {other} and {user} are both mapped to {:?}: one person, one GitHub user",
                approver.as_str()
            ));
        }
        users.insert(id, approver);
    }
    let mut environments = BTreeMap::new();
    for (name, environment) in raw.environments.map(|e| e.0).unwrap_or_default() {
        if name.is_empty() || name.chars().count() > 255 || name.chars().any(char::is_control) {
            return Err(
                "environments: a key is not an environment name (1 to 255 characters \
                        without control characters)"
                    .to_owned(),
            );
        }
        if let Some(other) = environments
            .keys()
            .find(|other: &&String| other.to_lowercase() == name.to_lowercase())
        {
            return Err(format!(
                "environments: {other} and {name} are one environment (GitHub's names are not \
                 case-sensitive)"
            ));
        }
        let parsed =
            parse_environment(environment).map_err(|e| format!("environments: {name}: {e}"))?;
        environments.insert(name, parsed);
    }
    Ok(GithubApp {
        app_id: raw.app_id,
        private_key,
        webhook_secrets,
        api_url: api_url.trim_end_matches('/').to_owned(),
        environments,
        users,
    })
}

/// Checked as the approval it opens will be: the same rules as a create's approvers, policy and
/// expiry, with the expiry at most 29 days.
fn parse_environment(raw: RawEnvironment) -> Result<GithubEnvironment, String> {
    let mut body = json!({
        "action": {"type": GITHUB_DEPLOYMENT},
        "approvers": raw.approvers,
    });
    if let Some(expires) = &raw.expires_in_seconds {
        body["expires_in_seconds"] = expires.clone();
    }
    let request = CreateRequest::parse(&body, |_| true).map_err(|refusal| match refusal {
        CreateRefusal::Invalid(errors) => errors
            .iter()
            .map(|e| format!("{}: {}", e.field, e.message))
            .collect::<Vec<_>>()
            .join("; "),
        CreateRefusal::UnknownActionType(kind) => format!("unknown action type {kind}"),
    })?;
    if request.approvers.is_empty() {
        return Err(
            "approvers: must list 1 to 20 approvers (where the tenant's approval policy chooses \
             them, an environment needs no entry)"
                .to_owned(),
        );
    }
    let expires_in_seconds = match raw.expires_in_seconds {
        None => DEFAULT_EXPIRES_IN_SECONDS,
        Some(_) if request.expires_in_seconds > MAX_EXPIRES_IN_SECONDS => {
            return Err(format!(
                "expires_in_seconds: at most {MAX_EXPIRES_IN_SECONDS} (29 days: GitHub fails a \
                 rule left waiting 30)"
            ));
        }
        Some(_) => request.expires_in_seconds,
    };
    if let Some(policy) = &raw.policy {
        // Nobody is this requester: what is checked here is the policy's shape; whether the
        // deployment's own requester could meet it alone is checked when its round opens.
        let nobody = Approver::parse("github:nobody").map_err(|e| e.0.to_owned())?;
        if let Err(PolicyRefusal::Invalid(errors)) =
            Policy::parse(policy, &request.approvers, &nobody)
        {
            return Err(errors
                .iter()
                .map(|e| format!("{}: {}", e.field, e.message))
                .collect::<Vec<_>>()
                .join("; "));
        }
    }
    let allow_unmapped_senders = match raw.unmapped_senders.as_deref() {
        None | Some("reject") => false,
        Some("allow") => true,
        Some(_) => return Err("unmapped_senders: \"allow\" or \"reject\"".to_owned()),
    };
    Ok(GithubEnvironment {
        approvers: request.approvers,
        policy: raw.policy.filter(|p| !p.is_null()),
        expires_in_seconds,
        allow_unmapped_senders,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A 2048-bit RSA key made for the tests only (PKCS#8; `app_key.pkcs1.pem` is the same key
    /// as PKCS#1, `app_key.pub.pem` its public half): it signs nothing anywhere else.
    pub(crate) const TEST_KEY: &str = include_str!("testdata/app_key.pem");
    pub(crate) const TEST_KEY_PKCS1: &str = include_str!("testdata/app_key.pkcs1.pem");

    const SECRET: &str = "gh-webhook-SECRETVALUE";

    fn app() -> String {
        json!({"acme": {
            "app_id": 123,
            "private_key": TEST_KEY,
            "webhook_secret": SECRET,
            "environments": {"production": {"approvers": ["alice@acme", "bob@acme", "carol@acme"],
                "policy": {"rules": [{"name": "two", "approvers": ["alice@acme", "bob@acme", "carol@acme"], "min_approvals": 2}]}}},
            "users": {"1001": "alice@acme", "1002": "dave@acme"}
        }})
        .to_string()
    }

    fn with(field: &str, value: Value) -> String {
        let mut config: Value = serde_json::from_str(&app()).unwrap();
        config["acme"][field] = value;
        config.to_string()
    }

    fn refused(raw: &str) -> String {
        let problem = parse_github(raw).unwrap_err();
        assert!(
            !problem.contains("SECRETVALUE") && !problem.contains("PRIVATE KEY-----\n"),
            "a secret quoted: {problem}"
        );
        problem
    }

    #[test]
    fn a_tenant_app_is_read_with_its_environments_and_users() {
        let apps = parse_github(&app()).unwrap();
        let acme = &apps[&TenantId::parse("acme").unwrap()];
        assert_eq!(acme.app_id, 123);
        assert_eq!(acme.api_url, DEFAULT_API_URL);
        assert_eq!(acme.webhook_secrets[0].expose(), SECRET);
        assert_eq!(acme.user(1001).unwrap().as_str(), "alice@acme");
        assert!(acme.user(1003).is_none());
        let production = &acme.environments["production"];
        assert_eq!(production.expires_in_seconds, DEFAULT_EXPIRES_IN_SECONDS);
        let carol = Approver::parse("carol@acme").unwrap();
        assert_eq!(
            production.policy_for(&carol).unwrap().unwrap().rules.len(),
            1
        );
        let pkcs1 = parse_github(&with("private_key", json!(TEST_KEY_PKCS1)));
        assert!(pkcs1.is_ok(), "a PKCS#1 key is read too");
        let debug = format!("{acme:?}");
        assert!(
            !debug.contains("SECRETVALUE") && !debug.contains("PRIVATE"),
            "{debug}"
        );
    }

    #[test]
    fn a_policy_only_the_requester_could_meet_is_told_when_the_round_opens() {
        let raw = with(
            "environments",
            json!({"solo": {"approvers": ["alice@acme", "bob@acme"],
                "policy": {"rules": [{"name": "both", "approvers": ["alice@acme", "bob@acme"], "min_approvals": 2}]}}}),
        );
        let apps = parse_github(&raw).unwrap();
        let solo = &apps[&TenantId::parse("acme").unwrap()].environments["solo"];
        let alice = Approver::parse("Alice@acme").unwrap();
        assert!(solo.policy_for(&alice).unwrap_err().contains("requester"));
        let eve = Approver::parse("eve@acme").unwrap();
        assert!(solo.policy_for(&eve).is_ok());
    }

    #[test]
    fn bad_github_configuration_is_refused_naming_the_field_without_quoting_a_secret() {
        let cases = [
            (
                with("private_key", json!("not a key SECRETVALUE")),
                "private_key",
            ),
            (
                with(
                    "private_key",
                    json!("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----"),
                ),
                "private_key",
            ),
            (with("app_id", json!(0)), "app_id"),
            (with("webhook_secret", json!("")), "webhook_secret"),
            (with("webhook_secret", json!([])), "webhook_secret"),
            (with("api_url", json!("ftp://x")), "api_url"),
            (
                with("api_url", json!("http://ghe.acme.internal/api/v3")),
                "https",
            ),
            (with("colour", json!("red")), "unknown field"),
            (
                with(
                    "environments",
                    json!({"prod": {"approvers": ["a@x"], "expires_in_seconds": 2_592_000}}),
                ),
                "29 days",
            ),
            (
                with(
                    "environments",
                    json!({"prod": {"approvers": ["a@x"], "expires_in_seconds": 30}}),
                ),
                "expires_in_seconds",
            ),
            (
                with("environments", json!({"prod": {"approvers": []}})),
                "approvers",
            ),
            (
                with(
                    "environments",
                    json!({"prod": {"approvers": ["a@x"], "reviewers": 2}}),
                ),
                "unknown field",
            ),
            (
                with(
                    "environments",
                    json!({"prod": {"approvers": ["a@x"],
                    "policy": {"rules": [{"name": "r", "approvers": ["b@x"], "min_approvals": 1}]}}}),
                ),
                "must be listed",
            ),
            (
                with("users", json!({"octocat": "a@x"})),
                "not a GitHub user id",
            ),
            (
                with("users", json!({"1": "a@x", "2": "A@X"})),
                "both mapped",
            ),
            (with("users", json!({"1": "a\u{200b}@x"})), "users: 1"),
        ];
        for (raw, expected) in cases {
            let problem = refused(&raw);
            assert!(
                problem.starts_with("acme: ") || problem.contains(expected),
                "{problem}"
            );
            assert!(problem.contains(expected), "{expected}: {problem}");
        }
        // A user id written twice: serde would keep the last silently.
        let twice = app().replace(r#""1002":"dave@acme""#, r#""1001":"dave@acme""#);
        assert!(refused(&twice).contains("duplicate key"), "{twice}");
        assert!(refused("[]").contains("expected shape"));
        // A key that is not a tenant id is not quoted: it may be a value put in the wrong place.
        let bad = refused(&app().replace(r#""acme""#, r#""bad tenant""#));
        assert!(
            bad.contains("not a tenant id") && !bad.contains("bad tenant"),
            "{bad}"
        );
    }
}
