//! Delegation (docs/API.md "Delegation"): a person lets another vote in their place for a
//! window — set, read and ended by that person or an operator — and a vote in someone's place
//! never lets one person count twice, fill one place twice, or decide what they asked for;
//! through the real router against the local AWS, racing.

use std::collections::BTreeSet;

use countersign::domain::rfc3339;
use countersign_tests::{
    ALICE, ALICE_KEY, ApiKeys, BOB, BOB_KEY, CAROL, CI, CI_KEY, CreateBody, DAVE, ERIN, OPS,
    OPS_KEY, Reply, TENANT_B, TestApp, decision_body, eventually,
};
use serde_json::{Value, json};

const CAROL_KEY: &str = "carol-key-0123456789abcdef";
const DAVE_KEY: &str = "dave-key-0123456789abcdef";
const ERIN_KEY: &str = "erin-key-0123456789abcdef";
const OTHER_OPS_KEY: &str = "other-ops-key-0123456789abcdef";
const DAY: i64 = 86_400;

/// Tenant A: a requester, five approvers (bob may also ask), an operator; tenant B's operator.
fn api_keys() -> String {
    ApiKeys::new()
        .key(CI, &["requester"], CI_KEY)
        .key(ALICE, &["approver"], ALICE_KEY)
        .key(BOB, &["approver", "requester"], BOB_KEY)
        .key(CAROL, &["approver"], CAROL_KEY)
        .key(DAVE, &["approver"], DAVE_KEY)
        .key(ERIN, &["approver"], ERIN_KEY)
        .key(OPS, &["operator"], OPS_KEY)
        .key_in(TENANT_B, OPS, &["operator"], OTHER_OPS_KEY)
        .to_string()
}

async fn start() -> TestApp {
    TestApp::start_with(&[("API_KEYS", &api_keys())]).await
}

fn path(identity: &str) -> String {
    format!("/delegations/{identity}")
}

/// `PUT /delegations/{identity}` as `api_key`.
async fn set(t: &TestApp, api_key: &str, identity: &str, body: Value) -> Reply {
    t.send(
        t.http
            .put(t.url(&path(identity)))
            .bearer_auth(api_key)
            .json(&body),
    )
    .await
}

async fn show(t: &TestApp, api_key: &str, identity: &str) -> Reply {
    t.get_path(api_key, &path(identity)).await
}

async fn end(t: &TestApp, api_key: &str, identity: &str) -> Reply {
    t.send(t.http.delete(t.url(&path(identity))).bearer_auth(api_key))
        .await
}

/// `delegate` stands in for the key's person from now for `days`.
async fn delegate(t: &TestApp, api_key: &str, delegator: &str, to: &str, days: i64) {
    let until = rfc3339(t.clock.now() + days * DAY);
    let reply = set(
        t,
        api_key,
        delegator,
        json!({"delegate": to, "until": until}),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
}

/// ALICE, BOB and CAROL, 2 of 3.
fn two_of_three(build: u64) -> String {
    CreateBody::new("deploy", &[ALICE, BOB, CAROL])
        .payload(json!({"service": "api", "build": build}))
        .policy(json!({"rules": [
            {"name": "engineering", "approvers": [ALICE, BOB, CAROL], "min_approvals": 2}]}))
        .expires_in(DAY as u64)
        .to_string()
}

/// ALICE, BOB and CAROL, all three.
fn all_three() -> String {
    CreateBody::new("deploy", &[ALICE, BOB, CAROL])
        .policy(json!({"rules": [
            {"name": "all", "approvers": [ALICE, BOB, CAROL], "min_approvals": 3}]}))
        .expires_in(5 * DAY as u64)
        .to_string()
}

/// `api_key`'s person votes `decision`, naming `place`.
async fn vote(t: &TestApp, api_key: &str, id: &str, place: &str, decision: &str) -> Reply {
    t.decide(api_key, id, decision_body(decision, place)).await
}

fn approvals(approval: &Value) -> u64 {
    approval["policy"]["rules"][0]["approvals"]
        .as_u64()
        .expect("approvals")
}

/// Each recorded vote's place and who cast it.
fn votes(approval: &Value) -> Vec<(String, String)> {
    approval["votes"]
        .as_array()
        .expect("votes")
        .iter()
        .map(|v| {
            let place = v["approver"].as_str().expect("approver").to_owned();
            let by = v["by"]
                .as_str()
                .map_or_else(|| place.clone(), str::to_owned);
            (place, by)
        })
        .collect()
}

#[tokio::test]
async fn the_person_or_an_operator_sets_reads_and_ends_a_delegation() {
    let t = start().await;
    let now = t.clock.now();
    let body = json!({"delegate": BOB, "until": rfc3339(now + 7 * DAY), "reason": "holiday"});
    // Anyone else: another approver, a requester, the delegate, another tenant's operator.
    for key in [CAROL_KEY, CI_KEY, BOB_KEY] {
        set(&t, key, ALICE, body.clone())
            .await
            .assert_problem(403, "forbidden");
    }
    show(&t, ALICE_KEY, ALICE)
        .await
        .assert_problem(404, "not_found");

    let reply = set(&t, ALICE_KEY, "Alice@Example.com", body.clone()).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let mut answered = reply.json();
    // `from` defaults to the server's now: the second the request was answered in.
    let from = answered["from"].take();
    assert!(
        [rfc3339(now), rfc3339(now + 1)].contains(&from.as_str().unwrap_or_default().to_owned()),
        "{from}"
    );
    let expected = json!({"delegator": "Alice@Example.com", "delegate": BOB,
        "from": null, "until": rfc3339(now + 7 * DAY), "reason": "holiday", "set_by": ALICE});
    assert_eq!(answered, expected, "any spelling of herself");
    let shown = show(&t, ALICE_KEY, ALICE).await;
    assert_eq!(shown.status, 200, "{}", shown.text());
    assert_eq!(shown.json()["delegate"], BOB);
    assert_eq!(shown.json()["delegator"], ALICE);
    for key in [CAROL_KEY, BOB_KEY, CI_KEY] {
        show(&t, key, ALICE).await.assert_problem(403, "forbidden");
        end(&t, key, ALICE).await.assert_problem(403, "forbidden");
    }
    assert_eq!(show(&t, OPS_KEY, ALICE).await.status, 200, "an operator");
    // Tenant-scoped: another tenant's operator finds nothing of tenant A's.
    show(&t, OTHER_OPS_KEY, ALICE)
        .await
        .assert_problem(404, "not_found");

    // An operator replaces it: one delegation per person. Handing on another person's vote
    // needs a reason, and who set it is shown (review of v6, finding 4).
    let by_operator = json!({"delegate": CAROL, "until": rfc3339(now + DAY)});
    let refused = set(&t, OPS_KEY, ALICE, by_operator.clone()).await;
    refused.assert_problem(400, "invalid_request");
    assert_eq!(refused.json()["errors"][0]["field"], "reason");
    assert_eq!(
        show(&t, ALICE_KEY, ALICE).await.json()["delegate"],
        BOB,
        "nothing written"
    );
    let mut with_reason = by_operator;
    with_reason["reason"] = json!("alice is out sick: ticket OPS-12");
    assert_eq!(set(&t, OPS_KEY, ALICE, with_reason).await.status, 200);
    let shown = show(&t, ALICE_KEY, ALICE).await.json();
    assert_eq!(shown["delegate"], CAROL);
    assert_eq!(shown["set_by"], OPS);
    assert_eq!(shown["reason"], "alice is out sick: ticket OPS-12");

    let ended = end(&t, ALICE_KEY, ALICE).await;
    assert_eq!(ended.status, 204, "{}", ended.text());
    show(&t, ALICE_KEY, ALICE)
        .await
        .assert_problem(404, "not_found");
    assert_eq!(end(&t, OPS_KEY, ALICE).await.status, 204, "ending twice");

    // One that has run out is not shown.
    delegate(&t, ALICE_KEY, ALICE, BOB, 1).await;
    t.clock.advance(DAY);
    show(&t, ALICE_KEY, ALICE)
        .await
        .assert_problem(404, "not_found");
}

#[tokio::test]
async fn bad_input_is_refused_naming_the_field_and_writes_nothing() {
    let t = start().await;
    let now = t.clock.now();
    let until = rfc3339(now + DAY);
    for (body, field) in [
        (
            json!({"delegate": BOB, "until": until, "scope": "all"}),
            "scope",
        ),
        (
            json!({"delegate": "ALICE@example.com", "until": until}),
            "delegate",
        ),
        (json!({"until": until}), "delegate"),
        (
            json!({"delegate": "bob\u{200B}@example.com", "until": until}),
            "delegate",
        ),
        (
            json!({"delegate": BOB, "until": rfc3339(now + 90 * DAY + 1)}),
            "until",
        ),
        (
            json!({"delegate": BOB, "from": rfc3339(now + DAY), "until": rfc3339(now + 92 * DAY)}),
            "until",
        ),
        (json!({"delegate": BOB, "until": rfc3339(now - 1)}), "until"),
        (json!({"delegate": BOB}), "until"),
        (json!({"delegate": BOB, "until": "next week"}), "until"),
        (
            json!({"delegate": BOB, "from": "soon", "until": until}),
            "from",
        ),
        (
            json!({"delegate": BOB, "until": until, "reason": 7}),
            "reason",
        ),
        (json!([BOB]), "body"),
    ] {
        let reply = set(&t, ALICE_KEY, ALICE, body.clone()).await;
        reply.assert_problem(400, "invalid_request");
        let problem = reply.json();
        let fields: Vec<&str> = problem["errors"]
            .as_array()
            .expect("errors")
            .iter()
            .filter_map(|e| e["field"].as_str())
            .collect();
        assert_eq!(fields, [field], "{body}: {}", reply.text());
    }
    // Not a person in the path; not JSON; too large (refused before it is read).
    let reply = set(
        &t,
        ALICE_KEY,
        "al%E2%80%8Bice",
        json!({"delegate": BOB, "until": until}),
    )
    .await;
    reply.assert_problem(400, "invalid_request");
    assert_eq!(reply.json()["errors"][0]["field"], "identity");
    let not_json = t
        .http
        .put(t.url(&path(ALICE)))
        .bearer_auth(ALICE_KEY)
        .header("content-type", "text/plain")
        .body("delegate=bob");
    t.send(not_json)
        .await
        .assert_problem(415, "unsupported_media_type");
    let large = json!({"delegate": BOB, "until": until, "reason": "x".repeat(20_000)});
    set(&t, ALICE_KEY, ALICE, large)
        .await
        .assert_problem(413, "payload_too_large");
    // Nothing was written: no delegation, and bob still cannot stand in for alice.
    show(&t, ALICE_KEY, ALICE)
        .await
        .assert_problem(404, "not_found");
    let id = t.create_ok(CI_KEY, "bad-input", &two_of_three(1)).await;
    vote(&t, BOB_KEY, &id, ALICE, "approve")
        .await
        .assert_problem(403, "forbidden");
}

/// Alice delegates to bob, who is also listed in the same rule: his vote for her fills her
/// place once, and neither his own vote nor hers counts after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_delegate_fills_the_delegators_place_once_and_never_counts_twice() {
    let t = TestApp::start_jobs(&[("API_KEYS", &api_keys())]).await;
    delegate(&t, ALICE_KEY, ALICE, BOB, 7).await;
    let id = t.create_ok(CI_KEY, "in-place", &two_of_three(1)).await;

    let reply = vote(&t, BOB_KEY, &id, ALICE, "approve").await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let approval = reply.json();
    assert_eq!(votes(&approval), [(ALICE.to_owned(), BOB.to_owned())]);
    assert_eq!(approval["votes"][0]["by"], BOB);
    assert_eq!(approvals(&approval), 1, "alice's place, counted once");
    assert!(vote(&t, BOB_KEY, &id, ALICE, "approve").await.replayed());

    // Bob as himself, and alice herself: one person one vote, one place one vote.
    for (key, place) in [(BOB_KEY, BOB), (ALICE_KEY, ALICE)] {
        let reply = vote(&t, key, &id, place, "approve").await;
        reply.assert_problem(409, "already_voted");
    }
    let read = t.get(CI_KEY, &id).await.json();
    assert_eq!(read["status"], "pending");
    assert_eq!(approvals(&read), 1);
    assert_eq!(read["votes"][0]["by"], BOB, "GET shows who cast it");

    let done = vote(&t, CAROL_KEY, &id, CAROL, "approve").await;
    assert_eq!(done.json()["status"], "approved", "{}", done.text());
    assert_eq!(approvals(&done.json()), 2);

    eventually("the votes in the trail", || async {
        let trail = t.trail(CI_KEY, &id, 20).await;
        trail.iter().any(|e| e["type"] == "approval.approved")
    })
    .await;
    let trail = t.trail(CI_KEY, &id, 20).await;
    let actors: Vec<&Value> = trail
        .iter()
        .filter(|e| e["type"] == "approval.vote_recorded")
        .map(|e| &e["actor"])
        .collect();
    assert_eq!(actors.len(), 2, "{trail:?}");
    assert_eq!(actors[0]["approver"], ALICE);
    assert_eq!(actors[0]["by"], BOB, "the vote's actor names both");
    assert_eq!(
        actors[0]["delegation_set_by"], ALICE,
        "and who set the delegation it was cast under"
    );
    assert_eq!(actors[1]["approver"], CAROL);
    assert!(actors[1].get("by").is_none());
    assert!(actors[1].get("delegation_set_by").is_none());
}

#[tokio::test]
async fn the_delegators_own_vote_first_fills_the_place() {
    let t = start().await;
    delegate(&t, ALICE_KEY, ALICE, BOB, 7).await;
    let id = t.create_ok(CI_KEY, "own-first", &two_of_three(1)).await;
    assert_eq!(vote(&t, ALICE_KEY, &id, ALICE, "approve").await.status, 200);
    vote(&t, BOB_KEY, &id, ALICE, "approve")
        .await
        .assert_problem(409, "already_voted");
    // Bob's own place is still his.
    let reply = vote(&t, BOB_KEY, &id, BOB, "approve").await;
    assert_eq!(reply.json()["status"], "approved", "{}", reply.text());
}

/// Bob's own vote first: he has cast his one vote, so alice's place is not his to fill.
#[tokio::test]
async fn a_delegate_who_voted_as_himself_has_no_vote_left() {
    let t = start().await;
    delegate(&t, ALICE_KEY, ALICE, BOB, 7).await;
    // 3 of 3, so that his vote for her would not complete the quorum: only the condition on
    // the delegate's own vote refuses it.
    let id = t.create_ok(CI_KEY, "own-vote-first", &all_three()).await;
    assert_eq!(vote(&t, BOB_KEY, &id, BOB, "approve").await.status, 200);
    vote(&t, BOB_KEY, &id, ALICE, "approve")
        .await
        .assert_problem(409, "already_voted");
    let read = t.get(CI_KEY, &id).await.json();
    assert_eq!(read["status"], "pending");
    assert_eq!(approvals(&read), 1);
    // Alice's place is still hers.
    assert_eq!(vote(&t, ALICE_KEY, &id, ALICE, "approve").await.status, 200);
    let reply = vote(&t, CAROL_KEY, &id, CAROL, "approve").await;
    assert_eq!(reply.json()["status"], "approved", "{}", reply.text());
}

#[tokio::test]
async fn a_delegate_who_asked_decides_nothing() {
    let t = start().await;
    delegate(&t, ALICE_KEY, ALICE, BOB, 7).await;
    let id = t.create_ok(BOB_KEY, "bob-asks", &two_of_three(1)).await;
    for decision in ["approve", "reject"] {
        vote(&t, BOB_KEY, &id, ALICE, decision)
            .await
            .assert_problem(403, "self_approval_forbidden");
    }
    let read = t.get(CI_KEY, &id).await.json();
    assert_eq!(read["votes"], json!([]));
}

#[tokio::test]
async fn only_inside_the_window_and_only_to_whom_it_was_given() {
    let t = start().await;
    let now = t.clock.now();
    let window =
        json!({"delegate": BOB, "from": rfc3339(now + DAY), "until": rfc3339(now + 2 * DAY)});
    assert_eq!(set(&t, ALICE_KEY, ALICE, window).await.status, 200);
    let id = t.create_ok(CI_KEY, "window", &all_three()).await;
    vote(&t, BOB_KEY, &id, ALICE, "approve")
        .await
        .assert_problem(403, "forbidden");
    // Naming someone who delegated to somebody else, or to nobody.
    vote(&t, CAROL_KEY, &id, ALICE, "approve")
        .await
        .assert_problem(403, "forbidden");
    vote(&t, BOB_KEY, &id, CAROL, "approve")
        .await
        .assert_problem(403, "forbidden");

    t.clock.advance(DAY);
    let reply = vote(&t, BOB_KEY, &id, ALICE, "approve").await;
    assert_eq!(reply.status, 200, "inside the window: {}", reply.text());

    // Past `until`, and once ended: nothing.
    let other = t.create_ok(CI_KEY, "window-2", &two_of_three(2)).await;
    t.clock.advance(DAY);
    vote(&t, BOB_KEY, &other, ALICE, "approve")
        .await
        .assert_problem(403, "forbidden");
    delegate(&t, ALICE_KEY, ALICE, BOB, 1).await;
    assert_eq!(end(&t, ALICE_KEY, ALICE).await.status, 204);
    vote(&t, BOB_KEY, &other, ALICE, "approve")
        .await
        .assert_problem(403, "forbidden");
    assert_eq!(t.get(CI_KEY, &other).await.json()["votes"], json!([]));
}

/// One hop: carol stands in for bob, bob for alice; carol stands in for nobody of alice's.
#[tokio::test]
async fn a_chain_of_delegations_passes_nothing_on() {
    let t = start().await;
    delegate(&t, ALICE_KEY, ALICE, BOB, 7).await;
    delegate(&t, BOB_KEY, BOB, CAROL, 7).await;
    let id = t
        .create_ok(
            CI_KEY,
            "chain",
            &CreateBody::new("deploy", &[ALICE, BOB, DAVE])
                .expires_in(DAY as u64)
                .to_string(),
        )
        .await;
    vote(&t, CAROL_KEY, &id, ALICE, "approve")
        .await
        .assert_problem(403, "forbidden");
    let reply = vote(&t, CAROL_KEY, &id, BOB, "approve").await;
    assert_eq!(
        reply.status,
        200,
        "her own delegator's place: {}",
        reply.text()
    );
    assert_eq!(reply.json()["decision"]["approver"], BOB);
    assert_eq!(reply.json()["decision"]["by"], CAROL);
}

/// A vote as oneself costs what it did (one round trip, two for the vote that completes a
/// quorum); a vote in someone's place one more: the approval and the delegation read in one
/// batch, then the vote's transaction, which checks the delegation as read (review of v6,
/// finding 3) — the completing vote shaped from what was read, so it too is two. A refused one
/// is that read alone.
#[tokio::test]
async fn a_vote_in_someones_place_costs_one_read_more() {
    let t = start().await;
    delegate(&t, ALICE_KEY, ALICE, BOB, 7).await;
    let id = t.create_ok(CI_KEY, "rt", &two_of_three(1)).await;
    t.calls.take();
    assert_eq!(vote(&t, BOB_KEY, &id, ALICE, "approve").await.status, 200);
    assert_eq!(
        t.calls.take(),
        ["BatchGetItem", "TransactWriteItems"],
        "in alice's place"
    );
    vote(&t, BOB_KEY, &id, BOB, "approve")
        .await
        .assert_problem(409, "already_voted");
    assert_eq!(t.calls.take(), ["UpdateItem"], "as himself");
    vote(&t, BOB_KEY, &id, CAROL, "approve")
        .await
        .assert_problem(403, "forbidden");
    assert_eq!(t.calls.take(), ["BatchGetItem"], "no delegation");
    let own = vote(&t, CAROL_KEY, &id, CAROL, "reject").await;
    assert_eq!(own.json()["status"], "rejected", "{}", own.text());
    assert_eq!(t.calls.take(), ["UpdateItem"], "as herself");

    // The vote that completes the quorum: written as the completing write at once, from the
    // approval read with the delegation.
    let id = t.create_ok(CI_KEY, "rt-completing", &two_of_three(2)).await;
    assert_eq!(vote(&t, CAROL_KEY, &id, CAROL, "approve").await.status, 200);
    t.calls.take();
    let done = vote(&t, BOB_KEY, &id, ALICE, "approve").await;
    assert_eq!(done.json()["status"], "approved", "{}", done.text());
    assert_eq!(
        t.calls.take(),
        ["BatchGetItem", "TransactWriteItems"],
        "completing, in alice's place"
    );
}

/// 50 votes at once on a 2-of-3 (alice, bob, carol) by the listed people and their delegates —
/// alice → bob, carol → dave, bob → erin — 20 rounds: one outcome, each place filled at most
/// once, and no person in two votes, as GET and the trail tell.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_votes_by_delegates_and_delegators_count_each_person_once() {
    let t = TestApp::start_jobs(&[("API_KEYS", &api_keys())]).await;
    delegate(&t, ALICE_KEY, ALICE, BOB, 7).await;
    delegate(&t, CAROL_KEY, CAROL, DAVE, 7).await;
    delegate(&t, BOB_KEY, BOB, ERIN, 7).await;
    // (key, place): their own, in a delegator's place, and two that are not theirs (erin is
    // bob's delegate, not alice's; dave is carol's, not bob's).
    let ballots = [
        (ALICE_KEY, ALICE),
        (BOB_KEY, BOB),
        (BOB_KEY, ALICE),
        (CAROL_KEY, CAROL),
        (DAVE_KEY, CAROL),
        (ERIN_KEY, BOB),
        (ERIN_KEY, ALICE),
        (DAVE_KEY, BOB),
    ];
    let mut ids = Vec::new();
    for round in 0..20u64 {
        let id = t
            .create_ok(CI_KEY, &format!("race-{round}"), &two_of_three(round))
            .await;
        let requests = (0..50).map(|i| {
            let (key, place) = ballots[(i * 7 + round as usize) % ballots.len()];
            let decision = if (i + round as usize).is_multiple_of(11) {
                "reject"
            } else {
                "approve"
            };
            (key, place, decision)
        });
        let requests: Vec<_> = requests.collect();
        let replies = futures::future::join_all(
            requests
                .iter()
                .map(|(key, place, decision)| vote(&t, key, &id, place, decision)),
        )
        .await;
        let approval = t.get(CI_KEY, &id).await.json();
        let status = approval["status"].as_str().unwrap_or_default().to_owned();
        assert!(
            status == "approved" || status == "rejected",
            "round {round}: one outcome: {approval}"
        );
        let recorded = votes(&approval);
        let mut people = BTreeSet::new();
        for (place, by) in &recorded {
            assert!(people.insert(place.clone()), "round {round}: {recorded:?}");
            if by != place {
                assert!(people.insert(by.clone()), "round {round}: {recorded:?}");
            }
        }
        let mut counted = 0;
        for ((key, place, _), reply) in requests.iter().zip(&replies) {
            if reply.status == 200 {
                counted += usize::from(!reply.replayed());
                continue;
            }
            match (reply.status, reply.code().as_str()) {
                (403, "forbidden") => assert!(
                    (*key == ERIN_KEY && *place == ALICE) || (*key == DAVE_KEY && *place == BOB),
                    "round {round}: {place} refused to a delegate"
                ),
                (409, "already_voted" | "already_decided") => {}
                (status, code) => panic!("round {round}: {status} {code}: {}", reply.text()),
            }
        }
        assert_eq!(
            counted,
            recorded.len(),
            "round {round}: a 200 per vote recorded"
        );
        let approving = approval["votes"]
            .as_array()
            .expect("votes")
            .iter()
            .filter(|v| v["vote"] == "approve")
            .count() as u64;
        assert_eq!(approvals(&approval), approving, "round {round}");
        match status.as_str() {
            "approved" => assert_eq!(approving, 2, "round {round}: {recorded:?}"),
            _ => assert!(approving <= 1, "round {round}: {recorded:?}"),
        }
        ids.push((round, id, recorded.len(), status));
    }
    for (round, id, recorded, status) in &ids {
        eventually("the outcome in the trail", || async {
            let trail = t.trail(CI_KEY, id, 50).await;
            trail
                .iter()
                .any(|e| e["type"] == format!("approval.{status}"))
        })
        .await;
        let trail = t.trail(CI_KEY, id, 50).await;
        let cast: Vec<&Value> = trail
            .iter()
            .filter(|e| e["type"] == "approval.vote_recorded")
            .collect();
        assert_eq!(cast.len(), *recorded, "round {round}: {trail:?}");
        let mut people = BTreeSet::new();
        for event in &cast {
            let actor = &event["actor"];
            assert!(
                people.insert(actor["approver"].to_string()),
                "round {round}"
            );
            if let Some(by) = actor.get("by") {
                assert!(people.insert(by.to_string()), "round {round}: {trail:?}");
            }
        }
        let outcomes = trail
            .iter()
            .filter(|e| e["type"] == "approval.approved" || e["type"] == "approval.rejected")
            .count();
        assert_eq!(outcomes, 1, "round {round}: one outcome");
    }
}
