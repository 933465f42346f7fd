use std::collections::BTreeSet;

use proptest::prelude::*;
use serde_json::json;

use super::*;

fn who(name: &str) -> Approver {
    Approver::parse(&format!("{name}@example.com")).unwrap()
}

const NOW: EpochSeconds = 1_800_000_000;
const DAY: i64 = 86_400;

fn at(seconds: EpochSeconds) -> String {
    crate::domain::rfc3339(seconds)
}

#[test]
fn a_delegation_is_a_window_of_at_most_90_days_to_someone_else() {
    let alice = who("alice");
    let parsed = Delegation::parse(
        &alice,
        &json!({"delegate": "bob@example.com", "until": at(NOW + 7 * DAY), "reason": "holiday"}),
        NOW,
    )
    .unwrap();
    assert_eq!(
        (parsed.from, parsed.until),
        (NOW, NOW + 7 * DAY),
        "from defaults to now"
    );
    assert_eq!(parsed.delegate, who("bob"));
    let exactly_90 =
        json!({"delegate": "bob@example.com", "from": at(NOW + DAY), "until": at(NOW + 91 * DAY)});
    assert!(Delegation::parse(&alice, &exactly_90, NOW).is_ok());

    let field = |body: serde_json::Value| -> Vec<String> {
        Delegation::parse(&alice, &body, NOW)
            .unwrap_err()
            .into_iter()
            .map(|e| e.field)
            .collect()
    };
    assert_eq!(
        field(json!({"delegate": "Alice@Example.com", "until": at(NOW + DAY)})),
        ["delegate"]
    );
    assert_eq!(field(json!({"until": at(NOW + DAY)})), ["delegate"]);
    assert_eq!(field(json!({"delegate": "bob@example.com"})), ["until"]);
    assert_eq!(
        field(json!({"delegate": "bob@example.com", "until": at(NOW - 1)})),
        ["until"]
    );
    assert_eq!(
        field(
            json!({"delegate": "bob@example.com", "from": at(NOW + 2 * DAY), "until": at(NOW + DAY)})
        ),
        ["until"]
    );
    assert_eq!(
        field(json!({"delegate": "bob@example.com", "until": at(NOW + 90 * DAY + 1)})),
        ["until"],
        "longer than 90 days"
    );
    assert_eq!(
        field(json!({"delegate": "bob@example.com", "until": "tomorrow"})),
        ["until"]
    );
    assert_eq!(
        field(json!({"delegate": "bob@example.com", "until": at(NOW + DAY), "scope": "all"})),
        ["scope"]
    );
    assert_eq!(
        field(json!({"delegate": "bob@example.com", "until": at(NOW + DAY), "reason": "a\nb"})),
        ["reason"]
    );
    let long = format!("{}@example.com", "b".repeat(117));
    assert_eq!(
        field(json!({"delegate": long, "until": at(NOW + DAY)})),
        ["delegate"],
        "a delegate of 129 bytes"
    );
    let longest = format!("{}@example.com", "b".repeat(116));
    assert!(
        Delegation::parse(
            &alice,
            &json!({"delegate": longest, "until": at(NOW + DAY)}),
            NOW
        )
        .is_ok()
    );
}

fn delegation(from: &str, to: &str, window: (EpochSeconds, EpochSeconds)) -> Delegation {
    Delegation {
        delegator: who(from),
        delegate: who(to),
        from: window.0,
        until: window.1,
        reason: None,
    }
}

#[test]
fn a_delegate_fills_the_delegator_s_place_once_and_never_counts_twice() {
    let approvers = [who("alice"), who("bob"), who("carol")];
    let not_requested = |_: &Approver| false;
    let alice_to_bob = delegation("alice", "bob", (NOW - DAY, NOW + DAY));
    let place = |voter: &str, named: &str, cast: &[Cast], d: Option<&Delegation>| {
        super::place(
            &who(voter),
            &who(named),
            &approvers,
            not_requested,
            cast,
            d,
            NOW,
        )
    };
    // Bob votes in alice's place: recorded as both.
    assert_eq!(
        place("bob", "alice", &[], Some(&alice_to_bob)),
        Ok(Place::InPlaceOf(who("alice")))
    );
    let bob_for_alice = Cast {
        place: who("alice"),
        by: who("bob"),
    };
    // Bob, listed too, cannot add his own vote; alice's own after bob's is her filled place.
    assert_eq!(
        place("bob", "bob", std::slice::from_ref(&bob_for_alice), None),
        Err(PlaceRefusal::AlreadyVoted)
    );
    assert_eq!(
        place("alice", "alice", std::slice::from_ref(&bob_for_alice), None),
        Err(PlaceRefusal::AlreadyVoted)
    );
    // The other order: bob's own vote first, then alice's place is not his to fill.
    let bob_own = Cast {
        place: who("bob"),
        by: who("bob"),
    };
    assert_eq!(
        place(
            "bob",
            "alice",
            std::slice::from_ref(&bob_own),
            Some(&alice_to_bob)
        ),
        Err(PlaceRefusal::AlreadyVoted)
    );
    // Outside the window, or to someone else: forbidden.
    let over = delegation("alice", "bob", (NOW - 2 * DAY, NOW));
    assert_eq!(
        place("bob", "alice", &[], Some(&over)),
        Err(PlaceRefusal::NotDelegated)
    );
    let later = delegation("alice", "bob", (NOW + 1, NOW + DAY));
    assert_eq!(
        place("bob", "alice", &[], Some(&later)),
        Err(PlaceRefusal::NotDelegated)
    );
    assert_eq!(
        place("carol", "alice", &[], Some(&alice_to_bob)),
        Err(PlaceRefusal::NotDelegated)
    );
    assert_eq!(
        place("bob", "alice", &[], None),
        Err(PlaceRefusal::NotDelegated)
    );
    // One hop: alice → bob → carol gives carol nothing of alice's.
    let bob_to_carol = delegation("bob", "carol", (NOW - DAY, NOW + DAY));
    assert_eq!(
        place("carol", "alice", &[], Some(&bob_to_carol)),
        Err(PlaceRefusal::NotDelegated)
    );
    assert_eq!(
        place("carol", "alice", &[], Some(&alice_to_bob)),
        Err(PlaceRefusal::NotDelegated)
    );
    // A delegate who requested it is the requester still.
    let requested_by_bob = |a: &Approver| a.same_identity(&who("bob"));
    assert_eq!(
        super::place(
            &who("bob"),
            &who("alice"),
            &approvers,
            requested_by_bob,
            &[],
            Some(&alice_to_bob),
            NOW
        ),
        Err(PlaceRefusal::SelfApproval)
    );
    // Someone not listed has no place to give.
    let dave_to_bob = delegation("dave", "bob", (NOW - DAY, NOW + DAY));
    assert_eq!(
        place("bob", "dave", &[], Some(&dave_to_bob)),
        Err(PlaceRefusal::NotAnApprover)
    );
}

/// A vote on `approval`: `place` filled by `by` (themselves when `None`).
fn voted(approval: &mut crate::domain::Approval, place: &str, by: Option<&str>) {
    approval.votes.push(crate::domain::Decision {
        outcome: crate::domain::Outcome::Approved,
        approver: who(place),
        decided_at: NOW,
        channel: crate::domain::Channel::Api,
        comment: None,
        webhook_event_id: None,
        key_id: None,
        signed_in: None,
        by: by.map(who),
        delegation_set_by: None,
        passkey: None,
    });
}

#[test]
fn a_click_fills_the_first_open_place_its_clicker_stands_in_for() {
    let mut approval = crate::domain::approval::tests::pending(NOW + DAY);
    approval.approvers = ["alice", "bob", "carol", "dave", "erin"].map(who).to_vec();
    approval.requested_by = Some(who("erin"));
    // alice voted; carol voted in dave's place: neither alice's, dave's nor carol's own place
    // is open (carol's one vote is cast), nor the requester's.
    voted(&mut approval, "alice", None);
    voted(&mut approval, "dave", Some("carol"));
    let open = open_places(&approval);
    assert_eq!(open, [&who("bob")]);

    approval.votes.clear();
    let open = open_places(&approval);
    assert_eq!(open.len(), 4, "all but the requester's: {open:?}");
    let delegations = [
        delegation("carol", "frank", (NOW - DAY, NOW + DAY)),
        delegation("bob", "frank", (NOW - DAY, NOW + DAY)),
        delegation("alice", "frank", (NOW + 1, NOW + DAY)),
        delegation("dave", "grace", (NOW - DAY, NOW + DAY)),
    ];
    // The approvers' order, not the delegations': bob before carol; alice's not yet in force.
    let first = first_place(&open, &delegations, &who("frank"), NOW);
    assert_eq!(first.map(|d| &d.delegator), Some(&who("bob")));
    assert_eq!(
        first_place(&open, &delegations, &who("grace"), NOW).map(|d| &d.delegator),
        Some(&who("dave"))
    );
    assert_eq!(first_place(&open, &delegations, &who("heidi"), NOW), None);
    // A place no longer open is not filled, whoever delegated it.
    voted(&mut approval, "bob", None);
    let open = open_places(&approval);
    let first = first_place(&open, &delegations, &who("frank"), NOW);
    assert_eq!(first.map(|d| &d.delegator), Some(&who("carol")));
}

proptest! {
    /// Any delegations and any order of attempts: every vote counted is by a distinct person for
    /// a distinct listed place, in their own place or by a delegation in force from its owner;
    /// the requester is never either.
    #[test]
    fn no_delegation_lets_one_person_count_twice(
        delegations in proptest::collection::vec((0usize..5, 0usize..5, -2i64..2, -1i64..3), 0..6),
        attempts in proptest::collection::vec((0usize..5, 0usize..5), 0..40),
    ) {
        let names = ["alice", "bob", "carol", "dave", "erin"];
        let approvers = [who("alice"), who("bob"), who("carol")];
        let requester = who("erin");
        let by_delegator: Vec<Delegation> = delegations
            .iter()
            .filter(|(from, to, _, _)| from != to)
            .map(|(from, to, start, end)| delegation(names[*from], names[*to], (NOW + start * DAY, NOW + end * DAY)))
            .collect();
        let mut cast: Vec<Cast> = Vec::new();
        for (voter, named) in attempts {
            let (voter, named) = (who(names[voter]), who(names[named]));
            // The store reads the named person's delegation (the last one written wins).
            let delegation = by_delegator.iter().rev().find(|d| d.delegator.same_identity(&named));
            let is_requester = |a: &Approver| a.same_identity(&requester);
            if let Ok(place) = super::place(&voter, &named, &approvers, is_requester, &cast, delegation, NOW) {
                if let Place::InPlaceOf(owner) = &place {
                    let d = delegation.expect("a delegation");
                    prop_assert!(d.delegator.same_identity(owner) && d.lets(&voter, NOW));
                }
                cast.push(Cast { place: named, by: voter });
            }
        }
        let voters: BTreeSet<String> = cast.iter().map(|c| c.by.identity()).collect();
        let places: BTreeSet<String> = cast.iter().map(|c| c.place.identity()).collect();
        prop_assert_eq!(voters.len(), cast.len(), "one vote per person");
        prop_assert_eq!(places.len(), cast.len(), "one vote per place");
        prop_assert!(cast.iter().all(|c| approvers.iter().any(|a| a.same_identity(&c.place))));
        prop_assert!(cast.iter().all(|c| !c.by.same_identity(&requester) && !c.place.same_identity(&requester)));
    }
}

proptest! {
    /// Review of v6, finding 2: the place rule and the store's write condition must agree, or a
    /// vote the rule allows is refused by the write and answered 5xx. The store's condition
    /// modelled here: the place listed, neither person the requester, and neither the place nor
    /// the voter among `voters` (which holds both people of every vote cast). Over random
    /// delegations — cycles (A→B, B→A) and chains (A→B→C) included — and votes: the rule allows
    /// exactly what the write accepts, and every refused write classifies as a 4xx reason.
    #[test]
    fn the_place_rule_and_the_write_condition_agree(
        delegations in proptest::collection::vec((0usize..5, 0usize..5), 0..8),
        attempts in proptest::collection::vec((0usize..5, 0usize..5, proptest::bool::ANY), 0..30),
    ) {
        use crate::domain::{DecideRefusal, DecideRequest, Outcome, classify_refusal};

        let names = ["alice", "bob", "carol", "dave", "erin"];
        let mut approval = crate::domain::approval::tests::pending(NOW + DAY);
        approval.approvers = ["alice", "bob", "carol", "dave"].map(who).to_vec();
        approval.requested_by = Some(who("erin"));
        let by_delegator: Vec<Delegation> = delegations
            .iter()
            .filter(|(from, to)| from != to)
            .map(|(from, to)| delegation(names[*from], names[*to], (NOW - DAY, NOW + DAY)))
            .collect();
        let mut voters: BTreeSet<String> = BTreeSet::new();
        for (voter, named, approve) in attempts {
            let (voter, named) = (who(names[voter]), who(names[named]));
            let delegation = by_delegator.iter().rev().find(|d| d.delegator.same_identity(&named));
            let cast: Vec<Cast> = approval
                .votes
                .iter()
                .map(|v| Cast { place: v.approver.clone(), by: v.by.clone().unwrap_or_else(|| v.approver.clone()) })
                .collect();
            let is_requester = |a: &Approver| approval.is_requester(a);
            let ruled = super::place(&voter, &named, &approval.approvers, is_requester, &cast, delegation, NOW);
            if ruled == Err(PlaceRefusal::NotDelegated) {
                continue; // refused before any write
            }
            let in_place = !named.same_identity(&voter);
            let accepted = approval.status == crate::domain::Status::Pending
                && approval.is_approver(&named)
                && !approval.is_requester(&named)
                && !approval.is_requester(&voter)
                && !voters.contains(&named.identity())
                && !voters.contains(&voter.identity());
            prop_assert_eq!(ruled.is_ok(), accepted, "{:?} for {:?} after {:?}", voter, named, cast);
            let outcome = if approve { Outcome::Approved } else { Outcome::Rejected };
            if accepted {
                voters.insert(named.identity());
                voters.insert(voter.identity());
                approval.votes.push(crate::domain::Decision {
                    outcome,
                    approver: named.clone(),
                    decided_at: NOW,
                    channel: crate::domain::Channel::Api,
                    comment: None,
                    webhook_event_id: None,
                    key_id: None,
                    signed_in: None,
                    by: in_place.then(|| voter.clone()),
                    delegation_set_by: None,
                    passkey: None,
                });
                if outcome == Outcome::Rejected {
                    break; // a veto decides: nothing after it is a pending approval's vote
                }
            } else {
                let request = DecideRequest {
                    outcome,
                    approver: named.clone(),
                    comment: None,
                    sent_by: in_place.then(|| voter.clone()),
                    by: in_place.then(|| voter.clone()),
                    place_groups: Vec::new(),
                    passkey: false,
                };
                let refusal = classify_refusal(Some(approval.clone()), &request, NOW);
                prop_assert!(
                    refusal.reason().is_some() || matches!(refusal, DecideRefusal::Repeat(_)),
                    "a refused write must be a 4xx or a repeat: {:?} for {:?} after {:?}", refusal, request, cast
                );
            }
        }
    }
}
