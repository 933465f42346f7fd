//! Review of v6, finding 2: with A→B and B→A (or A→B→C), a vote the place rule allowed was
//! refused by the store's condition and answered 500. Random delegation graphs — cycles, chains,
//! people delegating and voting at once — and random votes in batches that race, through the
//! real router against the local AWS: never a 5xx; every person in at most one vote (for
//! themselves or one place); every vote in someone's place by that place's own delegate (one
//! hop).

use std::collections::{BTreeMap, BTreeSet};

use countersign::domain::rfc3339;
use countersign_tests::{ApiKeys, CI, CI_KEY, CreateBody, Reply, TestApp, decision_body};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

const PEOPLE: [&str; 5] = [
    "ann@example.com",
    "ben@example.com",
    "cat@example.com",
    "dan@example.com",
    "eve@example.com",
];

fn key_of(person: &str) -> String {
    format!("{}-key-0123456789abcdef", &person[..3])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn random_delegation_graphs_and_votes_never_answer_5xx_nor_count_a_person_twice() {
    let mut keys = ApiKeys::new().key(CI, &["requester"], CI_KEY);
    let person_keys: Vec<String> = PEOPLE.iter().map(|p| key_of(p)).collect();
    for (person, key) in PEOPLE.iter().zip(&person_keys) {
        keys = keys.key(person, &["approver"], key);
    }
    let t = TestApp::start_with(&[("API_KEYS", &keys.to_string())]).await;
    let mut cycles = 0;
    for round in 0..10u64 {
        let mut rng = StdRng::seed_from_u64(0xC0FF_EE00 + round);
        // Each person delegates to someone else with even odds: cycles and chains happen.
        let until = rfc3339(t.clock.now() + 86_400);
        let mut graph: BTreeMap<&str, &str> = BTreeMap::new();
        for (i, person) in PEOPLE.iter().enumerate() {
            let path = t.url(&format!("/delegations/{person}"));
            if rng.random_bool(0.6) {
                let to = PEOPLE[(i + rng.random_range(1..PEOPLE.len())) % PEOPLE.len()];
                let set = t
                    .send(
                        t.http
                            .put(&path)
                            .bearer_auth(&person_keys[i])
                            .json(&json!({"delegate": to, "until": until})),
                    )
                    .await;
                assert_eq!(set.status, 200, "{}", set.text());
                graph.insert(*person, to);
            } else {
                t.send(t.http.delete(&path).bearer_auth(&person_keys[i]))
                    .await;
            }
        }
        cycles += graph
            .iter()
            .filter(|(from, to)| graph.get(*to) == Some(*from))
            .count();
        // The first four listed; a quorum of all four, so the votes go on until a veto.
        let listed = &PEOPLE[..4];
        let body = CreateBody::new("deploy", listed)
            .policy(json!({"rules": [{"name": "all", "approvers": listed, "min_approvals": 4}]}))
            .expires_in(86_400)
            .to_string();
        let id = t.create_ok(CI_KEY, &format!("graph-{round}"), &body).await;
        for _batch in 0..3 {
            let votes: Vec<(usize, usize, &str)> = (0..5)
                .map(|_| {
                    let voter = rng.random_range(0..PEOPLE.len());
                    // Mostly a place the graph gives the voter (their own, or of someone who
                    // delegated to them), sometimes anyone's.
                    let given: Vec<usize> = (0..PEOPLE.len())
                        .filter(|p| graph.get(PEOPLE[*p]) == Some(&PEOPLE[voter]))
                        .collect();
                    let named = match rng.random_range(0..10) {
                        0..=2 => voter,
                        3..=7 if !given.is_empty() => given[rng.random_range(0..given.len())],
                        _ => rng.random_range(0..PEOPLE.len()),
                    };
                    let decision = if rng.random_bool(0.1) {
                        "reject"
                    } else {
                        "approve"
                    };
                    (voter, named, decision)
                })
                .collect();
            let replies: Vec<Reply> =
                futures::future::join_all(votes.iter().map(|(voter, named, decision)| {
                    t.decide(
                        &person_keys[*voter],
                        &id,
                        decision_body(decision, PEOPLE[*named]),
                    )
                }))
                .await;
            for (reply, vote) in replies.iter().zip(&votes) {
                assert!(
                    reply.status < 500,
                    "round {round}, {vote:?} under {graph:?}: {} {}",
                    reply.status,
                    reply.text()
                );
            }
        }
        let approval = t.get(CI_KEY, &id).await.json();
        let mut people = BTreeSet::new();
        for vote in approval["votes"].as_array().expect("votes") {
            let place = vote["approver"].as_str().expect("approver");
            assert!(people.insert(place.to_owned()), "{place} twice: {approval}");
            if let Some(by) = vote["by"].as_str() {
                assert!(people.insert(by.to_owned()), "{by} twice: {approval}");
                assert_eq!(
                    graph.get(place).copied(),
                    Some(by),
                    "one hop: only {place}'s own delegate fills {place}'s place"
                );
            }
        }
    }
    assert!(cycles > 0, "the seeds make at least one A→B, B→A cycle");
}
