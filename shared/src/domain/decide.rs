//! Deciding: the request, and what a refused conditional update means.

use serde_json::Value;

use super::approval_policy::GroupName;
use super::{Approval, Approver, EpochSeconds, FieldError, Outcome, Status};

/// A valid decision request, whatever channel it came through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecideRequest {
    pub outcome: Outcome,
    pub approver: Approver,
    pub comment: Option<String>,
    /// Who sent it, when that is not the approver: the principal of the key a trusted backend
    /// decides with. The requester never decides its own approval, under any name.
    pub sent_by: Option<Approver>,
    /// The delegate casting it in `approver`'s place (`None`: the approver's own vote).
    pub by: Option<Approver>,
    /// The groups `approver` (the place) is in now, from the cached groups: a deployment's
    /// group rule counts the place's vote only while it is still in the group.
    pub place_groups: Vec<GroupName>,
    /// Whether the vote carries a verified passkey signature (the only vote a passkey-only
    /// approval counts).
    pub passkey: bool,
}

impl DecideRequest {
    pub const MAX_COMMENT_CHARS: usize = 2_000;

    /// Parses the JSON API's body: `{"decision": "approve" | "reject", "approver", "comment"?}`.
    pub fn parse_json(body: &Value) -> Result<Self, Vec<FieldError>> {
        let Some(body) = body.as_object() else {
            return Err(vec![FieldError::new("", "the body must be a JSON object")]);
        };
        let mut errors = Vec::new();
        for key in body.keys() {
            if !matches!(key.as_str(), "decision" | "approver" | "comment") {
                errors.push(FieldError::new(key.clone(), "unknown field"));
            }
        }
        let outcome = match body.get("decision").and_then(Value::as_str) {
            Some(raw) => Self::parse_outcome(raw),
            None => None,
        };
        if outcome.is_none() {
            errors.push(FieldError::new(
                "decision",
                "must be \"approve\" or \"reject\"",
            ));
        }
        let approver = match body.get("approver") {
            Some(Value::String(raw)) => Approver::parse(raw)
                .map_err(|e| errors.push(FieldError::new("approver", e.0)))
                .ok(),
            _ => {
                errors.push(FieldError::new("approver", "required string"));
                None
            }
        };
        let comment = match body.get("comment") {
            None | Some(Value::Null) => None,
            Some(Value::String(c)) => Self::check_comment(c, &mut errors),
            Some(_) => {
                errors.push(FieldError::new("comment", "must be a string"));
                None
            }
        };
        match (outcome, approver) {
            (Some(outcome), Some(approver)) if errors.is_empty() => Ok(Self {
                outcome,
                approver,
                comment,
                sent_by: None,
                by: None,
                place_groups: Vec::new(),
                passkey: false,
            }),
            _ => Err(errors),
        }
    }

    /// `approve` / `reject`, the verbs of every channel.
    pub fn parse_outcome(raw: &str) -> Option<Outcome> {
        match raw {
            "approve" => Some(Outcome::Approved),
            "reject" => Some(Outcome::Rejected),
            _ => None,
        }
    }

    /// An empty comment is no comment.
    pub fn check_comment(raw: &str, errors: &mut Vec<FieldError>) -> Option<String> {
        if raw.chars().count() > Self::MAX_COMMENT_CHARS {
            errors.push(FieldError::new(
                "comment",
                "must be at most 2000 characters",
            ));
            None
        } else if raw.trim().is_empty() {
            None
        } else {
            Some(raw.to_owned())
        }
    }
}

/// Why the conditional vote did not apply, told apart from the item as it was (returned by the
/// failed condition itself, so no second read).
#[derive(Debug, Clone, PartialEq)]
pub enum DecideRefusal {
    /// No such approval for this tenant.
    NotFound,
    /// The same approver already cast the same vote: answer as if this request had won.
    Repeat(Box<Approval>),
    /// The approval is no longer pending (decided, or cancelled) and this vote was not counted.
    AlreadyDecided(Box<Approval>),
    /// The approver already voted otherwise on the pending approval (one vote per person).
    AlreadyVoted(Box<Approval>),
    Expired,
    NotAnApprover,
    /// The approver, or the principal that sent the vote, is the approval's requester
    /// (separation of duties).
    SelfApproval,
    /// A vote in someone's place whose delegation is not to the voter, not in force, or no
    /// longer the one read when the vote was written: nothing recorded.
    NotDelegated,
    /// The comment is longer than the approval keeps of one (an approval listing many people
    /// keeps shorter comments): 400 `invalid_request`, nothing recorded.
    CommentTooLong {
        cap: u32,
    },
    /// The place was in a group rule's group at the create and is no longer: 403 `forbidden`.
    NotInGroup(GroupName),
    /// The approval is passkey-only and the vote carries no passkey signature: 403
    /// `passkey_required`, nothing recorded.
    PasskeyRequired,
    /// A pending quorum approval that this approve completes: the counted-vote write refused
    /// it for exactly that reason, and the store writes it again as the completing vote.
    Completes(Box<Approval>),
    /// The item as returned satisfies the condition that refused it: the store and this code
    /// disagree about the condition, which no retry fixes.
    Unexplained,
}

impl DecideRefusal {
    /// Why the vote was not counted, as its problem's `code` (the `Reason` of the `VoteRefused`
    /// metric); `None` for a repeat (counted the first time) and for the store's own faults.
    pub fn reason(&self) -> Option<&'static str> {
        match self {
            Self::NotFound => Some("not_found"),
            Self::AlreadyDecided(_) => Some("already_decided"),
            Self::AlreadyVoted(_) => Some("already_voted"),
            Self::Expired => Some("approval_expired"),
            Self::NotAnApprover => Some("not_an_approver"),
            Self::SelfApproval => Some("self_approval_forbidden"),
            Self::NotDelegated | Self::NotInGroup(_) => Some("forbidden"),
            Self::PasskeyRequired => Some("passkey_required"),
            Self::CommentTooLong { .. } => Some("invalid_request"),
            Self::Repeat(_) | Self::Completes(_) | Self::Unexplained => None,
        }
    }
}

/// Classifies a refused vote from the approval as it was when the condition failed. A vote
/// already cast is told first (repeats answer as they did), then decided beats expired (a
/// decision made in time stands), and expired beats the approver checks.
pub fn classify_refusal(
    old: Option<Approval>,
    request: &DecideRequest,
    now: EpochSeconds,
) -> DecideRefusal {
    let Some(old) = old else {
        return DecideRefusal::NotFound;
    };
    // A passkey-only approval hears no other vote, whoever sends it and whatever its state:
    // told before anything else, so no other channel learns more of it.
    if old.assurance.is_some() && !request.passkey {
        return DecideRefusal::PasskeyRequired;
    }
    // The requester's own key decides nothing, whoever it names and whatever state it finds.
    if request
        .sent_by
        .as_ref()
        .is_some_and(|s| old.is_requester(s))
    {
        return DecideRefusal::SelfApproval;
    }
    // A delegate who asked decides nothing either, in anyone's place.
    if request.by.as_ref().is_some_and(|by| old.is_requester(by)) {
        return DecideRefusal::SelfApproval;
    }
    let status = old.status_at(now);
    // Who casts it: the delegate in someone's place, or the approver themselves.
    let voter = request.by.as_ref().unwrap_or(&request.approver);
    // The place's vote, or the voter's one vote cast for someone else: a place is filled once
    // and a person votes once. Only the same person's same vote on the same place repeats.
    let place = old.vote_of(&request.approver);
    if let Some(vote) = place.or_else(|| old.vote_cast_by(voter)) {
        let same_voter = vote
            .by
            .as_ref()
            .unwrap_or(&vote.approver)
            .same_identity(voter);
        return match status {
            _ if place.is_some() && same_voter && vote.outcome == request.outcome => {
                DecideRefusal::Repeat(Box::new(old))
            }
            Status::Pending => DecideRefusal::AlreadyVoted(Box::new(old)),
            Status::Expired => DecideRefusal::Expired,
            Status::Approved | Status::Rejected | Status::Cancelled => {
                DecideRefusal::AlreadyDecided(Box::new(old))
            }
        };
    }
    match status {
        Status::Approved | Status::Rejected | Status::Cancelled => {
            DecideRefusal::AlreadyDecided(Box::new(old))
        }
        Status::Expired => DecideRefusal::Expired,
        Status::Pending if !old.is_approver(&request.approver) => DecideRefusal::NotAnApprover,
        // The store's `voters` holds both people of every vote, so a place someone else's vote
        // involved (the named person cast a vote in another's place) or a voter whose own place
        // was filled by their delegate is refused as voted: a delegation cycle or chain
        // (A→B, B→A; A→B→C) is a 409, never an unexplained refusal (review of v6, finding 2).
        Status::Pending
            if old.involving(voter).is_some() || old.involving(&request.approver).is_some() =>
        {
            DecideRefusal::AlreadyVoted(Box::new(old))
        }
        Status::Pending if old.is_requester(&request.approver) => DecideRefusal::SelfApproval,
        Status::Pending if old.comment_too_long(request.comment.as_deref()) => {
            DecideRefusal::CommentTooLong {
                cap: old.comment_cap.unwrap_or_default(),
            }
        }
        Status::Pending => match old.left_group(&request.approver, &request.place_groups) {
            Some(group) => DecideRefusal::NotInGroup(group.clone()),
            None if old.completed_by(&request.approver, request.outcome) => {
                DecideRefusal::Completes(Box::new(old))
            }
            None => DecideRefusal::Unexplained,
        },
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::domain::approval::tests::pending;
    use crate::domain::{Channel, Decision};

    fn request(outcome: Outcome, approver: &str) -> DecideRequest {
        DecideRequest {
            outcome,
            approver: Approver::parse(approver).unwrap(),
            comment: None,
            sent_by: None,
            by: None,
            place_groups: Vec::new(),
            passkey: false,
        }
    }

    fn decided(outcome: Outcome, approver: &str) -> Approval {
        let mut approval = pending(100);
        approval.status = outcome.status();
        approval.decision = Some(Decision {
            outcome,
            approver: Approver::parse(approver).unwrap(),
            decided_at: 10,
            channel: Channel::Api,
            comment: None,
            webhook_event_id: None,
            key_id: None,
            signed_in: None,
            by: None,
            delegation_set_by: None,
            passkey: None,
        });
        approval
    }

    #[test]
    fn the_json_body_is_parsed_strictly() {
        let ok = DecideRequest::parse_json(
            &json!({"decision": "approve", "approver": "alice", "comment": " "}),
        );
        assert_eq!(ok.unwrap(), request(Outcome::Approved, "alice"));
        let bad =
            DecideRequest::parse_json(&json!({"decision": "approved", "approver": 3, "x": 1}))
                .unwrap_err();
        let fields: Vec<_> = bad.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["x", "decision", "approver"]);
        let long = "c".repeat(2_001);
        assert!(
            DecideRequest::parse_json(
                &json!({"decision": "reject", "approver": "a", "comment": long})
            )
            .is_err()
        );
    }

    #[test]
    fn missing_item_is_not_found() {
        assert_eq!(
            classify_refusal(None, &request(Outcome::Approved, "alice"), 0),
            DecideRefusal::NotFound
        );
    }

    #[test]
    fn the_same_decision_by_the_same_approver_is_a_repeat() {
        let got = classify_refusal(
            Some(decided(Outcome::Approved, "alice")),
            &request(Outcome::Approved, "alice"),
            50,
        );
        assert!(matches!(got, DecideRefusal::Repeat(_)));
    }

    #[test]
    fn any_other_decision_after_a_win_is_already_decided() {
        for (outcome, approver) in [
            (Outcome::Rejected, "alice"),
            (Outcome::Approved, "bob"),
            (Outcome::Rejected, "bob"),
        ] {
            let got = classify_refusal(
                Some(decided(Outcome::Approved, "alice")),
                &request(outcome, approver),
                50,
            );
            assert!(
                matches!(got, DecideRefusal::AlreadyDecided(_)),
                "{outcome:?} {approver}"
            );
        }
    }

    #[test]
    fn a_decision_made_in_time_outlives_the_expiry() {
        let got = classify_refusal(
            Some(decided(Outcome::Approved, "alice")),
            &request(Outcome::Approved, "alice"),
            500,
        );
        assert!(matches!(got, DecideRefusal::Repeat(_)));
    }

    #[test]
    fn the_requester_deciding_is_a_self_approval() {
        let mut approval = pending(100);
        let requester = approval.approvers[0].clone();
        approval.requested_by = Some(requester.clone());
        let got = classify_refusal(
            Some(approval.clone()),
            &request(Outcome::Approved, requester.as_str()),
            50,
        );
        assert_eq!(got, DecideRefusal::SelfApproval);
        // Unlisted comes first: a requester that is not an approver is told just that.
        approval.approvers.retain(|a| *a != requester);
        approval
            .approvers
            .push(Approver::parse("someone-else").unwrap());
        let got = classify_refusal(
            Some(approval),
            &request(Outcome::Approved, requester.as_str()),
            50,
        );
        assert_eq!(got, DecideRefusal::NotAnApprover);
    }

    #[test]
    fn a_vote_sent_by_the_requesters_key_is_a_self_approval_whoever_it_names() {
        let mut approval = pending(100);
        approval.requested_by = Some(Approver::parse("CI@acme").unwrap());
        let mut sent = request(Outcome::Approved, "alice");
        sent.sent_by = Some(Approver::parse(" ci@ACME").unwrap());
        assert_eq!(
            classify_refusal(Some(approval.clone()), &sent, 50),
            DecideRefusal::SelfApproval
        );
        sent.approver = Approver::parse("nobody-listed").unwrap();
        assert_eq!(
            classify_refusal(Some(approval.clone()), &sent, 50),
            DecideRefusal::SelfApproval
        );
        sent.sent_by = Some(Approver::parse("portal@acme").unwrap());
        assert_eq!(
            classify_refusal(Some(approval), &sent, 50),
            DecideRefusal::NotAnApprover
        );
    }

    /// A place is filled once and a person votes once: a delegate's vote and the delegator's
    /// own are one place, and the delegate's own vote and theirs for someone are one person.
    #[test]
    fn a_vote_in_someones_place_and_the_people_it_involves_are_told_apart() {
        let as_delegate = |outcome, place: &str, by: &str| DecideRequest {
            by: Some(Approver::parse(by).unwrap()),
            ..request(outcome, place)
        };
        let mut voted = pending(100);
        voted.votes.push(Decision {
            by: Some(Approver::parse("bob").unwrap()),
            ..decided(Outcome::Approved, "alice").decision.unwrap()
        });
        let classify = |req: &DecideRequest| classify_refusal(Some(voted.clone()), req, 50);
        assert!(matches!(
            classify(&as_delegate(Outcome::Approved, "alice", "Bob")),
            DecideRefusal::Repeat(_)
        ));
        for (req, why) in [
            (request(Outcome::Approved, "alice"), "the delegator after"),
            (request(Outcome::Approved, "bob"), "the delegate as himself"),
            (as_delegate(Outcome::Rejected, "alice", "bob"), "otherwise"),
            (as_delegate(Outcome::Approved, "alice", "carol"), "another"),
        ] {
            assert!(
                matches!(classify(&req), DecideRefusal::AlreadyVoted(_)),
                "{why}"
            );
        }
        let mut asked = pending(100);
        asked.requested_by = Some(Approver::parse("carol").unwrap());
        assert_eq!(
            classify_refusal(
                Some(asked),
                &as_delegate(Outcome::Approved, "alice", "carol"),
                50
            ),
            DecideRefusal::SelfApproval
        );
    }

    #[test]
    fn expired_and_unlisted_are_told_apart() {
        let req = request(Outcome::Approved, "mallory");
        assert_eq!(
            classify_refusal(Some(pending(100)), &req, 50),
            DecideRefusal::NotAnApprover
        );
        assert_eq!(
            classify_refusal(Some(pending(100)), &req, 100),
            DecideRefusal::Expired
        );
    }
}

/// What became of a webhook event, recorded in the inbox and answered to every delivery of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WebhookOutcome {
    /// The event decided the approval.
    Applied,
    /// The approval was already decided, or expired, before the event arrived.
    Superseded,
    NotAnApprover,
    /// No such approval for the source's tenant (missing, malformed id, or another tenant's).
    UnknownApproval,
    /// An event type Countersign does not act on.
    Ignored,
    /// The event's approver is the approval's requester (separation of duties).
    SelfApprovalForbidden,
    /// The event's comment is longer than the approval keeps of one: not counted.
    CommentTooLong,
    /// The approval is passkey-only: no webhook votes on it.
    PasskeyRequired,
    /// GitHub: a job waiting on an environment opened a round (its approval).
    Opened,
    /// GitHub: a job waiting on an environment joined the round open for it.
    Joined,
    /// GitHub: the round was refused at once (no configuration for the environment, a policy
    /// only the requester could meet): its approval is born rejected.
    Refused,
    /// GitHub: the run ended; its open rounds closed, their pending approvals cancelled.
    Cancelled,
}

impl WebhookOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Applied => "applied",
            Self::Superseded => "superseded",
            Self::NotAnApprover => "not_an_approver",
            Self::UnknownApproval => "unknown_approval",
            Self::Ignored => "ignored",
            Self::SelfApprovalForbidden => "self_approval_forbidden",
            Self::CommentTooLong => "comment_too_long",
            Self::PasskeyRequired => "passkey_required",
            Self::Opened => "opened",
            Self::Joined => "joined",
            Self::Refused => "refused",
            Self::Cancelled => "cancelled",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        [
            Self::Applied,
            Self::Superseded,
            Self::NotAnApprover,
            Self::UnknownApproval,
            Self::Ignored,
            Self::SelfApprovalForbidden,
            Self::CommentTooLong,
            Self::PasskeyRequired,
            Self::Opened,
            Self::Joined,
            Self::Refused,
            Self::Cancelled,
        ]
        .into_iter()
        .find(|o| o.as_str() == raw)
    }

    /// The outcome of a decision event the approval's condition refused (`None`: unexplained).
    pub fn from_refusal(refusal: &DecideRefusal) -> Option<Self> {
        match refusal {
            DecideRefusal::NotFound => Some(Self::UnknownApproval),
            DecideRefusal::Repeat(_)
            | DecideRefusal::AlreadyDecided(_)
            | DecideRefusal::AlreadyVoted(_)
            | DecideRefusal::Expired => Some(Self::Superseded),
            DecideRefusal::NotAnApprover
            | DecideRefusal::NotDelegated
            | DecideRefusal::NotInGroup(_) => Some(Self::NotAnApprover),
            DecideRefusal::CommentTooLong { .. } => Some(Self::CommentTooLong),
            DecideRefusal::SelfApproval => Some(Self::SelfApprovalForbidden),
            DecideRefusal::PasskeyRequired => Some(Self::PasskeyRequired),
            DecideRefusal::Completes(_) | DecideRefusal::Unexplained => None,
        }
    }
}
