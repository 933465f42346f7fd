//! API keys → tenants. Keys are held only as SHA-256 digests and compared in constant time.

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::domain::TenantId;

#[derive(Clone)]
pub struct ApiKeys {
    entries: Vec<(TenantId, [u8; 32])>,
}

impl std::fmt::Debug for ApiKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print key material, not even digests.
        f.debug_struct("ApiKeys")
            .field("keys", &self.entries.len())
            .finish()
    }
}

impl ApiKeys {
    /// Parses `tenant=key` pairs, comma-separated; a key may be given as `sha256:<hex>` so the
    /// plain key need not sit in the environment.
    pub fn parse(raw: &str) -> Result<Self, String> {
        let mut entries = Vec::new();
        for pair in raw.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (tenant, key) = pair
                .split_once('=')
                .ok_or_else(|| "expected tenant=key pairs separated by commas".to_owned())?;
            let tenant = TenantId::parse(tenant.trim()).map_err(|e| e.0.to_owned())?;
            let key = key.trim();
            let digest = match key.strip_prefix("sha256:") {
                Some(hex_digest) => {
                    let bytes = hex::decode(hex_digest)
                        .map_err(|_| format!("tenant {tenant}: sha256: needs 64 hex digits"))?;
                    <[u8; 32]>::try_from(bytes)
                        .map_err(|_| format!("tenant {tenant}: sha256: needs 64 hex digits"))?
                }
                None if key.len() >= 16 => Sha256::digest(key.as_bytes()).into(),
                None => {
                    return Err(format!(
                        "tenant {tenant}: keys must be at least 16 characters"
                    ));
                }
            };
            if entries.iter().any(|(_, d)| *d == digest) {
                return Err(format!(
                    "tenant {tenant}: this key is already configured (one key, one tenant)"
                ));
            }
            entries.push((tenant, digest));
        }
        if entries.is_empty() {
            return Err("no keys configured".to_owned());
        }
        Ok(Self { entries })
    }

    /// The tenant a presented key belongs to. Every configured key is compared, in constant
    /// time, whatever matches first.
    pub fn tenant_for(&self, presented: &str) -> Option<TenantId> {
        let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        let mut found = None;
        for (tenant, expected) in &self.entries {
            if bool::from(expected.ct_eq(&digest)) {
                found = Some(tenant);
            }
        }
        found.cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_and_hashed_keys_map_to_their_tenants() {
        let hashed = hex::encode(Sha256::digest(b"beta-key-0123456789"));
        let keys =
            ApiKeys::parse(&format!("alpha=alpha-key-0123456789, beta=sha256:{hashed}")).unwrap();
        assert_eq!(
            keys.tenant_for("alpha-key-0123456789").unwrap().as_str(),
            "alpha"
        );
        assert_eq!(
            keys.tenant_for("beta-key-0123456789").unwrap().as_str(),
            "beta"
        );
        assert_eq!(keys.tenant_for("alpha-key-012345678"), None);
        assert_eq!(keys.tenant_for(""), None);
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
        ] {
            assert!(ApiKeys::parse(raw).is_err(), "{raw:?} accepted");
        }
    }

    #[test]
    fn debug_output_reveals_no_key_material() {
        let keys = ApiKeys::parse("alpha=alpha-key-0123456789").unwrap();
        assert_eq!(format!("{keys:?}"), "ApiKeys { keys: 1 }");
    }
}
