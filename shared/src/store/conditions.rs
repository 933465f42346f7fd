//! The conditions more than one write shares. Each is a guarantee: its name says which, and
//! its comment which race it closes. (A condition only one write uses stands beside that write.)

/// only_if_new: an item is created once and never overwritten by a put.
pub(crate) const ONLY_IF_NEW: &str = "attribute_not_exists(#pk)";

/// only_if_exists: an update never creates an item (a missing approval fails the condition,
/// and its refusal says so: no item came back).
pub(crate) const ONLY_IF_EXISTS: &str = "attribute_exists(#pk)";

/// only_if_pending_unexpired_listed_and_not_the_requester: the one condition that makes a
/// decision terminal, whatever channel it comes through. A missing item fails it too (it has no
/// status), so a decision can never create an approval. Separation of duties is part of it, so
/// no channel can skip it: the approval's requester never decides it, neither as the approver
/// named nor as the principal whose key sent the vote (`:sender_id`, the approver's own
/// identity on channels without a key) — an approval from before `requested_by` existed has
/// none to compare.
pub(crate) const ONLY_IF_DECIDABLE: &str = "#status = :pending AND #expires_at > :now AND contains(#approvers, :approver) \
     AND (attribute_not_exists(#requested_by_id) \
          OR (#requested_by_id <> :approver_id AND #requested_by_id <> :sender_id)) \
     AND NOT contains(#gh.#rq, :approver_id) AND NOT contains(#gh.#rq, :sender_id)";
