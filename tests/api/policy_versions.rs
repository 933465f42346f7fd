//! Approval policies over time and without a person (docs/POLICY.md): a refund the policy
//! approves itself, executed once however often its create is replayed; `log_only` then a
//! rollback; a replay answering as first even after a new version; and twenty creates with one
//! key racing a push — one approval, carrying one version.

use std::time::Duration;

use countersign::domain::approval_policy::Mode;
use countersign_tests::{
    ALICE, ApiKeys, BOB, CAROL, CI, CI_KEY, CreateBody, DAVE, PORTAL, PORTAL_KEY, TENANT_A,
    TestApp, event_types, events_of_type, eventually, execute_key,
};
use serde_json::{Value, json};

use crate::policy::{DEPLOYS, rules, vote};

/// Refunds up to 50.00 approve themselves; above, two of finance.
const REFUNDS: &str = r#"
@id("small-refunds")
@require("none")
permit(principal, action == Countersign::Action::"refund", resource)
when { context.payload.amount_cents <= 5000 };

@id("large-refunds")
@require("finance:2")
permit(principal, action == Countersign::Action::"refund", resource)
when { context.payload.amount_cents > 5000 };
"#;

fn keys() -> String {
    ApiKeys::new()
        .key(CI, &["requester"], CI_KEY)
        .key(PORTAL, &["decider"], PORTAL_KEY)
        .to_string()
}

fn refund(cents: u64) -> String {
    CreateBody::new("refund", &[])
        .payload(json!({"order": "o-1", "amount_cents": cents}))
        .to_string()
}

/// `@require("none")`: created approved in the create's own write, executed once however often
/// the create is replayed (concurrently too), its decision and trail naming the policy.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refund_the_policy_approves_runs_once_under_replayed_creates() {
    let t = TestApp::start_jobs(&[("API_KEYS", &keys())]).await;
    t.set_group(TENANT_A, "finance", &[ALICE, BOB, CAROL]).await;
    t.push_policy(TENANT_A, REFUNDS, Mode::Enforce).await;
    let small = refund(4200);
    let replies =
        futures::future::join_all((0..8).map(|_| t.create(CI_KEY, "refund-1", &small))).await;
    let ids: std::collections::BTreeSet<String> = replies
        .iter()
        .map(|r| {
            assert_eq!(r.status, 201, "{}", r.text());
            r.json()["id"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(ids.len(), 1, "one approval: {ids:?}");
    let id = ids.into_iter().next().unwrap();
    let first = replies
        .iter()
        .find(|r| !r.replayed())
        .expect("one created it")
        .json();
    assert_eq!(first["status"], "approved");
    assert_eq!(
        first["decision"]["actor"],
        json!({"type": "policy", "id": "small-refunds", "version": 1})
    );
    assert_eq!(first["decision"]["channel"], "policy");
    assert_eq!(first["policy"]["rules"], json!([]));
    assert_eq!(
        first["policy"]["source"]["policies"],
        json!(["small-refunds"])
    );
    let done = t
        .wait_for_execution(CI_KEY, &id, Duration::from_secs(60))
        .await;
    assert_eq!(done["execution"]["status"], "succeeded", "{done}");
    for _ in 0..3 {
        let again = t.create(CI_KEY, "refund-1", &small).await;
        assert!(again.replayed() && again.json()["id"] == id.as_str());
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let key = execute_key("refund-1", &id);
    assert_eq!(
        (t.downstream().calls(&key), t.downstream().effects(&key)),
        (1, 1),
        "executed once"
    );
    eventually("the trail names the policy", || async {
        let trail = t.trail(CI_KEY, &id, 50).await;
        let approved = events_of_type(&trail, "approval.approved");
        let created = events_of_type(&trail, "approval.created");
        approved.first().is_some_and(|e| {
            e["actor"] == json!({"type": "policy", "id": "small-refunds", "version": 1})
        }) && created.first().is_some_and(|e| {
            e["data"]["policy_version"] == 1 && e["data"]["policies"] == json!(["small-refunds"])
        })
    })
    .await;

    // Above the line: two of finance, nobody else.
    let large = t.create(CI_KEY, "refund-2", &refund(9000)).await.json();
    assert_eq!(large["status"], "pending");
    assert_eq!(rules(&large)[0].1.as_deref(), Some("finance"));
}

/// `log_only`: the requester's own approvers apply; the trail's `policy.evaluated` and the
/// `PolicyWouldRefuse` metric say what enforcement would have done. A rollback makes an earlier
/// version current again, as a new version.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn log_only_records_what_enforcement_would_do_then_a_rollback_enforces() {
    let t = TestApp::start_jobs(&[("API_KEYS", &keys())]).await;
    t.set_group(TENANT_A, "sre", &[ALICE, BOB, CAROL]).await;
    t.set_group(TENANT_A, "security", &[DAVE]).await;
    let enforced = t.push_policy(TENANT_A, DEPLOYS, Mode::Enforce).await;
    t.push_policy(TENANT_A, DEPLOYS, Mode::LogOnly).await;
    t.metrics.take();
    let body = CreateBody::new("deploy", &[ALICE])
        .payload(json!({"environment": "production", "build": 1}))
        .to_string();
    let approval = t.create(CI_KEY, "log-1", &body).await.json();
    assert_eq!(
        approval["policy"],
        Value::Null,
        "the requester's own: {approval}"
    );
    let id = approval["id"].as_str().unwrap().to_owned();
    // An agent's DROP TABLE goes ahead in log_only, and is counted as a refusal to come.
    let drop = CreateBody::new("agent", &[ALICE])
        .payload(json!({"tool_name": "Bash", "input": {"command": "DROP TABLE users"}}))
        .to_string();
    let dropped = t.create(CI_KEY, "log-2", &drop).await;
    assert_eq!(dropped.status, 201, "{}", dropped.text());
    let would_refuse = t
        .metrics
        .take()
        .iter()
        .filter(|line| line.contains("\"PolicyWouldRefuse\"") && line.contains("\"agent\""))
        .count();
    assert_eq!(would_refuse, 1, "PolicyWouldRefuse for the agent's call");
    let dropped_id = dropped.json()["id"].as_str().unwrap().to_owned();
    eventually("policy.evaluated in the trails", || async {
        let allowed = t.trail(CI_KEY, &id, 50).await;
        let forbidden = t.trail(CI_KEY, &dropped_id, 50).await;
        let evaluated = |trail: &[Value]| {
            events_of_type(trail, "policy.evaluated")
                .first()
                .map(|e| e["data"].clone())
        };
        match (evaluated(&allowed), evaluated(&forbidden)) {
            (Some(allowed), Some(forbidden)) => {
                allowed["would"] == "allow"
                    && allowed["groups"]
                        == json!([{"group": "sre", "min_approvals": 2}, {"group": "security", "min_approvals": 1}])
                    && allowed["would_refuse"] == false
                    && forbidden["would"] == "forbid"
                    && forbidden["policies"] == json!(["agents-never-drop-tables"])
                    && forbidden["would_refuse"] == true
            }
            _ => false,
        }
    })
    .await;
    assert!(event_types(&t.trail(CI_KEY, &id, 50).await).contains(&"approval.created".to_owned()));
    assert_eq!(
        vote(&t, &id, ALICE).await.json()["status"],
        "approved",
        "ALICE alone decides, as the requester asked"
    );

    // Roll back to the enforced version: a new version, in force within the cache time.
    let store = &t.app.store;
    let tenant = countersign::domain::TenantId::parse(TENANT_A).unwrap();
    let old = store
        .policy_version(&tenant, enforced)
        .await
        .unwrap()
        .unwrap();
    let rolled = t.push_policy(TENANT_A, &old.text, old.mode).await;
    assert_eq!(rolled, 3);
    t.clock.advance(61);
    let enforced_now = t.create(CI_KEY, "log-3", &body).await.json();
    assert_eq!(enforced_now["policy"]["source"]["version"], 3);
    assert_eq!(
        rules(&enforced_now).len(),
        3,
        "sre, security, and the requester's own"
    );
    t.create(CI_KEY, "log-4", &drop)
        .await
        .assert_problem(403, "policy_forbidden");
}

/// The same key and body replay the first answer, whatever version is in force since.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replay_answers_as_first_after_a_new_version() {
    let t = TestApp::start_with(&[("API_KEYS", &keys())]).await;
    t.set_group(TENANT_A, "sre", &[ALICE, BOB, CAROL]).await;
    t.set_group(TENANT_A, "security", &[DAVE]).await;
    t.push_policy(TENANT_A, DEPLOYS, Mode::Enforce).await;
    let body = CreateBody::new("deploy", &[])
        .payload(json!({"environment": "staging", "build": 2}))
        .to_string();
    let first = t.create(CI_KEY, "replay-1", &body).await.json();
    t.push_policy(
        TENANT_A,
        r#"@id("nothing") forbid(principal, action, resource);"#,
        Mode::Enforce,
    )
    .await;
    t.clock.advance(61);
    let again = t.create(CI_KEY, "replay-1", &body).await;
    assert!(again.replayed(), "{}", again.text());
    assert_eq!(again.json(), first);
    t.create(CI_KEY, "replay-2", &body)
        .await
        .assert_problem(403, "policy_forbidden");
}

/// Twenty creates with one Idempotency-Key race a push of a new version: one approval, and it
/// carries exactly one version (every answer the same).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn twenty_creates_racing_a_push_make_one_approval_of_one_version() {
    let t = TestApp::start_with(&[("API_KEYS", &keys()), ("KEY_CACHE_SECONDS", "0")]).await;
    t.set_group(TENANT_A, "sre", &[ALICE, BOB, CAROL]).await;
    t.set_group(TENANT_A, "security", &[DAVE]).await;
    t.push_policy(TENANT_A, DEPLOYS, Mode::Enforce).await;
    let two_sre = DEPLOYS.replace(r#"@require("sre:1")"#, r#"@require("sre:2")"#);
    for round in 0..3 {
        let key = format!("race-{round}");
        let body = CreateBody::new("deploy", &[])
            .payload(json!({"environment": "staging", "build": round}))
            .to_string();
        let creates = futures::future::join_all((0..20).map(|_| t.create(CI_KEY, &key, &body)));
        let (replies, _) = tokio::join!(creates, t.push_policy(TENANT_A, &two_sre, Mode::Enforce));
        let answers: std::collections::BTreeSet<String> = replies
            .iter()
            .map(|r| {
                assert_eq!(r.status, 201, "{}", r.text());
                r.text()
            })
            .collect();
        assert_eq!(answers.len(), 1, "one answer for every create: {answers:?}");
        let answer: Value = serde_json::from_str(answers.first().unwrap()).unwrap();
        let stored = t.get(CI_KEY, answer["id"].as_str().unwrap()).await.json();
        assert_eq!(stored["policy"]["source"], answer["policy"]["source"]);
        let version = answer["policy"]["source"]["version"].as_u64().unwrap();
        let min = rules(&stored)[0].2;
        // The version's own requirement: sre:1 in the first version, sre:2 after.
        assert_eq!(min, if version == 1 { 1 } else { 2 }, "{stored}");
    }
}
