//! `PUT`, `GET`, `DELETE /delegations/{identity}` (docs/API.md "Delegation"): a person lets
//! another vote in their place for a window; served by the API function.

use serde_json::{Value, json};

use super::{PRINTABLE_PATTERN, nullable, responses, timestamp};
use crate::domain::Approver;
use crate::domain::delegation::Delegation;
use crate::http::delegations::DELEGATION_BODY_LIMIT;

/// The tag of these routes.
pub(super) fn tag() -> Value {
    json!({"name": "delegations", "description": "A person lets another vote in their place for a window (at most 90 days, one hop): set, read and ended by that person with their own approver key, or by an operator."})
}

pub(super) fn schemas() -> Value {
    let approver = json!({"$ref": "#/components/schemas/Approver"});
    json!({
        "SetDelegation": {
            "type": "object",
            "additionalProperties": false,
            "required": ["delegate", "until"],
            "properties": {
                "delegate": {"allOf": [approver], "maxLength": Delegation::MAX_DELEGATE_BYTES, "description": "Who may vote in the person's place: someone else, at most 128 bytes (UTF-8)."},
                "from": {"type": "string", "format": "date-time", "description": "RFC 3339; now when absent."},
                "until": {"type": "string", "format": "date-time", "description": "RFC 3339: in the future, after `from`, at most 90 days after it."},
                "reason": {"type": "string", "maxLength": Delegation::MAX_REASON_CHARS, "pattern": "^[^\\u0000-\\u001f\\u007f-\\u009f]*$", "description": "Required when an operator sets another person's delegation."}
            }
        },
        "Delegation": {
            "type": "object",
            "additionalProperties": false,
            "required": ["delegator", "delegate", "from", "until", "reason", "set_by"],
            "properties": {
                "delegator": {"type": "string", "description": "The person whose place it is, as the path names them."},
                "delegate": {"type": "string"},
                "from": timestamp(),
                "until": timestamp(),
                "reason": nullable(json!({"type": "string"})),
                "set_by": nullable(json!({"type": "string", "description": "The principal that set it: the person, or an operator (null for one stored before v7)."}))
            }
        }
    })
}

pub(super) fn paths() -> Value {
    let ok = |description: &str| {
        json!({
            "description": description,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Delegation"}}}
        })
    };
    json!({
        "/delegations/{identity}": {
            "parameters": [{
                "name": "identity", "in": "path", "required": true,
                "description": "The person: an identity as approvers are spelled (any spelling of it names the one delegation).",
                "schema": {"type": "string", "minLength": 1, "maxLength": Approver::MAX_CHARS, "pattern": PRINTABLE_PATTERN}
            }],
            "put": {
                "operationId": "setDelegation",
                "tags": ["delegations"],
                "summary": "Set (replace) a person's delegation",
                "description": format!("While it is in force (`from` ≤ now < `until`) the delegate may vote in the person's place on any approval that lists them, naming them as `approver` with the delegate's own approver key: the vote records `approver` (the person) and `by` (the delegate). One person casts one vote on an approval, for themselves or for one person they stand in for; a place is filled once; a delegate who requested the approval is refused. A person has one delegation at a time: a PUT replaces it. Bodies over {DELEGATION_BODY_LIMIT} bytes are refused; bad input is 400 naming the field, and nothing is written."),
                "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/SetDelegation"}}}},
                "responses": responses(
                    json!({"200": ok("The delegation as set.")}),
                    &["invalid_request", "unauthorized", "forbidden", "payload_too_large", "unsupported_media_type"],
                ),
            },
            "get": {
                "operationId": "getDelegation",
                "tags": ["delegations"],
                "summary": "A person's delegation, until it ends",
                "responses": responses(
                    json!({"200": ok("The delegation (in force, or starting later).")}),
                    &["invalid_request", "unauthorized", "forbidden", "not_found"],
                ),
            },
            "delete": {
                "operationId": "endDelegation",
                "tags": ["delegations"],
                "summary": "End a person's delegation now",
                "description": "No vote after the answer finds it. Ending one that is not there changes nothing (also 204).",
                "responses": responses(
                    json!({"204": {"description": "Ended (or there was none)."}}),
                    &["invalid_request", "unauthorized", "forbidden"],
                ),
            }
        }
    })
}
