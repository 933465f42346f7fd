//! What Cedar sees of a create: principal `Countersign::Requester::"<requested_by>"` (attributes
//! `tenant`, `roles`), action `Countersign::Action::"<action type>"`, resource
//! `Countersign::Tenant::"<tenant>"`, and the context `{payload, summary, approvers, channel,
//! resume, expires_in_seconds}`.

use std::collections::HashMap;

use cedar_policy::{
    Context, Entities, Entity, EntityId, EntityTypeName, EntityUid, Request, RestrictedExpression,
};
use serde_json::{Map, Value};

use super::payload;

/// A create as the policy sees it.
#[derive(Debug, Clone)]
pub struct AskRequest<'a> {
    pub tenant: &'a str,
    /// `requested_by`: the principal of the key that asks (`github:{login}` for a GitHub
    /// deployment).
    pub requester: &'a str,
    pub roles: Vec<&'a str>,
    pub action_type: &'a str,
    pub payload: &'a Map<String, Value>,
    /// The context's `summary`, or `""`.
    pub summary: &'a str,
    /// The approvers the create named (the agent gate's and GitHub's may name none).
    pub approvers: Vec<&'a str>,
    /// `"api"` or `"github"`.
    pub channel: &'a str,
    /// The `resume` type, or `""`.
    pub resume: &'a str,
    pub expires_in_seconds: i64,
}

fn uid(kind: &str, id: &str) -> Option<EntityUid> {
    let name: EntityTypeName = format!("Countersign::{kind}").parse().ok()?;
    Some(EntityUid::from_type_name_and_id(name, EntityId::new(id)))
}

fn strings<'a>(items: impl IntoIterator<Item = &'a str>) -> RestrictedExpression {
    RestrictedExpression::new_set(
        items
            .into_iter()
            .map(|s| RestrictedExpression::new_string(s.to_owned())),
    )
}

impl AskRequest<'_> {
    /// The Cedar request and the one entity it needs (the requester, with its attributes).
    /// `None` only for what a create can never send (an id Cedar cannot hold is still a
    /// string to it, so in practice never).
    pub(super) fn to_cedar(&self) -> Option<(Request, Entities)> {
        let principal = uid("Requester", self.requester)?;
        let requester = Entity::new(
            principal.clone(),
            HashMap::from([
                (
                    "tenant".to_owned(),
                    RestrictedExpression::new_string(self.tenant.to_owned()),
                ),
                ("roles".to_owned(), strings(self.roles.iter().copied())),
            ]),
            Default::default(),
        )
        .ok()?;
        let context = Context::from_pairs([
            (
                "payload".to_owned(),
                payload::record(self.payload).unwrap_or_else(|| {
                    RestrictedExpression::new_record([]).unwrap_or_else(|_| strings([]))
                }),
            ),
            (
                "summary".to_owned(),
                RestrictedExpression::new_string(self.summary.to_owned()),
            ),
            (
                "approvers".to_owned(),
                strings(self.approvers.iter().copied()),
            ),
            (
                "channel".to_owned(),
                RestrictedExpression::new_string(self.channel.to_owned()),
            ),
            (
                "resume".to_owned(),
                RestrictedExpression::new_string(self.resume.to_owned()),
            ),
            (
                "expires_in_seconds".to_owned(),
                RestrictedExpression::new_long(self.expires_in_seconds),
            ),
        ])
        .ok()?;
        let request = Request::new(
            principal,
            uid("Action", self.action_type)?,
            uid("Tenant", self.tenant)?,
            context,
            None,
        )
        .ok()?;
        let entities = Entities::from_entities([requester], None).ok()?;
        Some((request, entities))
    }
}
