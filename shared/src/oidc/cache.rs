//! Each tenant's relying party, discovered on its first sign-in and kept while its settings
//! stay the same (a rotated client secret, a new issuer: discovered again). Tenants never wait
//! on each other: each has its own lock, held across its own discovery only (so concurrent
//! first sign-ins of one tenant discover once), and a failed discovery is remembered for
//! [`FAILURE_MEMORY`] so a provider that is down is not asked on every request.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{OidcError, OidcSettings, RelyingParty};
use crate::domain::TenantId;

/// How long a call to a provider may take (discovery, keys, the code exchange).
const PROVIDER_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a failed discovery is answered from memory.
const FAILURE_MEMORY: Duration = Duration::from_secs(30);

/// One tenant's state: discovered, or failed at an instant, or neither yet.
#[derive(Default)]
struct Slot {
    party: Option<Arc<RelyingParty>>,
    failed: Option<(OidcSettings, Instant, String)>,
}

pub struct RelyingParties {
    http: reqwest::Client,
    slots: Mutex<HashMap<TenantId, Arc<tokio::sync::Mutex<Slot>>>>,
}

impl std::fmt::Debug for RelyingParties {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RelyingParties(…)")
    }
}

impl Default for RelyingParties {
    fn default() -> Self {
        Self::new()
    }
}

impl RelyingParties {
    pub fn new() -> Self {
        // A provider's answer never sends us elsewhere.
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(PROVIDER_TIMEOUT)
            .build()
            .unwrap_or_default();
        Self {
            http,
            slots: Mutex::new(HashMap::new()),
        }
    }

    fn slot(&self, tenant: &TenantId) -> Arc<tokio::sync::Mutex<Slot>> {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        slots.entry(tenant.clone()).or_default().clone()
    }

    /// `tenant`'s relying party under `settings`: the one discovered before if its settings
    /// are these, else discovered now (unless that failed in the last 30 s).
    pub async fn of(
        &self,
        tenant: &TenantId,
        settings: &OidcSettings,
    ) -> Result<Arc<RelyingParty>, OidcError> {
        let slot = self.slot(tenant);
        let mut slot = slot.lock().await;
        if let Some(party) = &slot.party
            && party.settings == *settings
        {
            return Ok(party.clone());
        }
        if let Some((failed_for, at, error)) = &slot.failed
            && failed_for == settings
            && at.elapsed() < FAILURE_MEMORY
        {
            return Err(OidcError::Discovery(format!("{error} (remembered)")));
        }
        match RelyingParty::discover(settings.clone(), self.http.clone()).await {
            Ok(party) => {
                let party = Arc::new(party);
                *slot = Slot {
                    party: Some(party.clone()),
                    failed: None,
                };
                Ok(party)
            }
            Err(error) => {
                slot.failed = Some((settings.clone(), Instant::now(), error.to_string()));
                Err(error)
            }
        }
    }

    /// `tenant`'s relying party if it was discovered under `settings`, without waiting or
    /// discovering (for what a page may name of the provider).
    pub fn discovered(
        &self,
        tenant: &TenantId,
        settings: &OidcSettings,
    ) -> Option<Arc<RelyingParty>> {
        let slot = self.slot(tenant);
        let slot = slot.try_lock().ok()?;
        slot.party
            .as_ref()
            .filter(|party| party.settings == *settings)
            .cloned()
    }
}
