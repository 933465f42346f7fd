//! Quorum policy (docs/API.md "Quorum policy"): which approving votes make an approval approved. Pure:
//! the store turns [`Policy::thresholds`] into the conditions of the one write that records a
//! vote, so that the vote completing the quorum is the one that sets the status.

use serde_json::Value;

use super::{Approver, FieldError};

/// One rule: at least `min_approvals` approving votes from distinct people among `approvers`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub name: String,
    pub approvers: Vec<Approver>,
    pub min_approvals: u32,
    /// The deployment's group this rule counts (its approval policy's `@require`): its
    /// approvers are the group's members at create, less the requester. `None`: a rule the
    /// requester wrote.
    pub group: Option<super::approval_policy::GroupName>,
}

/// Every rule must hold (AND); one reject by any listed approver rejects (veto).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub rules: Vec<Rule>,
}

/// Why a create's `policy` was refused.
#[derive(Debug, Clone, PartialEq)]
pub enum PolicyRefusal {
    /// Malformed (400 `invalid_request`).
    Invalid(Vec<FieldError>),
    /// Well formed, but it could only be met with the requester's own vote (400
    /// `policy_unsatisfiable`).
    Unsatisfiable(Vec<FieldError>),
}

/// What one vote does, given the approving votes each rule counted before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VoteEffect {
    /// Recorded; the approval stays pending.
    Counted,
    /// Recorded, and every rule now holds: the approval is approved by this vote.
    Completes,
    /// A reject: the approval is rejected by this vote.
    Vetoes,
}

impl Policy {
    pub const MAX_RULES: usize = 10;
    /// The most rules an approval holds with the groups a deployment's policy requires beside
    /// the requester's own (the most an approval id can hint at: see `ApprovalId`).
    pub const MAX_ALL_RULES: usize = 15;
    pub const MAX_NAME_CHARS: usize = 64;

    /// No `policy` given: one rule, every approver, one approval (v1's single decision).
    pub fn single_decision(approvers: &[Approver]) -> Self {
        Self {
            rules: vec![Rule {
                name: "approvers".to_owned(),
                approvers: approvers.to_vec(),
                min_approvals: 1,
                group: None,
            }],
        }
    }

    /// Parses a create's `policy`. Each rule's approvers must be listed in `approvers`, and
    /// `1 ≤ min_approvals ≤` the rule's approvers other than `requester`.
    pub fn parse(
        value: &Value,
        approvers: &[Approver],
        requester: &Approver,
    ) -> Result<Self, PolicyRefusal> {
        let mut errors = Vec::new();
        let invalid = |field: String, message: &str| FieldError {
            field,
            message: message.to_owned(),
        };
        let Some(rules) = value
            .as_object()
            .filter(|o| o.keys().all(|k| k == "rules"))
            .and_then(|o| o.get("rules"))
            .and_then(Value::as_array)
        else {
            return Err(PolicyRefusal::Invalid(vec![invalid(
                "policy".to_owned(),
                "must be an object with only `rules`, a list",
            )]));
        };
        if rules.is_empty() || rules.len() > Self::MAX_RULES {
            return Err(PolicyRefusal::Invalid(vec![invalid(
                "policy.rules".to_owned(),
                "must hold 1 to 10 rules",
            )]));
        }
        let mut parsed = Vec::new();
        let mut unsatisfiable = Vec::new();
        for (i, rule) in rules.iter().enumerate() {
            let at = |field: &str| format!("policy.rules[{i}].{field}");
            let Some(fields) = rule.as_object() else {
                errors.push(invalid(format!("policy.rules[{i}]"), "must be an object"));
                continue;
            };
            if let Some(unknown) = fields
                .keys()
                .find(|k| !["name", "approvers", "min_approvals"].contains(&k.as_str()))
            {
                errors.push(invalid(at(unknown), "is not a rule field"));
            }
            let name = match fields.get("name").and_then(Value::as_str) {
                Some(name)
                    if !name.trim().is_empty()
                        && name.chars().count() <= Self::MAX_NAME_CHARS
                        && !name.chars().any(char::is_control) =>
                {
                    Some(name.to_owned())
                }
                _ => {
                    errors.push(invalid(
                        at("name"),
                        "must be a non-empty string of at most 64 characters",
                    ));
                    None
                }
            };
            let mut members: Vec<Approver> = Vec::new();
            match fields.get("approvers").and_then(Value::as_array) {
                Some(list) if !list.is_empty() => {
                    for (j, a) in list.iter().enumerate() {
                        // By identity, kept in the spelling `approvers` lists it in (the
                        // one a vote is written as).
                        let parsed = a.as_str().map(Approver::parse);
                        let listed = match &parsed {
                            Some(Ok(a)) => approvers.iter().find(|l| l.same_identity(a)),
                            _ => None,
                        };
                        match (parsed, listed) {
                            (Some(Ok(_)), None) => errors.push(invalid(
                                format!("policy.rules[{i}].approvers[{j}]"),
                                "must be listed in `approvers`",
                            )),
                            (Some(Ok(_)), Some(l)) if members.contains(l) => errors.push(invalid(
                                format!("policy.rules[{i}].approvers[{j}]"),
                                "is listed twice",
                            )),
                            (Some(Ok(_)), Some(l)) => members.push(l.clone()),
                            (Some(Err(e)), _) => errors
                                .push(invalid(format!("policy.rules[{i}].approvers[{j}]"), e.0)),
                            (None, _) => errors.push(invalid(
                                format!("policy.rules[{i}].approvers[{j}]"),
                                "must be a non-empty string",
                            )),
                        }
                    }
                }
                _ => errors.push(invalid(at("approvers"), "must be a non-empty list")),
            }
            let min = match fields.get("min_approvals").and_then(Value::as_u64) {
                Some(min) if (1..=u64::from(u32::MAX)).contains(&min) => Some(min as u32),
                _ => {
                    errors.push(invalid(at("min_approvals"), "must be an integer ≥ 1"));
                    None
                }
            };
            if let (Some(name), Some(min)) = (name, min) {
                // By identity, as the decision's condition compares them: `CI@acme` listed by
                // `ci@acme` is the requester, and its vote never counts.
                let others = members
                    .iter()
                    .filter(|a| a.identity() != requester.identity())
                    .count();
                if min as usize > members.len() {
                    errors.push(invalid(
                        at("min_approvals"),
                        "is more than the rule's approvers",
                    ));
                } else if min as usize > others {
                    unsatisfiable.push(invalid(
                        at("min_approvals"),
                        "can only be met with the requester's own vote",
                    ));
                }
                parsed.push(Rule {
                    name,
                    approvers: members,
                    min_approvals: min,
                    group: None,
                });
            }
        }
        for (i, rule) in parsed.iter().enumerate() {
            if parsed[..i].iter().any(|r| r.name == rule.name) {
                errors.push(invalid(format!("policy.rules[{i}].name"), "is not unique"));
            }
        }
        if !errors.is_empty() {
            return Err(PolicyRefusal::Invalid(errors));
        }
        if !unsatisfiable.is_empty() {
            return Err(PolicyRefusal::Unsatisfiable(unsatisfiable));
        }
        Ok(Self { rules: parsed })
    }

    /// For each rule, the approving votes it must already hold for an approve by `voter` to
    /// complete the quorum: `min_approvals`, less one if the rule lists the voter. A threshold
    /// ≤ 0 holds whatever was counted.
    pub fn thresholds(&self, voter: &Approver) -> Vec<i64> {
        self.rules
            .iter()
            .map(|r| i64::from(r.min_approvals) - i64::from(r.approvers.contains(voter)))
            .collect()
    }

    /// Which rules count an approve by `voter` (one vote counts in every rule that lists it).
    pub fn counted_in(&self, voter: &Approver) -> Vec<usize> {
        (0..self.rules.len())
            .filter(|&i| self.rules[i].approvers.contains(voter))
            .collect()
    }

    /// What a vote does, given each rule's approving votes before it (`counts[i]`, rule `i`).
    pub fn effect(&self, counts: &[u32], voter: &Approver, approve: bool) -> VoteEffect {
        if !approve {
            return VoteEffect::Vetoes;
        }
        let met = self
            .thresholds(voter)
            .iter()
            .enumerate()
            .all(|(i, &t)| i64::from(counts.get(i).copied().unwrap_or(0)) >= t);
        if met {
            VoteEffect::Completes
        } else {
            VoteEffect::Counted
        }
    }

    /// Whether the vote alone completes the quorum, whatever was counted before (every
    /// threshold ≤ 0): the store then writes the completing update first.
    pub fn completes_alone(&self, voter: &Approver) -> bool {
        self.thresholds(voter).iter().all(|&t| t <= 0)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    fn people(names: &[&str]) -> Vec<Approver> {
        names.iter().map(|n| Approver::parse(n).unwrap()).collect()
    }

    fn engineering_and_security() -> Policy {
        Policy::parse(
            &json!({"rules": [
                {"name": "engineering", "approvers": ["alice", "bob", "carol"], "min_approvals": 2},
                {"name": "security", "approvers": ["dave"], "min_approvals": 1}]}),
            &people(&["alice", "bob", "carol", "dave"]),
            &Approver::parse("ci").unwrap(),
        )
        .unwrap()
    }

    #[test]
    fn the_spec_example_is_met_by_two_engineers_and_security() {
        let policy = engineering_and_security();
        let [alice, bob, _, dave] = &people(&["alice", "bob", "carol", "dave"])[..] else {
            unreachable!()
        };
        assert_eq!(policy.thresholds(alice), vec![1, 1]);
        assert_eq!(policy.thresholds(dave), vec![2, 0]);
        assert_eq!(policy.effect(&[0, 0], alice, true), VoteEffect::Counted);
        assert_eq!(policy.effect(&[1, 0], bob, true), VoteEffect::Counted);
        assert_eq!(policy.effect(&[2, 0], dave, true), VoteEffect::Completes);
        assert_eq!(policy.effect(&[1, 1], bob, true), VoteEffect::Completes);
        assert_eq!(policy.effect(&[1, 1], bob, false), VoteEffect::Vetoes);
        assert!(!policy.completes_alone(dave));
        let single = Policy::single_decision(&people(&["alice", "bob"]));
        assert!(single.completes_alone(alice), "v1: one vote decides");
    }

    #[test]
    fn malformed_policies_are_invalid_and_self_only_ones_unsatisfiable() {
        let approvers = people(&["alice", "bob", "ci"]);
        let ci = Approver::parse("ci").unwrap();
        for bad in [
            json!([]),
            json!({"rules": []}),
            json!({"rules": [{"name": "a", "approvers": ["alice"], "min_approvals": 1}], "x": 1}),
            json!({"rules": [{"name": "", "approvers": ["alice"], "min_approvals": 1}]}),
            json!({"rules": [{"name": "a", "approvers": [], "min_approvals": 1}]}),
            json!({"rules": [{"name": "a", "approvers": ["mallory"], "min_approvals": 1}]}),
            json!({"rules": [{"name": "a", "approvers": ["alice", "alice"], "min_approvals": 1}]}),
            json!({"rules": [{"name": "a", "approvers": ["alice"], "min_approvals": 0}]}),
            json!({"rules": [{"name": "a", "approvers": ["alice"], "min_approvals": 2}]}),
            json!({"rules": [{"name": "a", "approvers": ["alice"], "min_approvals": 1.5}]}),
            json!({"rules": [{"name": "a", "approvers": ["alice"], "min_approvals": 1, "y": 0}]}),
            json!({"rules": [
                {"name": "a", "approvers": ["alice"], "min_approvals": 1},
                {"name": "a", "approvers": ["bob"], "min_approvals": 1}]}),
            json!({"rules": (0..11).map(|i| json!({"name": format!("r{i}"), "approvers": ["alice"], "min_approvals": 1})).collect::<Vec<_>>()}),
        ] {
            assert!(
                matches!(
                    Policy::parse(&bad, &approvers, &ci),
                    Err(PolicyRefusal::Invalid(_))
                ),
                "{bad}"
            );
        }
        let self_only =
            json!({"rules": [{"name": "a", "approvers": ["ci", "alice"], "min_approvals": 2}]});
        assert!(matches!(
            Policy::parse(&self_only, &approvers, &ci),
            Err(PolicyRefusal::Unsatisfiable(_))
        ));
    }

    #[test]
    fn the_requester_is_known_in_any_spelling() {
        // The requester `ci@acme` listed as `CI@acme`: its vote is refused by the decision's
        // condition (identities compared), so a rule that needs it can never be met.
        let approvers = people(&["CI@acme", "alice"]);
        let requester = Approver::parse("ci@acme").unwrap();
        let needs_ci = json!({"rules": [{"name": "a", "approvers": ["CI@acme", "alice"], "min_approvals": 2}]});
        assert!(matches!(
            Policy::parse(&needs_ci, &approvers, &requester),
            Err(PolicyRefusal::Unsatisfiable(_))
        ));
        let alice_suffices = json!({"rules": [{"name": "a", "approvers": ["CI@acme", "alice"], "min_approvals": 1}]});
        assert!(Policy::parse(&alice_suffices, &approvers, &requester).is_ok());
    }

    /// The reference: recount from every vote so far, the way a person would.
    fn reference(policy: &Policy, votes: &[(usize, bool)], people: &[Approver]) -> Option<bool> {
        if votes.iter().any(|(_, approve)| !approve) {
            return Some(false);
        }
        let approving: HashSet<&Approver> = votes.iter().map(|(p, _)| &people[*p]).collect();
        policy
            .rules
            .iter()
            .all(|r| {
                r.approvers.iter().filter(|a| approving.contains(a)).count()
                    >= r.min_approvals as usize
            })
            .then_some(true)
    }

    fn policies() -> impl Strategy<Value = (Policy, Vec<Approver>)> {
        (2usize..7).prop_flat_map(|n| {
            let rule = (proptest::collection::btree_set(0..n, 1..=n), 1u32..4).prop_map(
                move |(members, min)| {
                    let min = min.min(members.len() as u32);
                    (members.into_iter().collect::<Vec<_>>(), min)
                },
            );
            proptest::collection::vec(rule, 1..4).prop_map(move |rules| {
                let people: Vec<Approver> = (0..n)
                    .map(|i| Approver::parse(&format!("p{i}")).unwrap())
                    .collect();
                let rules = rules
                    .into_iter()
                    .enumerate()
                    .map(|(i, (members, min))| Rule {
                        name: format!("r{i}"),
                        approvers: members.iter().map(|&m| people[m].clone()).collect(),
                        min_approvals: min,
                        group: None,
                    })
                    .collect();
                (Policy { rules }, people)
            })
        })
    }

    proptest! {
        /// The incremental count (what the store's conditions do, vote by vote, one vote per
        /// person, nothing recorded after the outcome) always agrees with a recount.
        #[test]
        fn counting_vote_by_vote_equals_a_recount(
            (policy, people) in policies(),
            sequence in proptest::collection::vec((0usize..7, proptest::bool::weighted(0.85)), 0..20),
        ) {
            let mut counts = vec![0u32; policy.rules.len()];
            let mut voted: Vec<(usize, bool)> = Vec::new();
            let mut outcome = None;
            for (person, approve) in sequence {
                let person = person % people.len();
                if outcome.is_some() || voted.iter().any(|(p, _)| *p == person) {
                    continue;
                }
                voted.push((person, approve));
                match policy.effect(&counts, &people[person], approve) {
                    VoteEffect::Vetoes => outcome = Some(false),
                    VoteEffect::Completes => outcome = Some(true),
                    VoteEffect::Counted => {
                        for i in policy.counted_in(&people[person]) {
                            counts[i] += 1;
                        }
                    }
                }
                prop_assert_eq!(outcome, reference(&policy, &voted, &people), "after {:?}", voted);
            }
        }
    }
}
