//! k-of-n quorum votes (docs/API.md "Quorum policy"): one vote per person, AND across rules, a veto by
//! any reject, and the vote that completes the quorum sets the status in the same conditional
//! write that records it — through the real router against the local AWS, racing.

use std::collections::BTreeSet;
use std::time::Duration;

use countersign_tests::{
    ACME_SECRET, ALICE, ALICE_KEY, ApiKeys, BOB, CAROL, CI, CI_KEY, CreateBody, DAVE, ERIN,
    MALLORY, PORTAL, PORTAL_KEY, Reply, TENANT_A, TOKEN_SECRET, TestApp, decided_event,
    decision_body, execute_key,
};
use serde_json::{Value, json};

fn api_keys() -> String {
    ApiKeys::new()
        .key(CI, &["requester"], CI_KEY)
        .key(ALICE, &["approver"], ALICE_KEY)
        .key(PORTAL, &["decider"], PORTAL_KEY)
        .to_string()
}

/// Engineering 2-of-3 AND security 1-of-1 (the spec's example).
fn engineering_and_security(build: u64) -> String {
    CreateBody::new("deploy", &[ALICE, BOB, CAROL, DAVE])
        .payload(json!({"service": "api", "build": build}))
        .policy(json!({"rules": [
            {"name": "engineering", "approvers": [ALICE, BOB, CAROL], "min_approvals": 2},
            {"name": "security", "approvers": [DAVE], "min_approvals": 1}]}))
        .expires_in(86_400)
        .to_string()
}

fn two_of_five(build: u64) -> String {
    CreateBody::new("deploy", &[ALICE, BOB, CAROL, DAVE, ERIN])
        .payload(json!({"service": "api", "build": build}))
        .policy(json!({"rules": [
            {"name": "oncall", "approvers": [ALICE, BOB, CAROL, DAVE, ERIN], "min_approvals": 2}]}))
        .expires_in(86_400)
        .to_string()
}

async fn vote(t: &TestApp, id: &str, approver: &str, decision: &str) -> Reply {
    t.decide(PORTAL_KEY, id, decision_body(decision, approver))
        .await
}

fn approvals_per_rule(approval: &Value) -> Vec<u64> {
    approval["policy"]["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .map(|r| r["approvals"].as_u64().expect("approvals"))
        .collect()
}

fn voters(approval: &Value) -> Vec<(String, String)> {
    approval["votes"]
        .as_array()
        .expect("votes")
        .iter()
        .map(|v| {
            (
                v["approver"].as_str().unwrap().to_owned(),
                v["vote"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn votes_count_once_per_person_and_the_completing_vote_decides() {
    let t = TestApp::start_with(&[("API_KEYS", &api_keys())]).await;
    let id = t
        .create_ok(CI_KEY, "q-1", &engineering_and_security(1))
        .await;
    let created = t.get(CI_KEY, &id).await.json();
    assert_eq!(approvals_per_rule(&created), [0, 0]);
    assert_eq!(created["policy"]["rules"][0]["min_approvals"], 2);
    assert_eq!(created["votes"], json!([]));

    // A vote that does not complete the quorum: counted, still pending, one round trip.
    t.calls.take();
    let first = t
        .decide(ALICE_KEY, &id, json!({"decision": "approve"}))
        .await;
    assert_eq!(first.status, 200, "{}", first.text());
    assert_eq!(t.calls.take(), ["UpdateItem"], "a counted vote");
    let approval = first.json();
    assert_eq!(approval["status"], "pending");
    assert_eq!(approvals_per_rule(&approval), [1, 0]);
    assert_eq!(voters(&approval), [(ALICE.into(), "approve".into())]);
    assert_eq!(approval["votes"][0]["channel"], "api");
    assert_eq!(approval["decision"], Value::Null);
    assert_eq!(approval["execution"]["status"], "not_started");

    // The same vote again: replayed; another vote by the same person: already_voted.
    let again = t
        .decide(ALICE_KEY, &id, json!({"decision": "approve"}))
        .await;
    assert_eq!(again.status, 200);
    assert!(again.replayed());
    let changed = t
        .decide(ALICE_KEY, &id, json!({"decision": "reject"}))
        .await;
    changed.assert_problem(409, "already_voted");
    assert_eq!(changed.json()["approval"]["status"], "pending");
    assert_eq!(t.calls.take(), ["UpdateItem", "UpdateItem"]);

    // Bob, through a webhook: engineering holds (2 of 2), security does not yet.
    let delivered = t
        .deliver(
            "acme",
            ACME_SECRET,
            "msg_q_1",
            &decided_event(&id, "approve", BOB),
        )
        .await;
    assert_eq!(delivered.json()["outcome"], "applied");
    let approval = t.get(CI_KEY, &id).await.json();
    assert_eq!(approval["status"], "pending");
    assert_eq!(approvals_per_rule(&approval), [2, 0]);

    // The review page shows each rule's progress and who voted.
    let page = t.send(t.http.get(t.review_link(&id, DAVE))).await.text();
    assert!(
        page.contains("engineering") && page.contains("2 of 2 approvals"),
        "{page}"
    );
    assert!(page.contains("security") && page.contains("0 of 1 approvals"));
    assert!(page.contains(BOB) && page.contains("a webhook"));
    assert!(page.contains(r#"value="approve""#), "dave may still vote");
    let alice_page = t.send(t.http.get(t.review_link(&id, ALICE))).await.text();
    assert!(alice_page.contains("Your vote is recorded"));
    assert!(!alice_page.contains(r#"value="approve""#), "one vote each");

    // Dave completes the quorum: approved, queued, decided by his vote, in ≤ 2 round trips.
    t.calls.take();
    let completing = vote(&t, &id, DAVE, "approve").await;
    assert_eq!(completing.status, 200, "{}", completing.text());
    assert_eq!(
        t.calls.take(),
        ["UpdateItem", "UpdateItem"],
        "the completing vote: refused as a counted vote, written as the completing one"
    );
    let approval = completing.json();
    assert_eq!(approval["status"], "approved");
    assert_eq!(approval["decision"]["approver"], DAVE);
    assert_eq!(approval["decision"]["outcome"], "approved");
    assert_eq!(approval["execution"]["status"], "queued");
    assert_eq!(approvals_per_rule(&approval), [2, 1]);
    assert_eq!(voters(&approval).len(), 3);

    // After the outcome: a new vote is not recorded; a counted vote repeats as a replay.
    let late = vote(&t, &id, CAROL, "approve").await;
    late.assert_problem(409, "already_decided");
    assert_eq!(late.json()["approval"]["status"], "approved");
    let repeat = vote(&t, &id, BOB, "approve").await;
    assert_eq!(repeat.status, 200);
    assert!(repeat.replayed());
    assert_eq!(voters(&t.get(CI_KEY, &id).await.json()).len(), 3);
}

#[tokio::test]
async fn a_reject_vetoes_and_policies_are_checked_at_create() {
    let t = TestApp::start_with(&[("API_KEYS", &api_keys())]).await;
    let id = t.create_ok(CI_KEY, "q-veto", &two_of_five(1)).await;
    assert_eq!(vote(&t, &id, ALICE, "approve").await.status, 200);
    t.calls.take();
    let veto = vote(&t, &id, ERIN, "reject").await;
    assert_eq!(t.calls.take(), ["UpdateItem"], "a veto is one write");
    let approval = veto.json();
    assert_eq!(approval["status"], "rejected");
    assert_eq!(approval["decision"]["approver"], ERIN);
    assert_eq!(approval["execution"]["status"], "not_started");
    assert_eq!(
        voters(&approval),
        [
            (ALICE.into(), "approve".into()),
            (ERIN.into(), "reject".into())
        ]
    );

    let policy = |rules: Value| {
        json!({"action": {"type": "deploy"}, "approvers": [ALICE, BOB, CI], "policy": rules})
            .to_string()
    };
    for (n, bad) in [
        json!({"rules": []}),
        json!({"rules": [{"name": "a", "approvers": [MALLORY], "min_approvals": 1}]}),
        json!({"rules": [{"name": "a", "approvers": [ALICE], "min_approvals": 2}]}),
        json!({"rules": [{"name": "a", "approvers": [ALICE], "min_approvals": 1},
                         {"name": "a", "approvers": [BOB], "min_approvals": 1}]}),
    ]
    .into_iter()
    .enumerate()
    {
        let refused = t.create(CI_KEY, &format!("q-bad-{n}"), &policy(bad)).await;
        refused.assert_problem(400, "invalid_request");
    }
    // Two of {alice, the requester}: only the requester's own vote could complete it.
    let self_only =
        policy(json!({"rules": [{"name": "a", "approvers": [ALICE, CI], "min_approvals": 2}]}));
    let refused = t.create(CI_KEY, "q-self", &self_only).await;
    refused.assert_problem(400, "policy_unsatisfiable");
    assert_eq!(
        refused.json()["errors"][0]["field"],
        "policy.rules[0].min_approvals"
    );
    assert_eq!(t.approval_count().await, 1, "refused creates write nothing");
}

/// Engineering 2-of-3 AND security 1-of-1; all four approve at once, 50 rounds.
#[tokio::test]
async fn concurrent_votes_meet_the_quorum_exactly_once() {
    let t = TestApp::start_jobs(&[("API_KEYS", &api_keys())]).await;
    let mut ids = Vec::new();
    for round in 0..50u64 {
        let id = t
            .create_ok(
                CI_KEY,
                &format!("race-{round}"),
                &engineering_and_security(round),
            )
            .await;
        let replies = futures::future::join_all(
            [ALICE, BOB, CAROL, DAVE].map(|who| vote(&t, &id, who, "approve")),
        )
        .await;
        let approval = t.get(CI_KEY, &id).await.json();
        assert_eq!(approval["status"], "approved", "round {round}: {approval}");
        let mut answered: BTreeSet<String> = BTreeSet::new();
        let mut deciding = 0;
        for (who, reply) in [ALICE, BOB, CAROL, DAVE].iter().zip(&replies) {
            match reply.status {
                200 => {
                    assert!(!reply.replayed(), "round {round}: one request per voter");
                    answered.insert((*who).to_owned());
                    if reply.json()["status"] == "approved" {
                        deciding += 1;
                    }
                }
                409 => {
                    assert_eq!(reply.code(), "already_decided", "round {round}");
                    assert_eq!(
                        reply.json()["approval"]["status"],
                        "approved",
                        "round {round}: a 409 reports the final approval"
                    );
                }
                other => panic!("round {round}: {who} answered {other}: {}", reply.text()),
            }
        }
        let recorded: BTreeSet<String> = voters(&approval).into_iter().map(|(a, _)| a).collect();
        assert_eq!(
            recorded, answered,
            "round {round}: the votes answered 200 are the votes recorded"
        );
        assert_eq!(deciding, 1, "round {round}: exactly one vote decided");
        assert!(
            answered.contains(DAVE),
            "round {round}: security's vote is needed"
        );
        let counts = approvals_per_rule(&approval);
        assert!(
            counts[0] >= 2 && counts[1] == 1,
            "round {round}: {counts:?}"
        );
        ids.push((round, id));
    }
    for (round, id) in &ids {
        let done = t
            .wait_for_execution(CI_KEY, id, Duration::from_secs(60))
            .await;
        assert_eq!(done["execution"]["status"], "succeeded", "round {round}");
        let key = execute_key(&format!("race-{round}"), id);
        assert_eq!(
            t.downstream().calls(&key),
            1,
            "round {round}: executed once"
        );
        assert_eq!(t.downstream().effects(&key), 1);
    }
}

/// 2-of-5: five approves and one reject at once, 50 rounds.
#[tokio::test]
async fn a_concurrent_veto_and_quorum_have_one_outcome() {
    let t = TestApp::start_jobs(&[("API_KEYS", &api_keys())]).await;
    let (mut approved, mut rejected) = (0, 0);
    for round in 0..50u64 {
        let id = t
            .create_ok(CI_KEY, &format!("veto-{round}"), &two_of_five(round))
            .await;
        // The veto comes from one of the five: its approve is not sent.
        let vetoer = [ALICE, BOB, CAROL, DAVE, ERIN][(round % 5) as usize];
        let requests = [ALICE, BOB, CAROL, DAVE, ERIN]
            .into_iter()
            .map(|who| (who, if who == vetoer { "reject" } else { "approve" }));
        let (t, id) = (&t, &id);
        // The veto leaves 0–285 ms after the approves, so that rounds see it land before, among
        // and after them (moto serialises requests; without a spread it always lands first).
        let lag = Duration::from_millis(15 * (round % 20));
        let replies = futures::future::join_all(requests.map(|(who, decision)| async move {
            if decision == "reject" {
                tokio::time::sleep(lag).await;
            }
            (who, decision, vote(t, id, who, decision).await)
        }))
        .await;
        let approval = t.get(CI_KEY, id).await.json();
        let votes = voters(&approval);
        let winners: Vec<_> = replies.iter().filter(|(_, _, r)| r.status == 200).collect();
        let recorded: BTreeSet<String> = votes.iter().map(|(a, _)| a.clone()).collect();
        let answered: BTreeSet<String> = winners.iter().map(|(w, _, _)| (*w).to_owned()).collect();
        assert_eq!(recorded, answered, "round {round}");
        for (who, _, reply) in &replies {
            if reply.status != 200 {
                assert_eq!(
                    reply.problem(),
                    (409, "already_decided".into()),
                    "round {round}: {who}"
                );
            }
        }
        let approves_before_veto = votes.iter().take_while(|(_, v)| v == "approve").count();
        match approval["status"].as_str() {
            Some("approved") => {
                approved += 1;
                assert_eq!(
                    votes.len(),
                    2,
                    "round {round}: the second approve decides: {votes:?}"
                );
                assert!(votes.iter().all(|(_, v)| v == "approve"));
            }
            Some("rejected") => {
                rejected += 1;
                assert_eq!(votes.last().unwrap().1, "reject", "round {round}");
                assert!(
                    approves_before_veto < 2,
                    "round {round}: a veto after the quorum was met: {votes:?}"
                );
                assert_eq!(approval["decision"]["approver"], vetoer);
            }
            other => panic!("round {round}: {other:?}"),
        }
        let deciding = replies
            .iter()
            .filter(|(_, _, r)| r.status == 200 && r.json()["status"] != "pending")
            .count();
        assert_eq!(deciding, 1, "round {round}: one outcome");
    }
    println!("2-of-5 with a veto, 50 rounds: {approved} approved, {rejected} rejected");
    assert!(
        approved > 0 && rejected > 0,
        "both outcomes occur: {approved} approved, {rejected} rejected"
    );
}

/// There is no step between "vote recorded" and "quorum decided" to crash in: the real runner
/// binary is killed (SIGKILL) while 100 votes race on 25 approvals, and every approval's votes
/// then agree with its status and its stored counts; after a restart, the clients' retries
/// finish every approval and each executes once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn killing_the_runner_mid_vote_never_leaves_a_met_quorum_pending() {
    use countersign::store::Store;
    use countersign::store::Tables;
    use countersign_tests::jobs::Downstream;
    use countersign_tests::local_runner::{LocalRunner, isolated_env};
    use futures::StreamExt;

    const APPROVALS: u64 = 25;
    let downstream = Downstream::default();
    let target = downstream.serve().await;
    let prefix = format!("qc-{}", ulid::Ulid::new().to_string().to_lowercase());
    let mut env = isolated_env(&prefix).await;
    env.extend(
        [
            ("API_KEYS", api_keys()),
            (
                "ACTION_TARGETS",
                json!({"deploy": {"url": format!("{target}/ok"), "idempotent": true}}).to_string(),
            ),
            ("NOTIFIER_URL", format!("{target}/notify")),
            ("DECISION_TOKEN_SECRET", TOKEN_SECRET.to_owned()),
            (
                "WEBHOOK_SOURCES",
                json!({"acme": {"tenant": TENANT_A, "secrets": [ACME_SECRET]}}).to_string(),
            ),
            (
                "PUBLIC_BASE_URL",
                "https://approvals.example.com".to_owned(),
            ),
        ]
        .map(|(k, v)| (k.to_owned(), v)),
    );
    let mut runner = LocalRunner::start(&env).await;
    let http = reqwest::Client::new();
    let mut ids = Vec::new();
    for i in 0..APPROVALS {
        let reply = http
            .post(runner.url("/approvals"))
            .bearer_auth(CI_KEY)
            .header("content-type", "application/json")
            .header("idempotency-key", format!("crash-{i}"))
            .body(engineering_and_security(i))
            .send()
            .await
            .expect("create");
        assert_eq!(reply.status(), 201);
        let body: Value = reply.json().await.expect("json");
        ids.push(body["id"].as_str().expect("id").to_owned());
    }
    let votes: Vec<(String, &str)> = ids
        .iter()
        .flat_map(|id| [ALICE, BOB, CAROL, DAVE].map(|who| (id.clone(), who)))
        .collect();
    let answered = std::sync::atomic::AtomicUsize::new(0);
    let send_votes = |base: String| {
        let (http, votes, answered) = (http.clone(), votes.clone(), &answered);
        async move {
            futures::stream::iter(votes)
                .map(|(id, who)| {
                    let (http, base) = (http.clone(), base.clone());
                    async move {
                        let reply = http
                            .post(format!("{base}/approvals/{id}/decision"))
                            .bearer_auth(PORTAL_KEY)
                            .json(&decision_body("approve", who))
                            .send()
                            .await
                            .map(|r| r.status().as_u16());
                        answered.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        reply
                    }
                })
                .buffer_unordered(100)
                .collect::<Vec<_>>()
                .await
        }
    };

    // Kill the runner while the 100 votes are in flight, once 40 have been answered.
    let base = runner.base.clone();
    let (answers, ()) = tokio::join!(send_votes(base), async {
        while answered.load(std::sync::atomic::Ordering::SeqCst) < 40 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        runner.kill();
    });
    let answered = answers.iter().filter(|a| a.is_ok()).count();
    println!(
        "killed with 100 votes in flight: {answered} answered, {} cut off",
        100 - answered
    );
    assert!(answered < 100, "the kill came too late to cut any vote off");

    // Every approval's votes against its status, and the counts the conditions compare.
    let sdk = countersign_tests::sdk_config().await;
    let dynamo = aws_sdk_dynamodb::Client::new(&sdk);
    let tables = Tables::with_prefix(&prefix);
    let store = Store::new(dynamo.clone(), tables.clone());
    let tenant = countersign::domain::TenantId::parse(TENANT_A).unwrap();
    let (mut pending, mut approved) = (0, 0);
    for id in &ids {
        let approval_id = countersign::domain::ApprovalId::parse(id).unwrap();
        let approval = store
            .get_approval(&tenant, &approval_id)
            .await
            .expect("read")
            .expect("exists");
        let policy = approval.policy.clone().expect("policy");
        let counts = approval.approvals_per_rule();
        let met = policy
            .rules
            .iter()
            .zip(&counts)
            .all(|(r, &c)| c >= r.min_approvals);
        let item = dynamo
            .get_item()
            .table_name(&tables.approvals)
            .key(
                "pk",
                aws_sdk_dynamodb::types::AttributeValue::S(format!("{TENANT_A}#{id}")),
            )
            .consistent_read(true)
            .send()
            .await
            .expect("raw read")
            .item
            .expect("item");
        for (i, count) in counts.iter().enumerate() {
            assert_eq!(
                item[&format!("approvals_{i}")].as_n().unwrap(),
                &count.to_string(),
                "{id}: the stored count of rule {i} is the recount of its votes"
            );
        }
        match approval.status {
            countersign::domain::Status::Pending => {
                pending += 1;
                assert!(!met, "{id}: a met quorum left pending: {counts:?}");
                assert!(approval.decision.is_none());
            }
            countersign::domain::Status::Approved => {
                approved += 1;
                assert!(met, "{id}: approved without its quorum: {counts:?}");
                let last = approval.votes.last().expect("votes");
                assert_eq!(
                    Some(last),
                    approval.decision.as_ref(),
                    "{id}: the last vote decided"
                );
                let before: Vec<_> = approval.votes[..approval.votes.len() - 1].to_vec();
                let mut earlier = approval.clone();
                earlier.votes = before;
                assert!(
                    earlier.completed_by(&last.approver, last.outcome),
                    "{id}: the votes before the deciding one did not already meet it"
                );
                assert_ne!(
                    approval.execution.status,
                    countersign::domain::ExecutionStatus::NotStarted,
                    "{id}: approved and its execution queued in the same write"
                );
            }
            other => panic!("{id}: {other:?}"),
        }
    }
    println!("after the kill: {approved} approved, {pending} pending");
    assert!(approved > 0, "the kill came before any quorum was met");

    // A new instance; the clients retry every vote: every approval ends approved, executed once.
    let runner = LocalRunner::start(&env).await;
    let answers = send_votes(runner.base.clone()).await;
    assert!(
        answers.iter().all(|a| matches!(a, Ok(200 | 409))),
        "{answers:?}"
    );
    for (i, id) in ids.iter().enumerate() {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let approval: Value = http
                .get(runner.url(&format!("/approvals/{id}")))
                .bearer_auth(CI_KEY)
                .send()
                .await
                .expect("get")
                .json()
                .await
                .expect("json");
            if approval["execution"]["status"] == "succeeded" {
                assert_eq!(approval["status"], "approved");
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{id} did not execute: {approval}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert_eq!(downstream.calls(&execute_key(&format!("crash-{i}"), id)), 1);
    }
}

/// The webhook vote that completes a quorum is two writes (refused as a counted vote, written as
/// the completing one), each its own transaction with the inbox item — and each with its own
/// client token: DynamoDB refuses a token sent with two different transactions
/// (IdempotentParameterMismatchException; the local stack refuses it as DynamoDB does), which
/// would fail every completing webhook vote, and every redelivery of it, with a 500.
#[tokio::test]
async fn a_webhook_vote_completing_a_quorum_is_applied_once() {
    let t = TestApp::start_with(&[("API_KEYS", &api_keys())]).await;
    let body = json!({
        "action": {"type": "deploy", "payload": {"build": 77}},
        "approvers": [ALICE, BOB],
        "policy": {"rules": [{"name": "both", "approvers": [ALICE, BOB], "min_approvals": 2}]},
    })
    .to_string();
    let id = t.create_ok(CI_KEY, "q-webhook", &body).await;
    let counted = vote(&t, &id, ALICE, "approve").await;
    assert_eq!(counted.status, 200, "{}", counted.text());
    for delivery in 0..2 {
        let delivered = t
            .deliver(
                "acme",
                ACME_SECRET,
                "msg_q_completes",
                &decided_event(&id, "approve", BOB),
            )
            .await;
        assert_eq!(delivered.status, 200, "{}", delivered.text());
        assert_eq!(delivered.json()["outcome"], "applied");
        let status = if delivery == 0 {
            "processed"
        } else {
            "duplicate"
        };
        assert_eq!(delivered.json()["status"], status);
    }
    let approval = t.get(CI_KEY, &id).await.json();
    assert_eq!(approval["status"], "approved", "{approval}");
    assert_eq!(approval["decision"]["approver"], BOB);
    assert_eq!(approval["decision"]["channel"], "webhook");
}
