//! Each tenant's relying party, discovered on its first sign-in and kept while its settings
//! stay the same (a rotated client secret, a new issuer: discovered again).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::{OidcError, OidcSettings, RelyingParty};
use crate::domain::TenantId;

/// How long a call to a provider may take (discovery, keys, the code exchange).
const PROVIDER_TIMEOUT: Duration = Duration::from_secs(10);

pub struct RelyingParties {
    http: reqwest::Client,
    /// Held across a discovery, so concurrent first sign-ins discover once.
    discovered: tokio::sync::Mutex<HashMap<TenantId, Arc<RelyingParty>>>,
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
            discovered: tokio::sync::Mutex::new(HashMap::new()),
        }
    }

    /// `tenant`'s relying party under `settings`: the one discovered before if its settings
    /// are these, else discovered now. A failed discovery is not kept (the next sign-in tries
    /// again).
    pub async fn of(
        &self,
        tenant: &TenantId,
        settings: &OidcSettings,
    ) -> Result<Arc<RelyingParty>, OidcError> {
        let mut discovered = self.discovered.lock().await;
        if let Some(party) = discovered.get(tenant)
            && party.settings == *settings
        {
            return Ok(party.clone());
        }
        let party = Arc::new(RelyingParty::discover(settings.clone(), self.http.clone()).await?);
        discovered.insert(tenant.clone(), party.clone());
        Ok(party)
    }
}
