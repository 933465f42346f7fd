//! API keys → who is calling: a tenant, a principal (who holds the key) and roles. Keys are held
//! only as SHA-256 digests and compared in constant time.

use serde::Deserialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::domain::{Approver, KeyId, TenantId, parse_config_json};

mod table_keys;

pub use table_keys::{KeyCache, LAST_USED_INTERVAL_SECONDS, caller_for_record};

/// What a key may do (docs/API.md "Who may do what").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Create; read; cancel approvals it requested.
    Requester,
    /// Decide as its own principal only.
    Approver,
    /// Decide on behalf of any listed approver (a backend that authenticated the person).
    Decider,
    /// Retry and resolve executions; cancel any approval.
    Operator,
    /// Read.
    Reader,
}

impl Role {
    pub const ALL: [Role; 5] = [
        Role::Requester,
        Role::Approver,
        Role::Decider,
        Role::Operator,
        Role::Reader,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Requester => "requester",
            Role::Approver => "approver",
            Role::Decider => "decider",
            Role::Operator => "operator",
            Role::Reader => "reader",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == raw)
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

/// The holder of the key a request presented.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub tenant: TenantId,
    /// Who holds the key, in the same terms as approvers (an approval's `requested_by`).
    pub principal: Approver,
    roles: u8,
    /// A development key (the legacy `tenant=key` form): it stands for a whole team, so the key
    /// half of separation of duties does not apply to it (docs/API.md "Who may do what").
    development: bool,
    /// The table key it presented (`None` for the `API_KEYS` forms): the actor's `key_id`.
    pub key_id: Option<KeyId>,
}

impl Caller {
    pub fn new(tenant: TenantId, principal: Approver, roles: &[Role]) -> Self {
        Self {
            tenant,
            principal,
            roles: roles.iter().fold(0, |bits, r| bits | r.bit()),
            development: false,
            key_id: None,
        }
    }

    /// A development key: every role, the tenant as its principal.
    pub fn development(tenant: TenantId, principal: Approver) -> Self {
        Self {
            development: true,
            ..Self::new(tenant, principal, &Role::ALL)
        }
    }

    pub fn is_development(&self) -> bool {
        self.development
    }

    /// Who sent a vote, for the key half of separation of duties: the key's principal, or
    /// nobody for a development key (only the approver it names is then compared).
    pub fn vote_sender(&self) -> Option<Approver> {
        (!self.development).then(|| self.principal.clone())
    }

    pub fn has(&self, role: Role) -> bool {
        self.roles & role.bit() != 0
    }

    /// The names of its roles (what an approval policy sees as the requester's `roles`).
    pub fn role_names(&self) -> Vec<&'static str> {
        Role::ALL
            .into_iter()
            .filter(|r| self.has(*r))
            .map(Role::as_str)
            .collect()
    }
}

#[derive(Clone)]
pub struct ApiKeys {
    entries: Vec<(Caller, [u8; 32])>,
}

impl std::fmt::Debug for ApiKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print key material, not even digests.
        f.debug_struct("ApiKeys")
            .field("keys", &self.entries.len())
            .finish()
    }
}

/// One key of the JSON form.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyEntry {
    tenant: String,
    principal: String,
    roles: Vec<String>,
    key: String,
}

impl ApiKeys {
    /// The tenants these keys belong to.
    pub fn tenants(&self) -> impl Iterator<Item = &TenantId> {
        self.entries.iter().map(|(caller, _)| &caller.tenant)
    }

    /// Parses either the JSON form, `[{"tenant", "principal", "roles": [...], "key"}]`, or the
    /// development form: `tenant=key` pairs, comma-separated, each key with every role and the
    /// tenant as its principal. A key may be given as `sha256:<hex>` so the plain key need not
    /// sit in the environment.
    pub fn parse(raw: &str) -> Result<Self, String> {
        let mut entries = Vec::new();
        if raw.trim_start().starts_with('[') {
            // serde's message can quote a value (a key pasted in the wrong place): only where.
            let keys: Vec<KeyEntry> = parse_config_json(
                raw,
                "[{\"tenant\", \"principal\", \"roles\": [...], \"key\"}]",
            )?;
            for (i, entry) in keys.into_iter().enumerate() {
                let tenant = TenantId::parse(entry.tenant.trim())
                    .map_err(|e| format!("key {i}: tenant {}", e.0))?;
                let principal = Approver::parse(entry.principal.trim())
                    .map_err(|e| format!("key {i}: principal {}", e.0))?;
                let mut roles = Vec::new();
                for (j, role) in entry.roles.iter().enumerate() {
                    roles.push(Role::parse(role).ok_or_else(|| {
                        format!(
                            "key {i}: role {j} is not one of requester, approver, decider, operator, reader"
                        )
                    })?);
                }
                if roles.is_empty() {
                    return Err(format!("key {i}: no roles"));
                }
                // The party an approval gates must not be able to open it: a key that asks may
                // not also decide for anyone it names.
                if roles.contains(&Role::Requester) && roles.contains(&Role::Decider) {
                    return Err(format!(
                        "key {i}: requester and decider on one key would let a requester approve its own requests"
                    ));
                }
                let digest = digest(&tenant, entry.key.trim())?;
                entries.push((Caller::new(tenant, principal, &roles), digest));
            }
        } else {
            for pair in raw.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                let (tenant, key) = pair.split_once('=').ok_or_else(|| {
                    "expected tenant=key pairs separated by commas, or a JSON list".to_owned()
                })?;
                let tenant = TenantId::parse(tenant.trim()).map_err(|e| e.0.to_owned())?;
                let principal = Approver::parse(tenant.as_str()).map_err(|e| e.0.to_owned())?;
                let digest = digest(&tenant, key.trim())?;
                entries.push((Caller::development(tenant, principal), digest));
            }
        }
        for (i, (caller, digest)) in entries.iter().enumerate() {
            if entries[..i].iter().any(|(_, d)| d == digest) {
                return Err(format!(
                    "tenant {}: this key is already configured (one key, one holder)",
                    caller.tenant
                ));
            }
        }
        if entries.is_empty() {
            return Err("no keys configured".to_owned());
        }
        Ok(Self { entries })
    }

    /// The start-up warnings: one naming each development key's tenant.
    pub fn development_key_warnings(&self) -> Vec<String> {
        self.entries
            .iter()
            .filter(|(caller, _)| caller.development)
            .map(|(caller, _)| {
                format!(
                    "development key for tenant {}: every role, no separation of duties by key",
                    caller.tenant
                )
            })
            .collect()
    }

    /// Who holds a presented key. Every configured key is compared, in constant time, whatever
    /// matches first.
    pub fn caller_for(&self, presented: &str) -> Option<Caller> {
        let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        let mut found = None;
        for (caller, expected) in &self.entries {
            if bool::from(expected.ct_eq(&digest)) {
                found = Some(caller);
            }
        }
        found.cloned()
    }
}

fn digest(tenant: &TenantId, key: &str) -> Result<[u8; 32], String> {
    match key.strip_prefix("sha256:") {
        Some(hex_digest) => {
            let bytes = hex::decode(hex_digest)
                .map_err(|_| format!("tenant {tenant}: sha256: needs 64 hex digits"))?;
            <[u8; 32]>::try_from(bytes)
                .map_err(|_| format!("tenant {tenant}: sha256: needs 64 hex digits"))
        }
        None if key.len() >= 16 => Ok(Sha256::digest(key.as_bytes()).into()),
        None => Err(format!(
            "tenant {tenant}: keys must be at least 16 characters"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_principal_has_one_spelling_or_the_start_fails() {
        for principal in ["ci@acme\\u200b", "\\u2060ops", "\\uff43i@acme"] {
            let raw = format!(
                r#"[{{"tenant": "acme", "principal": "{principal}", "roles": ["requester"], "key": "k-0123456789abcdef"}}]"#
            );
            let refused = ApiKeys::parse(&raw).expect_err(principal);
            assert!(refused.starts_with("key 0: principal must"), "{refused}");
        }
    }

    #[test]
    fn plain_and_hashed_keys_map_to_their_tenants() {
        let hashed = hex::encode(Sha256::digest(b"beta-key-0123456789"));
        let keys =
            ApiKeys::parse(&format!("alpha=alpha-key-0123456789, beta=sha256:{hashed}")).unwrap();
        let alpha = keys.caller_for("alpha-key-0123456789").unwrap();
        assert_eq!(alpha.tenant.as_str(), "alpha");
        assert_eq!(alpha.principal.as_str(), "alpha", "the development form");
        assert!(Role::ALL.into_iter().all(|r| alpha.has(r)), "every role");
        assert!(alpha.is_development() && alpha.vote_sender().is_none());
        assert_eq!(keys.development_key_warnings().len(), 2);
        assert_eq!(
            keys.caller_for("beta-key-0123456789")
                .unwrap()
                .tenant
                .as_str(),
            "beta"
        );
        assert_eq!(keys.caller_for("alpha-key-012345678"), None);
        assert_eq!(keys.caller_for(""), None);
    }

    #[test]
    fn the_json_form_names_principals_and_roles() {
        let hashed = hex::encode(Sha256::digest(b"bob-key-0123456789ab"));
        let keys = ApiKeys::parse(&format!(
            r#"[{{"tenant": "acme", "principal": "ci@acme", "roles": ["requester"], "key": "ci-key-0123456789ab"}},
                {{"tenant": "acme", "principal": "bob@example.com", "roles": ["approver", "reader"], "key": "sha256:{hashed}"}}]"#
        ))
        .unwrap();
        let ci = keys.caller_for("ci-key-0123456789ab").unwrap();
        assert_eq!(
            (ci.tenant.as_str(), ci.principal.as_str()),
            ("acme", "ci@acme")
        );
        assert!(ci.has(Role::Requester) && !ci.has(Role::Approver) && !ci.has(Role::Reader));
        assert!(!ci.is_development() && ci.vote_sender() == Some(ci.principal.clone()));
        assert!(keys.development_key_warnings().is_empty());
        let bob = keys.caller_for("bob-key-0123456789ab").unwrap();
        assert_eq!(bob.principal.as_str(), "bob@example.com");
        assert!(bob.has(Role::Approver) && bob.has(Role::Reader) && !bob.has(Role::Decider));
    }

    #[test]
    fn malformed_configuration_is_refused() {
        for raw in [
            "",
            "alpha",
            "a#b=key-0123456789abcdef",
            "alpha=short",
            "alpha=sha256:abcd",
            "alpha=same-key-0123456789,beta=same-key-0123456789",
            "[",
            r#"[{"tenant": "acme", "principal": "ci", "roles": [], "key": "ci-key-0123456789ab"}]"#,
            r#"[{"tenant": "acme", "principal": "ci", "roles": ["requester", "decider"], "key": "ci-key-0123456789ab"}]"#,
            r#"[{"tenant": "acme", "principal": "ci", "roles": ["admin"], "key": "ci-key-0123456789ab"}]"#,
            r#"[{"tenant": "acme", "principal": "", "roles": ["reader"], "key": "ci-key-0123456789ab"}]"#,
            r#"[{"tenant": "acme", "principal": "ci", "roles": ["reader"], "key": "short"}]"#,
            r#"[{"tenant": "acme", "principal": "ci", "roles": ["reader"]}]"#,
            r#"[{"tenant": "acme", "principal": "ci", "roles": ["reader"], "key": "ci-key-0123456789ab", "extra": 1}]"#,
            r#"[{"tenant": "acme", "principal": "a", "roles": ["reader"], "key": "same-key-0123456789"},
                {"tenant": "acme", "principal": "b", "roles": ["reader"], "key": "same-key-0123456789"}]"#,
        ] {
            assert!(ApiKeys::parse(raw).is_err(), "{raw:?} accepted");
        }
    }

    #[test]
    fn configuration_errors_never_quote_a_key() {
        for raw in [
            r#"["acme=live-key-0123456789abcdef"]"#,
            r#"[{"tenant": "acme", "principal": "ci", "roles": ["live-key-0123456789abcdef"], "key": "x"}]"#,
        ] {
            let error = ApiKeys::parse(raw).unwrap_err();
            assert!(!error.contains("live-key"), "{error}");
        }
    }

    #[test]
    fn debug_output_reveals_no_key_material() {
        let keys = ApiKeys::parse("alpha=alpha-key-0123456789").unwrap();
        assert_eq!(format!("{keys:?}"), "ApiKeys { keys: 1 }");
    }
}
