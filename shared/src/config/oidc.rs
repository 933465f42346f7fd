//! `OIDC`: each tenant's OpenID Provider and its registration there, for approvers who sign
//! in (docs/SIGN-IN.md). Validated as the other
//! secret-bearing variables are: unknown fields refused, errors naming the tenant and the field,
//! never quoting a value (the client secret least of all).

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::domain::{TenantId, parse_config_json};
use crate::oidc::{DEFAULT_IDENTITY_CLAIM, IDENTITY_CLAIMS, OidcSettings};

/// A tenant's sign-in: its provider, and how recent an authentication deciding needs.
#[derive(Debug, Clone)]
pub struct OidcTenant {
    pub settings: OidcSettings,
    /// A session whose `auth_time` is older must sign in again before deciding.
    pub max_auth_age_seconds: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOidc {
    issuer: String,
    client_id: String,
    client_secret: String,
    identity_claim: Option<String>,
    scopes: Option<Vec<String>>,
    max_auth_age_seconds: Option<u64>,
    /// `preferred_username` is mutable at many providers (a user may rename themselves into
    /// another person's name): taken as the identity claim only when this says so.
    allow_preferred_username: Option<bool>,
}

/// An issuer is `https`, or `http` on the loopback interface only (a provider on the same
/// machine, in development and tests).
fn issuer(raw: &str) -> Result<String, &'static str> {
    let url = url::Url::parse(raw).map_err(|_| "not a URL")?;
    let loopback = matches!(
        url.host(),
        Some(url::Host::Ipv4(ip)) if ip.is_loopback()
    ) || matches!(url.host(), Some(url::Host::Ipv6(ip)) if ip.is_loopback())
        || url.host_str() == Some("localhost");
    match url.scheme() {
        "https" => {}
        "http" if loopback => {}
        _ => return Err("must be https (http only on loopback)"),
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err("must have no query or fragment");
    }
    if raw.len() > crate::domain::SignIn::MAX_ISSUER_BYTES {
        // Every vote cast after sign-in stores it.
        return Err("at most 128 bytes");
    }
    // As given: an ID token's `iss` must equal it exactly, and some providers' end in a slash
    // (Auth0's `https://{domain}/`).
    Ok(raw.to_owned())
}

pub fn parse_oidc(raw: &str) -> Result<BTreeMap<TenantId, OidcTenant>, String> {
    let raw: BTreeMap<String, RawOidc> = parse_config_json(
        raw,
        "each tenant maps to {\"issuer\", \"client_id\", \"client_secret\", \"identity_claim\"?, \
         \"scopes\"?, \"max_auth_age_seconds\"?, \"allow_preferred_username\"?}",
    )?;
    let mut parsed = BTreeMap::new();
    for (tenant, oidc) in raw {
        let tenant_id = TenantId::parse(&tenant).map_err(|e| {
            format!(
                "a key that is not a tenant id (never quoted: it may be a value put there): {e}"
            )
        })?;
        let issuer = issuer(&oidc.issuer).map_err(|e| format!("{tenant}: issuer: {e}"))?;
        if oidc.client_id.trim().is_empty() {
            return Err(format!("{tenant}: client_id: empty"));
        }
        if oidc.client_secret.len() < 8 {
            return Err(format!("{tenant}: client_secret: too short"));
        }
        let identity_claim = oidc
            .identity_claim
            .unwrap_or_else(|| DEFAULT_IDENTITY_CLAIM.to_owned());
        if !IDENTITY_CLAIMS.contains(&identity_claim.as_str()) {
            return Err(format!(
                "{tenant}: identity_claim: one of {}",
                IDENTITY_CLAIMS.join(", ")
            ));
        }
        if identity_claim == "preferred_username" && oidc.allow_preferred_username != Some(true) {
            return Err(format!(
                "{tenant}: identity_claim: preferred_username is mutable at many providers (a \
                 person may rename themselves into someone else's name): set \
                 \"allow_preferred_username\": true to take it anyway, or use email or sub"
            ));
        }
        let scopes = oidc
            .scopes
            .unwrap_or_else(|| vec!["openid".to_owned(), "email".to_owned()]);
        if !scopes.iter().any(|s| s == "openid") {
            return Err(format!("{tenant}: scopes: must include openid"));
        }
        if scopes
            .iter()
            .any(|s| s.is_empty() || s.chars().any(|c| c.is_whitespace() || c.is_control()))
        {
            return Err(format!("{tenant}: scopes: one scope per entry, no spaces"));
        }
        if oidc.max_auth_age_seconds == Some(0) {
            return Err(format!("{tenant}: max_auth_age_seconds: at least 1"));
        }
        parsed.insert(
            tenant_id,
            OidcTenant {
                settings: OidcSettings {
                    issuer,
                    client_id: oidc.client_id,
                    client_secret: oidc.client_secret,
                    identity_claim,
                    scopes,
                },
                max_auth_age_seconds: oidc.max_auth_age_seconds,
            },
        );
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "s3cr3t-client-secret";

    fn one(entry: serde_json::Value) -> Result<BTreeMap<TenantId, OidcTenant>, String> {
        parse_oidc(&serde_json::json!({"acme": entry}).to_string())
    }

    #[test]
    fn a_tenant_names_its_provider_and_the_defaults_fill_the_rest() {
        let parsed = one(serde_json::json!({
            "issuer": "https://idp.example.com/", "client_id": "countersign",
            "client_secret": SECRET,
        }))
        .unwrap();
        let acme = &parsed[&TenantId::parse("acme").unwrap()];
        assert_eq!(
            acme.settings.issuer, "https://idp.example.com/",
            "as given: the provider's `iss` must match it exactly"
        );
        assert_eq!(acme.settings.identity_claim, "email");
        assert_eq!(acme.settings.scopes, ["openid", "email"]);
        assert_eq!(acme.max_auth_age_seconds, None);
        assert!(
            !format!("{acme:?}").contains(SECRET),
            "Debug never shows the secret"
        );
        for loopback in [
            "http://127.0.0.1:8080",
            "http://localhost:9000",
            "http://[::1]:1",
        ] {
            let local =
                serde_json::json!({"issuer": loopback, "client_id": "c", "client_secret": SECRET});
            assert!(one(local).is_ok(), "{loopback}");
        }
    }

    #[test]
    fn a_malformed_entry_is_refused_naming_the_tenant_and_never_quoting_the_secret() {
        let base = serde_json::json!({"issuer": "https://idp.example.com", "client_id": "c",
                                      "client_secret": SECRET});
        let with = |key: &str, value: serde_json::Value| {
            let mut entry = base.clone();
            entry[key] = value;
            entry
        };
        for (entry, field) in [
            (with("issuer", "http://idp.example.com".into()), "issuer"),
            (
                with("issuer", "https://idp.example.com/?x=1".into()),
                "issuer",
            ),
            (with("issuer", "idp".into()), "issuer"),
            (
                with(
                    "issuer",
                    format!("https://{}.example.com", "i".repeat(120)).into(),
                ),
                "issuer",
            ),
            (with("client_id", " ".into()), "client_id"),
            (with("client_secret", "short".into()), "client_secret"),
            (with("identity_claim", "upn".into()), "identity_claim"),
            (with("scopes", serde_json::json!(["email"])), "scopes"),
            (
                with("scopes", serde_json::json!(["openid email"])),
                "scopes",
            ),
            (
                with("max_auth_age_seconds", 0.into()),
                "max_auth_age_seconds",
            ),
            (with("client_secrets", SECRET.into()), "client_secrets"),
            (
                with("identity_claim", "preferred_username".into()),
                "allow_preferred_username",
            ),
        ] {
            let error = one(entry).unwrap_err();
            assert!(error.contains(field), "{field}: {error}");
            assert!(!error.contains(SECRET), "{error}");
        }
        let mut opted_in = with("identity_claim", "preferred_username".into());
        opted_in["allow_preferred_username"] = true.into();
        assert!(one(opted_in).is_ok(), "an explicit opt-in");
        let error =
            parse_oidc(&serde_json::json!({"not a tenant!": base}).to_string()).unwrap_err();
        assert!(error.contains("not a tenant id"), "{error}");
    }
}
