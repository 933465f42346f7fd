//! `EVENT_SUBSCRIPTIONS`: each tenant's callback subscription, its URL, signing secrets and
//! the event types it receives. Read as one of the secret-bearing variables (`secrets.rs`),
//! which is why it parses a raw value rather than a lookup.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::http_url;
use crate::domain::trail::EventType;
use crate::domain::{OneOrMany, TenantId, parse_config_json};
use crate::webhook::WebhookSecret;

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

pub(super) fn parse_subscriptions(raw: &str) -> Result<BTreeMap<TenantId, Subscription>, String> {
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

#[cfg(test)]
mod tests {
    use super::super::tests::{KEYS, TARGETS, config};
    use super::*;

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
    }
}
