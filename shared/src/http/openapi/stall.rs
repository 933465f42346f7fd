//! The schemas of reminders and escalation: what a create may ask for, and what an approval
//! shows of them.

use serde_json::{Value, json};

use super::timestamp;
use crate::domain::stall::{EscalationStep, Reminders};

/// Component schemas to add to the document's.
pub(super) fn schemas() -> Value {
    let approver = json!({"$ref": "#/components/schemas/Approver"});
    json!({
        "RemindersInput": {
            "type": "object", "additionalProperties": false,
            "required": ["after_seconds", "every_seconds", "max"],
            "description": "While pending, at `after_seconds` after creation and every `every_seconds` after, up to `max` times, each listed approver who has not voted is reminded through the channels that first notified them. An action type's `approval.reminders` in `ACTION_TARGETS` is the default; the request's own wins.",
            "properties": {
                "after_seconds": {"type": "integer", "minimum": Reminders::MIN_AFTER_SECONDS},
                "every_seconds": {"type": "integer", "minimum": Reminders::MIN_EVERY_SECONDS},
                "max": {"type": "integer", "minimum": 1, "maximum": Reminders::MAX_REMINDERS}
            }
        },
        "EscalationInput": {
            "type": "array", "minItems": 1, "maxItems": 3,
            "description": "At each step's time, if still pending, its approvers join the approval (the rule named, or every rule; `min_approvals` unchanged) and are notified, once. Times increase; a step's approvers are new to the approval and in no other step; the requester among them is `policy_unsatisfiable`; approvers and every step's together at most 20 people.",
            "items": {
                "type": "object", "additionalProperties": false, "required": ["after_seconds", "approvers"],
                "properties": {
                    "after_seconds": {"type": "integer", "minimum": EscalationStep::MIN_AFTER_SECONDS},
                    "approvers": {"type": "array", "minItems": 1, "uniqueItems": true, "items": approver},
                    "rule": {"type": "string", "description": "A rule of `policy` (absent: every rule)."}
                }
            }
        },
        "RemindersView": {
            "type": "object", "additionalProperties": false,
            "required": ["after_seconds", "every_seconds", "max", "sent"],
            "properties": {
                "after_seconds": {"type": "integer"},
                "every_seconds": {"type": "integer"},
                "max": {"type": "integer"},
                "sent": {"type": "integer", "minimum": 0, "description": "Reminders sent so far."}
            }
        },
        "EscalationView": {
            "type": "array",
            "items": {
                "type": "object", "additionalProperties": false,
                "required": ["step", "after_seconds", "at", "approvers", "applied"],
                "properties": {
                    "step": {"type": "integer", "minimum": 1},
                    "after_seconds": {"type": "integer"},
                    "at": timestamp(),
                    "approvers": {"type": "array", "items": {"type": "string"}},
                    "rule": {"type": "string"},
                    "applied": {"type": "boolean", "description": "Whether its approvers have joined (they are then in `approvers` and the rules)."}
                }
            }
        }
    })
}
