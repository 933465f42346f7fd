//! Each tenant's approval policy and groups as a function uses them: read from the keys table
//! (one `BatchGetItem`) and kept for `KEY_CACHE_SECONDS`, as keys are — so a create or a vote on
//! a warm function reads nothing for them, and a push or a group change is in force everywhere
//! within that time.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use crate::domain::approval_policy::{ActivePolicy, Groups, PolicySet};
use crate::domain::{EpochSeconds, TenantId};
use crate::store::{Store, StoreError};

/// A tenant's policy as in force on this function.
#[derive(Debug, Clone, Default)]
pub struct TenantPolicy {
    /// `None`: no policy pushed (requesters choose their approvers, as before v7).
    pub current: Option<ActivePolicy>,
    pub groups: Groups,
}

#[derive(Debug)]
pub struct PolicyCache {
    ttl_seconds: EpochSeconds,
    entries: Mutex<HashMap<TenantId, (Arc<TenantPolicy>, EpochSeconds)>>,
    /// Tenants already warned of (no policy), once per instance.
    warned: Mutex<HashSet<TenantId>>,
}

impl PolicyCache {
    pub fn new(ttl_seconds: EpochSeconds) -> Self {
        Self {
            ttl_seconds,
            entries: Mutex::new(HashMap::new()),
            warned: Mutex::new(HashSet::new()),
        }
    }

    /// The tenant's policy and groups at `now`: cached, or read (and kept for the cache time).
    pub async fn get(
        &self,
        store: &Store,
        tenant: &TenantId,
        now: EpochSeconds,
    ) -> Result<Arc<TenantPolicy>, StoreError> {
        if let Some((cached, at)) = self
            .entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(tenant)
            && now < at + self.ttl_seconds
        {
            return Ok(cached.clone());
        }
        let items = store.tenant_policy(tenant).await?;
        let policy = Arc::new(TenantPolicy {
            current: items.policy.map(|stored| ActivePolicy {
                version: stored.version,
                sha256: stored.sha256,
                mode: stored.mode,
                set: PolicySet::parse(&stored.text, None),
            }),
            groups: items.groups,
        });
        if self.ttl_seconds > 0 {
            self.entries
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(tenant.clone(), (policy.clone(), now));
        }
        Ok(policy)
    }

    /// Whether this is the first create this instance sees of `tenant` without a policy (the
    /// warning is logged once).
    pub fn first_without_policy(&self, tenant: &TenantId) -> bool {
        self.warned
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(tenant.clone())
    }
}
