//! What a tenant's policy in force makes of one create (pure): refused, the approvers and the
//! quorum it requires, approved by the policy, or — in `log_only` — the requester's own, with a
//! record of what enforcement would have done.

use serde_json::{Value, json};

use super::apply::{ApplyRefusal, approval_rules};
use super::set::{Evaluation, PolicyError, PolicySet};
use super::{Assurance, Groups, Mode, PolicySource};
use crate::domain::{Approver, FieldError, Policy};

/// The version of a tenant's set in force.
#[derive(Debug, Clone)]
pub struct ActivePolicy {
    pub version: u32,
    pub sha256: String,
    pub mode: Mode,
    /// The set parsed from its stored text; `Err` when this code cannot parse it (a set from a
    /// newer version, a damaged item): every create then fails closed.
    pub set: Result<PolicySet, PolicyError>,
}

impl ActivePolicy {
    /// What an approval shows of it, with the policies that decided.
    pub fn source(&self, policies: Vec<String>) -> PolicySource {
        PolicySource {
            version: self.version,
            sha256: self.sha256.clone(),
            policies,
        }
    }

    fn evaluate(&self, request: &super::AskRequest<'_>, groups: &Groups) -> Evaluation {
        match &self.set {
            Ok(set) => set.evaluate(request, groups),
            Err(error) => Evaluation::Error {
                errors: vec![(
                    String::new(),
                    format!("the stored set does not parse: {error}"),
                )],
            },
        }
    }
}

/// What the policy makes of a create it lets through.
#[derive(Debug, Clone, PartialEq)]
pub enum Governance {
    /// No policy pushed: the requester's approvers and rules, as before v7.
    Unpoliced,
    /// Enforced, with people: the approval's approvers and quorum.
    Required {
        approvers: Vec<Approver>,
        policy: Policy,
        source: PolicySource,
        assurance: Option<Assurance>,
    },
    /// Enforced, with no person: the approval is created approved by the policy (`source`'s
    /// first policy is the one named as its decider).
    Auto { source: PolicySource },
    /// `log_only`: the requester's own apply; `evaluated` is what enforcement would have done
    /// (the trail's `policy.evaluated`), and whether it would have refused.
    Logged {
        evaluated: Value,
        would_refuse: bool,
    },
}

/// Why an enforced policy refuses a create (nothing is written).
#[derive(Debug, Clone, PartialEq)]
pub enum GovernRefusal {
    /// 403 `policy_forbidden`: a matching forbid (its ids), or no matching permit (none).
    Forbidden { policies: Vec<String> },
    /// 403 `policy_error`: fail closed (the erroring policies and why).
    Error { errors: Vec<(String, String)> },
    /// 400 `policy_unsatisfiable`, naming the group.
    Unsatisfiable(Vec<FieldError>),
    /// 400 `invalid_request`.
    Invalid(Vec<FieldError>),
}

/// The create of `request` by `requester`, who named `approvers` and perhaps its own rules, under
/// `active` (the tenant's version in force, if any) and the tenant's `groups`.
pub fn govern(
    active: Option<&ActivePolicy>,
    groups: &Groups,
    request: &super::AskRequest<'_>,
    requester: &Approver,
    (approvers, requested): (&[Approver], Option<&Policy>),
) -> Result<Governance, GovernRefusal> {
    let Some(active) = active else {
        return Ok(Governance::Unpoliced);
    };
    let evaluation = active.evaluate(request, groups);
    // A requester that names people of its own asks for them: what they add stands even where
    // the policy requires nobody (its approvers and rules only add).
    let names_others = approvers.iter().any(|a| !a.same_identity(requester));
    let applied = match &evaluation {
        Evaluation::Required {
            groups: required, ..
        } => Some(approval_rules(
            required, groups, requester, approvers, requested,
        )),
        Evaluation::Auto { .. } if names_others => {
            Some(approval_rules(&[], groups, requester, approvers, requested))
        }
        _ => None,
    };
    if active.mode == Mode::LogOnly {
        let (outcome, would_refuse) = match (&evaluation, &applied) {
            (_, Some(Err(ApplyRefusal::Unsatisfiable(_)))) => ("unsatisfiable", true),
            (_, Some(Err(ApplyRefusal::Invalid(_)))) => ("invalid", true),
            (Evaluation::Forbidden { .. } | Evaluation::Error { .. }, _) => {
                (evaluation.outcome(), true)
            }
            _ => (evaluation.outcome(), false),
        };
        return Ok(Governance::Logged {
            evaluated: logged(active, &evaluation, (outcome, would_refuse)),
            would_refuse,
        });
    }
    match (evaluation, applied) {
        (Evaluation::Forbidden { policies }, _) => Err(GovernRefusal::Forbidden { policies }),
        (Evaluation::Error { errors }, _) => Err(GovernRefusal::Error { errors }),
        (Evaluation::Auto { policies }, None) => Ok(Governance::Auto {
            source: active.source(policies),
        }),
        (Evaluation::Auto { policies }, Some(Ok((approvers, policy)))) => {
            Ok(Governance::Required {
                approvers,
                policy,
                source: active.source(policies),
                assurance: None,
            })
        }
        (
            Evaluation::Required {
                policies,
                assurance,
                ..
            },
            Some(Ok((approvers, policy))),
        ) => Ok(Governance::Required {
            approvers,
            policy,
            source: active.source(policies),
            assurance,
        }),
        (_, Some(Err(ApplyRefusal::Unsatisfiable(errors)))) => {
            Err(GovernRefusal::Unsatisfiable(errors))
        }
        (_, Some(Err(ApplyRefusal::Invalid(errors)))) => Err(GovernRefusal::Invalid(errors)),
        (Evaluation::Required { .. }, None) => Err(GovernRefusal::Error {
            errors: vec![(
                String::new(),
                "no rules were made of the requirement".to_owned(),
            )],
        }),
    }
}

/// The trail's `policy.evaluated`: what enforcement would have done.
fn logged(
    active: &ActivePolicy,
    evaluation: &Evaluation,
    (outcome, would_refuse): (&str, bool),
) -> Value {
    let mut data = json!({
        "mode": active.mode.as_str(),
        "version": active.version,
        "sha256": active.sha256,
        "would": outcome,
        "would_refuse": would_refuse,
        "policies": evaluation.policies(),
    });
    match evaluation {
        Evaluation::Required { groups, .. } => {
            data["groups"] = groups
                .iter()
                .map(|(g, k)| json!({"group": g.as_str(), "min_approvals": k}))
                .collect();
        }
        Evaluation::Error { errors } => {
            data["errors"] = errors
                .iter()
                .map(|(policy, message)| json!({"policy": policy, "message": message}))
                .collect();
        }
        _ => {}
    }
    data
}
