//! `SLACK`: each tenant's Slack app, read once at start. Every problem names the variable and
//! the tenant, and never quotes a token or a secret (a serde message may quote the value it
//! could not read, so only the ones that name a field are passed on).

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;

use crate::domain::{Approver, Entries, OneOrMany, TenantId, parse_config_json};

/// Where Slack's Web API is, unless a tenant says otherwise (tests point it at a fake).
pub const DEFAULT_API_BASE_URL: &str = "https://slack.com/api";

/// A bot token or a signing secret: never printed, never logged.
#[derive(Clone, PartialEq, Eq)]
pub struct SlackSecret(String);

impl SlackSecret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SlackSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SlackSecret(<redacted>)")
    }
}

/// One tenant's Slack app.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlackApp {
    /// From `SLACK`, or from `SLACK_BOT_TOKENS` so that the functions that only verify Slack's
    /// requests (webhook) never hold it; the executor's start requires it.
    pub bot_token: Option<SlackSecret>,
    /// The app's signing secrets: one, or the new and the old while it is rotated.
    pub signing_secrets: Vec<SlackSecret>,
    /// The channel's id (`C…`, `G…`): `conversations.history` takes no name.
    pub channel: String,
    /// Slack user id → the approver it decides as. Nobody else decides from Slack.
    pub users: BTreeMap<String, Approver>,
    /// Without a trailing slash.
    pub api_base_url: String,
}

impl SlackApp {
    /// The approver a Slack user decides as, if mapped.
    pub fn approver(&self, slack_user: &str) -> Option<&Approver> {
        self.users.get(slack_user)
    }

    /// How a reply names `approver`: `<@U…>` (a mention Slack notifies) when `users` maps a
    /// Slack user to them, else their name, escaped.
    pub fn mention(&self, approver: &Approver) -> String {
        self.users
            .iter()
            .find(|(_, a)| a.same_identity(approver))
            .map_or_else(
                || super::message::escape(approver.as_str()),
                |(user, _)| format!("<@{user}>"),
            )
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSlackApp {
    bot_token: Option<String>,
    signing_secret: OneOrMany,
    channel: String,
    users: Entries<String>,
    api_base_url: Option<String>,
}

/// Parses `SLACK`: `{"<tenant>": {"bot_token"?, "signing_secret", "channel", "users",
/// "api_base_url"?}}` (a bot token left out is given in `SLACK_BOT_TOKENS`).
pub fn parse_slack(raw: &str) -> Result<BTreeMap<TenantId, SlackApp>, String> {
    let tenants: Entries<RawSlackApp> = parse_config_json(
        raw,
        "each tenant maps to an object of strings (bot_token, signing_secret, channel, \
         api_base_url) and users (an object of strings)",
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

fn secret(value: String, name: &str) -> Result<SlackSecret, String> {
    if value.is_empty() || value.chars().any(|c| c.is_whitespace() || c.is_control()) {
        Err(format!(
            "{name} is required: the app's {name}, without spaces"
        ))
    } else {
        Ok(SlackSecret(value))
    }
}

/// Parses `SLACK_BOT_TOKENS`: `{"<tenant>": "xoxb-…"}`, each tenant's bot token apart from the
/// rest of `SLACK` (see [`SlackApp::bot_token`]).
pub fn parse_slack_bot_tokens(raw: &str) -> Result<BTreeMap<TenantId, SlackSecret>, String> {
    let tenants: Entries<String> =
        parse_config_json(raw, "each tenant maps to its bot token, a string")?;
    let mut tokens = BTreeMap::new();
    for (tenant, token) in tenants.0 {
        let tenant_id = TenantId::parse(&tenant).map_err(|e| {
            format!(
                "a key that is not a tenant id (never quoted: it may be a value put there): {e}"
            )
        })?;
        tokens.insert(
            tenant_id,
            secret(token, "bot_token").map_err(|e| format!("{tenant}: {e}"))?,
        );
    }
    Ok(tokens)
}

fn parse_app(raw: RawSlackApp) -> Result<SlackApp, String> {
    let bot_token = raw
        .bot_token
        .map(|token| secret(token, "bot_token"))
        .transpose()?;
    let signing_secrets = raw
        .signing_secret
        .into_vec()
        .into_iter()
        .map(|s| secret(s, "signing_secret"))
        .collect::<Result<Vec<_>, _>>()?;
    if signing_secrets.is_empty() {
        return Err("signing_secret is required: at least one".to_owned());
    }
    if !is_slack_id(&raw.channel, &['C', 'G']) {
        return Err(format!(
            "channel: {:?} is not a channel id (C… or G…; conversations.history takes no name)",
            raw.channel
        ));
    }
    if raw.users.0.is_empty() {
        return Err("users: map at least one Slack user id to an approver".to_owned());
    }
    let mut users: BTreeMap<String, Approver> = BTreeMap::new();
    for (user, approver) in raw.users.0 {
        if !is_slack_id(&user, &['U', 'W']) {
            return Err(format!("users: {user:?} is not a Slack user id (U… or W…)"));
        }
        let approver = Approver::parse(&approver).map_err(|e| format!("users: {user}: {e}"))?;
        if let Some((other, _)) = users
            .iter()
            .find(|(_, a)| a.identity() == approver.identity())
        {
            return Err(format!(
                "users: {other} and {user} are both mapped to {:?}: one person, one Slack user",
                approver.as_str()
            ));
        }
        users.insert(user, approver);
    }
    let api_base_url = raw
        .api_base_url
        .unwrap_or_else(|| DEFAULT_API_BASE_URL.to_owned());
    match url::Url::parse(&api_base_url) {
        Ok(url) if matches!(url.scheme(), "http" | "https") => {}
        _ => return Err("api_base_url: must be an http or https URL".to_owned()),
    }
    Ok(SlackApp {
        bot_token,
        signing_secrets,
        channel: raw.channel,
        users,
        api_base_url: api_base_url.trim_end_matches('/').to_owned(),
    })
}

/// A Slack id: an upper-case letter of `kinds`, then upper-case letters and digits.
fn is_slack_id(raw: &str, kinds: &[char]) -> bool {
    raw.len() >= 3
        && raw.len() <= 32
        && raw.starts_with(kinds)
        && raw
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "xoxb-123-456-SECRETTOKEN";
    const SIGNING: &str = "8f742231b10e8888abcd99yyyzzz85a5";

    fn app(extra: &str, users: &str) -> String {
        format!(
            r#"{{"acme": {{"bot_token": "{TOKEN}", "signing_secret": "{SIGNING}", "channel": "C0123ABC", "users": {users}{extra}}}}}"#
        )
    }

    fn refused(raw: &str) -> String {
        let problem = parse_slack(raw).unwrap_err();
        assert!(
            !problem.contains("SECRETTOKEN") && !problem.contains("99yyyzzz"),
            "a secret quoted: {problem}"
        );
        problem
    }

    #[test]
    fn a_tenant_app_is_read_with_its_users() {
        let apps = parse_slack(&app("", r#"{"U01ALICE": "alice", "U02BOB": "bob"}"#)).unwrap();
        let acme = &apps[&TenantId::parse("acme").unwrap()];
        assert_eq!(
            acme.bot_token.as_ref().map(SlackSecret::expose),
            Some(TOKEN)
        );
        assert_eq!(acme.approver("U01ALICE").unwrap().as_str(), "alice");
        assert!(acme.approver("U03EVE").is_none());
        assert_eq!(acme.api_base_url, DEFAULT_API_BASE_URL);
        assert!(!format!("{acme:?}").contains("SECRETTOKEN"));
        let local = parse_slack(&app(
            r#", "api_base_url": "http://127.0.0.1:9/api/""#,
            r#"{"U01ALICE": "alice"}"#,
        ))
        .unwrap();
        assert_eq!(
            local[&TenantId::parse("acme").unwrap()].api_base_url,
            "http://127.0.0.1:9/api"
        );
    }

    #[test]
    fn bad_slack_configuration_is_refused_without_quoting_a_secret() {
        let cases = [
            (
                app("", r#"{"U01ALICE": "alice", "U01ALICE": "bob"}"#),
                "duplicate key \"U01ALICE\"",
            ),
            (
                app("", r#"{"U01ALICE": "alice", "U02BOB": "Alice"}"#),
                "both mapped",
            ),
            (
                app(r#", "colour": "red""#, r#"{"U01ALICE": "alice"}"#),
                "unknown field `colour`",
            ),
            (app("", "{}"), "at least one"),
            // One spelling per identity (issue 36): a hidden or compatibility character.
            (
                app("", r#"{"U01ALICE": "alice\u200b"}"#),
                "users: U01ALICE: must not contain format",
            ),
            (
                app("", r#"{"U01ALICE": "\uff41lice"}"#),
                "users: U01ALICE: must be in Unicode NFKC",
            ),
            (app("", r#"{"alice": "alice"}"#), "not a Slack user id"),
            (
                app(r#", "api_base_url": "ftp://x""#, r#"{"U01ALICE": "alice"}"#),
                "api_base_url",
            ),
            (
                format!(
                    r#"{{"acme": {{"bot_token": "{TOKEN}", "channel": "C0123", "users": {{}}}}}}"#
                ),
                "missing field `signing_secret`",
            ),
            (
                format!(
                    r#"{{"acme": {{"bot_token": "{TOKEN}", "signing_secret": "", "channel": "C0123", "users": {{"U1X": "a"}}}}}}"#
                ),
                "signing_secret is required",
            ),
            (
                format!(
                    r##"{{"acme": {{"bot_token": "{TOKEN}", "signing_secret": "{SIGNING}", "channel": "#general", "users": {{"U1X": "a"}}}}}}"##
                ),
                "not a channel id",
            ),
            (
                format!(r#"{{"acme": "{TOKEN}"}}"#),
                "not the expected shape",
            ),
            (
                format!(r#"{{"acme": {{"bot_token": 5, "signing_secret": "{SIGNING}"}}}}"#),
                "not the expected shape",
            ),
            (
                format!(r#"{{"acme": {{"bot_token": "{TOKEN}""#),
                "not valid JSON",
            ),
            ("[]".to_owned(), "not the expected shape"),
        ];
        for (raw, expected) in cases {
            let problem = refused(&raw);
            assert!(problem.contains(expected), "{raw}: {problem}");
        }
    }
}
