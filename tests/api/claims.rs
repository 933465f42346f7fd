//! Approval-only action types (docs/AGENTS.md): an approved approval is a
//! single-use capability. Claimed once (eight claimers racing through the real HTTP stack, one
//! winner), replayed for its own key, reported only by its claimer, never dispatched to a
//! target, and an unreported claim is ended by the reconciler.

use std::time::Duration;

use countersign_tests::{
    ALICE, ApiKeys, BOB, CreateBody, DECIDER_A, KEY_A, KEY_B, TENANT_A, TestApp, event_types,
    eventually,
};
use serde_json::{Value, json};

/// An `agent` (approval-only) approval of a tool call for `approvers`.
fn agent_body(approvers: &[&str]) -> String {
    CreateBody::new("agent", approvers)
        .payload(json!({"tool_name": "Bash", "input": {"command": "rm -rf build/"}}))
        .to_string()
}

fn claim(t: &TestApp, api_key: &str, id: &str, key: &str) -> reqwest::RequestBuilder {
    t.http
        .post(t.url(&format!("/approvals/{id}/execution/claim")))
        .bearer_auth(api_key)
        .header("idempotency-key", key)
}

fn report(t: &TestApp, api_key: &str, id: &str, key: &str, body: Value) -> reqwest::RequestBuilder {
    t.http
        .post(t.url(&format!("/approvals/{id}/execution/report")))
        .bearer_auth(api_key)
        .header("idempotency-key", key)
        .json(&body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_claimers_at_once_make_one_claim_and_only_its_key_reports() {
    let t = TestApp::start().await;
    let id = t
        .create_ok(KEY_A, "agent-race", &agent_body(&[ALICE]))
        .await;
    let approved = t.approve(&id, ALICE).await;
    assert_eq!(approved["status"], "approved");
    assert_eq!(
        approved["execution"]["status"], "not_started",
        "approved, waiting for its claim: {approved}"
    );
    assert_eq!(approved["action"]["executes"], false);

    let claims = (0..8).map(|i| t.send(claim(&t, KEY_A, &id, &format!("claimer-{i}"))));
    let replies = futures::future::join_all(claims).await;
    let winners: Vec<usize> = (0..8).filter(|i| replies[*i].status == 200).collect();
    assert_eq!(
        winners.len(),
        1,
        "one claim wins: {:?}",
        replies.iter().map(|r| r.status).collect::<Vec<_>>()
    );
    for (i, reply) in replies.iter().enumerate() {
        if i != winners[0] {
            reply.assert_problem(409, "already_claimed");
        }
    }
    let winner = format!("claimer-{}", winners[0]);
    let claimed = replies[winners[0]].json();
    assert_eq!(claimed["execution"]["status"], "running");
    assert_eq!(claimed["execution"]["claimed_by"], winner.as_str());
    assert_eq!(
        claimed["action"]["payload"]["input"]["command"], "rm -rf build/",
        "the claim answers the payload the approvers saw"
    );

    let again = t.send(claim(&t, KEY_A, &id, &winner)).await;
    assert_eq!(
        (again.status, again.replayed()),
        (200, true),
        "{}",
        again.text()
    );

    let done = json!({"outcome": "succeeded", "detail": "removed build/"});
    let other = t
        .send(report(&t, KEY_A, &id, "claimer-x", done.clone()))
        .await;
    other.assert_problem(409, "already_claimed");
    let reported = t.send(report(&t, KEY_A, &id, &winner, done.clone())).await;
    assert_eq!(
        (reported.status, reported.replayed()),
        (200, false),
        "{}",
        reported.text()
    );
    assert_eq!(reported.json()["execution"]["status"], "succeeded");
    assert_eq!(reported.json()["execution"]["note"], "removed build/");
    let repeat = t.send(report(&t, KEY_A, &id, &winner, done)).await;
    assert_eq!((repeat.status, repeat.replayed()), (200, true));
    let changed = t
        .send(report(
            &t,
            KEY_A,
            &id,
            &winner,
            json!({"outcome": "failed"}),
        ))
        .await;
    changed.assert_problem(409, "already_reported");
    let late_claim = t.send(claim(&t, KEY_A, &id, "claimer-late")).await;
    late_claim.assert_problem(409, "already_claimed");

    let stored = t.get(KEY_A, &id).await.json();
    assert_eq!(
        (
            stored["execution"]["status"].as_str(),
            stored["execution"]["claimed_by"].as_str()
        ),
        (Some("succeeded"), Some(winner.as_str()))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn only_an_approved_approval_only_execution_is_claimed_and_only_by_its_requester_or_an_operator()
 {
    let keys = ApiKeys::new()
        .key_in(
            TENANT_A,
            TENANT_A,
            &["requester", "approver", "operator", "reader"],
            KEY_A,
        )
        .key_in(
            "tenant-b",
            "tenant-b",
            &["requester", "operator", "reader"],
            KEY_B,
        )
        .key("agent-1@acme", &["requester"], "agent-1-key-0123456789")
        .key("agent-2@acme", &["requester"], "agent-2-key-0123456789")
        .key("reader@acme", &["reader"], "reader-key-0123456789ab")
        .key("portal@tenant-a", &["decider"], DECIDER_A)
        .to_string();
    let t = TestApp::start_with(&[("API_KEYS", &keys)]).await;

    let pending = t
        .create_ok("agent-1-key-0123456789", "pending", &agent_body(&[ALICE]))
        .await;
    t.send(claim(&t, "agent-1-key-0123456789", &pending, "k1"))
        .await
        .assert_problem(409, "not_approved");
    t.send(report(
        &t,
        "agent-1-key-0123456789",
        &pending,
        "k1",
        json!({"outcome": "succeeded"}),
    ))
    .await
    .assert_problem(409, "not_claimed");
    let no_key = t
        .send(
            t.http
                .post(t.url(&format!("/approvals/{pending}/execution/claim")))
                .bearer_auth("agent-1-key-0123456789"),
        )
        .await;
    no_key.assert_problem(400, "idempotency_key_missing");

    let rejected = t
        .create_ok("agent-1-key-0123456789", "rejected", &agent_body(&[ALICE]))
        .await;
    let no = t
        .decide(
            DECIDER_A,
            &rejected,
            json!({"decision": "reject", "approver": ALICE}),
        )
        .await;
    assert_eq!(no.status, 200, "{}", no.text());
    t.send(claim(&t, "agent-1-key-0123456789", &rejected, "k1"))
        .await
        .assert_problem(409, "not_approved");

    let deploy = CreateBody::new("deploy", &[ALICE])
        .payload(json!({"build": 1}))
        .to_string();
    let executed = t.create_approved("deploy-1", &deploy, ALICE).await;
    t.send(claim(&t, KEY_A, &executed, "k1"))
        .await
        .assert_problem(409, "not_claimable");

    let approved = t
        .create_ok("agent-1-key-0123456789", "approved", &agent_body(&[ALICE]))
        .await;
    t.approve(&approved, ALICE).await;
    t.send(claim(&t, "reader-key-0123456789ab", &approved, "k1"))
        .await
        .assert_problem(403, "forbidden");
    t.send(claim(&t, "agent-2-key-0123456789", &approved, "k1"))
        .await
        .assert_problem(403, "forbidden");
    t.send(claim(&t, KEY_B, &approved, "k1"))
        .await
        .assert_problem(404, "not_found");
    let own = t
        .send(claim(&t, "agent-1-key-0123456789", &approved, "k1"))
        .await;
    assert_eq!(own.status, 200, "its requester claims it: {}", own.text());
    // The claim's key shows on the approval: another requester holding it still may not report.
    t.send(report(
        &t,
        "agent-2-key-0123456789",
        &approved,
        "k1",
        json!({"outcome": "succeeded"}),
    ))
    .await
    .assert_problem(403, "forbidden");
    assert_eq!(
        t.get(KEY_A, &approved).await.json()["execution"]["status"],
        "running"
    );
    // An operator may claim any of the tenant's approvals (here: meets the claim).
    t.send(claim(&t, KEY_A, &approved, "k2"))
        .await
        .assert_problem(409, "already_claimed");
    let bad = t
        .send(report(
            &t,
            "agent-1-key-0123456789",
            &approved,
            "k1",
            json!({"outcome": "maybe"}),
        ))
        .await;
    bad.assert_problem(400, "invalid_request");
}

/// Approved through a quorum (the completing write), an approval-only
/// execution waits for its claim: no execute job is made, no target called; a claim never
/// reported is ended `needs_reconciliation` by the reconciler, and the claimer's late report
/// still records what happened. The trail names the claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn approval_only_executions_are_never_dispatched_and_an_unreported_claim_is_reconciled() {
    let t = TestApp::start_jobs(&[("STUCK_EXECUTION_SECONDS", "60")]).await;
    let quorum = CreateBody::new("agent", &[ALICE, BOB])
        .payload(json!({"tool_name": "Write", "input": {"path": "a.txt"}}))
        .policy(json!({"rules": [{"name": "two", "approvers": [ALICE, BOB], "min_approvals": 2}]}))
        .to_string();
    let id = t.create_ok(KEY_A, "agent-quorum", &quorum).await;
    t.approve(&id, ALICE).await;
    let approved = t.approve(&id, BOB).await;
    assert_eq!(
        (
            approved["status"].as_str(),
            approved["execution"]["status"].as_str()
        ),
        (Some("approved"), Some("not_started"))
    );
    eventually("the approval's events are recorded", || async {
        event_types(&t.trail(KEY_A, &id, 50).await).contains(&"approval.approved".to_owned())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let ledger = &t.app.config.tables.execution_ledger;
    assert!(
        t.item(ledger, &format!("{id}#execute")).await.is_none(),
        "no execute job ran for an approval-only type"
    );

    let claimed = t.send(claim(&t, KEY_A, &id, "tool-use-1")).await;
    assert_eq!(claimed.status, 200, "{}", claimed.text());
    t.clock.advance(120);
    let run = countersign::jobs::Reconciler::new(t.function(countersign::Function::Reconciler))
        .run()
        .await
        .expect("the reconciler's run");
    assert_eq!((run.ended, run.requeued), (1, 0), "{run:?}");
    let stuck = t.get(KEY_A, &id).await.json();
    assert_eq!(stuck["execution"]["status"], "needs_reconciliation");
    t.send(t.retry_request(&id, None))
        .await
        .assert_problem(409, "not_retryable");
    let late = t
        .send(report(
            &t,
            KEY_A,
            &id,
            "tool-use-1",
            json!({"outcome": "failed", "detail": "denied by the tool"}),
        ))
        .await;
    assert_eq!(
        late.status,
        200,
        "the claimer's late report: {}",
        late.text()
    );
    assert_eq!(late.json()["execution"]["status"], "failed");
    eventually("the trail shows the claim and its end", || async {
        let types = event_types(&t.trail(KEY_A, &id, 50).await);
        [
            "execution.claimed",
            "execution.needs_reconciliation",
            "execution.resolved",
        ]
        .iter()
        .all(|kind| types.contains(&(*kind).to_owned()))
    })
    .await;
    let events = t.trail(KEY_A, &id, 50).await;
    let claimed = events
        .iter()
        .find(|e| e["type"] == "execution.claimed")
        .expect("claimed");
    assert_eq!(claimed["actor"]["principal"], TENANT_A);
    assert_eq!(claimed["data"]["claimed_by"], "tool-use-1");
    assert!(
        !event_types(&events).contains(&"execution.queued".to_owned()),
        "never queued: {:?}",
        event_types(&events)
    );
}
