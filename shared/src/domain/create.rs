//! Validation of `POST /approvals` bodies, and the request fingerprint that tells a replay from a
//! reused key.

use std::collections::HashSet;

use serde::Serialize;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::{
    Approval, ApprovalId, Approver, EpochSeconds, Execution, IdempotencyKey, Policy, Status,
    TenantId,
};

/// One thing wrong with a request body, named by its JSON path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Why a create body was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CreateRefusal {
    /// The body does not match the schema: every offending field.
    Invalid(Vec<FieldError>),
    /// A well-formed body naming an action type that is not configured.
    UnknownActionType(String),
}

/// A valid create body.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateRequest {
    pub action_type: String,
    pub payload: Map<String, Value>,
    pub approvers: Vec<Approver>,
    pub context: Map<String, Value>,
    pub expires_in_seconds: i64,
    /// The quorum policy as sent: checked against the requester by [`Policy::parse`].
    pub policy: Option<Value>,
    /// `reminders`, checked (`None`: the action type's default, if any).
    pub reminders: Option<super::stall::Reminders>,
    /// `escalation` as sent: checked against the approvers, policy and requester by
    /// [`super::stall::parse_escalation`].
    pub escalation: Option<Value>,
    /// The AWS workflow to tell when it ends (whether its type is enabled is the caller's to
    /// check).
    pub resume: Option<super::resume::Resume>,
    /// `"assurance": "passkey"`: every vote a passkey signature (it only adds to what the
    /// deployment's policy asks).
    pub assurance: Option<super::approval_policy::Assurance>,
}

impl CreateRequest {
    pub const MIN_EXPIRES_IN: i64 = 60;
    pub const MAX_EXPIRES_IN: i64 = 2_592_000;
    pub const DEFAULT_EXPIRES_IN: i64 = 604_800;
    pub const MAX_APPROVERS: usize = 20;
    /// The most bytes payload and context may take together as they are written out (stored,
    /// and carried by every job): a job must fit an SQS message (256 KiB) with room for the
    /// rest of it. A body within the 64 KiB limit exceeds this only when it is written much
    /// longer than it was sent (numbers such as `1e15` are written in full).
    pub const MAX_WRITTEN_BYTES: usize = 192 * 1024;

    /// Checks every field and reports every problem at once, so a client fixes its request in one
    /// round. `is_action_type` says which action types are configured; an unknown type is
    /// reported on its own once the rest of the body is valid.
    pub fn parse(
        body: &Value,
        is_action_type: impl Fn(&str) -> bool,
    ) -> Result<Self, CreateRefusal> {
        let mut errors = Vec::new();
        let Some(body) = body.as_object() else {
            return Err(CreateRefusal::Invalid(vec![FieldError::new(
                "",
                "the body must be a JSON object",
            )]));
        };
        check_exact_numbers(&Value::Object(body.clone()), "", &mut errors);
        for key in body.keys() {
            if !matches!(
                key.as_str(),
                "action"
                    | "approvers"
                    | "context"
                    | "expires_in_seconds"
                    | "policy"
                    | "reminders"
                    | "escalation"
                    | "resume"
                    | "assurance"
            ) {
                errors.push(FieldError::new(key.clone(), "unknown field"));
            }
        }

        let (action_type, payload) = match body.get("action") {
            None => {
                errors.push(FieldError::new("action", "required"));
                (None, Map::new())
            }
            Some(Value::Object(action)) => {
                for key in action.keys() {
                    if !matches!(key.as_str(), "type" | "payload") {
                        errors.push(FieldError::new(format!("action.{key}"), "unknown field"));
                    }
                }
                let action_type = match action.get("type") {
                    Some(Value::String(t)) if !t.is_empty() => Some(t.clone()),
                    Some(Value::String(_)) => {
                        errors.push(FieldError::new("action.type", "must not be empty"));
                        None
                    }
                    Some(_) => {
                        errors.push(FieldError::new("action.type", "must be a string"));
                        None
                    }
                    None => {
                        errors.push(FieldError::new("action.type", "required"));
                        None
                    }
                };
                (
                    action_type,
                    object_field(action.get("payload"), "action.payload", &mut errors),
                )
            }
            Some(_) => {
                errors.push(FieldError::new("action", "must be an object"));
                (None, Map::new())
            }
        };

        let approvers = parse_approvers(body.get("approvers"), &mut errors);
        let context = object_field(body.get("context"), "context", &mut errors);

        let expires_in_seconds = match body.get("expires_in_seconds") {
            None => Self::DEFAULT_EXPIRES_IN,
            Some(value) => match value.as_i64() {
                Some(n) if (Self::MIN_EXPIRES_IN..=Self::MAX_EXPIRES_IN).contains(&n) => n,
                _ => {
                    errors.push(FieldError::new(
                        "expires_in_seconds",
                        "must be an integer from 60 to 2592000",
                    ));
                    Self::DEFAULT_EXPIRES_IN
                }
            },
        };

        let reminders = match body.get("reminders").filter(|r| !r.is_null()) {
            None => None,
            Some(value) => super::stall::Reminders::parse(value, "reminders")
                .map_err(|e| errors.extend(e))
                .ok(),
        };

        let resume = match body.get("resume").filter(|r| !r.is_null()) {
            None => None,
            Some(value) => super::resume::Resume::parse(value, &mut errors),
        };

        let assurance = match body.get("assurance").filter(|a| !a.is_null()) {
            None => None,
            Some(Value::String(raw)) if raw == "passkey" => {
                Some(super::approval_policy::Assurance::Passkey)
            }
            Some(_) => {
                errors.push(FieldError::new("assurance", "must be \"passkey\""));
                None
            }
        };

        let written = serde_json::to_vec(&payload).map_or(usize::MAX, |v| v.len())
            + serde_json::to_vec(&context).map_or(usize::MAX, |v| v.len());
        if written > Self::MAX_WRITTEN_BYTES {
            errors.push(FieldError::new(
                "action.payload",
                format!(
                    "payload and context take {written} bytes once written out (numbers in full); at most {}",
                    Self::MAX_WRITTEN_BYTES
                ),
            ));
        }

        match action_type {
            Some(action_type) if errors.is_empty() => {
                if !is_action_type(&action_type) {
                    return Err(CreateRefusal::UnknownActionType(action_type));
                }
                Ok(Self {
                    action_type,
                    payload,
                    approvers,
                    context,
                    expires_in_seconds,
                    policy: body.get("policy").filter(|p| !p.is_null()).cloned(),
                    reminders,
                    escalation: body.get("escalation").filter(|e| !e.is_null()).cloned(),
                    resume,
                    assurance,
                })
            }
            _ => Err(CreateRefusal::Invalid(errors)),
        }
    }
}

impl CreateRequest {
    /// The new pending approval this request describes.
    pub fn into_approval(
        self,
        tenant: TenantId,
        requested_by: Approver,
        policy: Option<Policy>,
        idempotency_key: IdempotencyKey,
        executes: bool,
        now: EpochSeconds,
    ) -> Approval {
        let rules = policy.as_ref().map_or(0, |p| p.rules.len());
        Approval {
            tenant,
            id: ApprovalId::generate_hinting(rules, executes),
            status: Status::Pending,
            requested_by: Some(requested_by),
            requested_by_key_id: None,
            action_type: self.action_type,
            executes,
            payload: self.payload,
            approvers: self.approvers,
            context: self.context,
            idempotency_key,
            execute_key_names_approval: true,
            created_at: now,
            expires_at: now + self.expires_in_seconds,
            policy,
            votes: Vec::new(),
            decision: None,
            cancellation: None,
            execution: Execution::not_started(now),
            slack: None,
            trace: None,
            stall: Default::default(),
            github: None,
            resume: self.resume,
            policy_source: None,
            policy_evaluated: None,
            assurance: self.assurance,
            comment_cap: None,
            certificate: None,
        }
    }
}

/// The largest integer a JSON number holds exactly in the canonical form (RFC 8785 numbers are
/// IEEE 754 doubles, as I-JSON, RFC 7493, requires).
const MAX_EXACT_INTEGER: u64 = 1 << 53;

/// Refuses integers beyond ±2^53: the fingerprint could not tell two of them apart, so a changed
/// body would replay instead of conflicting.
fn check_exact_numbers(value: &Value, path: &str, errors: &mut Vec<FieldError>) {
    match value {
        Value::Number(n) => {
            let inexact = n.as_u64().is_some_and(|u| u > MAX_EXACT_INTEGER)
                || n.as_i64()
                    .is_some_and(|i| i.unsigned_abs() > MAX_EXACT_INTEGER);
            if inexact {
                errors.push(FieldError::new(
                    path,
                    "integers beyond ±2^53 are not exact in JSON; send a string",
                ));
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                check_exact_numbers(item, &format!("{path}[{i}]"), errors);
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                let path = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                check_exact_numbers(item, &path, errors);
            }
        }
        _ => {}
    }
}

/// An optional JSON object; absent means empty.
fn object_field(
    value: Option<&Value>,
    field: &str,
    errors: &mut Vec<FieldError>,
) -> Map<String, Value> {
    match value {
        None => Map::new(),
        Some(Value::Object(map)) => map.clone(),
        Some(_) => {
            errors.push(FieldError::new(field, "must be an object"));
            Map::new()
        }
    }
}

/// `approvers`: absent is none (a deployment's approval policy may name every approver: the
/// create refuses an approval that ends up with none), and so is `[]`; given, at most 20
/// distinct identities.
fn parse_approvers(value: Option<&Value>, errors: &mut Vec<FieldError>) -> Vec<Approver> {
    let Some(value) = value.filter(|v| !v.is_null()) else {
        return Vec::new();
    };
    let Some(list) = value.as_array() else {
        errors.push(FieldError::new("approvers", "must be an array of strings"));
        return Vec::new();
    };
    if list.len() > CreateRequest::MAX_APPROVERS {
        errors.push(FieldError::new(
            "approvers",
            "must list at most 20 approvers",
        ));
    }
    let mut seen = HashSet::new();
    let mut approvers = Vec::with_capacity(list.len());
    for (i, item) in list.iter().enumerate() {
        let field = format!("approvers[{i}]");
        let Some(raw) = item.as_str() else {
            errors.push(FieldError::new(field, "must be a string"));
            continue;
        };
        match Approver::parse(raw) {
            // One person, one entry: votes are counted per person (compared by identity).
            Ok(approver) if seen.insert(approver.identity()) => approvers.push(approver),
            Ok(_) => errors.push(FieldError::new(field, "duplicate approver")),
            Err(e) => errors.push(FieldError::new(field, e.0)),
        }
    }
    approvers
}

/// SHA-256 (hex) of the body's RFC 8785 canonical form: key order and whitespace do not change it,
/// any value does.
pub fn fingerprint(body: &Value) -> String {
    // Serialising a `Value` cannot fail: its keys are strings and its numbers finite.
    let canonical = serde_json_canonicalizer::to_vec(body).unwrap_or_default();
    hex::encode(Sha256::digest(&canonical))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parse(body: Value) -> Result<CreateRequest, CreateRefusal> {
        CreateRequest::parse(&body, |t| t == "deploy")
    }

    fn fields(body: Value) -> Vec<String> {
        match parse(body).unwrap_err() {
            CreateRefusal::Invalid(errors) => errors.into_iter().map(|e| e.field).collect(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_minimal_body_gets_the_defaults() {
        let req = parse(json!({"action": {"type": "deploy"}, "approvers": ["alice"]})).unwrap();
        assert_eq!(req.expires_in_seconds, 604_800);
        assert!(req.payload.is_empty() && req.context.is_empty());
    }

    #[test]
    fn every_bad_field_is_reported_at_once() {
        let got = fields(json!({
            "action": {"type": "", "payload": 3},
            "approvers": ["alice", "alice", "", 7],
            "context": [],
            "expires_in_seconds": 59,
            "extra": true
        }));
        assert_eq!(
            got,
            [
                "extra",
                "action.type",
                "action.payload",
                "approvers[1]",
                "approvers[2]",
                "approvers[3]",
                "context",
                "expires_in_seconds"
            ]
        );
    }

    #[test]
    fn one_person_is_listed_once_whatever_the_spelling() {
        assert_eq!(
            fields(
                json!({"action": {"type": "deploy"}, "approvers": ["alice@x.com", " Alice@X.com"]})
            ),
            ["approvers[1]"]
        );
    }

    #[test]
    fn approvers_are_at_most_20_and_may_be_left_to_the_policy() {
        // None (absent or empty): the deployment's approval policy chooses them; the create
        // refuses an approval that ends with none.
        for none in [json!([]), Value::Null] {
            let parsed = parse(json!({"action": {"type": "deploy"}, "approvers": none})).unwrap();
            assert!(parsed.approvers.is_empty());
        }
        assert!(parse(json!({"action": {"type": "deploy"}})).is_ok());
        let many: Vec<String> = (0..21).map(|i| format!("a{i}")).collect();
        assert_eq!(
            fields(json!({"action": {"type": "deploy"}, "approvers": many})),
            ["approvers"]
        );
        let twenty: Vec<String> = (0..20).map(|i| format!("a{i}")).collect();
        assert!(parse(json!({"action": {"type": "deploy"}, "approvers": twenty})).is_ok());
    }

    #[test]
    fn expiry_bounds_are_inclusive() {
        for (n, ok) in [
            (60, true),
            (2_592_000, true),
            (59, false),
            (2_592_001, false),
        ] {
            let body =
                json!({"action": {"type": "deploy"}, "approvers": ["a"], "expires_in_seconds": n});
            assert_eq!(parse(body).is_ok(), ok, "{n}");
        }
        let body =
            json!({"action": {"type": "deploy"}, "approvers": ["a"], "expires_in_seconds": 60.5});
        assert!(parse(body).is_err());
    }

    #[test]
    fn an_unconfigured_action_type_is_its_own_refusal_once_the_rest_is_valid() {
        let body = json!({"action": {"type": "launch"}, "approvers": ["a"]});
        assert_eq!(
            parse(body).unwrap_err(),
            CreateRefusal::UnknownActionType("launch".into())
        );
        assert_eq!(
            fields(json!({"action": {"type": "launch"}, "approvers": [7]})),
            ["approvers[0]"]
        );
    }

    #[test]
    fn non_objects_are_refused() {
        assert_eq!(fields(json!([1, 2])), [""]);
        assert_eq!(fields(json!({"approvers": ["a"]})), ["action"]);
    }

    #[test]
    fn integers_the_fingerprint_cannot_tell_apart_are_refused() {
        let body = json!({"action": {"type": "deploy", "payload": {"ids": [9_007_199_254_740_993u64]}},
                          "approvers": ["a"], "context": {"n": -9_007_199_254_740_993i64}});
        assert_eq!(fields(body), ["action.payload.ids[0]", "context.n"]);
        let exact = json!({"action": {"type": "deploy", "payload": {"n": 9_007_199_254_740_992u64, "f": 1.5e300}},
                           "approvers": ["a"]});
        assert!(parse(exact).is_ok());
    }

    #[test]
    fn fingerprint_ignores_key_order_and_whitespace_but_not_values() {
        let a: Value = serde_json::from_str(r#"{"a": 1, "b": {"x": [1, 2], "y": "z"}}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{ "b":{"y":"z","x":[1,2]},"a":1 }"#).unwrap();
        let c: Value = serde_json::from_str(r#"{"a": 2, "b": {"x": [1, 2], "y": "z"}}"#).unwrap();
        assert_eq!(fingerprint(&a), fingerprint(&b));
        assert_ne!(fingerprint(&a), fingerprint(&c));
        assert_eq!(fingerprint(&a).len(), 64);
    }
}
