//! Votes, counted exactly once by DynamoDB's conditions (SPEC "Quorum policy").
//!
//! A vote is one conditional `UpdateItem` (or the update of a webhook's transaction), shaped
//! without a read by what the approval's id says of its policy ([`ApprovalId::rules_hint`]):
//!
//! - **reject** (a veto, with or without a policy, [`WriteKind::Veto`]): records the vote and
//!   sets `rejected`.
//! - **approve, no policy** ([`WriteKind::Single`]): v1's single decision, unchanged — sets
//!   `approved` and queues the execution; the decision is the approval's one vote.
//! - **approve on a quorum of `k` rules** ([`WriteKind::Counted`]): records the vote and adds it
//!   to every rule that lists the voter, `approvals_i += ballots[voter].m_i` (`m_i` = 1 if rule
//!   `i` lists the voter, kept per approver on the item since its create); the condition lets it
//!   apply only while some rule stays short after it (`approvals_i < ballots[voter].t_i`, `t_i` =
//!   `min_approvals` less `m_i`), i.e. only when this vote does **not** complete the quorum.
//! - When that condition refuses an approve because the vote completes the quorum, the item as
//!   it was (`ALL_OLD`) carries the policy and the counts, and the vote is written again as
//!   [`WriteKind::Completing`]: conditioned on every rule already holding enough
//!   (`approvals_i >= ballots[voter].t_i`), it records the vote, sets `approved` and queues the execution. Two
//!   round trips, the second only for the completing vote. Counts only grow, so a refused
//!   completing write means somebody else decided first (or the same voter's other request won).
//!
//! So no write ever leaves a met quorum `pending`: the counted write cannot apply when it would
//! meet the quorum, and the completing write sets the status in the write that counts the vote.
//! There is no step between them to crash in. A hint that does not match the item (only an id
//! made before policies existed) is refused by the kind's own guard (`attribute_exists` /
//! `attribute_not_exists(#while_pending)`) and the right kind follows from `ALL_OLD`; each kind
//! is sent at most once per vote.
//!
//! Which race each condition closes:
//! - `#status = :pending` — a vote after the outcome is not recorded; of two votes that both
//!   complete the quorum (or a completing vote and a veto, or a vote and a cancel) exactly one
//!   applies.
//! - `NOT contains(#voters, :approver_id)` — one vote per person even when the same person's
//!   votes race on several channels: a second vote is never counted twice nor changed.
//! - `approvals_i < t_i` for some `i` (counted write) — a vote racing others that raised the
//!   counts since is refused rather than leave the approval pending with its quorum met.
//! - `approvals_i >= t_i` for every `i` (completing write) — the counts it read still hold.
//! - expiry, listed approver and separation of duties: as for v1's decision (`ONLY_IF_DECIDABLE`).

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

use super::approvals::ONLY_IF_DECIDABLE;
use super::expr::names;
use super::items::{DUE_EXECUTION, decision_to_attr, epoch, n, s, status_id};
use crate::domain::{
    Approval, ApprovalId, Approver, DecideRefusal, DecideRequest, Decision, EpochSeconds,
    ExecutionStatus, Outcome, Status, classify_refusal,
};

/// ... and the voter has not voted yet.
const ONLY_IF_FIRST_VOTE: &str = "NOT contains(#voters, :approver_id)";

/// Records the vote (a list in the order applied) and its voter (a set, for the condition).
const RECORD_VOTE: &str = "#votes = list_append(if_not_exists(#votes, :no_votes), :vote)";
const ADD_VOTER: &str = "ADD #voters :voter_set";

/// An approved approval's execution is due to end (the reconciler watches it from now on).
const EXECUTION_DUE: &str = "#due_kind = :execution_due, #due_at = :now";
/// A rejected approval has nothing due.
const NOTHING_DUE: &str = "REMOVE #due_kind, #due_at";

/// Which write a vote is (see the module's notes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WriteKind {
    Veto,
    Single,
    /// On a quorum of this many rules.
    Counted(usize),
    Completing(usize),
}

/// One conditional write of a vote.
pub(crate) struct VoteWrite {
    pub kind: WriteKind,
    pub update: String,
    pub condition: String,
    pub names: HashMap<String, String>,
    pub values: HashMap<String, AttributeValue>,
}

/// Whether `expression` holds `token` as a whole word (`:t1` is not in `:t10`).
fn uses(expression: &str, token: &str) -> bool {
    expression.match_indices(token).any(|(at, _)| {
        !expression[at + token.len()..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
    })
}

impl VoteWrite {
    fn new(
        kind: WriteKind,
        update: String,
        condition: String,
        id: &ApprovalId,
        vote: &Decision,
        sent_by: Option<&Approver>,
        now: EpochSeconds,
    ) -> Self {
        let mut names = names(&[&update, &condition]);
        if names.contains_key("#voter") {
            // The voter's ballot is found under its identity (any characters: only ever a name).
            names.insert("#voter".to_owned(), vote.approver.identity());
        }
        let mut values = HashMap::from([
            (":outcome".to_owned(), s(vote.outcome.status().as_str())),
            (":decision".to_owned(), decision_to_attr(vote)),
            (
                ":vote".to_owned(),
                AttributeValue::L(vec![decision_to_attr(vote)]),
            ),
            (":no_votes".to_owned(), AttributeValue::L(Vec::new())),
            (
                ":voter_set".to_owned(),
                AttributeValue::Ss(vec![vote.approver.identity()]),
            ),
            (":pending".to_owned(), s(Status::Pending.as_str())),
            (":queued".to_owned(), s(ExecutionStatus::Queued.as_str())),
            (":now".to_owned(), epoch(now)),
            (":approver".to_owned(), s(vote.approver.as_str())),
            (":approver_id".to_owned(), s(vote.approver.identity())),
            (
                ":sender_id".to_owned(),
                s(sent_by.unwrap_or(&vote.approver).identity()),
            ),
            (":zero".to_owned(), n(0)),
            (":one".to_owned(), n(1)),
            (
                ":status_id".to_owned(),
                status_id(vote.outcome.status(), id),
            ),
            (":execution_due".to_owned(), s(DUE_EXECUTION)),
        ]);
        // DynamoDB refuses a value the expressions do not use.
        values.retain(|v, _| uses(&update, v) || uses(&condition, v));
        Self {
            kind,
            update,
            condition,
            names,
            values,
        }
    }
}

/// The first write of a vote on approval `id`.
pub(crate) fn first(
    id: &ApprovalId,
    vote: &Decision,
    sent_by: Option<&Approver>,
    now: EpochSeconds,
) -> VoteWrite {
    let kind = match (vote.outcome, id.rules_hint()) {
        (Outcome::Rejected, _) => WriteKind::Veto,
        (Outcome::Approved, Some(rules)) if rules > 0 => WriteKind::Counted(rules),
        (Outcome::Approved, _) => WriteKind::Single,
    };
    write(kind, id, vote, sent_by, now)
}

/// The next write of a vote whose `previous` write was refused with the item as it was
/// (`old`), or `None` when the refusal is the answer.
pub(crate) fn next(
    previous: WriteKind,
    old: Option<&Approval>,
    vote: &Decision,
    sent_by: Option<&Approver>,
    now: EpochSeconds,
) -> Option<VoteWrite> {
    let request = DecideRequest {
        outcome: vote.outcome,
        approver: vote.approver.clone(),
        comment: None,
        sent_by: sent_by.cloned(),
    };
    let kind = match classify_refusal(old.cloned(), &request, now) {
        DecideRefusal::Completes(old) => {
            WriteKind::Completing(old.policy.as_ref().map_or(0, |p| p.rules.len()))
        }
        // Decidable, and the vote does not complete a quorum: the write did not match the
        // approval (an id whose hint is wrong).
        DecideRefusal::Unexplained => match &old?.policy {
            None => WriteKind::Single,
            Some(policy) => WriteKind::Counted(policy.rules.len()),
        },
        _ => return None,
    };
    let id = old?.id.clone();
    (kind != previous).then(|| write(kind, &id, vote, sent_by, now))
}

fn write(
    kind: WriteKind,
    id: &ApprovalId,
    vote: &Decision,
    sent_by: Option<&Approver>,
    now: EpochSeconds,
) -> VoteWrite {
    let decidable = format!("{ONLY_IF_DECIDABLE} AND {ONLY_IF_FIRST_VOTE}");
    match kind {
        WriteKind::Veto => {
            let update = format!(
                "SET #status = :outcome, #status_id = :status_id, #decision = :decision, \
                 {RECORD_VOTE} {ADD_VOTER} {NOTHING_DUE}"
            );
            VoteWrite::new(kind, update, decidable, id, vote, sent_by, now)
        }
        WriteKind::Single => {
            // v1's decision as it was: the decision is the approval's one vote, so no list of
            // votes is kept (nothing is recorded after the outcome).
            let update = format!(
                "SET #status = :outcome, #status_id = :status_id, #decision = :decision, \
                 #execution.#status = :queued, #execution.#updated_at = :now, {EXECUTION_DUE}"
            );
            let condition = format!("{ONLY_IF_DECIDABLE} AND attribute_not_exists(#while_pending)");
            VoteWrite::new(kind, update, condition, id, vote, sent_by, now)
        }
        WriteKind::Counted(rules) => {
            // if_not_exists: an approval whose id hints wrongly has no counters, and its
            // condition fails without the update being evaluated against missing attributes.
            let counters: Vec<String> = (0..rules)
                .map(|i| {
                    format!(
                        "#approvals_{i} = if_not_exists(#approvals_{i}, :zero) + if_not_exists(#ballots.#voter.#m{i}, :zero)"
                    )
                })
                .collect();
            let short: Vec<String> = (0..rules)
                .map(|i| format!("#approvals_{i} < #ballots.#voter.#t{i}"))
                .collect();
            let update = format!("SET {RECORD_VOTE}, {} {ADD_VOTER}", counters.join(", "));
            let condition = format!(
                "{decidable} AND attribute_exists(#while_pending) AND ({})",
                short.join(" OR ")
            );
            VoteWrite::new(kind, update, condition, id, vote, sent_by, now)
        }
        WriteKind::Completing(rules) => {
            // The policy was confirmed by the refused write's item: every counter and ballot
            // exists.
            let counters: Vec<String> = (0..rules)
                .map(|i| format!(", #approvals_{i} = #approvals_{i} + #ballots.#voter.#m{i}"))
                .collect();
            let enough: Vec<String> = (0..rules)
                .map(|i| format!("#approvals_{i} >= #ballots.#voter.#t{i}"))
                .collect();
            let update = format!(
                "SET #status = :outcome, #status_id = :status_id, #decision = :decision, \
                 #execution.#status = :queued, #execution.#updated_at = :now, {EXECUTION_DUE}, \
                 {RECORD_VOTE}{} {ADD_VOTER}",
                counters.concat()
            );
            let condition = format!(
                "{decidable} AND attribute_exists(#while_pending) AND {}",
                enough.join(" AND ")
            );
            VoteWrite::new(kind, update, condition, id, vote, sent_by, now)
        }
    }
}

/// What a quorum approval carries from its create for its votes' writes: the marker that keeps it
/// pending, each rule's count (0), and each approver's ballot (`m_i`, `t_i` per rule).
pub(crate) fn quorum_attributes(approval: &Approval) -> Vec<(String, AttributeValue)> {
    let Some(policy) = &approval.policy else {
        return Vec::new();
    };
    let while_pending = AttributeValue::M(HashMap::from([
        ("status".to_owned(), s(Status::Pending.as_str())),
        ("decision".to_owned(), AttributeValue::Null(true)),
        (
            "execution_status".to_owned(),
            s(approval.execution.status.as_str()),
        ),
        (
            "execution_updated_at".to_owned(),
            epoch(approval.execution.updated_at),
        ),
    ]));
    let ballots = approval
        .approvers
        .iter()
        .map(|voter| {
            let mut ballot = HashMap::new();
            for (i, t) in policy.thresholds(voter).into_iter().enumerate() {
                let member = policy.rules[i].approvers.contains(voter);
                ballot.insert(format!("m{i}"), n(u8::from(member)));
                ballot.insert(format!("t{i}"), n(t));
            }
            (voter.identity(), AttributeValue::M(ballot))
        })
        .collect();
    let mut attributes = vec![
        ("while_pending".to_owned(), while_pending),
        ("ballots".to_owned(), AttributeValue::M(ballots)),
    ];
    for i in 0..policy.rules.len() {
        attributes.push((format!("approvals_{i}"), n(0)));
    }
    attributes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Approver, Channel};

    fn vote(outcome: Outcome) -> Decision {
        Decision {
            outcome,
            approver: Approver::parse("Alice@Example.com").unwrap(),
            decided_at: 5,
            channel: Channel::Api,
            comment: None,
            webhook_event_id: None,
        }
    }

    #[test]
    fn every_alias_and_value_of_a_write_is_defined_and_used() {
        for write in [
            first(&ApprovalId::generate(), &vote(Outcome::Approved), None, 5),
            first(
                &ApprovalId::generate_for(3),
                &vote(Outcome::Approved),
                None,
                5,
            ),
            first(
                &ApprovalId::generate_for(3),
                &vote(Outcome::Rejected),
                None,
                5,
            ),
            write(
                WriteKind::Completing(2),
                &ApprovalId::generate_for(2),
                &vote(Outcome::Approved),
                None,
                5,
            ),
        ] {
            let text = format!("{} {}", write.update, write.condition);
            for alias in names(&[&text]).keys() {
                assert!(write.names.contains_key(alias), "{alias} in {text}");
            }
            for value in write.values.keys() {
                assert!(uses(&text, value), "{value} unused");
            }
        }
        let counted = first(
            &ApprovalId::generate_for(3),
            &vote(Outcome::Approved),
            None,
            5,
        );
        assert_eq!(counted.kind, WriteKind::Counted(3));
        assert_eq!(counted.names["#voter"], "alice@example.com");
        assert!(
            counted.update.contains("#approvals_2 =") && !counted.update.contains("#approvals_3")
        );
        let legacy = ApprovalId::parse("apr_01JD3ZZZZZZZZZZZZZZZZZZZZZ").unwrap();
        assert_eq!(
            first(&legacy, &vote(Outcome::Approved), None, 5).kind,
            WriteKind::Single
        );
    }
}
