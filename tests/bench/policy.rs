//! `make bench --policy` (and the full run): a create's approval-policy evaluation against a
//! set of 100 policies (p50, p99: Cedar in-process, on the cached set and groups), and a
//! create's throughput under that set beside one without a policy, through the real router
//! in-process on the local AWS — with the DynamoDB round trips of a create under policy
//! counted (one, once the cache is warm).

use std::time::Instant;

use axum::body::Body;
use axum::http::Request;
use countersign::domain::Approver;
use countersign::domain::approval_policy::{
    ActivePolicy, AskRequest, GroupName, Groups, Mode, PolicySet, govern,
};
use countersign_tests::{KEY_A, KEY_B, TENANT_B, TestApp};
use serde_json::{Map, Value, json};
use tower::ServiceExt;

use crate::{Stats, drive};

/// 100 policies: 92 permits over other action types, 4 permits over `deploy` that read the
/// payload (two of them match a production deploy), and 4 forbids that read it too.
pub fn hundred_policies() -> String {
    let mut text = String::new();
    for i in 0..92 {
        text.push_str(&format!(
            "@id(\"other-{i}\") @require(\"sre:1\")\npermit(principal, action == Countersign::Action::\"other_{i}\", resource)\nwhen {{ context.payload.build > {i} }};\n\n"
        ));
    }
    text.push_str(
        r#"@id("production-deploys") @require("sre:2, security:1")
permit(principal, action == Countersign::Action::"deploy", resource)
when { context.payload.environment == "production" };

@id("large-builds") @require("sre:1")
permit(principal, action == Countersign::Action::"deploy", resource)
when { context.payload.build > 1000 && principal.roles.contains("requester") };

@id("staging-deploys") @require("sre:1")
permit(principal, action == Countersign::Action::"deploy", resource)
when { context.payload.environment == "staging" };

@id("weekend-deploys") @require("security:1")
permit(principal, action == Countersign::Action::"deploy", resource)
when { context.summary like "*weekend*" };

@id("no-friday") forbid(principal, action == Countersign::Action::"deploy", resource)
when { context.payload.branch == "friday" };

@id("no-drop") forbid(principal, action, resource)
when { context.payload has sql && context.payload.sql like "*DROP TABLE*" };

@id("no-huge-refunds") forbid(principal, action, resource)
when { context.payload has amount_cents && context.payload.amount_cents > 10000000 };

@id("no-outsiders") forbid(principal, action, resource)
when { principal.tenant == "a-blocked-tenant" };
"#,
    );
    text
}

fn groups() -> Groups {
    let members = |names: &[&str]| {
        Groups::members(&names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>())
            .expect("members")
    };
    Groups::new(
        [
            (
                GroupName::parse("sre").unwrap(),
                members(&["a@x", "b@x", "c@x", "d@x", "e@x"]),
            ),
            (
                GroupName::parse("security").unwrap(),
                members(&["f@x", "g@x"]),
            ),
        ]
        .into_iter()
        .collect(),
    )
}

fn deploy_payload(build: u64) -> Map<String, Value> {
    json!({"environment": "production", "build": 1042 + build, "branch": "main", "service": "api"})
        .as_object()
        .cloned()
        .unwrap_or_default()
}

pub async fn run(ops: usize) {
    // Every policy is evaluated on every request (Cedar has no index by action here): the
    // decision is the production permit's, its groups merged with the large builds'.
    let clean = hundred_policies();
    let set = PolicySet::parse(&clean, None).expect("the benchmark's set");
    assert_eq!(set.entries().len(), 100, "a set of 100 policies");
    let active = ActivePolicy {
        version: 1,
        sha256: String::new(),
        mode: Mode::Enforce,
        set: Ok(set),
    };
    let groups = groups();
    let requester = Approver::parse("ci@acme").unwrap();
    let mut latencies = Vec::with_capacity(2_000);
    for i in 0..2_000u64 {
        let payload = deploy_payload(i);
        let ask = AskRequest {
            tenant: "acme",
            requester: requester.as_str(),
            roles: vec!["requester"],
            action_type: "deploy",
            payload: &payload,
            summary: "Deploy api",
            approvers: Vec::new(),
            channel: "api",
            resume: "",
            expires_in_seconds: 86_400,
        };
        let started = Instant::now();
        let governed = govern(Some(&active), &groups, &ask, &requester, (&[], None));
        latencies.push(started.elapsed());
        assert!(governed.is_ok(), "{governed:?}");
    }
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    println!(
        "policy-eval: a create against 100 policies (Cedar in-process, 2,000 evaluations): p50 {:?}, p99 {:?}",
        at(0.50),
        at(0.99)
    );

    // Creates of tenant A (no policy) and tenant B (the 100 policies, groups set), in-process.
    let t = TestApp::start().await;
    for (group, members) in [
        ("sre", vec!["a@x", "b@x", "c@x", "d@x", "e@x"]),
        ("security", vec!["f@x", "g@x"]),
    ] {
        t.set_group(TENANT_B, group, &members).await;
    }
    t.push_policy(TENANT_B, &clean, Mode::Enforce).await;
    let router = countersign::http::local_router(|f| t.function(f));
    let create = |key: &'static str, idempotency: String, body: String| {
        let router = router.clone();
        async move {
            let request = Request::post("/approvals")
                .header("authorization", format!("Bearer {key}"))
                .header("content-type", "application/json")
                .header("idempotency-key", idempotency)
                .body(Body::from(body))
                .expect("request");
            let status = router.oneshot(request).await.expect("router").status();
            assert_eq!(status.as_u16(), 201);
        }
    };
    let unpoliced = |i: usize| {
        // The same ask without a policy: sre 2-of-5 and security 1-of-2, named by the request.
        json!({"action": {"type": "deploy", "payload": deploy_payload(i as u64)},
               "approvers": ["a@x", "b@x", "c@x", "d@x", "e@x", "f@x", "g@x"],
               "policy": {"rules": [
                   {"name": "sre", "approvers": ["a@x", "b@x", "c@x", "d@x", "e@x"], "min_approvals": 2},
                   {"name": "security", "approvers": ["f@x", "g@x"], "min_approvals": 1}]}})
        .to_string()
    };
    let policed = |i: usize| {
        json!({"action": {"type": "deploy", "payload": deploy_payload(i as u64)}}).to_string()
    };
    // Warm both tenants' caches (a function's first create of a tenant reads its policy).
    create(KEY_A, "warm".into(), unpoliced(0)).await;
    create(KEY_B, "warm".into(), policed(0)).await;
    t.calls.take();
    create(KEY_B, "counted".into(), policed(1)).await;
    let calls = t.calls.take();
    let mut rounds: Vec<(Stats, Stats)> = Vec::new();
    // The two alternate which goes first, as the local AWS slows while its tables grow.
    for round in 0..4 {
        let plain = || {
            drive(ops, 8, |i| {
                create(KEY_A, format!("a-{round}-{i}"), unpoliced(i))
            })
        };
        let governed = || {
            drive(ops, 8, |i| {
                create(KEY_B, format!("b-{round}-{i}"), policed(i))
            })
        };
        let (plain, governed) = if round % 2 == 0 {
            let p = plain().await;
            (p, governed().await)
        } else {
            let g = governed().await;
            (plain().await, g)
        };
        rounds.push((plain, governed));
    }
    rounds.sort_by(|a, b| {
        (a.1.ops_per_s / a.0.ops_per_s).total_cmp(&(b.1.ops_per_s / b.0.ops_per_s))
    });
    let (plain, governed) = rounds[2].clone();
    println!(
        "create, concurrency 8, in-process: no policy {:.0} ops/s (p50 {:?}, p99 {:?}); under 100 policies {:.0} ops/s (p50 {:?}, p99 {:?}); DynamoDB calls per create under policy (warm): {calls:?}",
        plain.ops_per_s, plain.p50, plain.p99, governed.ops_per_s, governed.p50, governed.p99,
    );
    println!(
        "policy-overhead-ratio: create under 100 policies / create without a policy = {:.2} (round trips per create: {})",
        governed.ops_per_s / plain.ops_per_s,
        calls.len()
    );
}
