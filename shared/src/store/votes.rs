//! Votes, counted exactly once by DynamoDB's conditions (SPEC "Quorum policy").
//!
//! Every vote is first sent as one conditional `UpdateItem` (or the update of a webhook's
//! transaction) that does not depend on the approval's policy, because the caller does not
//! know it without a read:
//!
//! - **reject** (a veto, with or without a policy): records the vote and sets `rejected`.
//! - **approve** ([`cast`]): records the vote and adds it to every rule that lists the voter,
//!   `approvals_i += ballots[voter].m_i` (`m_i` = 1 if rule `i` lists the voter). Its status is
//!   `if_not_exists(while_pending.status, approved)`: an approval without a policy has no
//!   `while_pending`, so the vote approves it and queues the execution, exactly v1's single
//!   decision in one round trip; a quorum approval keeps `pending` — and the condition lets the
//!   write apply only while some rule stays short after it (`approvals_i < ballots[voter].t_i`,
//!   `t_i` = `min_approvals` less the voter's own `m_i`), i.e. only when this vote does **not**
//!   complete the quorum.
//! - When that condition refuses an approve because the vote completes the quorum, the item as
//!   it was (`ALL_OLD`) carries the policy and the counts, and [`complete`] writes it again:
//!   conditioned on every rule holding enough already (`approvals_i >= t_i`), it records the
//!   vote, sets `approved` and queues the execution. Two round trips, the second only for the
//!   completing vote. Counts only grow, so a refused completing write means somebody else
//!   decided first (or the same voter's other request won); it is never sent a third time.
//!
//! So no write ever leaves a met quorum `pending`: the counted write cannot apply when it would
//! meet the quorum, and the completing write sets the status in the write that counts the vote.
//! There is no step between them to crash in.
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
use super::items::{decision_to_attr, epoch, n, s};
use crate::domain::{
    Approval, DecideRefusal, DecideRequest, Decision, EpochSeconds, ExecutionStatus, Outcome,
    Policy, Status, classify_refusal,
};

/// A rule's approving votes are kept in `approvals_{i}`; an approve updates every one of them
/// (by 0 or 1), since it is written before the policy is known.
const COUNTERS: usize = Policy::MAX_RULES;

/// ... and the voter has not voted yet.
const ONLY_IF_FIRST_VOTE: &str = "NOT contains(#voters, :approver_id)";

/// Records the vote (a list in the order applied) and its voter (a set, for the condition).
const RECORD_VOTE: &str = "#votes = list_append(if_not_exists(#votes, :no_votes), :vote)";
const ADD_VOTER: &str = "ADD #voters :voter_set";

/// One conditional write of a vote.
pub(crate) struct VoteWrite {
    /// The first write of the vote ([`cast`]), or the completing one.
    pub is_first: bool,
    pub update: String,
    pub condition: String,
    pub names: HashMap<String, String>,
    pub values: HashMap<String, AttributeValue>,
}

impl VoteWrite {
    fn new(update: String, condition: String, vote: &Decision, now: EpochSeconds) -> Self {
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
            (":now".to_owned(), epoch(now)),
            (":approver".to_owned(), s(vote.approver.as_str())),
            (":approver_id".to_owned(), s(vote.approver.identity())),
        ]);
        if vote.outcome == Outcome::Approved {
            values.insert(":queued".to_owned(), s(ExecutionStatus::Queued.as_str()));
        }
        // DynamoDB refuses a value the expressions do not use.
        values.retain(|v, _| uses(&update, v) || uses(&condition, v));
        Self {
            is_first: true,
            update,
            condition,
            names,
            values,
        }
    }
}

/// Whether `expression` holds `token` as a whole word (`:t1` is not in `:t10`).
fn uses(expression: &str, token: &str) -> bool {
    expression.match_indices(token).any(|(at, _)| {
        !expression[at + token.len()..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// The first write of any vote (see the module's notes).
pub(crate) fn cast(vote: &Decision, now: EpochSeconds) -> VoteWrite {
    let condition = format!("{ONLY_IF_DECIDABLE} AND {ONLY_IF_FIRST_VOTE}");
    if vote.outcome == Outcome::Rejected {
        let update =
            format!("SET #status = :outcome, #decision = :decision, {RECORD_VOTE} {ADD_VOTER}");
        return VoteWrite::new(update, condition, vote, now);
    }
    let counters: Vec<String> = (0..COUNTERS)
        .map(|i| {
            format!("#approvals_{i} = if_not_exists(#approvals_{i}, :zero) + if_not_exists(#ballots.#voter.#m{i}, :zero)")
        })
        .collect();
    let short: Vec<String> = (0..COUNTERS)
        .map(|i| format!("#approvals_{i} < #ballots.#voter.#t{i}"))
        .collect();
    let update = format!(
        "SET #status = if_not_exists(#while_pending.#status, :outcome), \
         #decision = if_not_exists(#while_pending.#decision, :decision), \
         #execution.#status = if_not_exists(#while_pending.#execution_status, :queued), \
         #execution.#updated_at = if_not_exists(#while_pending.#execution_updated_at, :now), \
         {RECORD_VOTE}, {} {ADD_VOTER}",
        counters.join(", ")
    );
    let condition = format!(
        "{condition} AND (attribute_not_exists(#while_pending) OR {})",
        short.join(" OR ")
    );
    let mut write = VoteWrite::new(update, condition, vote, now);
    write.values.insert(":zero".to_owned(), n(0));
    write
}

/// The second write of the approve that completes a quorum: what the refused first write's
/// `ALL_OLD` (`old`) says, or `None` when the refusal means anything else.
pub(crate) fn completing(
    old: Option<&Approval>,
    vote: &Decision,
    now: EpochSeconds,
) -> Option<VoteWrite> {
    let request = DecideRequest {
        outcome: vote.outcome,
        approver: vote.approver.clone(),
        comment: None,
    };
    let DecideRefusal::Completes(old) = classify_refusal(old.cloned(), &request, now) else {
        return None;
    };
    let policy = old.policy.as_ref()?;
    let counted: Vec<String> = policy
        .counted_in(&vote.approver)
        .into_iter()
        .map(|i| format!("#approvals_{i} = #approvals_{i} + :one"))
        .collect();
    let enough: Vec<String> = (0..policy.rules.len())
        .map(|i| format!("#approvals_{i} >= :t{i}"))
        .collect();
    let mut update = format!(
        "SET #status = :outcome, #decision = :decision, #execution.#status = :queued, \
         #execution.#updated_at = :now, {RECORD_VOTE}"
    );
    for counter in counted {
        update.push_str(", ");
        update.push_str(&counter);
    }
    update.push(' ');
    update.push_str(ADD_VOTER);
    let condition = format!(
        "{ONLY_IF_DECIDABLE} AND {ONLY_IF_FIRST_VOTE} AND attribute_exists(#while_pending) AND {}",
        enough.join(" AND ")
    );
    let mut write = VoteWrite::new(update, condition, vote, now);
    write.is_first = false;
    write.values.insert(":one".to_owned(), n(1));
    for (i, t) in policy.thresholds(&vote.approver).into_iter().enumerate() {
        write.values.insert(format!(":t{i}"), n(t));
    }
    Some(write)
}

/// What a quorum approval carries from its create for [`cast`]: the marker that keeps it
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
            cast(&vote(Outcome::Approved), 5),
            cast(&vote(Outcome::Rejected), 5),
        ] {
            let text = format!("{} {}", write.update, write.condition);
            for alias in names(&[&text]).keys() {
                assert!(write.names.contains_key(alias), "{alias} in {text}");
            }
            for value in write.values.keys() {
                assert!(text.contains(value.as_str()), "{value} unused");
            }
        }
        let approve = cast(&vote(Outcome::Approved), 5);
        assert_eq!(approve.names["#voter"], "alice@example.com");
    }
}
