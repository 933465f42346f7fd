//! The events a webhook may carry.

use serde_json::Value;

use crate::domain::{Approver, DecideRequest, FieldError, Outcome};

/// A verified webhook body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WebhookEvent {
    /// `approval.decided`: decide an approval through the external channel. The id is kept as
    /// sent: one that names no approval is recorded as `unknown_approval`, not refused.
    Decided {
        approval_id: String,
        outcome: Outcome,
        approver: Approver,
        comment: Option<String>,
    },
    /// Any other type: recorded and acknowledged as `ignored`.
    Other,
}

impl WebhookEvent {
    pub const DECIDED: &'static str = "approval.decided";
}

/// Parses `{"type": "…", "data": {…}}`; returns the event type and the event.
pub fn parse_event(body: &[u8]) -> Result<(String, WebhookEvent), Vec<FieldError>> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|_| vec![FieldError::new("", "the body is not valid JSON")])?;
    let Some(object) = value.as_object() else {
        return Err(vec![FieldError::new("", "the body must be a JSON object")]);
    };
    let kind = match object.get("type") {
        Some(Value::String(kind)) if !kind.is_empty() && kind.len() <= 200 => kind.clone(),
        _ => {
            return Err(vec![FieldError::new(
                "type",
                "required: a string of 1-200 characters",
            )]);
        }
    };
    if kind != WebhookEvent::DECIDED {
        return Ok((kind, WebhookEvent::Other));
    }

    let Some(data) = object.get("data").and_then(Value::as_object) else {
        return Err(vec![FieldError::new("data", "required: an object")]);
    };
    let mut errors = Vec::new();
    let approval_id = match data.get("approval_id") {
        Some(Value::String(id)) if !id.is_empty() && id.len() <= 200 => Some(id.clone()),
        _ => {
            errors.push(FieldError::new(
                "data.approval_id",
                "required: a string of 1-200 characters",
            ));
            None
        }
    };
    let outcome = data
        .get("decision")
        .and_then(Value::as_str)
        .and_then(DecideRequest::parse_outcome);
    if outcome.is_none() {
        errors.push(FieldError::new(
            "data.decision",
            "must be \"approve\" or \"reject\"",
        ));
    }
    let approver = match data.get("approver").and_then(Value::as_str) {
        Some(raw) => Approver::parse(raw)
            .map_err(|e| errors.push(FieldError::new("data.approver", e.0)))
            .ok(),
        None => {
            errors.push(FieldError::new("data.approver", "required string"));
            None
        }
    };
    let mut comment_errors = Vec::new();
    let comment = match data.get("comment") {
        None | Some(Value::Null) => None,
        Some(Value::String(c)) => DecideRequest::check_comment(c, &mut comment_errors),
        Some(_) => {
            comment_errors.push(FieldError::new("comment", "must be a string"));
            None
        }
    };
    errors.extend(
        comment_errors
            .into_iter()
            .map(|e| FieldError::new("data.comment", e.message)),
    );
    match (approval_id, outcome, approver) {
        (Some(approval_id), Some(outcome), Some(approver)) if errors.is_empty() => Ok((
            kind,
            WebhookEvent::Decided {
                approval_id,
                outcome,
                approver,
                comment,
            },
        )),
        _ => Err(errors),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parse(value: Value) -> Result<(String, WebhookEvent), Vec<FieldError>> {
        parse_event(value.to_string().as_bytes())
    }

    #[test]
    fn a_decision_event_is_parsed() {
        let (kind, event) = parse(json!({"type": "approval.decided", "data": {
            "approval_id": "apr_x", "decision": "reject", "approver": "bob", "comment": "no"}}))
        .unwrap();
        assert_eq!(kind, "approval.decided");
        assert_eq!(
            event,
            WebhookEvent::Decided {
                approval_id: "apr_x".into(),
                outcome: Outcome::Rejected,
                approver: Approver::parse("bob").unwrap(),
                comment: Some("no".into()),
            }
        );
    }

    #[test]
    fn other_types_are_accepted_whatever_their_data() {
        assert_eq!(
            parse(json!({"type": "ping", "data": [1]})).unwrap(),
            ("ping".into(), WebhookEvent::Other)
        );
        assert_eq!(
            parse(json!({"type": "ping"})).unwrap().1,
            WebhookEvent::Other
        );
    }

    #[test]
    fn invalid_events_name_their_fields() {
        assert!(parse_event(b"not json").is_err());
        assert!(parse(json!([])).is_err());
        assert!(parse(json!({"data": {}})).is_err());
        let errors = parse(json!({"type": "approval.decided", "data": {"decision": "maybe", "approver": "", "comment": 3}}))
            .unwrap_err();
        let fields: Vec<_> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "data.approval_id",
                "data.decision",
                "data.approver",
                "data.comment"
            ]
        );
    }
}
