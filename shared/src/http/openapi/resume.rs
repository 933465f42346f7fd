//! The schemas of `resume`: the AWS workflow a create names, and what an approval shows of its
//! answer (never the token).

use serde_json::{Value, json};

use crate::domain::resume::{MAX_CALLBACK_ID_CHARS, MAX_TASK_TOKEN_CHARS};

/// `POST /approvals/{id}/resume/retry`.
pub(super) fn paths() -> Value {
    json!({
        "/approvals/{id}/resume/retry": {
            "parameters": [{"$ref": "#/components/parameters/ApprovalId"}],
            "post": {
                "operationId": "retryResume",
                "tags": ["executions"],
                "summary": "Send a failed answer to the waiting workflow again (operator)",
                "description": "Only a `failed` resume whose token is still held (it is removed once an answer succeeded), at most 20 times; nothing changes but the resume's status, and a resume job answers the workflow as the first did. A repeat while that answer is pending is `not_retryable`.",
                "responses": super::responses(
                    json!({"202": super::approval_response("Queued again.", false)}),
                    &["unauthorized", "forbidden", "not_found", "not_retryable"],
                ),
            }
        }
    })
}

/// Component schemas to add to the document's.
pub(super) fn schemas() -> Value {
    json!({
        "ResumeInput": {
            "description": "An AWS workflow waiting on this approval, told once when it ends: approved → success with the decision document `{approval_id, tenant, idempotency_key, requested_by, status, decided_at, votes}`; rejected, expired or cancelled → failure with error `Countersign.Rejected`, `Countersign.Expired` or `Countersign.Cancelled`. The token is a credential: it is never shown again. A type the deployment does not enable (`RESUME_TYPES`) is `resume_not_enabled`; a token or callback id another approval (of any tenant) names is `resume_in_use`.",
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
