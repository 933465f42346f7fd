//! A tenant's approval policy and groups, written as `countersign policy push` and `countersign
//! groups set` write them: the store's own calls, with the deployer's credentials (the test
//! app's, never a function's).

use countersign::domain::TenantId;
use countersign::domain::approval_policy::{GroupName, Groups, Mode, PolicySet};
use countersign::store::StoredPolicy;
use sha2::{Digest, Sha256};

use crate::TestApp;

impl TestApp {
    /// Pushes `text` as `tenant`'s next version in `mode`; its version.
    pub async fn push_policy(&self, tenant: &str, text: &str, mode: Mode) -> u32 {
        PolicySet::parse(text, None).expect("a set a push accepts");
        let tenant = TenantId::parse(tenant).expect("tenant");
        let store = &self.app.store;
        loop {
            let current = store.tenant_policy(&tenant).await.expect("read the policy");
            let version = current.policy.map_or(1, |p| p.version + 1);
            let policy = StoredPolicy {
                version,
                text: text.to_owned(),
                sha256: hex::encode(Sha256::digest(text.as_bytes())),
                mode,
                pushed_at: self.clock.now(),
                pushed_by: "arn:aws:iam::123456789012:user/tests".to_owned(),
            };
            match store.push_policy(&tenant, &policy).await.expect("push") {
                Ok(()) => return version,
                Err(_) => continue,
            }
        }
    }

    /// Sets (replaces) `tenant`'s group `name`.
    pub async fn set_group(&self, tenant: &str, name: &str, members: &[&str]) {
        let members: Vec<String> = members.iter().map(|m| (*m).to_owned()).collect();
        let members = Groups::members(&members).expect("members");
        self.app
            .store
            .set_group(
                &TenantId::parse(tenant).expect("tenant"),
                &GroupName::parse(name).expect("group"),
                &members,
                self.clock.now(),
            )
            .await
            .expect("set the group");
    }
}
