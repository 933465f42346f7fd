//! Delegation (issue 48): a person lets another vote in their place for a window. Pure: what
//! `PUT /delegations/{identity}` may say, which place a vote naming someone fills, and which a
//! click in Slack (naming nobody) fills — never one that lets a person count twice.
//!
//! The rules a vote in someone's place keeps (the store will make them the conditions of the
//! vote's one write): the named person has delegated to the voter, in force now; one hop (a
//! delegate's own delegation passes nothing on: only the named person's delegation is read);
//! a delegate who is the requester is refused as the requester is; one person casts at most one
//! vote on an approval, for themselves or for one person they stand in for; and a place is
//! filled once, by its owner or their delegate, whichever is first.

use serde_json::Value;

use super::{Approval, Approver, EpochSeconds, FieldError};

/// `{identity}` lets `delegate` vote in their place from `from` until `until`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delegation {
    pub delegator: Approver,
    pub delegate: Approver,
    pub from: EpochSeconds,
    pub until: EpochSeconds,
    pub reason: Option<String>,
}

/// Whose place a vote fills.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// The voter's own.
    Own,
    /// The named person's, by the voter as their delegate.
    InPlaceOf(Approver),
}

/// Why a vote naming someone may not be cast.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlaceRefusal {
    /// 403 `forbidden`: the named person has not delegated to the voter, or not now.
    NotDelegated,
    /// 403 `not_an_approver`: the named person is not listed.
    NotAnApprover,
    /// 403 `self_approval_forbidden`: the voter requested the approval.
    SelfApproval,
    /// 409 `already_voted`: the voter has cast their one vote, or the place is filled.
    AlreadyVoted,
}

/// A vote already cast: the place it filled, and who cast it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cast {
    pub place: Approver,
    pub by: Approver,
}

impl Delegation {
    /// The longest window.
    pub const MAX_SECONDS: i64 = 90 * 86_400;
    pub const MAX_REASON_CHARS: usize = 500;
    /// The longest delegate, in UTF-8 bytes (as spelled and as its identity): a vote in someone's
    /// place records the delegate beside the vote and in the approval's voters, so its size is
    /// bounded where the approval's growth is budgeted (store::size).
    pub const MAX_DELEGATE_BYTES: usize = 128;

    /// Parses a `PUT /delegations/{delegator}` body at `now`: `delegate` (not the delegator),
    /// `from` (RFC 3339, default now), `until` (RFC 3339, in the future, after `from`, at most
    /// 90 days after it), `reason`; anything else is refused, naming the field.
    pub fn parse(
        delegator: &Approver,
        body: &Value,
        now: EpochSeconds,
    ) -> Result<Self, Vec<FieldError>> {
        let Some(fields) = body.as_object() else {
            return Err(vec![FieldError::new("body", "must be an object")]);
        };
        let mut errors: Vec<FieldError> = fields
            .keys()
            .filter(|k| !["delegate", "from", "until", "reason"].contains(&k.as_str()))
            .map(|k| FieldError::new(k.as_str(), "is not a field of a delegation"))
            .collect();
        let delegate = match fields
            .get("delegate")
            .and_then(Value::as_str)
            .map(Approver::parse)
        {
            Some(Ok(delegate)) if delegate.same_identity(delegator) => {
                errors.push(FieldError::new("delegate", "must be someone else"));
                None
            }
            Some(Ok(delegate))
                if delegate.as_str().len() > Self::MAX_DELEGATE_BYTES
                    || delegate.identity().len() > Self::MAX_DELEGATE_BYTES =>
            {
                errors.push(FieldError::new("delegate", "must be at most 128 bytes"));
                None
            }
            Some(Ok(delegate)) => Some(delegate),
            Some(Err(error)) => {
                errors.push(FieldError::new("delegate", error.0));
                None
            }
            None => {
                errors.push(FieldError::new("delegate", "is required: an identity"));
                None
            }
        };
        let time = |name: &str| -> Result<Option<EpochSeconds>, FieldError> {
            match fields.get(name) {
                None => Ok(None),
                Some(value) => value
                    .as_str()
                    .and_then(Self::parse_time)
                    .map(Some)
                    .ok_or_else(|| FieldError::new(name, "must be an RFC 3339 time")),
            }
        };
        let from = time("from").unwrap_or_else(|e| {
            errors.push(e);
            None
        });
        let until = match time("until") {
            Ok(Some(until)) => Some(until),
            Ok(None) => {
                errors.push(FieldError::new("until", "is required: an RFC 3339 time"));
                None
            }
            Err(error) => {
                errors.push(error);
                None
            }
        };
        let from_or_now = from.unwrap_or(now);
        if let Some(until) = until {
            if until <= now {
                errors.push(FieldError::new("until", "must be in the future"));
            } else if until <= from_or_now {
                errors.push(FieldError::new("until", "must be after `from`"));
            } else if until - from_or_now > Self::MAX_SECONDS {
                errors.push(FieldError::new(
                    "until",
                    "must be at most 90 days after `from`",
                ));
            }
        }
        let reason = match fields.get("reason") {
            None => None,
            Some(Value::String(reason))
                if reason.chars().count() <= Self::MAX_REASON_CHARS
                    && !reason.chars().any(char::is_control) =>
            {
                Some(reason.clone())
            }
            Some(_) => {
                errors.push(FieldError::new(
                    "reason",
                    "must be a string of at most 500 characters, without control characters",
                ));
                None
            }
        };
        match (delegate, until) {
            (Some(delegate), Some(until)) if errors.is_empty() => Ok(Self {
                delegator: delegator.clone(),
                delegate,
                from: from_or_now,
                until,
                reason,
            }),
            _ => Err(errors),
        }
    }

    /// An RFC 3339 time as `from` and `until` are written (the CLI's `--for` counts from one).
    pub fn parse_time(raw: &str) -> Option<EpochSeconds> {
        time::OffsetDateTime::parse(raw, &time::format_description::well_known::Rfc3339)
            .ok()
            .map(|at| at.unix_timestamp())
    }

    /// Whether it lets `voter` vote in its delegator's place at `now`.
    pub fn lets(&self, voter: &Approver, now: EpochSeconds) -> bool {
        self.delegate.same_identity(voter) && self.from <= now && now < self.until
    }
}

/// The place `voter` fills by a vote naming `named` as its approver, on an approval that lists
/// `approvers`, requested by someone for whom `is_requester` holds, with the votes `cast`
/// before it; `delegation` is the named person's (read only when `named` is not the voter).
pub fn place(
    voter: &Approver,
    named: &Approver,
    approvers: &[Approver],
    is_requester: impl Fn(&Approver) -> bool,
    cast: &[Cast],
    delegation: Option<&Delegation>,
    now: EpochSeconds,
) -> Result<Place, PlaceRefusal> {
    let place = if named.same_identity(voter) {
        Place::Own
    } else {
        // One hop: only the named person's own delegation counts, and it must name the voter.
        match delegation {
            Some(d) if d.delegator.same_identity(named) && d.lets(voter, now) => {
                Place::InPlaceOf(named.clone())
            }
            _ => return Err(PlaceRefusal::NotDelegated),
        }
    };
    if !approvers.iter().any(|a| a.same_identity(named)) {
        return Err(PlaceRefusal::NotAnApprover);
    }
    // The requester never decides, for themselves or for anyone.
    if is_requester(voter) || is_requester(named) {
        return Err(PlaceRefusal::SelfApproval);
    }
    // One vote per person, one per place: each vote involves its place and whoever cast it,
    // and neither the voter nor the place may be involved in another (the store's `voters`
    // condition, which holds both people of every vote).
    if cast.iter().any(|c| {
        [&c.by, &c.place]
            .into_iter()
            .any(|p| p.same_identity(voter) || p.same_identity(named))
    }) {
        return Err(PlaceRefusal::AlreadyVoted);
    }
    Ok(place)
}

/// The places of `approval` a vote in someone's place could still fill, in its approvers'
/// order: each listed person who has cast no vote (their one vote, for themselves or anyone,
/// is their delegate's too) and whose place nobody filled. Never the requester's, which no
/// vote fills.
pub fn open_places(approval: &Approval) -> Vec<&Approver> {
    approval
        .approvers
        .iter()
        .filter(|a| {
            approval.vote_of(a).is_none()
                && approval.vote_cast_by(a).is_none()
                && !approval.is_requester(a)
        })
        .collect()
}

/// The delegation, of those `delegations` read for the places `open`, by which `voter` fills the
/// first of them (in `open`'s order) at `now`: where a vote that names nobody (a click in
/// Slack) is cast.
pub fn first_place<'a>(
    open: &[&Approver],
    delegations: &'a [Delegation],
    voter: &Approver,
    now: EpochSeconds,
) -> Option<&'a Delegation> {
    open.iter().find_map(|place| {
        delegations
            .iter()
            .find(|d| d.delegator.same_identity(place) && d.lets(voter, now))
    })
}

#[cfg(test)]
mod tests;
