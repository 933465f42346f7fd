//! The approval's rules under a deployment's policy: each required group a rule of its own
//! (named by the group, its approvers the group's members at create less the requester), the
//! requester's own rules kept beside them (AND). Nothing the requester sends can drop or lower a
//! required group: its approvers and rules only add.

use super::groups::{GroupName, Groups};
use crate::domain::{Approver, FieldError, Policy, Rule};

/// The most people one approval can list (the requester's approvers, every required group's
/// members, escalation steps'): each is a ballot on the approval's item, and each may vote.
pub const MAX_APPROVERS: usize = 100;

/// Why a policy's requirements cannot become an approval.
#[derive(Debug, Clone, PartialEq)]
pub enum ApplyRefusal {
    /// A group has fewer than k members besides the requester (400 `policy_unsatisfiable`,
    /// naming the group).
    Unsatisfiable(Vec<FieldError>),
    /// A requester's rule is named like a required group, or the approval would list more than
    /// [`MAX_APPROVERS`] (400 `invalid_request`).
    Invalid(Vec<FieldError>),
}

/// The approvers and quorum of an approval whose deployment policy requires `required` (each
/// group's approving votes), from `groups` as they are, asked by `requester`, who named
/// `approvers` and, optionally, rules of its own (`requested`, already checked against them).
pub fn approval_rules(
    required: &[(GroupName, u32)],
    groups: &Groups,
    requester: &Approver,
    approvers: &[Approver],
    requested: Option<&Policy>,
) -> Result<(Vec<Approver>, Policy), ApplyRefusal> {
    let mut listed: Vec<Approver> = approvers.to_vec();
    let mut rules: Vec<Rule> = Vec::new();
    let mut unsatisfiable = Vec::new();
    for (group, k) in required {
        // Separation of duties: the requester is in no group's rule.
        let members: Vec<Approver> = groups
            .get(group)
            .unwrap_or_default()
            .iter()
            .filter(|m| !m.same_identity(requester))
            .cloned()
            .collect();
        if members.len() < *k as usize {
            unsatisfiable.push(FieldError::new(
                format!("group {group}"),
                format!(
                    "the approval policy requires {k} approving vote(s) of {group}, which has {} member(s) besides the requester",
                    members.len()
                ),
            ));
            continue;
        }
        for member in &members {
            if !listed.iter().any(|a| a.same_identity(member)) {
                listed.push(member.clone());
            }
        }
        rules.push(Rule {
            name: group.as_str().to_owned(),
            approvers: members,
            min_approvals: *k,
            group: Some(group.clone()),
        });
    }
    if !unsatisfiable.is_empty() {
        return Err(ApplyRefusal::Unsatisfiable(unsatisfiable));
    }
    // The requester's own: its rules, or — named approvers and no rules — v1's one approving
    // vote among them, kept beside the groups (it can only add).
    let own: Vec<Rule> = match requested {
        Some(policy) => policy.rules.clone(),
        None if approvers.iter().any(|a| !a.same_identity(requester)) => {
            Policy::single_decision(approvers).rules
        }
        None => Vec::new(),
    };
    let mut invalid = Vec::new();
    for (i, rule) in own.into_iter().enumerate() {
        if rules.iter().any(|r| r.name == rule.name) {
            invalid.push(FieldError::new(
                format!("policy.rules[{i}].name"),
                "is the name of a group the approval policy requires: choose another",
            ));
            continue;
        }
        rules.push(rule);
    }
    if listed.len() > MAX_APPROVERS {
        invalid.push(FieldError::new(
            "approvers",
            format!(
                "with the groups the approval policy requires, the approval would list {} people: at most {MAX_APPROVERS}",
                listed.len()
            ),
        ));
    }
    if rules.len() > Policy::MAX_ALL_RULES {
        invalid.push(FieldError::new(
            "policy.rules",
            format!(
                "with the groups the approval policy requires, more than {} rules",
                Policy::MAX_ALL_RULES
            ),
        ));
    }
    if !invalid.is_empty() {
        return Err(ApplyRefusal::Invalid(invalid));
    }
    Ok((listed, Policy { rules }))
}
