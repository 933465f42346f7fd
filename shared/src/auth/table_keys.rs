//! Table keys at request time: the per-function cache of key items (`KEY_CACHE_SECONDS`), and
//! what a presented key is worth once its item is known. The `GetItem` itself is the store's.

use std::collections::HashMap;
use std::sync::Mutex;

use subtle::ConstantTimeEq;

use super::{Caller, Role};
use crate::domain::{EpochSeconds, KeyId, KeyRecord, TableKey};

/// `last_used_at` is written at most this often per key.
pub const LAST_USED_INTERVAL_SECONDS: EpochSeconds = 3600;

/// Key items as fetched, each for `KEY_CACHE_SECONDS`: a revocation reaches a warm function
/// within that time. Nothing is cached for an unknown key (no negative caching), so a key
/// created a moment ago works on its first request.
#[derive(Debug)]
pub struct KeyCache {
    ttl_seconds: EpochSeconds,
    entries: Mutex<HashMap<KeyId, Cached>>,
    /// When this process last sent a `last_used_at` write, per key (kept whatever the cache
    /// time, so one process writes at most once an hour per key).
    used: Mutex<HashMap<KeyId, EpochSeconds>>,
}

#[derive(Debug)]
struct Cached {
    record: KeyRecord,
    fetched_at: EpochSeconds,
}

impl KeyCache {
    pub fn new(ttl_seconds: EpochSeconds) -> Self {
        Self {
            ttl_seconds,
            entries: Mutex::new(HashMap::new()),
            used: Mutex::new(HashMap::new()),
        }
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<KeyId, Cached>> {
        // A panic elsewhere while holding the lock leaves a map that is still whole.
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The cached item of `id`, while it is fresh.
    pub fn get(&self, id: &KeyId, now: EpochSeconds) -> Option<KeyRecord> {
        let entries = self.entries();
        let cached = entries.get(id)?;
        (now < cached.fetched_at + self.ttl_seconds).then(|| cached.record.clone())
    }

    /// Keeps a fetched item (not at all with a cache time of 0).
    pub fn put(&self, record: KeyRecord, now: EpochSeconds) {
        if self.ttl_seconds == 0 {
            return;
        }
        self.entries().insert(
            record.id.clone(),
            Cached {
                record,
                fetched_at: now,
            },
        );
    }

    /// Whether this use of `record` should be written as its `last_used_at` (an hour since the
    /// last one this process knows of); it is then counted as written.
    pub fn take_use(&self, record: &KeyRecord, now: EpochSeconds) -> bool {
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        let last = used.get(&record.id).copied().max(record.last_used_at);
        if last.is_some_and(|at| now - at < LAST_USED_INTERVAL_SECONDS) {
            return false;
        }
        used.insert(record.id.clone(), now);
        true
    }
}

/// Who holds `presented`, given its item: the hash compared in constant time, then revocation
/// and expiry (every request, cached item or not), then the roles.
pub fn caller_for_record(
    presented: &TableKey,
    record: &KeyRecord,
    now: EpochSeconds,
) -> Option<Caller> {
    let matches = bool::from(presented.digest().ct_eq(&record.key_hash));
    if !matches || &record.id != presented.id() || !record.usable_at(now) {
        return None;
    }
    let roles: Vec<Role> = record.roles.iter().filter_map(|r| Role::parse(r)).collect();
    if roles.is_empty() {
        return None;
    }
    let mut caller = Caller::new(record.tenant.clone(), record.principal.clone(), &roles);
    caller.key_id = Some(record.id.clone());
    Some(caller)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Approver, TenantId};

    fn record(key: &TableKey) -> KeyRecord {
        KeyRecord {
            id: key.id().clone(),
            tenant: TenantId::parse("acme").unwrap(),
            principal: Approver::parse("ci@acme").unwrap(),
            roles: vec!["requester".into(), "reader".into()],
            key_hash: key.digest(),
            created_at: 0,
            created_by: "test".into(),
            description: None,
            expires_at: Some(1_000),
            revoked_at: None,
            last_used_at: None,
        }
    }

    #[test]
    fn a_matching_live_key_is_its_holder() {
        let key = TableKey::generate(KeyId::random());
        let caller = caller_for_record(&key, &record(&key), 10).unwrap();
        assert_eq!(caller.principal.as_str(), "ci@acme");
        assert!(caller.has(Role::Requester) && !caller.has(Role::Decider));
        assert_eq!(caller.key_id.as_ref(), Some(key.id()));
        assert!(
            caller.vote_sender().is_some(),
            "a table key is never a development key"
        );
        assert!(
            caller_for_record(&key, &record(&key), 1_000).is_none(),
            "expired"
        );
        let other = TableKey::generate(key.id().clone());
        assert!(
            caller_for_record(&other, &record(&key), 10).is_none(),
            "another secret"
        );
        let revoked = KeyRecord {
            revoked_at: Some(5),
            ..record(&key)
        };
        assert!(caller_for_record(&key, &revoked, 10).is_none());
        let no_roles = KeyRecord {
            roles: vec!["admin".into()],
            ..record(&key)
        };
        assert!(caller_for_record(&key, &no_roles, 10).is_none());
    }

    #[test]
    fn the_cache_keeps_an_item_for_its_time_and_a_use_once_an_hour() {
        let key = TableKey::generate(KeyId::random());
        let cache = KeyCache::new(60);
        assert!(cache.get(key.id(), 0).is_none());
        cache.put(record(&key), 100);
        assert!(cache.get(key.id(), 159).is_some());
        assert!(cache.get(key.id(), 160).is_none());
        assert!(cache.take_use(&record(&key), 100));
        assert!(!cache.take_use(&record(&key), 3_699));
        assert!(cache.take_use(&record(&key), 3_700));
        let none = KeyCache::new(0);
        none.put(record(&key), 100);
        assert!(
            none.get(key.id(), 100).is_none(),
            "KEY_CACHE_SECONDS=0 caches nothing"
        );
        let used = KeyRecord {
            last_used_at: Some(50),
            ..record(&key)
        };
        assert!(
            !none.take_use(&used, 100),
            "written by another function within the hour"
        );
    }
}
