//! What several suites of this binary share beyond the support library: callback
//! subscriptions, and the create bodies of the jobs suites.

use std::time::Duration;

use countersign_tests::{ALICE, CreateBody, TestApp};
use serde_json::json;

pub use countersign_tests::CALLBACK_SECRET;

/// `EVENT_SUBSCRIPTIONS` for tenant A: `url`, signed with [`CALLBACK_SECRET`], for `types` (all
/// when `None`).
pub fn subscription(url: &str, types: Option<&[&str]>) -> String {
    let mut sub = json!({"url": url, "secret": CALLBACK_SECRET});
    if let Some(types) = types {
        sub["types"] = json!(types);
    }
    json!({ "tenant-a": sub }).to_string()
}

/// A `deploy` of build 9 for `approvers`.
pub fn deploy(approvers: &[&str]) -> String {
    CreateBody::new("deploy", approvers)
        .payload(json!({"build": 9}))
        .to_string()
}

/// How long the jobs suites wait for an execution to end.
pub const WAIT: Duration = Duration::from_secs(30);

/// An `action` (payload `{"n": 1}`, context `{"why": "test"}`) for `approvers`.
pub fn action_body(action: &str, approvers: &[&str]) -> String {
    CreateBody::new(action, approvers)
        .payload(json!({"n": 1}))
        .context(json!({"why": "test"}))
        .to_string()
}

/// Tenant A's `action` for alice alone (see [`action_body`]), created under `key` and approved;
/// returns its id.
pub async fn approved(t: &TestApp, key: &str, action: &str) -> String {
    t.create_approved(key, &action_body(action, &[ALICE]), ALICE)
        .await
}
