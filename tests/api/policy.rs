//! The deployment decides who must approve (docs/POLICY.md): a tenant's approval policy in
//! Cedar, pushed as the CLI pushes it, enforced at every create through the real HTTP stack
//! against the local AWS — a requester naming an accomplice still needs the groups, the
//! requester leaves its own group, forbid and default deny refuse with nothing written, an
//! erroring policy fails closed, a removed member's vote is refused.

use countersign::domain::approval_policy::Mode;
use countersign_tests::{
    ALICE, ApiKeys, BOB, CAROL, CI, CI_KEY, CreateBody, DAVE, ERIN, MALLORY, PORTAL, PORTAL_KEY,
    Reply, TENANT_A, TestApp, decision_body,
};
use serde_json::{Value, json};

/// Production deploys need two SRE and one security; other deploys one SRE; agents may never
/// drop a table.
pub const DEPLOYS: &str = r#"
@id("production-deploys")
@require("sre:2, security:1")
permit(principal, action == Countersign::Action::"deploy", resource)
when { context.payload.environment == "production" };

@id("other-deploys")
@require("sre:1")
permit(principal, action == Countersign::Action::"deploy", resource)
when { context.payload.environment != "production" };

@id("agents-never-drop-tables")
forbid(principal, action == Countersign::Action::"agent", resource)
when { context.payload.input.command like "*DROP TABLE*" };

@id("agent-tools")
@require("sre:1")
permit(principal, action == Countersign::Action::"agent", resource);
"#;

pub fn api_keys() -> String {
    ApiKeys::new()
        .key(CI, &["requester"], CI_KEY)
        .key(ALICE, &["requester"], "alice-requester-0123456789abcdef")
        .key(PORTAL, &["decider"], PORTAL_KEY)
        .to_string()
}

/// A stack whose tenant A has [`DEPLOYS`] in force and its groups: sre (Alice, Bob, Carol),
/// security (Dave).
pub async fn policed() -> TestApp {
    let t = TestApp::start_with(&[("API_KEYS", &api_keys())]).await;
    t.set_group(TENANT_A, "sre", &[ALICE, BOB, CAROL]).await;
    t.set_group(TENANT_A, "security", &[DAVE]).await;
    t.push_policy(TENANT_A, DEPLOYS, Mode::Enforce).await;
    t
}

pub fn deploy(environment: &str, approvers: &[&str]) -> CreateBody {
    CreateBody::new("deploy", approvers).payload(json!({"environment": environment, "build": 7}))
}

pub async fn vote(t: &TestApp, id: &str, approver: &str) -> Reply {
    t.decide(PORTAL_KEY, id, decision_body("approve", approver))
        .await
}

/// Each rule as `(name, group, min_approvals, approvers)`.
pub fn rules(approval: &Value) -> Vec<(String, Option<String>, u64, Vec<String>)> {
    approval["policy"]["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .map(|r| {
            (
                r["name"].as_str().expect("name").to_owned(),
                r["group"].as_str().map(str::to_owned),
                r["min_approvals"].as_u64().expect("min"),
                r["approvers"]
                    .as_array()
                    .expect("approvers")
                    .iter()
                    .map(|a| a.as_str().expect("approver").to_owned())
                    .collect(),
            )
        })
        .collect()
}

fn strings(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| (*n).to_owned()).collect()
}

/// Tried as a new user would (the issue's first finding): a requester key lists one accomplice
/// and a quorum of one — the accomplice's vote counts in its own rule, and the approval still
/// waits for the groups the policy requires.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_requester_naming_an_accomplice_still_needs_the_groups() {
    let t = policed().await;
    let body = deploy("production", &[MALLORY])
        .policy(json!({"rules": [{"name": "mine", "approvers": [MALLORY], "min_approvals": 1}]}));
    let created = t.create(CI_KEY, "pol-1", &body.to_string()).await;
    assert_eq!(created.status, 201, "{}", created.text());
    let approval = created.json();
    let id = approval["id"].as_str().expect("id").to_owned();
    assert_eq!(
        rules(&approval),
        [
            (
                "sre".into(),
                Some("sre".into()),
                2,
                strings(&[ALICE, BOB, CAROL])
            ),
            (
                "security".into(),
                Some("security".into()),
                1,
                strings(&[DAVE])
            ),
            ("mine".into(), None, 1, strings(&[MALLORY])),
        ]
    );
    let source = &approval["policy"]["source"];
    assert_eq!(source["version"], 1);
    assert_eq!(source["policies"], json!(["production-deploys"]));
    assert_eq!(source["sha256"].as_str().map(str::len), Some(64));
    let listed: Vec<&str> = approval["approvers"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(listed, [MALLORY, ALICE, BOB, CAROL, DAVE]);

    // The review page says which policy required whom.
    let page = t.send(t.http.get(t.review_link(&id, ALICE))).await;
    assert_eq!(page.status, 200);
    let page = page.text();
    assert!(
        page.contains(
            "required by approval policy production-deploys (version 1), as a member of sre"
        ) && page
            .contains("group security, required by approval policy production-deploys (version 1)"),
        "{page}"
    );
    let accomplice = vote(&t, &id, MALLORY).await.json();
    assert_eq!(
        accomplice["status"], "pending",
        "one accomplice is not enough"
    );
    vote(&t, &id, ALICE).await;
    let two_sre = vote(&t, &id, BOB).await.json();
    assert_eq!(two_sre["status"], "pending", "security has not voted");
    let done = vote(&t, &id, DAVE).await.json();
    assert_eq!(done["status"], "approved", "{done}");
    // Someone in no group the policy names, and not listed, is nobody's approver here.
    let other = t
        .create_ok(CI_KEY, "pol-1b", &deploy("production", &[]).to_string())
        .await;
    vote(&t, &other, ERIN)
        .await
        .assert_problem(403, "not_an_approver");
}

/// Separation of duties: the requester is left out of every group's rule; a rule that cannot
/// then be met is 400 `policy_unsatisfiable` naming the group, and nothing is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_requester_in_its_own_group_is_left_out_of_it() {
    let t = policed().await;
    let alice = "alice-requester-0123456789abcdef";
    let created = t
        .create(alice, "pol-2", &deploy("production", &[]).to_string())
        .await;
    assert_eq!(created.status, 201, "{}", created.text());
    let approval = created.json();
    assert_eq!(rules(&approval)[0].3, strings(&[BOB, CAROL]));
    let id = approval["id"].as_str().unwrap().to_owned();
    assert!(
        !approval["approvers"]
            .as_array()
            .unwrap()
            .contains(&json!(ALICE)),
        "the requester is nobody's approver here"
    );
    vote(&t, &id, ALICE)
        .await
        .assert_problem(403, "not_an_approver");

    // Down to one other SRE: two cannot be met without Alice.
    t.set_group(TENANT_A, "sre", &[ALICE, BOB]).await;
    t.clock.advance(61);
    let refused = t
        .create(alice, "pol-2b", &deploy("production", &[]).to_string())
        .await;
    refused.assert_problem(400, "policy_unsatisfiable");
    assert!(
        refused.json()["errors"][0]["field"] == "group sre",
        "names the group: {}",
        refused.text()
    );
    // Nothing was written: the key is unused, and takes another body.
    t.create_ok(alice, "pol-2b", &deploy("staging", &[]).to_string())
        .await;
}

/// A matching forbid, and Cedar's default deny, are 403 `policy_forbidden` naming the policies;
/// the key stays unused.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn forbid_and_default_deny_refuse_with_nothing_written() {
    let t = policed().await;
    let drop = CreateBody::new("agent", &[])
        .payload(json!({"tool_name": "Bash", "input": {"command": "psql -c 'DROP TABLE users'"}}))
        .to_string();
    let refused = t.create(CI_KEY, "pol-3", &drop).await;
    refused.assert_problem(403, "policy_forbidden");
    assert_eq!(
        refused.json()["policies"],
        json!(["agents-never-drop-tables"])
    );
    let allowed = CreateBody::new("agent", &[])
        .payload(json!({"tool_name": "Bash", "input": {"command": "ls"}}))
        .to_string();
    let created = t.create(CI_KEY, "pol-3", &allowed).await;
    assert_eq!(
        created.status,
        201,
        "the key was not used: {}",
        created.text()
    );
    assert_eq!(
        created.json()["policy"]["source"]["policies"],
        json!(["agent-tools"])
    );

    // No permit for refunds at all: Cedar's default deny.
    let refund = CreateBody::new("refund", &[ALICE]).payload(json!({"amount_cents": 100}));
    let denied = t.create(CI_KEY, "pol-3b", &refund.to_string()).await;
    denied.assert_problem(403, "policy_forbidden");
    assert_eq!(denied.json()["policies"], json!([]));
    assert!(
        denied.json()["detail"]
            .as_str()
            .unwrap()
            .contains("no approval policy permits")
    );
}

/// Fail closed: a forbid that errors on a request (Cedar alone would skip it and permit), and
/// a permit requiring a group the tenant does not have, are 403 `policy_error`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_policy_that_errors_fails_closed() {
    let t = policed().await;
    // The agent forbid reads input.command: a tool call without one makes it error.
    let odd = CreateBody::new("agent", &[])
        .payload(json!({"tool_name": "Read", "input": {"path": "a.txt"}}))
        .to_string();
    let refused = t.create(CI_KEY, "pol-4", &odd).await;
    refused.assert_problem(403, "policy_error");
    assert_eq!(
        refused.json()["policies"],
        json!(["agents-never-drop-tables"])
    );
    // A payload without an environment: both deploy permits error.
    let bare = CreateBody::new("deploy", &[ALICE]).payload(json!({"build": 1}));
    let refused = t.create(CI_KEY, "pol-4b", &bare.to_string()).await;
    refused.assert_problem(403, "policy_error");

    // A group the tenant does not have.
    t.push_policy(
        TENANT_A,
        r#"@id("needs-dba") @require("dba:1") permit(principal, action, resource);"#,
        Mode::Enforce,
    )
    .await;
    t.clock.advance(61);
    let refused = t
        .create(CI_KEY, "pol-4c", &deploy("staging", &[]).to_string())
        .await;
    refused.assert_problem(403, "policy_error");
    assert!(refused.text().contains("dba"), "{}", refused.text());
}

/// A member removed from a group since the create no longer counts there: 403 `forbidden`,
/// nothing recorded — read from the cached groups, so within `KEY_CACHE_SECONDS`. A create
/// after the change lists the group as it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_removed_member_is_refused_and_a_group_change_reaches_new_creates() {
    let t = policed().await;
    let id = t
        .create_ok(CI_KEY, "pol-5", &deploy("staging", &[]).to_string())
        .await;
    t.set_group(TENANT_A, "sre", &[ALICE, CAROL, ERIN]).await;
    t.clock.advance(61);
    let refused = vote(&t, &id, BOB).await;
    refused.assert_problem(403, "forbidden");
    assert_eq!(refused.json()["group"], "sre");
    let unchanged = t.get(CI_KEY, &id).await.json();
    assert_eq!(unchanged["votes"], json!([]), "nothing recorded");
    // Erin joined after the create: she is not on this approval.
    vote(&t, &id, ERIN)
        .await
        .assert_problem(403, "not_an_approver");
    let approved = vote(&t, &id, CAROL).await.json();
    assert_eq!(approved["status"], "approved");

    let later = t
        .create(CI_KEY, "pol-5b", &deploy("staging", &[]).to_string())
        .await
        .json();
    assert_eq!(rules(&later)[0].3, strings(&[ALICE, CAROL, ERIN]));
    let later_id = later["id"].as_str().unwrap();
    assert_eq!(vote(&t, later_id, ERIN).await.json()["status"], "approved");
}

/// A requester's escalation adds people to its own rules only, never to a group's.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn escalation_cannot_join_a_group_rule() {
    let t = policed().await;
    let sneaky = deploy("staging", &[])
        .with(
            "escalation",
            json!([{"after_seconds": 600, "approvers": [MALLORY]}]),
        )
        .to_string();
    t.create(CI_KEY, "pol-6", &sneaky)
        .await
        .assert_problem(400, "invalid_request");
    let named = deploy("staging", &[])
        .with(
            "escalation",
            json!([{"after_seconds": 600, "approvers": [MALLORY], "rule": "sre"}]),
        )
        .to_string();
    t.create(CI_KEY, "pol-6b", &named)
        .await
        .assert_problem(400, "invalid_request");
    // Beside a rule of its own, a step joins that one.
    let own = deploy("staging", &[ERIN])
        .with(
            "escalation",
            json!([{"after_seconds": 600, "approvers": [MALLORY]}]),
        )
        .to_string();
    let created = t.create(CI_KEY, "pol-6c", &own).await;
    assert_eq!(created.status, 201, "{}", created.text());
}

/// No policy pushed: v6's behaviour, `policy.source` absent, approvers required.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_a_policy_requesters_choose_as_before() {
    let t = TestApp::start_with(&[("API_KEYS", &api_keys())]).await;
    let approval = t
        .create(CI_KEY, "pol-7", &deploy("production", &[ALICE]).to_string())
        .await
        .json();
    assert_eq!(approval["policy"], Value::Null, "{approval}");
    t.create(CI_KEY, "pol-7b", &deploy("production", &[]).to_string())
        .await
        .assert_problem(400, "invalid_request");
}

/// `make run`'s demo pushes its tenant's approval policy and `owners` group at start and prints
/// them: the quickstart's create that names nobody gets the owners.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_demo_pushes_a_policy_and_its_quickstart_create_gets_the_owners() {
    use countersign_tests::local_runner::{LocalRunner, isolated_env};
    let prefix = format!("demo-{}", ulid::Ulid::new().to_string().to_lowercase());
    let runner = LocalRunner::start(&isolated_env(&prefix).await).await;
    let created = runner
        .http
        .post(runner.url("/approvals"))
        .bearer_auth("cs_demo_key_0123456789")
        .header("idempotency-key", "demo-policy-1")
        .json(&json!({"action": {"type": "echo", "payload": {"say": "the policy chose"}}}))
        .send()
        .await
        .expect("create");
    assert_eq!(created.status(), 201);
    let approval: Value = created.json().await.expect("json");
    assert_eq!(approval["approvers"], json!([ALICE, BOB]));
    assert_eq!(approval["policy"]["rules"][0]["group"], "owners");
    assert_eq!(
        approval["policy"]["source"]["policies"],
        json!(["echo-needs-an-owner"])
    );
    assert!(
        !runner
            .stdout_lines_with("approval policy (version 1, pushed now; group owners = alice@example.com, bob@example.com)")
            .is_empty(),
        "the banner shows the policy"
    );
    assert!(
        !runner
            .stdout_lines_with(r#"@id("agents-never-drop-tables")"#)
            .is_empty()
    );
}
