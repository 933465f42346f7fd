//! What a quorum approval carries for its votes' writes (see `votes.rs`): written with
//! the approval at its create, read by the conditions of every vote.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

use super::attr::n;
use crate::domain::Approval;

/// What a quorum approval carries from its create for its votes' writes: the marker that keeps it
/// pending, each rule's count (0), and each approver's ballot (`m_i`, `t_i` per rule).
pub(crate) fn quorum_attributes(approval: &Approval) -> Vec<(String, AttributeValue)> {
    let Some(policy) = &approval.policy else {
        return Vec::new();
    };
    // A marker: the votes' conditions test only that it exists (items written before it was
    // cut to a boolean hold a map; the same to the conditions). Every byte of the item is paid
    // on each of its writes, and on each of its indexes' (docs/COST.md).
    let while_pending = AttributeValue::Bool(true);
    // Every escalation step's approvers get their ballot now, as members of the rules the step
    // joins them to: the write that applies a step then only lists them (a ballot of someone
    // not listed is never read — the votes' condition requires the listing).
    let policy = &crate::domain::stall::joined(policy, &approval.stall.escalation);
    let steps = approval.stall.escalation.iter().flat_map(|s| &s.approvers);
    let ballots = approval
        .approvers
        .iter()
        .chain(steps)
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
