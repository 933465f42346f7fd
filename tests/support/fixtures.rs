//! The tests' cast, keys and secrets, and builders for the configuration and bodies they send:
//! one definition each, so that a suite says which keys it configures (principals and roles)
//! rather than copying their spelling.

use std::fmt;

use serde_json::{Value, json};

// People: approvers, and principals of their own keys where a suite gives them one.
/// The secret of the callback subscriptions below.
pub const CALLBACK_SECRET: &str = "whsec_Y2FsbGJhY2stc2VjcmV0LTAxMjM0NTY3ODlhYmNkZWY=";
pub const ALICE: &str = "alice@example.com";
pub const BOB: &str = "bob@example.com";
pub const CAROL: &str = "carol@example.com";
pub const DAVE: &str = "dave@example.com";
pub const ERIN: &str = "erin@example.com";
/// Listed on no approval.
pub const MALLORY: &str = "mallory@example.com";

// Machine principals of tenant A.
/// A pipeline that requests approvals.
pub const CI: &str = "ci@acme";
/// A backend that decides for the approvers it lists.
pub const PORTAL: &str = "portal@acme";
pub const OPS: &str = "ops@acme";
pub const AUDITOR: &str = "audit@acme";

// Keys a suite configures for the principals above, with the roles it chooses
// (see [`ApiKeys`]); the test apps' default keys are `KEY_A` and the others below.
pub const CI_KEY: &str = "ci-key-0123456789abcdef";
pub const ALICE_KEY: &str = "alice-key-0123456789abcdef";
pub const BOB_KEY: &str = "bob-key-0123456789abcdef";
pub const PORTAL_KEY: &str = "portal-key-0123456789abcdef";
pub const READER_KEY: &str = "reader-key-0123456789abcdef";
pub const OPS_KEY: &str = "ops-key-0123456789abcdef";

pub const TENANT_A: &str = "tenant-a";
pub const KEY_A: &str = "key-a-0123456789abcdef";
pub const TENANT_B: &str = "tenant-b";
pub const KEY_B: &str = "key-b-0123456789abcdef";
/// Each tenant's decider (a backend deciding for its approvers): the keys above request
/// approvals, and a key never decides what its own principal requested.
pub const DECIDER_A: &str = "decider-a-0123456789abcdef";
pub const DECIDER_B: &str = "decider-b-0123456789abcdef";

/// The test apps' keys: tenant A's and B's requesters (`KEY_A`, `KEY_B`: the tenant as principal,
/// every role but deciding for others) and their deciders, `portal@tenant-a` / `portal@tenant-b`.
pub fn test_api_keys() -> String {
    let requester = ["requester", "approver", "operator", "reader"];
    ApiKeys::new()
        .key_in(TENANT_A, TENANT_A, &requester, KEY_A)
        .key_in(TENANT_B, TENANT_B, &requester, KEY_B)
        .key_in(
            TENANT_A,
            "portal@tenant-a",
            &["decider", "reader"],
            DECIDER_A,
        )
        .key_in(
            TENANT_B,
            "portal@tenant-b",
            &["decider", "reader"],
            DECIDER_B,
        )
        .to_string()
}

/// An `API_KEYS` configuration (JSON), key by key:
/// `ApiKeys::new().key(CI, &["requester"], CI_KEY).to_string()`.
#[derive(Debug, Clone, Default)]
pub struct ApiKeys(Vec<Value>);

impl ApiKeys {
    pub fn new() -> Self {
        Self::default()
    }

    /// A key of tenant A: `principal` with `roles`.
    pub fn key(self, principal: &str, roles: &[&str], key: &str) -> Self {
        self.key_in(TENANT_A, principal, roles, key)
    }

    /// A key of `tenant`: `principal` with `roles`.
    pub fn key_in(mut self, tenant: &str, principal: &str, roles: &[&str], key: &str) -> Self {
        self.0
            .push(json!({"tenant": tenant, "principal": principal, "roles": roles, "key": key}));
        self
    }
}

impl fmt::Display for ApiKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", Value::from(self.0.clone()))
    }
}

/// Webhook sources: `acme` and `rotating` belong to tenant A, `other` to tenant B.
pub const ACME_SECRET: &str = "whsec_YWNtZS13ZWJob29rLXNlY3JldC0wMTIzNDU2Nzg5YWI=";
pub const ROTATING_NEW_SECRET: &str = "whsec_cm90YXRpbmctbmV3LXNlY3JldC0wMTIzNDU2Nzg5YWI=";
pub const ROTATING_OLD_SECRET: &str = "whsec_cm90YXRpbmctb2xkLXNlY3JldC0wMTIzNDU2Nzg5YWI=";
/// The review-link token key of test apps.
pub const TOKEN_SECRET: &str = "test-review-token-secret-0123456789";
pub const OTHER_SECRET: &str = "whsec_dGVuYW50LWItd2ViaG9vay1zZWNyZXQtMDEyMzQ1Njc=";

/// A create body (`POST /approvals`), field by field:
/// `CreateBody::new("deploy", &[ALICE]).payload(json!({"n": 1})).to_string()` is
/// `{"action": {"type": "deploy", "payload": {"n": 1}}, "approvers": ["alice@example.com"]}`.
#[derive(Debug, Clone)]
pub struct CreateBody(Value);

impl CreateBody {
    /// An action of type `action` (no payload), for `approvers`.
    pub fn new(action: &str, approvers: &[&str]) -> Self {
        Self(json!({"action": {"type": action}, "approvers": approvers}))
    }

    pub fn payload(mut self, payload: Value) -> Self {
        self.0["action"]["payload"] = payload;
        self
    }

    pub fn policy(mut self, policy: Value) -> Self {
        self.0["policy"] = policy;
        self
    }

    pub fn context(mut self, context: Value) -> Self {
        self.0["context"] = context;
        self
    }

    pub fn expires_in(mut self, seconds: u64) -> Self {
        self.0["expires_in_seconds"] = json!(seconds);
        self
    }

    /// Any other field (`reminders`, `escalation`, ...).
    pub fn with(mut self, field: &str, value: Value) -> Self {
        self.0[field] = value;
        self
    }
}

impl fmt::Display for CreateBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A valid create body for the `deploy` action.
pub fn deploy_body(build: u64, approvers: &[&str]) -> String {
    CreateBody::new("deploy", approvers)
        .payload(json!({"service": "api", "build": build}))
        .context(
            json!({"summary": format!("Deploy api build {build} to prod"), "requested_by": "ci"}),
        )
        .expires_in(86_400)
        .to_string()
}

/// A decision body (`POST /approvals/{id}/decision`) naming its approver.
pub fn decision_body(decision: &str, approver: &str) -> Value {
    json!({"decision": decision, "approver": approver})
}

/// An `approval.decided` webhook body.
pub fn decided_event(approval_id: &str, decision: &str, approver: &str) -> String {
    json!({
        "type": "approval.decided",
        "data": {"approval_id": approval_id, "decision": decision, "approver": approver}
    })
    .to_string()
}

/// A table key written to `t`'s keys table (as `countersign keys create` writes one): the key,
/// shown once.
pub async fn table_key(
    store: &countersign::Store,
    tenant: &str,
    principal: &str,
    roles: &[&str],
    expires_at: Option<i64>,
) -> countersign::domain::TableKey {
    use countersign::domain::{Approver, KeyId, KeyRecord, TableKey, TenantId};
    let key = TableKey::generate(KeyId::random());
    let record = KeyRecord {
        id: key.id().clone(),
        tenant: TenantId::parse(tenant).expect("tenant"),
        principal: Approver::parse(principal).expect("principal"),
        roles: roles.iter().map(|r| (*r).to_owned()).collect(),
        key_hash: key.digest(),
        created_at: 0,
        created_by: "tests".to_owned(),
        description: None,
        expires_at,
        revoked_at: None,
        last_used_at: None,
    };
    store.create_key(&record).await.expect("create the key");
    key
}
