//! Approvals that don't stall: reminders to the approvers who have not voted, and escalation steps that add
//! approvers to an approval still pending at their time. Pure: what a create may ask for, and
//! when each reminder and step falls due, so that the store can keep one `due` entry per
//! approval (the earliest of its expiry, its next reminder and its next step) and make each
//! one a conditional write on its number.

use std::collections::BTreeSet;

use serde::Serialize;
use serde_json::{Map, Value};

use super::{Approver, EpochSeconds, FieldError, Policy, PolicyRefusal, rfc3339};

/// `"reminders": {"after_seconds": A, "every_seconds": E, "max": M}`: at A seconds after
/// creation and every E after, up to M times, while pending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reminders {
    pub after_seconds: i64,
    pub every_seconds: i64,
    pub max: u32,
}

/// One escalation step: at `after_seconds` after creation, if still pending, `approvers` join
/// the approval (and the rule named, or every rule; `min_approvals` unchanged).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EscalationStep {
    pub after_seconds: i64,
    pub approvers: Vec<Approver>,
    pub rule: Option<String>,
}

/// What falls due next on a pending approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Reminder number `n` (1-based).
    Reminder(u32),
    /// Escalation step number `n` (1-based).
    Escalation(u32),
    /// Its expiry.
    Expiry,
}

impl Reminders {
    pub const MIN_AFTER_SECONDS: i64 = 60;
    pub const MIN_EVERY_SECONDS: i64 = 300;
    pub const MAX_REMINDERS: u32 = 20;

    /// Parses a create's `reminders` (or an action type's default), naming `field` in errors.
    pub fn parse(value: &Value, field: &str) -> Result<Self, Vec<FieldError>> {
        let Some(fields) = value.as_object() else {
            return Err(vec![FieldError::new(
                field,
                "must be an object {after_seconds, every_seconds, max}",
            )]);
        };
        let mut errors = unknown_fields(fields, &["after_seconds", "every_seconds", "max"], field);
        let after = integer(
            fields,
            "after_seconds",
            Self::MIN_AFTER_SECONDS,
            i64::MAX,
            field,
        );
        let every = integer(
            fields,
            "every_seconds",
            Self::MIN_EVERY_SECONDS,
            i64::MAX,
            field,
        );
        let max = integer(fields, "max", 1, i64::from(Self::MAX_REMINDERS), field);
        match (after, every, max) {
            (Ok(after_seconds), Ok(every_seconds), Ok(max)) if errors.is_empty() => Ok(Self {
                after_seconds,
                every_seconds,
                max: u32::try_from(max).unwrap_or(Self::MAX_REMINDERS),
            }),
            (after, every, max) => {
                errors.extend([after.err(), every.err(), max.err()].into_iter().flatten());
                Err(errors)
            }
        }
    }

    /// When reminder number `n` (1-based) falls due on an approval created at `created_at`:
    /// `None` past `max`.
    pub fn due(&self, created_at: EpochSeconds, n: u32) -> Option<EpochSeconds> {
        if n == 0 || n > self.max {
            return None;
        }
        let later = self.every_seconds.checked_mul(i64::from(n - 1))?;
        created_at
            .checked_add(self.after_seconds)?
            .checked_add(later)
    }
}

/// The escalation steps of a create (`"escalation": [...]`), checked against its approvers,
/// policy and requester as any approver is: 1–3 steps, times increasing, each at least 60 s;
/// a step's approvers valid, new to the approval (an approver joining another rule could
/// complete a quorum with a vote already cast, which no write would then decide) and in no
/// other step; the rule it names one of the policy's; the requester among them is `policy_unsatisfiable` (they could never vote); all
/// approvers together within [`super::CreateRequest::MAX_APPROVERS`].
pub fn parse_escalation(
    value: &Value,
    approvers: &[Approver],
    policy: Option<&Policy>,
    requester: &Approver,
) -> Result<Vec<EscalationStep>, PolicyRefusal> {
    const FIELD: &str = "escalation";
    let Some(steps) = value.as_array().filter(|s| (1..=3).contains(&s.len())) else {
        return Err(PolicyRefusal::Invalid(vec![FieldError::new(
            FIELD,
            "must be a list of 1 to 3 steps",
        )]));
    };
    let mut errors = Vec::new();
    let mut unsatisfiable = Vec::new();
    let mut parsed: Vec<EscalationStep> = Vec::new();
    // Everyone, for the bound; and who the steps add, for repeats.
    let listed: BTreeSet<String> = approvers.iter().map(Approver::identity).collect();
    let mut everyone = listed.clone();
    let mut in_steps: BTreeSet<String> = BTreeSet::new();
    for (i, step) in steps.iter().enumerate() {
        let at = format!("{FIELD}[{i}]");
        let Some(fields) = step.as_object() else {
            errors.push(FieldError::new(&at, "must be an object"));
            continue;
        };
        errors.extend(unknown_fields(
            fields,
            &["after_seconds", "approvers", "rule"],
            &at,
        ));
        let after = integer(
            fields,
            "after_seconds",
            EscalationStep::MIN_AFTER_SECONDS,
            i64::MAX,
            &at,
        );
        match (&after, parsed.last()) {
            (Ok(after), Some(previous)) if *after <= previous.after_seconds => {
                errors.push(FieldError::new(
                    format!("{at}.after_seconds"),
                    "must be later than the step before",
                ))
            }
            (Err(error), _) => errors.push(error.clone()),
            _ => {}
        }
        let rule = match fields.get("rule") {
            None => None,
            Some(Value::String(name))
                if policy.is_some_and(|p| p.rules.iter().any(|r| r.name == *name)) =>
            {
                Some(name.clone())
            }
            Some(_) => {
                errors.push(FieldError::new(
                    format!("{at}.rule"),
                    "must name a rule of `policy`",
                ));
                None
            }
        };
        let mut members = Vec::new();
        match fields.get("approvers").and_then(Value::as_array) {
            Some(list) if !list.is_empty() => {
                for (j, raw) in list.iter().enumerate() {
                    let field = format!("{at}.approvers[{j}]");
                    match raw.as_str().map(Approver::parse) {
                        Some(Ok(approver)) if approver.same_identity(requester) => unsatisfiable
                            .push(FieldError::new(
                                &field,
                                "is the requester, who may not decide their own request",
                            )),
                        Some(Ok(approver)) if listed.contains(&approver.identity()) => {
                            errors.push(FieldError::new(&field, "is an approver already"));
                        }
                        Some(Ok(approver)) if !in_steps.insert(approver.identity()) => {
                            errors.push(FieldError::new(&field, "is in a step already"));
                        }
                        Some(Ok(approver)) => {
                            everyone.insert(approver.identity());
                            members.push(approver);
                        }
                        Some(Err(error)) => errors.push(FieldError::new(&field, error.0)),
                        None => errors.push(FieldError::new(&field, "must be a string")),
                    }
                }
            }
            _ => errors.push(FieldError::new(
                format!("{at}.approvers"),
                "must be a non-empty list",
            )),
        }
        if let Ok(after_seconds) = after {
            parsed.push(EscalationStep {
                after_seconds,
                approvers: members,
                rule,
            });
        }
    }
    if everyone.len() > super::CreateRequest::MAX_APPROVERS {
        errors.push(FieldError::new(
            FIELD,
            "approvers and every step's together must be at most 20 people",
        ));
    }
    if !errors.is_empty() {
        return Err(PolicyRefusal::Invalid(errors));
    }
    if !unsatisfiable.is_empty() {
        return Err(PolicyRefusal::Unsatisfiable(unsatisfiable));
    }
    Ok(parsed)
}

impl EscalationStep {
    pub const MIN_AFTER_SECONDS: i64 = 60;
}

/// What falls due next on a pending approval created at `created_at` and expiring at
/// `expires_at`, with `reminded` reminders sent and `escalated` steps applied: the earliest of
/// the next reminder, the next step and the expiry (a tie goes to the step, whose approvers
/// the reminder should then include; anything at or after the expiry gives way to it).
pub fn next_due(
    created_at: EpochSeconds,
    expires_at: EpochSeconds,
    reminders: Option<&Reminders>,
    reminded: u32,
    escalation: &[EscalationStep],
    escalated: u32,
) -> (Next, EpochSeconds) {
    let step = usize::try_from(escalated)
        .ok()
        .and_then(|i| escalation.get(i))
        .and_then(|s| created_at.checked_add(s.after_seconds))
        .map(|at| (Next::Escalation(escalated + 1), at));
    let reminder = reminders
        .and_then(|r| r.due(created_at, reminded + 1))
        .map(|at| (Next::Reminder(reminded + 1), at));
    [step, reminder]
        .into_iter()
        .flatten()
        .filter(|(_, at)| *at < expires_at)
        .min_by_key(|(next, at)| (*at, matches!(next, Next::Reminder(_))))
        .unwrap_or((Next::Expiry, expires_at))
}

/// What an approval keeps of its reminders and escalation: what it was created with, and how
/// many reminders were sent and steps applied — each count moved on by one conditional write,
/// so any number of sweeps sends each reminder and applies each step once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stall {
    pub reminders: Option<Reminders>,
    pub reminded: u32,
    pub escalation: Vec<EscalationStep>,
    pub escalated: u32,
}

impl Stall {
    /// Neither reminders nor escalation.
    pub fn is_empty(&self) -> bool {
        self.reminders.is_none() && self.escalation.is_empty()
    }

    /// The steps applied so far.
    pub fn applied(&self) -> &[EscalationStep] {
        let applied = usize::try_from(self.escalated).unwrap_or(usize::MAX);
        &self.escalation[..applied.min(self.escalation.len())]
    }

    /// What falls due next (see [`next_due`]).
    pub fn next(&self, created_at: EpochSeconds, expires_at: EpochSeconds) -> (Next, EpochSeconds) {
        next_due(
            created_at,
            expires_at,
            self.reminders.as_ref(),
            self.reminded,
            &self.escalation,
            self.escalated,
        )
    }

    /// The reminder to send or the step to apply at `now`, if one is due before the expiry. A
    /// sweep that runs late sends the latest reminder fallen due, not a burst of every one
    /// missed (but never one past a step due before it: the step's approvers come first).
    pub fn due_at(
        &self,
        created_at: EpochSeconds,
        expires_at: EpochSeconds,
        now: EpochSeconds,
    ) -> Option<Next> {
        let (next, at) = self.next(created_at, expires_at);
        if at > now || now >= expires_at {
            return None;
        }
        match (next, &self.reminders) {
            (Next::Reminder(mut n), Some(reminders)) => {
                let step_at = self
                    .escalation
                    .get(usize::try_from(self.escalated).unwrap_or(usize::MAX))
                    .and_then(|s| created_at.checked_add(s.after_seconds))
                    .unwrap_or(EpochSeconds::MAX);
                while reminders
                    .due(created_at, n + 1)
                    .is_some_and(|t| t <= now && t < step_at && t < expires_at)
                {
                    n += 1;
                }
                Some(Next::Reminder(n))
            }
            (Next::Expiry, _) => None,
            (next, _) => Some(next),
        }
    }

    /// The API's view of it.
    pub fn view(&self, created_at: EpochSeconds) -> StallView<'_> {
        StallView {
            reminders: self.reminders.map(|r| RemindersView {
                after_seconds: r.after_seconds,
                every_seconds: r.every_seconds,
                max: r.max,
                sent: self.reminded,
            }),
            escalation: self
                .escalation
                .iter()
                .zip(1u32..)
                .map(|(step, number)| StepView {
                    step: number,
                    after_seconds: step.after_seconds,
                    at: rfc3339(created_at.saturating_add(step.after_seconds)),
                    approvers: &step.approvers,
                    rule: step.rule.as_deref(),
                    applied: number <= self.escalated,
                })
                .collect(),
        }
    }
}

impl super::Approval {
    /// The escalation step that added `approver`, if one applied did.
    pub fn joined_at_step(&self, approver: &Approver) -> Option<u32> {
        self.stall
            .applied()
            .iter()
            .zip(1u32..)
            .find(|(step, _)| step.approvers.iter().any(|a| a.same_identity(approver)))
            .map(|(_, number)| number)
    }

    /// The approvers listed now (with the steps applied) whose place has no vote: whom a
    /// reminder goes to.
    pub fn waiting_on(&self) -> Vec<&Approver> {
        // A person who cast their one vote in someone else's place has voted too: a reminder
        // would ask for a vote the store must refuse.
        self.approvers
            .iter()
            .filter(|a| self.involving(a).is_none())
            .collect()
    }
}

/// `policy` with the approvers of `steps` joined: to the rule each step names, or every rule —
/// never a deployment's group rule, whose approvers are the group's members (a requester's
/// escalation cannot add anyone to what the approval policy requires).
pub fn joined(policy: &Policy, steps: &[EscalationStep]) -> Policy {
    let mut policy = policy.clone();
    for step in steps {
        for rule in policy
            .rules
            .iter_mut()
            .filter(|r| r.group.is_none() && step.rule.as_ref().is_none_or(|name| *name == r.name))
        {
            for approver in &step.approvers {
                if !rule.approvers.iter().any(|a| a.same_identity(approver)) {
                    rule.approvers.push(approver.clone());
                }
            }
        }
    }
    policy
}

/// Reminders and escalation as the API shows them (absent when the approval has neither).
#[derive(Debug, Serialize)]
pub struct StallView<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    reminders: Option<RemindersView>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    escalation: Vec<StepView<'a>>,
}

#[derive(Debug, Serialize)]
struct RemindersView {
    after_seconds: i64,
    every_seconds: i64,
    max: u32,
    /// How many were sent so far.
    sent: u32,
}

#[derive(Debug, Serialize)]
struct StepView<'a> {
    step: u32,
    after_seconds: i64,
    at: String,
    approvers: &'a [Approver],
    #[serde(skip_serializing_if = "Option::is_none")]
    rule: Option<&'a str>,
    /// Whether its approvers have joined.
    applied: bool,
}

fn unknown_fields(fields: &Map<String, Value>, known: &[&str], at: &str) -> Vec<FieldError> {
    fields
        .keys()
        .filter(|k| !known.contains(&k.as_str()))
        .map(|k| FieldError::new(format!("{at}.{k}"), "is not a field here"))
        .collect()
}

/// The integer `name` of `fields`, within `min..=max`.
fn integer(
    fields: &Map<String, Value>,
    name: &str,
    min: i64,
    max: i64,
    at: &str,
) -> Result<i64, FieldError> {
    fields
        .get(name)
        .and_then(Value::as_i64)
        .filter(|n| (min..=max).contains(n))
        .ok_or_else(|| {
            let range = if max == i64::MAX {
                format!("an integer of at least {min}")
            } else {
                format!("an integer from {min} to {max}")
            };
            FieldError::new(format!("{at}.{name}"), format!("must be {range}"))
        })
}

#[cfg(test)]
mod tests;
