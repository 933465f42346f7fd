//! A vote under a deployment's group rule counts only while its place is still in the group:
//! the domain's side of the vote write's condition (store/votes.rs `still_in_groups`), so that
//! a refusal is told apart exactly as the write refused it.

use super::groups::GroupName;
use crate::domain::{Approval, Approver};

impl Approval {
    /// The first group rule that lists `place` (as listed) while `place_groups` — the groups the
    /// place is in now — no longer holds its group; `None` when every such rule still does.
    pub fn left_group(&self, place: &Approver, place_groups: &[GroupName]) -> Option<&GroupName> {
        let listed = self.listed_as(place)?;
        let policy = self.policy.as_ref()?;
        policy
            .rules
            .iter()
            .filter(|rule| rule.approvers.contains(listed))
            .filter_map(|rule| rule.group.as_ref())
            .find(|group| !place_groups.contains(group))
    }

    /// Whether a vote's comment (its bytes) is longer than this approval keeps of one.
    pub fn comment_too_long(&self, comment: Option<&str>) -> bool {
        self.comment_cap
            .is_some_and(|cap| comment.map_or(0, str::len) > cap as usize)
    }

    /// Why `person` is asked, when a deployment's approval policy asked them: "approval policy
    /// production-deploys (version 3), as a member of sre" — what the review page and the inbox
    /// say beside them.
    pub fn required_by(&self, person: &Approver) -> Option<String> {
        let source = self.policy_source.as_ref()?;
        let groups: Vec<&str> = self
            .policy
            .iter()
            .flat_map(|p| &p.rules)
            .filter(|r| r.approvers.iter().any(|a| a.same_identity(person)))
            .filter_map(|r| r.group.as_ref().map(GroupName::as_str))
            .collect();
        (!groups.is_empty()).then(|| {
            format!(
                "approval policy {} (version {}), as a member of {}",
                source.policies.join(", "),
                source.version,
                groups.join(", ")
            )
        })
    }

    /// What the review page says of a rule a deployment's policy made: its group, and which
    /// policy and version required it.
    pub fn rule_source(&self, rule: &crate::domain::Rule) -> Option<String> {
        let source = self.policy_source.as_ref()?;
        let group = rule.group.as_ref()?;
        Some(format!(
            "group {group}, required by approval policy {} (version {})",
            source.policies.join(", "),
            source.version
        ))
    }
}
