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
}
