//! Approval items ⇄ DynamoDB attribute maps.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::{Map, Value};

use super::attr::{Item, get_n, get_s, n, opt_s, s};
use super::ballots::quorum_attributes;
use super::error::StoreError;
use super::indexes::Indexed;
use super::keys::approval_key;
use crate::domain::approval_policy::GroupName;
use crate::domain::{
    Approval, ApprovalId, Approver, Cancellation, Channel, Decision, Execution, ExecutionStatus,
    GithubDelivery, GithubGate, IdempotencyKey, KeyId, Outcome, Policy, Rule, SignIn, SlackMessage,
    Status, StatusCheck, TenantId,
};
use crate::observe::TraceContext;

/// The `execute_key` attribute of an approval whose downstream key names it (absent on
/// approvals made before: theirs is `{tenant}:{create key}`). Kept as this string, though a
/// boolean would be 28 bytes smaller on every write: a version that reads only the string
/// (during a rolling deploy, or after a rollback) would send another key for the same
/// execution.
const EXECUTE_KEY_NAMES_APPROVAL: &str = "tenant:create_key:approval_id";

/// The attribute an approval of an approval-only type has (absent: Countersign executes it).
pub(crate) const APPROVAL_ONLY: &str = "approval_only";

pub(crate) fn approval_to_item(approval: &Approval) -> Item {
    let mut item = HashMap::from([
        (
            "pk".to_owned(),
            approval_key(&approval.tenant, &approval.id),
        ),
        ("tenant".to_owned(), s(approval.tenant.as_str())),
        ("id".to_owned(), s(approval.id.as_str())),
        ("status".to_owned(), s(approval.status.as_str())),
        ("action_type".to_owned(), s(&approval.action_type)),
        // Payload and context are kept as JSON text: exactly what the requester sent, with no
        // number or null conversions through DynamoDB's types.
        (
            "payload".to_owned(),
            s(serde_json::to_string(&approval.payload).unwrap_or_default()),
        ),
        (
            "context".to_owned(),
            s(serde_json::to_string(&approval.context).unwrap_or_default()),
        ),
        (
            "approvers".to_owned(),
            AttributeValue::L(approval.approvers.iter().map(|a| s(a.as_str())).collect()),
        ),
        (
            "idempotency_key".to_owned(),
            s(approval.idempotency_key.as_str()),
        ),
        ("created_at".to_owned(), n(approval.created_at)),
        ("expires_at".to_owned(), n(approval.expires_at)),
        (
            "execution".to_owned(),
            execution_to_attr(&approval.execution),
        ),
    ]);
    if let Some(decision) = &approval.decision {
        item.insert("decision".to_owned(), decision_to_attr(decision));
    }
    if approval.execute_key_names_approval {
        item.insert("execute_key".to_owned(), s(EXECUTE_KEY_NAMES_APPROVAL));
    }
    if let Some(trace) = approval
        .trace
        .as_deref()
        .and_then(TraceContext::from_stored)
    {
        item.insert(
            "tr".to_owned(),
            AttributeValue::B(aws_sdk_dynamodb::primitives::Blob::new(trace.to_bytes())),
        );
    }
    // Only on approval-only types: what the vote's and the claim's conditions test.
    if !approval.executes {
        item.insert(APPROVAL_ONLY.to_owned(), AttributeValue::Bool(true));
    }
    item.extend(Indexed::of(approval).attributes());
    // Without a policy the decision is the one vote (see `Approval::recorded_votes`).
    if approval.policy.is_some() || !approval.votes.is_empty() {
        item.insert(
            "votes".to_owned(),
            AttributeValue::L(approval.votes.iter().map(decision_to_attr).collect()),
        );
    }
    if let Some(policy) = &approval.policy {
        item.insert("policy".to_owned(), policy_to_attr(policy));
        item.extend(quorum_attributes(approval));
    }
    if let Some(cancellation) = &approval.cancellation {
        item.insert(
            "cancellation".to_owned(),
            cancellation_to_attr(cancellation),
        );
    }
    if let Some(slack) = &approval.slack {
        item.insert("slack".to_owned(), slack_message_to_attr(slack));
    }
    if let Some(requested_by) = &approval.requested_by {
        item.insert("requested_by".to_owned(), s(requested_by.as_str()));
        // What the decision condition compares (separation of duties), in one spelling: for a
        // GitHub deployment, the approver its sender is mapped to.
        let requester = approval.requester().unwrap_or(requested_by);
        item.insert("requested_by_id".to_owned(), s(requester.identity()));
    }
    if let Some(gate) = &approval.github {
        item.insert(GITHUB_GATE.to_owned(), github_gate_to_attr(gate));
    }
    if let Some(key_id) = &approval.requested_by_key_id {
        item.insert("requested_by_key_id".to_owned(), s(key_id.as_str()));
    }
    item.extend(stall::stall_attributes(&approval.stall));
    if let Some(resume) = &approval.resume {
        item.insert(resume::RESUME.to_owned(), resume::resume_to_attr(resume));
    }
    item.extend(governed::governed_attributes(approval));
    if let Some(seal) = &approval.certificate {
        item.insert(passkey::CERTIFICATE.to_owned(), passkey::seal_to_attr(seal));
    }
    item
}

/// The attribute of a GitHub deployment's gate (`github_gate_to_attr`).
pub(crate) const GITHUB_GATE: &str = "gh";

/// A GitHub deployment's gate, short names (it is on every write of the item).
fn github_gate_to_attr(gate: &GithubGate) -> AttributeValue {
    let mut map = HashMap::from([
        ("iid".to_owned(), n(gate.installation_id)),
        ("repo".to_owned(), s(&gate.repository)),
        ("rid".to_owned(), n(gate.repository_id)),
        ("run".to_owned(), n(gate.run_id)),
        ("env".to_owned(), s(&gate.environment)),
        ("cb".to_owned(), s(&gate.callback_url)),
        ("login".to_owned(), s(&gate.sender_login)),
        ("uid".to_owned(), n(gate.sender_id)),
        (
            "dl".to_owned(),
            AttributeValue::L(
                gate.deliveries
                    .iter()
                    .map(github_delivery_to_attr)
                    .collect(),
            ),
        ),
    ]);
    if let Some(requester) = &gate.requester {
        map.insert("req".to_owned(), s(requester.as_str()));
    }
    // A set of identities (what the decision's condition tests); never empty in DynamoDB.
    if !gate.joined_requesters.is_empty() {
        map.insert(
            "rq".to_owned(),
            AttributeValue::Ss(
                gate.joined_requesters
                    .iter()
                    .map(Approver::identity)
                    .collect(),
            ),
        );
    }
    AttributeValue::M(map)
}

fn github_gate_from(value: Option<&AttributeValue>) -> Result<Option<GithubGate>, StoreError> {
    let map = match value {
        None => return Ok(None),
        Some(AttributeValue::M(map)) => map,
        Some(_) => return Err(StoreError::corrupt("gh")),
    };
    Ok(Some(GithubGate {
        installation_id: get_n(map, "iid")?,
        repository: get_s(map, "repo")?.to_owned(),
        repository_id: get_n(map, "rid")?,
        run_id: get_n(map, "run")?,
        environment: get_s(map, "env")?.to_owned(),
        callback_url: get_s(map, "cb")?.to_owned(),
        sender_login: get_s(map, "login")?.to_owned(),
        sender_id: get_n(map, "uid")?,
        requester: opt_s(map, "req")
            .map(|r| Approver::from_stored(&r).map_err(|_| StoreError::corrupt("gh.req")))
            .transpose()?,
        joined_requesters: match map.get("rq") {
            None => Vec::new(),
            Some(AttributeValue::Ss(set)) => set
                .iter()
                .map(|r| Approver::from_stored(r).map_err(|_| StoreError::corrupt("gh.rq")))
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(StoreError::corrupt("gh.rq")),
        },
        deliveries: match map.get("dl") {
            Some(AttributeValue::L(list)) => list
                .iter()
                .map(|d| match d {
                    AttributeValue::M(d) => Ok(GithubDelivery {
                        id: get_s(d, "id")?.to_owned(),
                        at: get_n(d, "at")?,
                    }),
                    _ => Err(StoreError::corrupt("gh.dl")),
                })
                .collect::<Result<_, _>>()?,
            _ => return Err(StoreError::corrupt("gh.dl")),
        },
    }))
}

/// A delivery on a GitHub deployment's gate: `{id, at}`.
pub(crate) fn github_delivery_to_attr(delivery: &GithubDelivery) -> AttributeValue {
    AttributeValue::M(HashMap::from([
        ("id".to_owned(), s(&delivery.id)),
        ("at".to_owned(), n(delivery.at)),
    ]))
}

/// Where the approval's Slack message is: `{channel, ts}`.
pub(crate) fn slack_message_to_attr(message: &SlackMessage) -> AttributeValue {
    AttributeValue::M(HashMap::from([
        ("channel".to_owned(), s(&message.channel)),
        ("ts".to_owned(), s(&message.ts)),
    ]))
}

fn slack_message_from(value: Option<&AttributeValue>) -> Result<Option<SlackMessage>, StoreError> {
    match value {
        None | Some(AttributeValue::Null(_)) => Ok(None),
        Some(AttributeValue::M(map)) => Ok(Some(SlackMessage {
            channel: get_s(map, "channel")
                .map_err(|_| StoreError::corrupt("slack.channel"))?
                .to_owned(),
            ts: get_s(map, "ts")
                .map_err(|_| StoreError::corrupt("slack.ts"))?
                .to_owned(),
        })),
        Some(_) => Err(StoreError::corrupt("slack")),
    }
}

pub(crate) fn decision_to_attr(decision: &Decision) -> AttributeValue {
    let mut map = HashMap::from([
        ("outcome".to_owned(), s(decision.outcome.as_str())),
        ("approver".to_owned(), s(decision.approver.as_str())),
        ("decided_at".to_owned(), n(decision.decided_at)),
        ("channel".to_owned(), s(decision.channel.as_str())),
    ]);
    if let Some(comment) = &decision.comment {
        map.insert("comment".to_owned(), s(comment));
    }
    if let Some(key_id) = &decision.key_id {
        map.insert("key_id".to_owned(), s(key_id.as_str()));
    }
    if let Some(event) = &decision.webhook_event_id {
        map.insert("webhook_event_id".to_owned(), s(event));
    }
    if let Some(signed_in) = &decision.signed_in {
        map.insert("iss".to_owned(), s(&signed_in.issuer));
        map.insert("sub".to_owned(), s(&signed_in.sub));
        if let Some(at) = signed_in.auth_time {
            map.insert("auth_time".to_owned(), n(at));
        }
    }
    // Absent on one's own vote, so a vote stored before delegation reads the same.
    if let Some(by) = &decision.by {
        map.insert("by".to_owned(), s(by.as_str()));
    }
    if let Some(set_by) = &decision.delegation_set_by {
        map.insert("set_by".to_owned(), s(set_by.as_str()));
    }
    if let Some(evidence) = &decision.passkey {
        map.insert("passkey".to_owned(), passkey::evidence_to_attr(evidence));
    }
    AttributeValue::M(map)
}

fn policy_to_attr(policy: &Policy) -> AttributeValue {
    AttributeValue::L(
        policy
            .rules
            .iter()
            .map(|rule| {
                let mut map = HashMap::from([
                    ("name".to_owned(), s(&rule.name)),
                    (
                        "approvers".to_owned(),
                        AttributeValue::L(rule.approvers.iter().map(|a| s(a.as_str())).collect()),
                    ),
                    ("min_approvals".to_owned(), n(rule.min_approvals)),
                ]);
                // A deployment's group rule names its group (the votes' write checks a
                // member is still in it); a requester's rule has none.
                if let Some(group) = &rule.group {
                    map.insert("group".to_owned(), s(group.as_str()));
                }
                AttributeValue::M(map)
            })
            .collect(),
    )
}

fn policy_from_attr(value: &AttributeValue) -> Result<Policy, StoreError> {
    const FIELD: &str = "policy";
    let rules = value.as_l().map_err(|_| StoreError::corrupt(FIELD))?;
    let rules = rules
        .iter()
        .map(|rule| {
            let rule = rule.as_m().map_err(|_| StoreError::corrupt(FIELD))?;
            Ok(Rule {
                name: get_s(rule, "name")?.to_owned(),
                approvers: approvers_from(rule.get("approvers"), FIELD)?,
                min_approvals: get_n(rule, "min_approvals")?,
                group: opt_s(rule, "group")
                    .map(|g| GroupName::parse(&g).map_err(|_| StoreError::corrupt(FIELD)))
                    .transpose()?,
            })
        })
        .collect::<Result<_, StoreError>>()?;
    Ok(Policy { rules })
}

pub(super) fn approvers_from(
    value: Option<&AttributeValue>,
    field: &'static str,
) -> Result<Vec<Approver>, StoreError> {
    match value {
        Some(AttributeValue::L(list)) => list
            .iter()
            .map(|a| match a {
                AttributeValue::S(a) => {
                    Approver::from_stored(a).map_err(|_| StoreError::corrupt(field))
                }
                _ => Err(StoreError::corrupt(field)),
            })
            .collect(),
        _ => Err(StoreError::corrupt(field)),
    }
}

pub(crate) fn cancellation_to_attr(cancellation: &Cancellation) -> AttributeValue {
    let mut map = HashMap::from([
        ("by".to_owned(), s(cancellation.by.as_str())),
        ("at".to_owned(), n(cancellation.at)),
    ]);
    if let Some(reason) = &cancellation.reason {
        map.insert("reason".to_owned(), s(reason));
    }
    if let Some(channel) = cancellation.channel {
        map.insert("channel".to_owned(), s(channel.as_str()));
    }
    AttributeValue::M(map)
}

fn cancellation_from_map(map: &Item) -> Result<Cancellation, StoreError> {
    Ok(Cancellation {
        by: Approver::from_stored(get_s(map, "by")?)
            .map_err(|_| StoreError::corrupt("cancellation.by"))?,
        at: get_n(map, "at")?,
        reason: opt_s(map, "reason"),
        channel: opt_s(map, "channel")
            .map(|c| Channel::parse(&c).ok_or(StoreError::corrupt("cancellation.channel")))
            .transpose()?,
    })
}

pub(crate) fn execution_to_attr(execution: &Execution) -> AttributeValue {
    let mut map = HashMap::from([
        ("status".to_owned(), s(execution.status.as_str())),
        ("attempts".to_owned(), n(execution.attempts)),
        ("updated_at".to_owned(), n(execution.updated_at)),
        ("generation".to_owned(), n(execution.generation)),
    ]);
    if let Some(error) = &execution.last_error {
        map.insert("last_error".to_owned(), s(error));
    }
    if let Some(note) = &execution.note {
        map.insert("note".to_owned(), s(note));
    }
    if let Some(key) = &execution.claimed_by {
        map.insert("claimed_by".to_owned(), s(key));
    }
    if let Some(claimant) = &execution.claimant {
        map.insert("claimant".to_owned(), s(claimant.as_str()));
    }
    if let Some(at) = execution.reported_at {
        map.insert("reported_at".to_owned(), n(at));
    }
    if !execution.retry_keys.is_empty() {
        map.insert(
            "retry_keys".to_owned(),
            AttributeValue::L(execution.retry_keys.iter().map(s).collect()),
        );
    }
    if let Some(key) = &execution.retry_key {
        map.insert("retry_key".to_owned(), s(key));
    }
    if execution.requeues > 0 {
        map.insert("requeues".to_owned(), n(execution.requeues));
    }
    if !execution.status_checks.is_empty() {
        map.insert(
            "status_checks".to_owned(),
            AttributeValue::L(
                execution
                    .status_checks
                    .iter()
                    .map(status_check_to_attr)
                    .collect(),
            ),
        );
    }
    if !execution.late_reports.is_empty() {
        map.insert(
            "late_reports".to_owned(),
            AttributeValue::L(execution.late_reports.iter().map(s).collect()),
        );
    }
    AttributeValue::M(map)
}

pub(crate) fn status_check_to_attr(check: &StatusCheck) -> AttributeValue {
    let mut map = HashMap::from([
        ("at".to_owned(), n(check.at)),
        ("answer".to_owned(), s(&check.answer)),
    ]);
    if let Some(detail) = &check.detail {
        map.insert("detail".to_owned(), s(detail));
    }
    AttributeValue::M(map)
}

fn status_checks_from(value: Option<&AttributeValue>) -> Result<Vec<StatusCheck>, StoreError> {
    const FIELD: &str = "execution.status_checks";
    let Some(value) = value else {
        return Ok(Vec::new());
    };
    value
        .as_l()
        .map_err(|_| StoreError::corrupt(FIELD))?
        .iter()
        .map(|check| {
            let map = check.as_m().map_err(|_| StoreError::corrupt(FIELD))?;
            Ok(StatusCheck {
                at: get_n(map, "at")?,
                answer: get_s(map, "answer")?.to_owned(),
                detail: opt_s(map, "detail"),
            })
        })
        .collect()
}

pub(crate) fn approval_from_item(item: &Item) -> Result<Approval, StoreError> {
    let decision = match item.get("decision") {
        None | Some(AttributeValue::Null(_)) => None,
        Some(AttributeValue::M(map)) => Some(decision_from_map(map)?),
        Some(_) => return Err(StoreError::corrupt("decision")),
    };
    let cancellation = match item.get("cancellation") {
        None | Some(AttributeValue::Null(_)) => None,
        Some(AttributeValue::M(map)) => Some(cancellation_from_map(map)?),
        Some(_) => return Err(StoreError::corrupt("cancellation")),
    };
    let execution = match item.get("execution") {
        Some(AttributeValue::M(map)) => execution_from_map(map)?,
        _ => return Err(StoreError::corrupt("execution")),
    };
    let approvers = approvers_from(item.get("approvers"), "approvers")?;
    let stall = stall::stall_from(item)?;
    // The rules as they stand: with the approvers of every step applied so far (the write
    // that applies one adds them to `approvers`, which the votes' condition reads).
    let policy = item
        .get("policy")
        .map(policy_from_attr)
        .transpose()?
        .map(|p| crate::domain::stall::joined(&p, stall.applied()));
    // An approval decided before votes were recorded has no list.
    let votes = match item.get("votes") {
        None => Vec::new(),
        Some(AttributeValue::L(list)) => list
            .iter()
            .map(|v| match v {
                AttributeValue::M(map) => decision_from_map(map),
                _ => Err(StoreError::corrupt("votes")),
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(StoreError::corrupt("votes")),
    };
    Ok(Approval {
        tenant: TenantId::parse(get_s(item, "tenant")?)
            .map_err(|_| StoreError::corrupt("tenant"))?,
        id: ApprovalId::parse(get_s(item, "id")?).map_err(|_| StoreError::corrupt("id"))?,
        status: Status::parse(get_s(item, "status")?).ok_or(StoreError::corrupt("status"))?,
        requested_by: opt_s(item, "requested_by")
            .map(|r| Approver::from_stored(&r).map_err(|_| StoreError::corrupt("requested_by")))
            .transpose()?,
        requested_by_key_id: opt_s(item, "requested_by_key_id")
            .map(|k| KeyId::parse(&k).ok_or(StoreError::corrupt("requested_by_key_id")))
            .transpose()?,
        action_type: get_s(item, "action_type")?.to_owned(),
        executes: !item.contains_key(APPROVAL_ONLY),
        payload: json_object(item, "payload")?,
        approvers,
        context: json_object(item, "context")?,
        idempotency_key: IdempotencyKey::parse(get_s(item, "idempotency_key")?)
            .map_err(|_| StoreError::corrupt("idempotency_key"))?,
        execute_key_names_approval: opt_s(item, "execute_key").as_deref()
            == Some(EXECUTE_KEY_NAMES_APPROVAL),
        created_at: get_n(item, "created_at")?,
        expires_at: get_n(item, "expires_at")?,
        policy,
        votes,
        decision,
        cancellation,
        execution,
        slack: slack_message_from(item.get("slack"))?,
        github: github_gate_from(item.get(GITHUB_GATE))?,
        // 17 bytes (see `TraceContext::to_bytes`); anything else is no trace.
        trace: match item.get("tr") {
            Some(AttributeValue::B(bytes)) => {
                TraceContext::from_bytes(bytes.as_ref()).map(|t| t.stored())
            }
            _ => None,
        },
        stall,
        resume: resume::resume_from(item)?,
        policy_source: governed::source_from(item)?,
        policy_evaluated: governed::evaluated_from(item)?,
        assurance: governed::assurance_from(item)?,
        comment_cap: governed::comment_cap_from(item),
        certificate: passkey::seal_from(item)?,
    })
}

fn decision_from_map(map: &Item) -> Result<Decision, StoreError> {
    Ok(Decision {
        outcome: Outcome::parse(get_s(map, "outcome")?)
            .ok_or(StoreError::corrupt("decision.outcome"))?,
        approver: Approver::from_stored(get_s(map, "approver")?)
            .map_err(|_| StoreError::corrupt("decision.approver"))?,
        decided_at: get_n(map, "decided_at")?,
        channel: Channel::parse(get_s(map, "channel")?)
            .ok_or(StoreError::corrupt("decision.channel"))?,
        comment: opt_s(map, "comment"),
        webhook_event_id: opt_s(map, "webhook_event_id"),
        key_id: opt_s(map, "key_id").and_then(|k| KeyId::parse(&k)),
        signed_in: match (opt_s(map, "iss"), opt_s(map, "sub")) {
            (Some(issuer), Some(sub)) => Some(SignIn {
                issuer,
                sub,
                auth_time: map
                    .contains_key("auth_time")
                    .then(|| get_n(map, "auth_time"))
                    .transpose()?,
            }),
            _ => None,
        },
        by: opt_s(map, "by")
            .map(|by| Approver::from_stored(&by))
            .transpose()
            .map_err(|_| StoreError::corrupt("decision.by"))?,
        delegation_set_by: opt_s(map, "set_by")
            .map(|by| Approver::from_stored(&by))
            .transpose()
            .map_err(|_| StoreError::corrupt("decision.set_by"))?,
        passkey: passkey::evidence_from(map)?,
    })
}

fn execution_from_map(map: &Item) -> Result<Execution, StoreError> {
    Ok(Execution {
        status: ExecutionStatus::parse(get_s(map, "status")?)
            .ok_or(StoreError::corrupt("execution.status"))?,
        attempts: get_n(map, "attempts")?,
        last_error: opt_s(map, "last_error"),
        updated_at: get_n(map, "updated_at")?,
        generation: get_n(map, "generation")?,
        note: opt_s(map, "note"),
        claimed_by: opt_s(map, "claimed_by"),
        claimant: opt_s(map, "claimant")
            .map(|c| {
                Approver::from_stored(&c).map_err(|_| StoreError::corrupt("execution.claimant"))
            })
            .transpose()?,
        reported_at: get_n(map, "reported_at").ok(),
        retry_key: opt_s(map, "retry_key"),
        retry_keys: strings_from(map.get("retry_keys"), "execution.retry_keys")?,
        requeues: get_n(map, "requeues").unwrap_or(0),
        status_checks: status_checks_from(map.get("status_checks"))?,
        late_reports: strings_from(map.get("late_reports"), "execution.late_reports")?,
    })
}

/// A list of strings (absent: empty).
fn strings_from(
    value: Option<&AttributeValue>,
    field: &'static str,
) -> Result<Vec<String>, StoreError> {
    match value {
        None => Ok(Vec::new()),
        Some(list) => list
            .as_l()
            .map_err(|_| StoreError::corrupt(field))?
            .iter()
            .map(|v| v.as_s().cloned())
            .collect::<Result<_, _>>()
            .map_err(|_| StoreError::corrupt(field)),
    }
}

fn json_object(item: &Item, name: &'static str) -> Result<Map<String, Value>, StoreError> {
    match serde_json::from_str(get_s(item, name)?) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(StoreError::corrupt(name)),
    }
}

pub(crate) mod governed;
pub(crate) mod passkey;
mod resume;
mod stall;
pub(crate) use stall::{ESCALATED, REMINDED};

#[cfg(test)]
mod tests;
