//! A tenant's policy set: parsed and checked as a push checks it, and evaluated on a create.

use std::collections::HashMap;
use std::str::FromStr;

use cedar_policy::{Authorizer, Decision, Effect, PolicyId};

use super::annotations::{Assurance, Requirement};
use super::groups::{GroupName, Groups};
use super::request::AskRequest;

/// One policy of the set, as its annotations describe it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyEntry {
    /// Its `@id`: how the approval, the trail and the errors name it.
    pub id: String,
    pub permit: bool,
    /// A permit's `@require` (a forbid has none).
    pub require: Option<Requirement>,
    pub assurance: Option<Assurance>,
}

/// Why a set cannot be pushed (exit 1, nothing stored): Cedar's own message, or an annotation's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("{0}")]
    Cedar(String),
    #[error("the schema: {0}")]
    Schema(String),
    #[error("Cedar's validator (strict) refused the set:\n{0}")]
    Validation(String),
    #[error("policy {policy}: {message}")]
    Annotation { policy: String, message: String },
    #[error("templates (policies with ?principal or ?resource) are not supported")]
    Template,
    #[error("the set holds no policy")]
    Empty,
}

/// What a tenant's set decides of a create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Evaluation {
    /// Permitted, with people: each group's approving votes (a group named by two permits
    /// keeps the larger count), the permits that matched (`@id`s), and the assurance any of
    /// them asks for.
    Required {
        policies: Vec<String>,
        groups: Vec<(GroupName, u32)>,
        assurance: Option<Assurance>,
    },
    /// Permitted with no person: every matching permit says `@require("none")`.
    Auto { policies: Vec<String> },
    /// A matching `forbid` (its `@id`s), or no matching `permit` (none: Cedar's default deny).
    Forbidden { policies: Vec<String> },
    /// Some policy errored on this request, or a matching permit names a group the tenant does
    /// not have: refused (fail closed — Cedar alone skips an erroring policy, so an erroring
    /// `forbid` would permit). Each erroring policy's `@id` and the message.
    Error { errors: Vec<(String, String)> },
}

impl Evaluation {
    /// `allowed`, `auto`, `forbidden` or `error`, as the trail and `policy test` name it.
    pub fn outcome(&self) -> &'static str {
        match self {
            Self::Required { .. } => "allow",
            Self::Auto { .. } => "auto",
            Self::Forbidden { .. } => "forbid",
            Self::Error { .. } => "error",
        }
    }

    /// The `@id`s that decided.
    pub fn policies(&self) -> Vec<String> {
        match self {
            Self::Required { policies, .. }
            | Self::Auto { policies }
            | Self::Forbidden { policies } => policies.clone(),
            Self::Error { errors } => errors.iter().map(|(id, _)| id.clone()).collect(),
        }
    }
}

/// A parsed, checked set.
#[derive(Debug, Clone)]
pub struct PolicySet {
    cedar: cedar_policy::PolicySet,
    /// By Cedar's own id (`policy0`, …: a set parsed from text is numbered, whatever `@id`).
    entries: HashMap<PolicyId, PolicyEntry>,
}

impl PolicySet {
    /// Parses `text` and checks it: every policy carries `@id("…")`, unique; every permit a
    /// well-formed `@require`, a forbid none; `@assurance` well formed and never beside
    /// `@require("none")`. With `schema` (Cedar's schema syntax), Cedar's validator checks the
    /// set in strict mode.
    pub fn parse(text: &str, schema: Option<&str>) -> Result<Self, PolicyError> {
        let cedar = cedar_policy::PolicySet::from_str(text)
            .map_err(|e| PolicyError::Cedar(e.to_string()))?;
        if cedar.num_of_templates() > 0 {
            return Err(PolicyError::Template);
        }
        if let Some(schema) = schema {
            let (schema, _warnings) = cedar_policy::Schema::from_cedarschema_str(schema)
                .map_err(|e| PolicyError::Schema(e.to_string()))?;
            let result = cedar_policy::Validator::new(schema)
                .validate(&cedar, cedar_policy::ValidationMode::Strict);
            if !result.validation_passed() {
                // Cedar names a policy by its position (`policy0`); an author knows its @id.
                let named = |id: &PolicyId| {
                    cedar
                        .policy(id)
                        .and_then(|p| p.annotation("id"))
                        .map_or_else(|| id.to_string(), |a| format!("{a:?}"))
                };
                let errors: Vec<String> = result
                    .validation_errors()
                    .map(|e| {
                        let text = e.to_string();
                        let cedar_name = format!("`{}`", e.policy_id());
                        text.replacen(&cedar_name, &named(e.policy_id()), 1)
                    })
                    .collect();
                return Err(PolicyError::Validation(errors.join("\n")));
            }
        }
        let mut entries = HashMap::new();
        let mut seen: Vec<String> = Vec::new();
        for policy in cedar.policies() {
            let annotation = |message: String| PolicyError::Annotation {
                policy: policy
                    .annotation("id")
                    .map_or_else(|| policy.id().to_string(), str::to_owned),
                message,
            };
            let id = match policy.annotation("id") {
                Some(id) if !id.trim().is_empty() && id.len() <= 128 => id.to_owned(),
                _ => {
                    return Err(annotation(
                        "needs @id(\"…\"), 1 to 128 characters".to_owned(),
                    ));
                }
            };
            if seen.contains(&id) {
                return Err(annotation("its @id is another policy's too".to_owned()));
            }
            seen.push(id.clone());
            let permit = policy.effect() == Effect::Permit;
            let require = match (policy.annotation("require"), permit) {
                (Some(raw), true) => {
                    Some(Requirement::parse(raw).map_err(|e| annotation(format!("@require {e}")))?)
                }
                (None, true) => {
                    return Err(annotation(
                        "a permit says what it requires: @require(\"group:k, …\") or @require(\"none\")"
                            .to_owned(),
                    ));
                }
                (Some(_), false) => {
                    return Err(annotation(
                        "a forbid requires nothing: no @require".to_owned(),
                    ));
                }
                (None, false) => None,
            };
            let assurance = policy
                .annotation("assurance")
                .map(Assurance::parse)
                .transpose()
                .map_err(|e| annotation(format!("@assurance {e}")))?;
            if assurance.is_some() && !permit {
                return Err(annotation("@assurance belongs on a permit".to_owned()));
            }
            if assurance.is_some() && require == Some(Requirement::None) {
                return Err(annotation(
                    "@assurance asks how votes are cast: not with @require(\"none\")".to_owned(),
                ));
            }
            entries.insert(
                policy.id().clone(),
                PolicyEntry {
                    id,
                    permit,
                    require,
                    assurance,
                },
            );
        }
        if entries.is_empty() {
            return Err(PolicyError::Empty);
        }
        Ok(Self { cedar, entries })
    }

    /// The policies, as their annotations say (in `@id` order).
    pub fn entries(&self) -> Vec<&PolicyEntry> {
        let mut entries: Vec<&PolicyEntry> = self.entries.values().collect();
        entries.sort_by(|a, b| a.id.cmp(&b.id));
        entries
    }

    /// Every group a permit's `@require` names, each once.
    pub fn required_groups(&self) -> std::collections::BTreeSet<&GroupName> {
        self.entries
            .values()
            .filter_map(|e| match &e.require {
                Some(Requirement::Groups(groups)) => Some(groups.iter().map(|(g, _)| g)),
                _ => None,
            })
            .flatten()
            .collect()
    }

    /// Whether any permit's `@require` names `group`.
    pub fn requires(&self, group: &GroupName) -> bool {
        self.entries.values().any(|e| match &e.require {
            Some(Requirement::Groups(groups)) => groups.iter().any(|(g, _)| g == group),
            _ => false,
        })
    }

    fn id_of(&self, cedar: &PolicyId) -> String {
        self.entries
            .get(cedar)
            .map_or_else(|| cedar.to_string(), |e| e.id.clone())
    }

    /// What the set decides of `request`, the tenant's `groups` being as they are.
    pub fn evaluate(&self, request: &AskRequest<'_>, groups: &Groups) -> Evaluation {
        let Some((cedar_request, entities)) = request.to_cedar() else {
            return Evaluation::Error {
                errors: vec![(
                    String::new(),
                    "the request has no Cedar form (an identifier Cedar cannot hold)".to_owned(),
                )],
            };
        };
        let response = Authorizer::new().is_authorized(&cedar_request, &self.cedar, &entities);
        let diagnostics = response.diagnostics();
        let mut errors: Vec<(String, String)> = diagnostics
            .errors()
            .map(|e| {
                let cedar_policy::AuthorizationError::PolicyEvaluationError(e) = e;
                (self.id_of(e.policy_id()), e.inner().to_string())
            })
            .collect();
        if !errors.is_empty() {
            errors.sort();
            return Evaluation::Error { errors };
        }
        let mut decided: Vec<&PolicyEntry> = diagnostics
            .reason()
            .filter_map(|id| self.entries.get(id))
            .collect();
        decided.sort_by(|a, b| a.id.cmp(&b.id));
        let policies: Vec<String> = decided.iter().map(|e| e.id.clone()).collect();
        if response.decision() == Decision::Deny {
            return Evaluation::Forbidden { policies };
        }
        let mut merged: Vec<(GroupName, u32)> = Vec::new();
        let mut unknown: Vec<(String, String)> = Vec::new();
        for entry in &decided {
            let Some(Requirement::Groups(required)) = &entry.require else {
                continue;
            };
            for (group, k) in required {
                if groups.get(group).is_none() {
                    unknown.push((
                        entry.id.clone(),
                        format!("@require names group {group}, which this tenant does not have"),
                    ));
                    continue;
                }
                match merged.iter_mut().find(|(g, _)| g == group) {
                    Some((_, have)) => *have = (*have).max(*k),
                    None => merged.push((group.clone(), *k)),
                }
            }
        }
        if !unknown.is_empty() {
            unknown.sort();
            return Evaluation::Error { errors: unknown };
        }
        if merged.is_empty() {
            // Every matching permit said none (a permit always carries @require).
            return Evaluation::Auto { policies };
        }
        let assurance = decided.iter().find_map(|e| e.assurance);
        Evaluation::Required {
            policies,
            groups: merged,
            assurance,
        }
    }
}
