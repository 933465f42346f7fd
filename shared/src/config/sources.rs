//! `WEBHOOK_SOURCES`: each provider webhook source, the tenant its events belong to and the
//! secrets its deliveries are signed with. Read as one of the secret-bearing variables
//! (`secrets.rs`), which is why it parses a raw value rather than a lookup.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::domain::{TenantId, parse_config_json};
use crate::webhook::WebhookSecret;

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

pub(super) fn parse_webhook_sources(raw: &str) -> Result<BTreeMap<String, WebhookSource>, String> {
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

#[cfg(test)]
mod tests {
    use super::super::tests::{KEYS, TARGETS, config};

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
}
