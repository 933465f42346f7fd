//! Votes, counted exactly once by DynamoDB's conditions (docs/API.md "Quorum policy"; the whole
//! argument is in docs/ARCHITECTURE.md, "A quorum, counted once").
//!
//! A vote is one conditional `UpdateItem` (or the update of a webhook's transaction), shaped
//! without a read by what the approval's id hints of its policy ([`ApprovalId::rules_hint`]): a
//! reject is a veto ([`WriteKind::Veto`]); an approve without a policy decides
//! ([`WriteKind::Single`]); an approve on a quorum is counted ([`WriteKind::Counted`]) only while
//! it does not complete the quorum, and the vote that does is written again as the completing
//! write ([`WriteKind::Completing`]), which sets the status in the write that counts it. No write
//! leaves a met quorum pending.
//!
//! Which race each condition closes:
//! - `#status = :pending` — a vote after the outcome is not recorded; of two votes that both
//!   complete the quorum (or a completing vote and a veto, or a vote and a cancel) exactly one
//!   applies.
//! - `NOT contains(#voters, :approver_id)` — one vote per person even when the same person's
//!   votes race on several channels: a second vote is never counted twice nor changed.
//! - `NOT contains(#voters, :by_id)` (a vote in someone's place) — the delegate has cast no vote,
//!   for themselves or anyone; the write adds both identities to `voters`.
//! - `approvals_i < t_i` for some `i` (counted write) — a vote racing others that raised the
//!   counts since is refused rather than leave the approval pending with its quorum met.
//! - `approvals_i >= t_i` for every `i` (completing write) — the counts it read still hold.
//! - expiry, listed approver and separation of duties: as for v1's decision (`ONLY_IF_DECIDABLE`).
//! - `attribute_not_exists(#assurance)` (a vote without a passkey signature) — a passkey-only
//!   approval counts only votes whose assertion the handler verified; any other is refused.
//! - `attribute_[not_]exists(#approval_only)` (a write that approves) — the execution it leaves
//!   is the one the action type has: queued for the executor, or not started, waiting for its
//!   caller's claim on an approval-only type ([`ApprovalId::executes_hint`] picks the first
//!   write; a wrong hint is refused and written again, as a wrong rules hint).

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

use super::attr::{epoch, n, s};
use super::client::{DecideOutcome, Store};
use super::codec::decision_to_attr;
use super::conditions::ONLY_IF_DECIDABLE;
use super::error::StoreError;
use super::expr::{UpdateExpr, names, uses};
use super::indexes::Indexed;
use crate::domain::approval_policy::GroupName;
use crate::domain::{
    Approval, ApprovalId, Approver, DecideRefusal, DecideRequest, Decision, EpochSeconds,
    ExecutionStatus, Outcome, Retention, Status, TenantId, classify_refusal,
};

/// ... and the voter has not voted yet.
const ONLY_IF_FIRST_VOTE: &str = "NOT contains(#voters, :approver_id)";

/// ... and, for a vote cast in someone's place, neither has its delegate, for themselves or for
/// anyone else. Both identities join `voters` in the same write, so of a delegator's own vote,
/// their delegate's for them and the delegate's own (or for another delegator), racing, one
/// counts: no delegation lets one person count twice, nor fills one place twice.
const ONLY_IF_DELEGATES_FIRST_VOTE: &str = "NOT contains(#voters, :by_id)";

/// ... and its delegate did not request the approval: separation of duties in the write itself,
/// whichever channel cast the vote and whatever key sent it (one with no sender too).
const ONLY_IF_DELEGATE_NOT_REQUESTER: &str = "(attribute_not_exists(#requested_by_id) OR #requested_by_id <> :by_id) \
     AND NOT contains(#gh.#rq, :by_id)";

/// ... and its comment fits what the approval keeps of one (`comment_cap`: an approval that lists
/// many people keeps shorter comments, so that its item never outgrows DynamoDB's 400 KB).
const ONLY_IF_COMMENT_FITS: &str =
    "(attribute_not_exists(#comment_cap) OR #comment_cap >= :comment_bytes)";

/// ... and, for a vote without a passkey signature, the approval is not passkey-only
/// (`assurance`, set at the create): whichever channel sent it, it records nothing.
const ONLY_IF_NOT_PASSKEY_ONLY: &str = " AND attribute_not_exists(#assurance)";

/// The most of the place's groups a vote's condition names: with 15 rules, a delegate's
/// completing vote's condition stays within DynamoDB's 4 KB for an expression (tested below).
/// A place in more groups is checked against the ones the policy in force requires first.
pub const MAX_GROUPS_OF_ONE: usize = 10;

/// ... and, for each of the approval's first `rules` rules that counts a deployment's group and
/// lists the place, the place is still in that group (`groups` of its groups now, `:g0…`): a
/// member removed from a group since the create is not counted in its rule — the check reads
/// the cached groups, no round trip.
fn still_in_groups(rules: usize, groups: usize) -> String {
    let now_in: Vec<String> = (0..groups).map(|g| format!(":g{g}")).collect();
    let now_in = now_in.join(", ");
    (0..rules)
        .map(|i| {
            format!(
                " AND (attribute_not_exists(#policy[{i}].#group) OR #ballots.#voter.#m{i} = :zero \
                 OR #policy[{i}].#group IN ({now_in}))"
            )
        })
        .collect()
}

/// Who sent a vote, beyond the vote itself, and where its place stands now.
#[derive(Debug, Clone, Copy, Default)]
pub struct VoteBy<'a> {
    /// The principal of the key (or the person) that sent it, when it is not the approver.
    pub sent_by: Option<&'a Approver>,
    /// The groups the vote's place (its approver) is in now, from the cached groups.
    pub groups: &'a [GroupName],
}

impl<'a> VoteBy<'a> {
    /// Who sent `request` and its place's groups, as the handler found them.
    pub fn of(request: &'a DecideRequest) -> Self {
        Self {
            sent_by: request.sent_by.as_ref(),
            groups: &request.place_groups,
        }
    }
}

/// Records the vote (a list in the order applied) and its voter (a set, for the condition).
const RECORD_VOTE: &str = "#votes = list_append(if_not_exists(#votes, :no_votes), :vote)";
const ADD_VOTER: &str = "#voters :voter_set";

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
    /// Whether the approval's action type is executed by Countersign (its approving write
    /// queues the execution) or approval-only (it leaves it for a claim).
    pub executes: bool,
    pub update: String,
    pub condition: String,
    pub names: HashMap<String, String>,
    pub values: HashMap<String, AttributeValue>,
}

impl VoteWrite {
    /// `update`, with the index attributes of the outcome it sets (`None`: it leaves the
    /// approval pending), while `condition` holds.
    fn new(
        (kind, executes): (WriteKind, bool),
        update: UpdateExpr,
        condition: String,
        (id, vote, by, now): (&ApprovalId, &Decision, VoteBy<'_>, EpochSeconds),
        retention: Retention,
    ) -> Self {
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
                AttributeValue::Ss(
                    std::iter::once(&vote.approver)
                        .chain(&vote.by)
                        .map(Approver::identity)
                        .collect(),
                ),
            ),
            (":pending".to_owned(), s(Status::Pending.as_str())),
            (":now".to_owned(), epoch(now)),
            (":approver".to_owned(), s(vote.approver.as_str())),
            (":approver_id".to_owned(), s(vote.approver.identity())),
            (
                ":by_id".to_owned(),
                s(vote
                    .by
                    .as_ref()
                    .map_or_else(String::new, Approver::identity)),
            ),
            (
                ":sender_id".to_owned(),
                s(by.sent_by.unwrap_or(&vote.approver).identity()),
            ),
            (":zero".to_owned(), n(0)),
            (":one".to_owned(), n(1)),
            (
                ":comment_bytes".to_owned(),
                n(vote.comment.as_ref().map_or(0, String::len)),
            ),
        ]);
        // The place's groups now, for each group rule's check (a sentinel when none: no
        // group's name holds a `#`).
        let groups: Vec<&str> = match by.groups {
            [] => vec!["#none"],
            groups => groups
                .iter()
                .map(GroupName::as_str)
                .take(MAX_GROUPS_OF_ONE)
                .collect(),
        };
        for (i, group) in groups.iter().enumerate() {
            values.insert(format!(":g{i}"), s(*group));
        }
        let rules = match kind {
            WriteKind::Counted(rules) | WriteKind::Completing(rules) => rules,
            WriteKind::Veto | WriteKind::Single => id.rules_hint().unwrap_or(0),
        };
        let condition = format!(
            "{condition} AND {ONLY_IF_COMMENT_FITS}{}{}",
            still_in_groups(rules, groups.len()),
            match vote.passkey {
                Some(_) => "",
                None => ONLY_IF_NOT_PASSKEY_ONLY,
            }
        );
        // The outcome a deciding write sets: rejected (nothing due), or approved with the
        // execution queued (due to end from now) or, approval-only, waiting for its claim.
        let decides = matches!(
            kind,
            WriteKind::Veto | WriteKind::Single | WriteKind::Completing(_)
        );
        let update = match decides {
            true => {
                let execution = match vote.outcome {
                    Outcome::Approved if executes => ExecutionStatus::Queued,
                    Outcome::Approved | Outcome::Rejected => ExecutionStatus::NotStarted,
                };
                values.insert(":execution".to_owned(), s(execution.as_str()));
                Indexed::after(id, vote.outcome.status(), true, execution, now).apply(
                    update,
                    &mut values,
                    retention,
                )
            }
            false => update,
        }
        .build();
        let mut names = names(&[&update, &condition]);
        if names.contains_key("#voter") {
            // The voter's ballot is found under its identity (any characters: only ever a name).
            names.insert("#voter".to_owned(), vote.approver.identity());
        }
        // DynamoDB refuses a value the expressions do not use.
        values.retain(|v, _| uses(&update, v) || uses(&condition, v));
        Self {
            kind,
            executes,
            update,
            condition,
            names,
            values,
        }
    }
}

impl Store {
    /// Records a vote (see the module's notes): one conditional update, and a second only for
    /// the approve that completes a quorum (or after an id's wrong hint). Every vote that is not
    /// counted gets the item as it was.
    /// `by`: who sent it, when it is not the approver, and the place's groups now.
    pub async fn decide(
        &self,
        tenant: &TenantId,
        id: &ApprovalId,
        vote: &Decision,
        by: VoteBy<'_>,
        now: EpochSeconds,
    ) -> Result<DecideOutcome, StoreError> {
        let mut vote = std::borrow::Cow::Borrowed(vote);
        let mut write = first(id, &vote, by, (now, self.retention));
        let mut respelled = false;
        loop {
            let outcome = self
                .update_approval(
                    tenant,
                    id,
                    &write.update,
                    &write.condition,
                    write.names,
                    write.values,
                )
                .await?;
            let old = match outcome {
                Ok(approval) => return Ok(DecideOutcome::Won(Box::new(approval))),
                Err(old) => old,
            };
            // The vote that completes a quorum is written again as the completing write (and a
            // wrong hint gets the right kind); each kind once, so this ends.
            if let Some(next) = next(
                (write.kind, write.executes),
                old.as_ref(),
                &vote,
                by,
                (now, self.retention),
            ) {
                write = next;
                continue;
            }
            // Listed is by identity: a voter spelled otherwise than its listing
            // (`Alice@Example.com`, listed `alice@example.com`) votes as listed, once. Only
            // this case costs the second round trip; the condition still checks the item.
            let listed = old
                .as_ref()
                .and_then(|a| a.listed_as(&vote.approver))
                .filter(|listed| listed.as_str() != vote.approver.as_str())
                .cloned();
            match listed {
                Some(listed) if !respelled => {
                    respelled = true;
                    let mut respelled_vote = vote.into_owned();
                    respelled_vote.approver = listed;
                    vote = std::borrow::Cow::Owned(respelled_vote);
                    write = first(id, &vote, by, (now, self.retention));
                }
                _ => return Ok(DecideOutcome::Refused(old.map(Box::new))),
            }
        }
    }
}

/// The first write of a vote on approval `id`.
pub(crate) fn first(
    id: &ApprovalId,
    vote: &Decision,
    by: VoteBy<'_>,
    (now, retention): (EpochSeconds, Retention),
) -> VoteWrite {
    let kind = match (vote.outcome, id.rules_hint()) {
        (Outcome::Rejected, _) => WriteKind::Veto,
        (Outcome::Approved, Some(rules)) if rules > 0 => WriteKind::Counted(rules),
        (Outcome::Approved, _) => WriteKind::Single,
    };
    write((kind, id.executes_hint()), id, vote, by, (now, retention))
}

/// The first write of a vote on `approval`, as read a moment ago: its kind from the approval
/// itself (a quorum's completing vote at once), not from its id's hint.
pub(crate) fn first_for(
    approval: &Approval,
    vote: &Decision,
    by: VoteBy<'_>,
    (now, retention): (EpochSeconds, Retention),
) -> VoteWrite {
    let kind = match (vote.outcome, &approval.policy) {
        (Outcome::Rejected, _) => WriteKind::Veto,
        (Outcome::Approved, None) => WriteKind::Single,
        (Outcome::Approved, Some(policy))
            if approval.completed_by(&vote.approver, Outcome::Approved) =>
        {
            WriteKind::Completing(policy.rules.len())
        }
        (Outcome::Approved, Some(policy)) => WriteKind::Counted(policy.rules.len()),
    };
    write(
        (kind, approval.executes),
        &approval.id,
        vote,
        by,
        (now, retention),
    )
}

/// The next write of a vote whose `previous` write (its kind, and whether it took the action
/// type to be executed) was refused with the item as it was (`old`), or `None` when the refusal
/// is the answer.
pub(crate) fn next(
    previous: (WriteKind, bool),
    old: Option<&Approval>,
    vote: &Decision,
    by: VoteBy<'_>,
    (now, retention): (EpochSeconds, Retention),
) -> Option<VoteWrite> {
    let request = DecideRequest {
        outcome: vote.outcome,
        approver: vote.approver.clone(),
        comment: vote.comment.clone(),
        sent_by: by.sent_by.cloned(),
        by: vote.by.clone(),
        place_groups: by.groups.to_vec(),
        passkey: vote.passkey.is_some(),
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
    let old = old?;
    let shape = (kind, old.executes);
    (shape != previous).then(|| write(shape, &old.id, vote, by, (now, retention)))
}

fn write(
    (kind, executes): (WriteKind, bool),
    id: &ApprovalId,
    vote: &Decision,
    by: VoteBy<'_>,
    (now, retention): (EpochSeconds, Retention),
) -> VoteWrite {
    let (decidable, not_requester) = match vote.by {
        None => (
            format!("{ONLY_IF_DECIDABLE} AND {ONLY_IF_FIRST_VOTE}"),
            String::new(),
        ),
        Some(_) => (
            format!(
                "{ONLY_IF_DECIDABLE} AND {ONLY_IF_FIRST_VOTE} AND {ONLY_IF_DELEGATES_FIRST_VOTE} \
                 AND {ONLY_IF_DELEGATE_NOT_REQUESTER}"
            ),
            format!(" AND {ONLY_IF_DELEGATE_NOT_REQUESTER}"),
        ),
    };
    let decides = UpdateExpr::default()
        .set("#status = :outcome")
        .set("#decision = :decision");
    let vote_of = (id, vote, by, now);
    let approves = match executes {
        true => "attribute_not_exists(#approval_only)",
        false => "attribute_exists(#approval_only)",
    };
    let shape = (kind, executes);
    match kind {
        WriteKind::Veto => {
            let update = decides.set(RECORD_VOTE).add(ADD_VOTER);
            VoteWrite::new(shape, update, decidable, vote_of, retention)
        }
        WriteKind::Single => {
            // v1's decision as it was: the decision is the approval's one vote, so no list of
            // votes is kept (nothing is recorded after the outcome).
            let update = decides
                .set("#execution.#status = :execution")
                .set("#execution.#updated_at = :now");
            let condition = format!(
                "{ONLY_IF_DECIDABLE} AND attribute_not_exists(#while_pending) AND {approves}{not_requester}"
            );
            VoteWrite::new(shape, update, condition, vote_of, retention)
        }
        WriteKind::Counted(rules) => {
            // if_not_exists: an approval whose id hints wrongly has no counters, and its
            // condition fails without the update being evaluated against missing attributes.
            let mut update = UpdateExpr::default().set(RECORD_VOTE).add(ADD_VOTER);
            for i in 0..rules {
                update = update.set(format!(
                    "#approvals_{i} = if_not_exists(#approvals_{i}, :zero) + if_not_exists(#ballots.#voter.#m{i}, :zero)"
                ));
            }
            let short: Vec<String> = (0..rules)
                .map(|i| format!("#approvals_{i} < #ballots.#voter.#t{i}"))
                .collect();
            let condition = format!(
                "{decidable} AND attribute_exists(#while_pending) AND ({})",
                short.join(" OR ")
            );
            VoteWrite::new(shape, update, condition, vote_of, retention)
        }
        WriteKind::Completing(rules) => {
            // The policy was confirmed by the refused write's item: every counter and ballot
            // exists.
            let mut update = decides
                .set("#execution.#status = :execution")
                .set("#execution.#updated_at = :now")
                .set(RECORD_VOTE)
                .add(ADD_VOTER);
            for i in 0..rules {
                update = update.set(format!(
                    "#approvals_{i} = #approvals_{i} + #ballots.#voter.#m{i}"
                ));
            }
            let enough: Vec<String> = (0..rules)
                .map(|i| format!("#approvals_{i} >= #ballots.#voter.#t{i}"))
                .collect();
            let condition = format!(
                "{decidable} AND attribute_exists(#while_pending) AND {approves} AND {}",
                enough.join(" AND ")
            );
            VoteWrite::new(shape, update, condition, vote_of, retention)
        }
    }
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
            key_id: None,
            signed_in: None,
            by: None,
            delegation_set_by: None,
            passkey: None,
        }
    }

    #[test]
    fn every_alias_and_value_of_a_write_is_defined_and_used() {
        for write in [
            first(
                &ApprovalId::generate(),
                &vote(Outcome::Approved),
                VoteBy::default(),
                (5, Retention::days(1)),
            ),
            first(
                &ApprovalId::generate_for(3),
                &vote(Outcome::Approved),
                VoteBy::default(),
                (5, Retention::days(1)),
            ),
            first(
                &ApprovalId::generate_for(3),
                &vote(Outcome::Rejected),
                VoteBy::default(),
                (5, Retention::days(1)),
            ),
            write(
                (WriteKind::Completing(2), false),
                &ApprovalId::generate_for(2),
                &vote(Outcome::Approved),
                VoteBy::default(),
                (5, Retention::days(1)),
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
            VoteBy::default(),
            (5, Retention::days(1)),
        );
        assert_eq!(counted.kind, WriteKind::Counted(3));
        assert_eq!(counted.names["#voter"], "alice@example.com");
        assert!(
            counted.update.contains("#approvals_2 =") && !counted.update.contains("#approvals_3")
        );
        // In someone's place: the delegate's own first vote too, both joining the voters.
        let delegated = Decision {
            by: Some(Approver::parse("Bob@Example.com").unwrap()),
            ..vote(Outcome::Approved)
        };
        let counted = first(
            &ApprovalId::generate_for(3),
            &delegated,
            VoteBy {
                sent_by: delegated.by.as_ref(),
                groups: &[],
            },
            (5, Retention::days(1)),
        );
        assert!(counted.condition.contains("NOT contains(#voters, :by_id)"));
        assert_eq!(
            counted.values[":voter_set"],
            AttributeValue::Ss(vec!["alice@example.com".into(), "bob@example.com".into()])
        );
        assert_eq!(
            counted.names["#voter"], "alice@example.com",
            "the place's ballot"
        );
        let own = first(
            &ApprovalId::generate_for(3),
            &vote(Outcome::Approved),
            VoteBy::default(),
            (5, Retention::days(1)),
        );
        assert!(!own.condition.contains(":by_id") && !own.values.contains_key(":by_id"));
        // An id made before hints may hint at anything: its first write is shaped by the hint,
        // and a refused one is written again as the approval's own kind (`next`).
        let legacy = ApprovalId::parse("apr_01JD3ZZZZZZZZZZZZZZZZZZZZZ").unwrap();
        assert_eq!(
            first(
                &legacy,
                &vote(Outcome::Approved),
                VoteBy::default(),
                (5, Retention::days(1))
            )
            .kind,
            WriteKind::Counted(15)
        );
    }

    /// DynamoDB: "the maximum length of any expression string is 4 KB". The longest a vote's
    /// write can be: a delegate's completing vote on 15 rules, its place in the most groups
    /// the condition names.
    #[test]
    fn the_longest_vote_write_stays_within_dynamodbs_4_kb_per_expression() {
        let groups: Vec<GroupName> = (0..MAX_GROUPS_OF_ONE)
            .map(|i| GroupName::parse(&format!("{i:0>64}")).unwrap())
            .collect();
        let delegated = Decision {
            by: Some(Approver::parse("Bob@Example.com").unwrap()),
            comment: Some("x".repeat(2_000)),
            ..vote(Outcome::Approved)
        };
        let by = VoteBy {
            sent_by: delegated.by.as_ref(),
            groups: &groups,
        };
        for kind in [
            WriteKind::Completing(15),
            WriteKind::Counted(15),
            WriteKind::Veto,
        ] {
            let longest = write(
                (kind, true),
                &ApprovalId::generate_for(15),
                &delegated,
                by,
                (5, Retention::days(1)),
            );
            assert!(
                longest.condition.len() <= 4096 && longest.update.len() <= 4096,
                "{kind:?}: condition {} bytes, update {} bytes",
                longest.condition.len(),
                longest.update.len()
            );
            assert!(
                longest
                    .condition
                    .contains(&format!(":g{}", MAX_GROUPS_OF_ONE - 1))
            );
        }
    }
}
