//! The schemas of `resume`: the AWS workflow a create names, and what an approval shows of its
//! answer (never the token).

use serde_json::{Value, json};

use crate::domain::resume::{MAX_CALLBACK_ID_CHARS, MAX_TASK_TOKEN_CHARS};

/// Component schemas to add to the document's.
pub(super) fn schemas() -> Value {
    json!({
        "ResumeInput": {
            "description": "An AWS workflow waiting on this approval, told once when it ends: approved → success with the decision document `{approval_id, status, decided_at, votes}`; rejected, expired or cancelled → failure with error `Countersign.Rejected`, `Countersign.Expired` or `Countersign.Cancelled`. The token is a credential: it is never shown again. A type the deployment does not enable (`RESUME_TYPES`) is `resume_not_enabled`.",
            "oneOf": [
                {
                    "type": "object", "additionalProperties": false, "required": ["type", "task_token"],
                    "properties": {
                        "type": {"const": "stepfunctions"},
                        "task_token": {"type": "string", "minLength": 1, "maxLength": MAX_TASK_TOKEN_CHARS,
                                       "description": "`$$.Task.Token` of a task state with `.waitForTaskToken`."}
                    }
                },
                {
                    "type": "object", "additionalProperties": false, "required": ["type", "callback_id"],
                    "properties": {
                        "type": {"const": "lambda_durable"},
                        "callback_id": {"type": "string", "minLength": 1, "maxLength": MAX_CALLBACK_ID_CHARS,
                                        "pattern": "^[A-Za-z0-9+/]+={0,2}$",
                                        "description": "A Lambda durable function's callback id (`waitForCallback`)."}
                    }
                }
            ]
        },
        "ResumeView": {
            "type": "object", "additionalProperties": false,
            "required": ["type", "status", "attempts", "last_error"],
            "description": "How far telling the waiting workflow went (never its token).",
            "properties": {
                "type": {"type": "string", "enum": ["stepfunctions", "lambda_durable"]},
                "status": {"type": "string", "enum": ["pending", "succeeded", "failed"]},
                "attempts": {"type": "integer", "minimum": 0},
                "last_error": {"type": ["string", "null"]}
            }
        }
    })
}
