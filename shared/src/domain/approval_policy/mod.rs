//! Approval policies (docs/POLICY.md): the deployment decides, at every create on every channel,
//! whether an action may be asked at all, whether it needs a person, and whose votes — in
//! Cedar, evaluated in-process by the `cedar-policy` crate (Cedar's own parser, validator and
//! evaluator). Pure: no AWS, no clock; the set and the groups come from the store, cached.
//!
//! - [`PolicySet`]: a tenant's set, parsed and checked as a push checks it (`@id` on every
//!   policy, unique; `@require` on every permit, well formed; `@assurance` well formed).
//! - [`AskRequest`]: what Cedar sees of a create (principal, action, resource, context), the
//!   payload converted value for value, never misread ([`payload`]).
//! - [`PolicySet::evaluate`]: Cedar's decision, failing closed on any evaluation error, the
//!   matching permits' requirements merged ([`Evaluation`]).
//! - [`Groups`]: a tenant's groups, each a name and its members.

mod annotations;
mod applied;
mod apply;
mod govern;
mod groups;
mod membership;
pub mod payload;
mod request;
mod schema;
mod set;

#[cfg(test)]
mod tests;

pub use annotations::{Assurance, Requirement};
pub use applied::policy_approver;
pub use apply::{ApplyRefusal, MAX_APPROVERS, approval_rules};
pub use govern::{ActivePolicy, GovernRefusal, Governance, govern};
pub use groups::{GroupName, Groups, MAX_MEMBERS};
pub use request::AskRequest;
pub use schema::base_schema;
pub use set::{Evaluation, PolicyEntry, PolicyError, PolicySet};

/// How a tenant's policy set is applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The decision is the approval's: forbidden is refused, groups are required.
    Enforce,
    /// The requester's approvers apply as before; what enforcement would have done is recorded.
    LogOnly,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Enforce => "enforce",
            Self::LogOnly => "log_only",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        match raw {
            "enforce" => Some(Self::Enforce),
            "log_only" => Some(Self::LogOnly),
            _ => None,
        }
    }
}

/// Which version of which set decided an approval: what it shows as `policy.source`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicySource {
    pub version: u32,
    /// Hex SHA-256 of the set's text as pushed.
    pub sha256: String,
    /// The `@id`s of the policies that decided (the matching permits).
    pub policies: Vec<String>,
}
