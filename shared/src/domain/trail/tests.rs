use serde_json::json;

use super::*;
use crate::domain::approval::tests::pending;
use crate::domain::{Approver, Channel, Decision, ExecutionStatus, Outcome, Status};

fn vote(approver: &str, outcome: Outcome, at: EpochSeconds) -> Decision {
    Decision {
        outcome,
        approver: Approver::parse(approver).unwrap(),
        decided_at: at,
        channel: Channel::Api,
        comment: None,
        webhook_event_id: None,
        key_id: None,
        signed_in: None,
        by: None,
        delegation_set_by: None,
        passkey: None,
    }
}

fn types(events: &[TrailEvent]) -> Vec<&'static str> {
    events.iter().map(|e| e.kind.as_str()).collect()
}

/// The approval's life, one committed change after another, and the events of each.
#[test]
fn a_quorum_approval_and_its_execution_make_each_event_once() {
    let created = pending(1_000);
    let mut one_vote = created.clone();
    one_vote.votes.push(vote("alice", Outcome::Approved, 10));
    let mut approved = one_vote.clone();
    let bob = vote("bob", Outcome::Approved, 11);
    approved.votes.push(bob.clone());
    approved.status = Status::Approved;
    approved.decision = Some(bob);
    approved.execution.status = ExecutionStatus::Queued;
    let mut running = approved.clone();
    running.execution.status = ExecutionStatus::Running;
    running.execution.attempts = 1;
    let mut waiting = running.clone();
    waiting.execution.status = ExecutionStatus::Queued;
    waiting.execution.last_error = Some("HTTP 503".into());
    let mut again = waiting.clone();
    again.execution.status = ExecutionStatus::Running;
    again.execution.attempts = 2;
    let mut done = again.clone();
    done.execution.status = ExecutionStatus::Succeeded;
    done.execution.last_error = None;

    let life = [
        None,
        Some(&created),
        Some(&one_vote),
        Some(&approved),
        Some(&running),
        Some(&waiting),
        Some(&again),
        Some(&done),
    ];
    let mut all = Vec::new();
    for (i, pair) in life.windows(2).enumerate() {
        all.extend(events_for_change(
            pair[0],
            pair[1],
            &stream_position(&i.to_string()),
        ));
    }
    assert_eq!(
        types(&all),
        [
            "approval.created",
            "approval.vote_recorded",
            "approval.vote_recorded",
            "approval.approved",
            "execution.queued",
            "execution.attempt_started",
            "execution.attempt_ended",
            "execution.attempt_started",
            "execution.attempt_ended",
            "execution.succeeded",
        ]
    );
    assert_eq!(all[6].data["outcome"], "retryable");
    assert_eq!(all[6].data["error"], "HTTP 503");
    assert_eq!(all[8].data["outcome"], "succeeded");
    let mut ids: Vec<_> = all.iter().map(|e| e.id.clone()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), all.len(), "ids are distinct");
    let mut orders: Vec<_> = all.iter().map(|e| e.order.clone()).collect();
    orders.sort();
    assert_eq!(
        orders,
        all.iter().map(|e| e.order.clone()).collect::<Vec<_>>()
    );

    // The same change derived again (a redelivered record) makes the same events.
    assert_eq!(
        events_for_change(Some(&one_vote), Some(&approved), "p"),
        events_for_change(Some(&one_vote), Some(&approved), "p")
    );
    // A change that records nothing new (a late report, the same image) makes none.
    assert!(events_for_change(Some(&done), Some(&done), "p").is_empty());
}

#[test]
fn a_policy_less_decision_is_its_one_vote_and_the_outcome() {
    let created = pending(1_000);
    let mut rejected = created.clone();
    rejected.status = Status::Rejected;
    rejected.decision = Some(vote("alice", Outcome::Rejected, 12));
    let events = events_for_change(Some(&created), Some(&rejected), "p");
    assert_eq!(
        types(&events),
        ["approval.vote_recorded", "approval.rejected"]
    );
    assert_eq!(events[0].actor["approver"], "alice");
    assert_eq!(events[0].data["vote"], "reject");
}

#[test]
fn a_vote_cast_after_sign_in_names_the_person_the_provider_vouched_for() {
    let created = pending(1_000);
    let mut voted = created.clone();
    let mut signed_in = vote("alice@example.com", Outcome::Approved, 12);
    signed_in.channel = Channel::ReviewPage;
    signed_in.signed_in = Some(crate::domain::SignIn {
        issuer: "https://idp.example.com".to_owned(),
        sub: "00u1abcd".to_owned(),
        auth_time: Some(5),
    });
    voted.votes.push(signed_in);
    let events = events_for_change(Some(&created), Some(&voted), "p");
    assert_eq!(
        events[0].actor,
        json!({"approver": "alice@example.com", "channel": "review_page",
               "iss": "https://idp.example.com", "sub": "00u1abcd",
               "auth_time": "1970-01-01T00:00:05Z"})
    );
}

#[test]
fn a_vote_in_someones_place_names_the_place_and_the_delegate() {
    let created = pending(1_000);
    let mut voted = created.clone();
    let mut delegated = vote("alice@example.com", Outcome::Approved, 12);
    delegated.by = Some(Approver::parse("bob@example.com").unwrap());
    voted.votes.push(delegated);
    let events = events_for_change(Some(&created), Some(&voted), "p");
    assert_eq!(
        events[0].actor,
        json!({"approver": "alice@example.com", "by": "bob@example.com", "channel": "api"})
    );
}

#[test]
fn operator_retries_takeovers_and_resolutions_are_events() {
    let mut failed = pending(1_000);
    failed.status = Status::Approved;
    failed.decision = Some(vote("alice", Outcome::Approved, 12));
    failed.execution.status = ExecutionStatus::Failed;
    failed.execution.attempts = 5;
    let mut retried = failed.clone();
    retried.execution.status = ExecutionStatus::Queued;
    retried.execution.generation = 1;
    assert_eq!(
        types(&events_for_change(Some(&failed), Some(&retried), "p")),
        ["execution.retried", "execution.queued"]
    );
    let mut running = retried.clone();
    running.execution.status = ExecutionStatus::Running;
    running.execution.attempts = 6;
    let mut taken_over = running.clone();
    taken_over.execution.attempts = 7;
    let events = events_for_change(Some(&running), Some(&taken_over), "p");
    assert_eq!(
        types(&events),
        ["execution.attempt_ended", "execution.attempt_started"]
    );
    assert_eq!(events[0].data["outcome"], "abandoned");
    let mut unknown = taken_over.clone();
    unknown.execution.status = ExecutionStatus::NeedsReconciliation;
    assert_eq!(
        types(&events_for_change(Some(&taken_over), Some(&unknown), "p")),
        ["execution.attempt_ended", "execution.needs_reconciliation"]
    );
    let mut resolved = unknown.clone();
    resolved.execution.status = ExecutionStatus::Succeeded;
    resolved.execution.note = Some("done by hand".into());
    let events = events_for_change(Some(&unknown), Some(&resolved), "p");
    assert_eq!(types(&events), ["execution.resolved"]);
    assert_eq!(events[0].data["note"], "done by hand");
    // A job that never began and is recorded as failed.
    let mut never = retried.clone();
    never.execution.status = ExecutionStatus::Failed;
    assert_eq!(
        types(&events_for_change(Some(&retried), Some(&never), "p")),
        ["execution.failed"]
    );
}

#[test]
fn each_status_query_is_an_event_before_what_it_led_to() {
    let mut running = pending(1_000);
    running.status = Status::Approved;
    running.decision = Some(vote("alice", Outcome::Approved, 12));
    running.execution.status = ExecutionStatus::Running;
    running.execution.attempts = 1;
    let check = |answer: &str| crate::domain::StatusCheck {
        at: 20,
        answer: answer.into(),
        detail: None,
    };
    let mut waiting = running.clone();
    waiting.execution.status_checks.push(check("pending"));
    let events = events_for_change(Some(&running), Some(&waiting), "p");
    assert_eq!(types(&events), ["execution.status_checked"]);
    assert_eq!(events[0].data["answer"], "pending");
    let mut done = waiting.clone();
    done.execution.status_checks.push(check("succeeded"));
    done.execution.status = ExecutionStatus::Succeeded;
    let events = events_for_change(Some(&waiting), Some(&done), "p");
    assert_eq!(
        types(&events),
        [
            "execution.status_checked",
            "execution.attempt_ended",
            "execution.succeeded"
        ]
    );
    assert_ne!(
        events[0].id,
        events_for_change(Some(&running), Some(&waiting), "p")[0].id,
        "each query is its own event"
    );
}

/// An event the executor records sorts after its cause's change (every event of it), before
/// the next change; its order's key holds no `#`, so orders sort as the items that store them.
#[test]
fn executor_events_sort_after_their_cause() {
    let created = format!("{}#00", stream_position("7"));
    let next = format!("{}#01", stream_position("7"));
    let (tenant, id) = (TenantId::parse("acme").unwrap(), ApprovalId::generate());
    let sent = TrailEvent::recorded_after(
        &created,
        EventType::NotificationSent,
        (&tenant, &id),
        "alice",
        5,
        json!({}),
        json!({}),
    );
    assert!(created < next && next < sent.order);
    assert!(sent.order < format!("{}#00", stream_position("8")));
    let (key, place) = order_place(&sent.order);
    assert_eq!(place, 0);
    assert!(!key.contains('#') && key.starts_with(&stream_position("7")));
    let delivered = TrailEvent::recorded_after(
        &sent.order,
        EventType::CallbackDelivered,
        (&tenant, &id),
        &sent.id,
        6,
        json!({}),
        json!({}),
    );
    assert!(sent.order < delivered.order);
    assert!(delivered.order < format!("{}#00", stream_position("8")));
    assert!(!order_place(&delivered.order).0.contains('#'));
    assert_eq!(
        sent.id,
        event_id(&tenant, &id, EventType::NotificationSent, "alice")
    );
    assert!(
        EventType::ALL
            .iter()
            .all(|t| EventType::parse(t.as_str()) == Some(*t))
    );
}

/// Review of v5, finding 7: the trail lists item keys from `0` to `:` (stream positions), so an
/// event recorded after a cause of another shape (none at all) was stored where no listing
/// reads it. Its key begins with a digit now, after every stream position.
#[test]
fn an_event_recorded_after_no_cause_is_still_listed() {
    let (tenant, id) = (TenantId::parse("acme").unwrap(), ApprovalId::generate());
    for after in ["", "evt_0123", "~odd"] {
        let event = TrailEvent::recorded_after(
            after,
            EventType::GithubAnswered,
            (&tenant, &id),
            "",
            5,
            json!({}),
            json!({}),
        );
        let (key, _) = order_place(&event.order);
        assert!(
            ("0".."~").contains(&key) && key < ":",
            "{after:?}: {key} is outside the listed range"
        );
        assert!(
            key > stream_position("99999999").as_str(),
            "after every position"
        );
    }
}

/// An approval-only type: the claim is an event of its claimer; its end is the claimer's when
/// its report made it, the reconciler's when it gave up waiting, an operator's when resolved.
#[test]
fn a_claim_and_its_end_name_who_did_each() {
    let mut approved = pending(1_000);
    approved.executes = false;
    approved.status = Status::Approved;
    approved.decision = Some(vote("alice", Outcome::Approved, 10));
    let mut claimed = approved.clone();
    claimed.execution.status = ExecutionStatus::Running;
    claimed.execution.attempts = 1;
    claimed.execution.claimed_by = Some("toolu_1".into());
    claimed.execution.claimant = Some(Approver::parse("agent@acme").unwrap());
    let events = events_for_change(Some(&approved), Some(&claimed), "p1");
    assert_eq!(types(&events), ["execution.claimed"]);
    assert_eq!(events[0].actor["principal"], "agent@acme");
    assert_eq!(events[0].data["claimed_by"], "toolu_1");

    let mut reported = claimed.clone();
    reported.execution.status = ExecutionStatus::Succeeded;
    reported.execution.reported_at = Some(20);
    let events = events_for_change(Some(&claimed), Some(&reported), "p2");
    assert_eq!(types(&events), ["execution.succeeded"]);
    assert_eq!(events[0].actor["principal"], "agent@acme");

    let mut stuck = claimed.clone();
    stuck.execution.status = ExecutionStatus::NeedsReconciliation;
    let events = events_for_change(Some(&claimed), Some(&stuck), "p3");
    assert_eq!(types(&events), ["execution.needs_reconciliation"]);
    assert_eq!(events[0].actor, json!({"channel": "reconciler"}));

    let mut resolved = stuck.clone();
    resolved.execution.status = ExecutionStatus::Failed;
    let by_operator = events_for_change(Some(&stuck), Some(&resolved), "p4");
    assert_eq!(types(&by_operator), ["execution.resolved"]);
    assert_eq!(by_operator[0].actor, json!({"channel": "api"}));
    resolved.execution.reported_at = Some(30);
    let by_claimer = events_for_change(Some(&stuck), Some(&resolved), "p4");
    assert_eq!(by_claimer[0].actor["principal"], "agent@acme");
}
