//! Who may do what (docs/API.md "Who may do what"): every route checks its key's role, an
//! approval records who requested it, and its requester never decides it, on any channel —
//! refused by the same conditional write that records a decision.

use countersign_tests::{
    ACME_SECRET, ALICE, ALICE_KEY, AUDITOR, ApiKeys, BOB, BOB_KEY, CI, CI_KEY, MALLORY, OPS,
    OPS_KEY, PORTAL, PORTAL_KEY, READER_KEY, TENANT_A, TestApp, decided_event, decision_body,
    deploy_body, execute_key,
};
use serde_json::{Value, json};
use std::time::Duration;

fn api_keys() -> String {
    ApiKeys::new()
        .key(CI, &["requester"], CI_KEY)
        // A person who both asks for approvals and approves others'.
        .key(ALICE, &["requester", "approver"], ALICE_KEY)
        .key(BOB, &["approver"], BOB_KEY)
        .key(PORTAL, &["decider"], PORTAL_KEY)
        .key(AUDITOR, &["reader"], READER_KEY)
        .key(OPS, &["operator"], OPS_KEY)
        .to_string()
}

async fn start() -> TestApp {
    TestApp::start_with(&[("API_KEYS", &api_keys())]).await
}

#[tokio::test]
async fn every_route_checks_its_role() {
    let t = start().await;
    let body = deploy_body(1, &[ALICE, BOB]);

    let refused = t.create(READER_KEY, "roles-1", &body).await;
    refused.assert_problem(403, "forbidden");
    let refused = t.create(BOB_KEY, "roles-1", &body).await;
    refused.assert_problem(403, "forbidden");
    assert_eq!(
        t.approval_count().await,
        0,
        "a refused create writes nothing"
    );

    let created = t.create(CI_KEY, "roles-1", &body).await;
    assert_eq!(created.status, 201, "{}", created.text());
    let id = created.json()["id"].as_str().unwrap().to_owned();
    assert_eq!(created.json()["requested_by"], CI);
    for key in [READER_KEY, CI_KEY, BOB_KEY, PORTAL_KEY, OPS_KEY] {
        let read = t.get(key, &id).await;
        assert_eq!(read.status, 200, "every role reads");
        assert_eq!(read.json()["requested_by"], CI);
    }

    // Deciding takes `approver` (as itself) or `decider` (for anyone listed).
    for key in [CI_KEY, READER_KEY, OPS_KEY] {
        let refused = t.decide(key, &id, decision_body("approve", ALICE)).await;
        refused.assert_problem(403, "forbidden");
    }
    let as_someone_else = t
        .decide(BOB_KEY, &id, decision_body("approve", ALICE))
        .await;
    as_someone_else.assert_problem(403, "forbidden");
    for key in [CI_KEY, BOB_KEY, READER_KEY, PORTAL_KEY] {
        let refused = t.send(t.retry_request_as(key, &id, None)).await;
        assert_eq!(
            refused.problem(),
            (403, "forbidden".into()),
            "only an operator retries"
        );
    }
    assert_eq!(t.get(READER_KEY, &id).await.json()["status"], "pending");

    // An approver's own vote: the body names it, or nobody.
    let own = t.decide(BOB_KEY, &id, json!({"decision": "approve"})).await;
    assert_eq!(own.status, 200, "{}", own.text());
    assert_eq!(own.json()["decision"]["approver"], BOB);
    let again = t.decide(BOB_KEY, &id, decision_body("approve", BOB)).await;
    assert_eq!((again.status, again.replayed()), (200, true));

    // The operator's role passes; the execution's state answers.
    let not_retryable = t.send(t.retry_request_as(OPS_KEY, &id, None)).await;
    assert_eq!(not_retryable.status, 409, "{}", not_retryable.text());

    let unknown = t.get("nobody-0123456789abcdef", &id).await;
    assert_eq!(unknown.status, 401);
}

#[tokio::test]
async fn the_requester_never_decides_its_own_approval() {
    let t = start().await;
    let created = t
        .create(ALICE_KEY, "sod-1", &deploy_body(2, &[ALICE, BOB]))
        .await;
    assert_eq!(created.status, 201, "{}", created.text());
    let id = created.json()["id"].as_str().unwrap().to_owned();
    assert_eq!(created.json()["requested_by"], ALICE);

    // API: as itself, and through a decider acting for it.
    let own = t
        .decide(ALICE_KEY, &id, json!({"decision": "approve"}))
        .await;
    own.assert_problem(403, "self_approval_forbidden");
    let via_portal = t
        .decide(PORTAL_KEY, &id, decision_body("approve", ALICE))
        .await;
    via_portal.assert_problem(403, "self_approval_forbidden");

    // Review page: her own link shows no buttons, and a post anyway is refused.
    let token = t.review_token(TENANT_A, &id, ALICE);
    let own_page = t.send(t.http.get(t.review_link(&id, ALICE))).await.text();
    assert!(
        own_page.contains("You requested this approval"),
        "{own_page}"
    );
    assert!(!own_page.contains(r#"value="approve""#));
    let page = t
        .send(
            t.http
                .post(t.url(&format!("/approvals/{id}/decision")))
                .header("content-type", "application/x-www-form-urlencoded")
                .body(format!("decision=approve&token={token}")),
        )
        .await;
    assert_eq!(page.status, 403);
    assert!(
        page.text().contains("You requested this approval"),
        "{}",
        page.text()
    );

    // Webhook: recorded and acknowledged, not applied.
    let delivered = t
        .deliver(
            "acme",
            ACME_SECRET,
            "msg_sod_1",
            &decided_event(&id, "approve", ALICE),
        )
        .await;
    assert_eq!(delivered.status, 200, "{}", delivered.text());
    assert_eq!(delivered.json()["outcome"], "self_approval_forbidden");

    let approval = t.get(READER_KEY, &id).await.json();
    assert_eq!(approval["status"], "pending", "{approval}");
    assert_eq!(approval["decision"], Value::Null);

    // Anyone else listed decides.
    let bob = t.decide(BOB_KEY, &id, json!({"decision": "approve"})).await;
    assert_eq!(bob.status, 200, "{}", bob.text());
    assert_eq!(bob.json()["status"], "approved");
}

/// The requester listed in another spelling is still the requester.
#[tokio::test]
async fn another_spelling_of_the_requester_is_the_requester() {
    let t = start().await;
    let shouting = "Alice@Example.com ";
    let only_her = t
        .create(ALICE_KEY, "sod-3", &deploy_body(9, &[shouting]))
        .await;
    only_her.assert_problem(400, "policy_unsatisfiable");
    let created = t
        .create(ALICE_KEY, "sod-3", &deploy_body(9, &[shouting, BOB]))
        .await;
    assert_eq!(created.status, 201, "{}", created.text());
    let id = created.json()["id"].as_str().unwrap().to_owned();
    let via_portal = t
        .decide(PORTAL_KEY, &id, decision_body("approve", shouting))
        .await;
    via_portal.assert_problem(403, "self_approval_forbidden");
    let page = t
        .send(
            t.http
                .post(t.url(&format!("/approvals/{id}/decision")))
                .header("content-type", "application/x-www-form-urlencoded")
                .body(format!(
                    "decision=approve&token={}",
                    t.review_token(TENANT_A, &id, shouting)
                )),
        )
        .await;
    assert_eq!(page.status, 403);
    assert_eq!(t.get(READER_KEY, &id).await.json()["status"], "pending");
}

#[tokio::test]
async fn an_approval_only_its_requester_could_approve_is_refused_at_create() {
    let t = start().await;
    let refused = t
        .create(ALICE_KEY, "sod-2", &deploy_body(3, &[ALICE]))
        .await;
    refused.assert_problem(400, "policy_unsatisfiable");
    assert_eq!(t.approval_count().await, 0);
    let listed_with_another = t
        .create(ALICE_KEY, "sod-2", &deploy_body(3, &[ALICE, BOB]))
        .await;
    assert_eq!(listed_with_another.status, 201);
}

/// The development form (`tenant=key`) gives a key every role, with the tenant as its
/// principal. It stands for a whole team, so the key half of separation of duties does not apply
/// (docs/API.md "Who may do what"): the key that created an approval decides it on behalf of a
/// listed approver, as in v1, and the action runs once. The approver half always holds: naming
/// the tenant itself as the approver is a self-approval.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_development_key_creates_and_decides_but_never_approves_as_the_requester() {
    let dev = format!("{TENANT_A}={}", countersign_tests::KEY_A);
    let t = TestApp::start_jobs(&[("API_KEYS", &dev)]).await;
    let key = countersign_tests::KEY_A;
    let id = t.create_ok(key, "dev-1", &deploy_body(4, &[ALICE])).await;
    let approval = t.get(key, &id).await.json();
    assert_eq!(
        approval["requested_by"], TENANT_A,
        "the tenant is its principal"
    );
    let decided = t.decide(key, &id, decision_body("approve", ALICE)).await;
    assert_eq!(decided.status, 200, "{}", decided.text());
    assert_eq!(decided.json()["status"], "approved");
    let done = t
        .wait_for_execution(key, &id, Duration::from_secs(60))
        .await;
    assert_eq!(done["execution"]["status"], "succeeded");
    let sent = execute_key("dev-1", &id);
    assert_eq!(
        (t.downstream().calls(&sent), t.downstream().effects(&sent)),
        (1, 1),
        "executed once"
    );

    // The approver half: the tenant (the requester) named as the approver is refused, on an
    // approval that lists it beside another approver.
    let listed = t
        .create_ok(key, "dev-2", &deploy_body(5, &[TENANT_A, ALICE]))
        .await;
    let own = t
        .decide(key, &listed, decision_body("approve", TENANT_A))
        .await;
    own.assert_problem(403, "self_approval_forbidden");
    let cancelled = t.send(cancel(&t, key, &listed, None)).await;
    assert_eq!(cancelled.status, 200, "{}", cancelled.text());
    assert_eq!(cancelled.json()["status"], "cancelled");
}

/// Every development key is named in a warning at start.
#[test]
fn the_start_up_warning_names_each_development_key() {
    let keys =
        countersign::auth::ApiKeys::parse("acme=acme-key-0123456789,beta=beta-key-0123456789")
            .unwrap();
    assert_eq!(
        keys.development_key_warnings(),
        [
            "development key for tenant acme: every role, no separation of duties by key",
            "development key for tenant beta: every role, no separation of duties by key",
        ]
    );
}

fn cancel(t: &TestApp, key: &str, id: &str, body: Option<Value>) -> reqwest::RequestBuilder {
    let request = t
        .http
        .post(t.url(&format!("/approvals/{id}/cancel")))
        .bearer_auth(key);
    match body {
        Some(body) => request.json(&body),
        None => request,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cancelled_approval_is_never_decided_nor_executed() {
    let t = TestApp::start_jobs(&[("API_KEYS", &api_keys())]).await;
    let created = t
        .create(CI_KEY, "cancel-1", &deploy_body(5, &[ALICE, BOB]))
        .await;
    assert_eq!(created.status, 201, "{}", created.text());
    let id = created.json()["id"].as_str().unwrap().to_owned();

    // Not an approver's, nor another requester's, to cancel.
    for key in [BOB_KEY, ALICE_KEY, READER_KEY, PORTAL_KEY] {
        let refused = t.send(cancel(&t, key, &id, None)).await;
        refused.assert_problem(403, "forbidden");
    }
    let bad = t
        .send(cancel(&t, CI_KEY, &id, Some(json!({"reason": 7}))))
        .await;
    bad.assert_problem(400, "invalid_request");

    let cancelled = t
        .send(cancel(
            &t,
            CI_KEY,
            &id,
            Some(json!({"reason": "wrong build"})),
        ))
        .await;
    assert_eq!(cancelled.status, 200, "{}", cancelled.text());
    let approval = cancelled.json();
    assert_eq!(approval["status"], "cancelled");
    assert_eq!(approval["cancellation"]["by"], CI);
    assert_eq!(approval["cancellation"]["reason"], "wrong build");
    let again = t.send(cancel(&t, CI_KEY, &id, None)).await;
    assert_eq!((again.status, again.replayed()), (200, true));

    // Every channel's vote is refused after it.
    let vote = t.decide(BOB_KEY, &id, json!({"decision": "approve"})).await;
    vote.assert_problem(409, "already_decided");
    let hook = t
        .deliver(
            "acme",
            ACME_SECRET,
            "msg_cancel_1",
            &decided_event(&id, "approve", BOB),
        )
        .await;
    assert_eq!(hook.json()["outcome"], "superseded", "{}", hook.text());
    let page = t.send(t.http.get(t.review_link(&id, BOB))).await;
    assert!(page.text().contains("was cancelled"), "{}", page.text());

    // Nothing executes (the notifications sent at create are all that reach downstream).
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let approval = t.get(READER_KEY, &id).await.json();
    assert_eq!(approval["status"], "cancelled");
    assert_eq!(approval["execution"]["status"], "not_started");
    assert_eq!(t.downstream().calls(&execute_key("cancel-1", &id)), 0);

    // An operator cancels anyone's; a decided one is 409, an expired one 410, unknown 404.
    let other = t
        .create(ALICE_KEY, "cancel-2", &deploy_body(6, &[BOB]))
        .await;
    let other = other.json()["id"].as_str().unwrap().to_owned();
    let by_ops = t.send(cancel(&t, OPS_KEY, &other, None)).await;
    assert_eq!(by_ops.status, 200, "{}", by_ops.text());
    assert_eq!(by_ops.json()["cancellation"]["by"], OPS);
    let decided = t.create(CI_KEY, "cancel-3", &deploy_body(7, &[BOB])).await;
    let decided = decided.json()["id"].as_str().unwrap().to_owned();
    assert_eq!(
        t.decide(BOB_KEY, &decided, json!({"decision": "approve"}))
            .await
            .status,
        200
    );
    let late = t.send(cancel(&t, CI_KEY, &decided, None)).await;
    late.assert_problem(409, "already_decided");
    let unknown = t
        .send(cancel(&t, CI_KEY, "apr_01JD3ZZZZZZZZZZZZZZZZZZZZZ", None))
        .await;
    assert_eq!(unknown.status, 404);
    let expiring = t.create(CI_KEY, "cancel-4", &deploy_body(8, &[BOB])).await;
    let expiring = expiring.json()["id"].as_str().unwrap().to_owned();
    t.clock.advance(86_401);
    let expired = t.send(cancel(&t, CI_KEY, &expiring, None)).await;
    expired.assert_problem(410, "approval_expired");
}

/// A cancel and an approve sent at once: exactly one applies, and only an approved one runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cancel_racing_a_vote_has_one_winner() {
    let t = TestApp::start_jobs(&[("API_KEYS", &api_keys())]).await;
    let mut approved = Vec::new();
    let mut rounds = Vec::new();
    for round in 0..20 {
        let key = format!("race-{round}");
        let id = t.create_ok(CI_KEY, &key, &deploy_body(round, &[BOB])).await;
        let (cancelled, voted) = tokio::join!(
            t.send(cancel(&t, CI_KEY, &id, None)),
            t.decide(BOB_KEY, &id, json!({"decision": "approve"})),
        );
        let wins = [cancelled.status, voted.status];
        assert!(
            wins == [200, 409] || wins == [409, 200],
            "round {round}: cancel {} / vote {}",
            cancelled.text(),
            voted.text()
        );
        let status = t.get(READER_KEY, &id).await.json()["status"].clone();
        assert_eq!(
            status,
            if voted.status == 200 {
                "approved"
            } else {
                "cancelled"
            }
        );
        if voted.status == 200 {
            approved.push((id.clone(), key.clone()));
        }
        rounds.push((id, key, voted.status == 200));
    }
    for (id, _) in &approved {
        let done = t
            .wait_for_execution(READER_KEY, id, std::time::Duration::from_secs(30))
            .await;
        assert_eq!(done["execution"]["status"], "succeeded");
    }
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let mut executed = 0;
    for (id, key, was_approved) in &rounds {
        let key = execute_key(key, id);
        let calls = t.downstream().calls(&key);
        assert_eq!(calls, usize::from(*was_approved), "{key}");
        executed += calls;
    }
    println!(
        "cancel vs vote, 20 rounds: {} approved (each executed once), {} cancelled; {executed} calls",
        approved.len(),
        20 - approved.len()
    );
}

/// The requester holding a `decider` key as well (a principal may hold several keys) approves
/// nothing it requested, whoever its vote names: the decision's own condition compares the key's
/// principal with the approval's requester. The same key decides others' approvals.
#[tokio::test]
async fn a_decider_key_of_the_requester_never_decides_its_own_request() {
    let keys = ApiKeys::new()
        .key(CI, &["requester"], CI_KEY)
        .key("CI@acme ", &["decider"], PORTAL_KEY)
        .key(OPS, &["requester"], OPS_KEY)
        .to_string();
    let t = TestApp::start_with(&[("API_KEYS", &keys)]).await;
    let id = t
        .create_ok(CI_KEY, "sod-1", &deploy_body(1, &[ALICE, BOB]))
        .await;
    for approver in [ALICE, BOB, MALLORY] {
        for decision in ["approve", "reject"] {
            let refused = t
                .decide(PORTAL_KEY, &id, decision_body(decision, approver))
                .await;
            assert_eq!(
                refused.problem(),
                (403, "self_approval_forbidden".into()),
                "{decision} as {approver}: {}",
                refused.text()
            );
        }
    }
    let approval = t.get(CI_KEY, &id).await.json();
    assert_eq!(approval["status"], "pending", "{approval}");
    assert_eq!(approval["decision"], Value::Null);

    // Another requester's approval: the same key decides it for a listed approver.
    let other = t
        .create_ok(OPS_KEY, "sod-2", &deploy_body(2, &[ALICE]))
        .await;
    let decided = t
        .decide(PORTAL_KEY, &other, decision_body("approve", ALICE))
        .await;
    assert_eq!(decided.status, 200, "{}", decided.text());
    assert_eq!(decided.json()["status"], "approved");
}

/// The requester listed in another spelling counts as the requester when a policy is checked, as
/// it does when a vote is: a rule that needs its vote is unsatisfiable at create (400), not an
/// approval that can never be approved.
#[tokio::test]
async fn a_policy_needing_the_requester_in_another_spelling_is_unsatisfiable() {
    let t = start().await;
    let body = json!({
        "action": {"type": "deploy", "payload": {}},
        "approvers": ["CI@acme", ALICE],
        "policy": {"rules": [{"name": "both", "approvers": ["CI@acme", ALICE], "min_approvals": 2}]},
    })
    .to_string();
    let refused = t.create(CI_KEY, "sod-policy", &body).await;
    refused.assert_problem(400, "policy_unsatisfiable");
    assert_eq!(t.approval_count().await, 0);
}
