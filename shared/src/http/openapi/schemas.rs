//! The document's component schemas: every body the API takes or answers with.

use serde_json::{Value, json};

use super::{APPROVAL_ID_PATTERN, PRINTABLE_PATTERN, approver_schema, nullable, timestamp};
use crate::domain::trail::EventType;
use crate::domain::{CreateRequest, DecideRequest, Policy};
use crate::http::problem::ApiError;

pub(super) fn schemas() -> Value {
    let mut all = core();
    for more in [super::stall::schemas(), super::resume::schemas()] {
        if let (Some(all), Value::Object(more)) = (all.as_object_mut(), more) {
            all.extend(more);
        }
    }
    all
}

fn core() -> Value {
    let comment =
        json!({"type": ["string", "null"], "maxLength": DecideRequest::MAX_COMMENT_CHARS});
    let approver = json!({"$ref": "#/components/schemas/Approver"});
    let channel = json!({"type": "string", "enum": ["api", "review_page", "webhook", "slack", "github", "policy"]});
    json!({
        "Approver": approver_schema(),
        "ApprovalId": {"type": "string", "pattern": APPROVAL_ID_PATTERN},
        "ApprovalStatus": {"type": "string", "enum": ["pending", "approved", "rejected", "expired", "cancelled"]},
        "ExecutionStatus": {"type": "string", "enum": ["not_started", "queued", "running", "succeeded", "failed", "needs_reconciliation"]},
        "CreateApproval": {
            "type": "object",
            "additionalProperties": false,
            "required": ["action"],
            "properties": {
                "action": {
                    "type": "object",
                    "additionalProperties": false,
                    "required": ["type"],
                    "properties": {
                        "type": {"type": "string", "minLength": 1, "description": "A configured action type (`ACTION_TARGETS`)."},
                        "payload": {"type": "object", "description": "What the action target receives."}
                    }
                },
                "approvers": {
                    "type": "array", "maxItems": CreateRequest::MAX_APPROVERS,
                    "uniqueItems": true, "items": approver,
                    "description": "Who may approve. Where the tenant's approval policy requires groups, optional: their members are added, and anyone named here only adds (docs/POLICY.md). Without an enforced policy, at least one."
                },
                "context": {"type": "object", "description": "Shown to approvers; not sent to the target."},
                "expires_in_seconds": {
                    "type": "integer",
                    "minimum": CreateRequest::MIN_EXPIRES_IN,
                    "maximum": CreateRequest::MAX_EXPIRES_IN,
                    "default": CreateRequest::DEFAULT_EXPIRES_IN
                },
                "policy": nullable(json!({"$ref": "#/components/schemas/PolicyInput"})),
                "reminders": nullable(json!({"$ref": "#/components/schemas/RemindersInput"})),
                "escalation": nullable(json!({"$ref": "#/components/schemas/EscalationInput"})),
                "resume": nullable(json!({"$ref": "#/components/schemas/ResumeInput"})),
                "assurance": nullable(json!({"type": "string", "enum": ["passkey"], "description": "Every vote a passkey signature over the exact action, and a certificate once approved (docs/VERIFY.md). It only adds to what the deployment's approval policy asks."}))
            },
            "description": format!("`payload` and `context` together take at most {} bytes once written out; numbers must be exact (integers within ±2^53).", CreateRequest::MAX_WRITTEN_BYTES),
            "examples": [{"action": {"type": "deploy", "payload": {"service": "api", "build": 1042}}, "approvers": ["alice@example.com", "bob@example.com"]}]
        },
        "PolicyInput": {
            "type": "object",
            "additionalProperties": false,
            "required": ["rules"],
            "description": "k-of-n quorums: every rule must be met; one reject decides. Without a policy, one approving vote decides.",
            "properties": {"rules": {
                "type": "array", "minItems": 1, "maxItems": Policy::MAX_RULES,
                "items": {
                    "type": "object",
                    "additionalProperties": false,
                    "required": ["name", "approvers", "min_approvals"],
                    "properties": {
                        "name": {"type": "string", "minLength": 1, "maxLength": Policy::MAX_NAME_CHARS, "pattern": PRINTABLE_PATTERN},
                        "approvers": {"type": "array", "minItems": 1, "uniqueItems": true, "items": approver, "description": "Each listed in the approval's `approvers`."},
                        "min_approvals": {"type": "integer", "minimum": 1, "maximum": u32::MAX}
                    }
                }
            }}
        },
        "Decide": {
            "type": "object",
            "additionalProperties": false,
            "required": ["decision"],
            "properties": {
                "decision": {"type": "string", "enum": ["approve", "reject"]},
                "approver": {"oneOf": [approver, {"type": "null"}], "description": "Required for a decider key; an approver key votes as itself, or in the place of a person whose delegation to it is in force (naming anyone else is 403 `forbidden`)."},
                "comment": comment
            }
        },
        "DecideForm": {
            "type": "object",
            "required": ["token", "decision"],
            "properties": {
                "token": {"type": "string"},
                "csrf": {"type": "string", "description": "A tenant with `OIDC`: the signed-in session's CSRF token (the review page's form carries it)."},
                "decision": {"type": "string", "enum": ["approve", "reject"]},
                "comment": {"type": "string", "maxLength": DecideRequest::MAX_COMMENT_CHARS}
            }
        },
        "CancelApproval": {
            "type": "object",
            "additionalProperties": false,
            "properties": {"reason": comment}
        },
        "Resolve": {
            "type": "object",
            "additionalProperties": false,
            "required": ["outcome", "note"],
            "properties": {
                "outcome": {"type": "string", "enum": ["succeeded", "failed"]},
                "note": {"type": "string", "minLength": 1, "maxLength": DecideRequest::MAX_COMMENT_CHARS, "pattern": "\\S", "description": "What happened, and how you know."}
            }
        },
        "Report": {
            "type": "object",
            "additionalProperties": false,
            "required": ["outcome"],
            "properties": {
                "outcome": {"type": "string", "enum": ["succeeded", "failed"]},
                "detail": {"type": ["string", "null"], "maxLength": DecideRequest::MAX_COMMENT_CHARS, "description": "What the claimer did (kept as the execution's note)."}
            }
        },
        "WebhookEvent": {
            "type": "object",
            "required": ["type"],
            "description": "`approval.decided` decides; other types are recorded and ignored.",
            "properties": {
                "type": {"type": "string", "minLength": 1, "maxLength": 200},
                "data": {
                    "type": "object",
                    "properties": {
                        "approval_id": {"type": "string", "minLength": 1, "maxLength": 200},
                        "decision": {"type": "string", "enum": ["approve", "reject"]},
                        "approver": approver,
                        "comment": comment
                    }
                }
            }
        },
        "WebhookReceipt": {
            "type": "object",
            "additionalProperties": false,
            "required": ["status", "outcome"],
            "properties": {
                "status": {"type": "string", "enum": ["processed", "duplicate"]},
                "outcome": {"type": "string", "enum": ["applied", "superseded", "not_an_approver", "unknown_approval", "ignored", "self_approval_forbidden"]}
            }
        },
        "Vote": {
            "type": "object",
            "additionalProperties": false,
            "required": ["approver", "vote", "at", "channel", "comment", "webhook_event_id"],
            "properties": {
                "approver": {"type": "string"},
                "vote": {"type": "string", "enum": ["approve", "reject"]},
                "at": timestamp(),
                "channel": channel,
                "comment": {"type": ["string", "null"]},
                "webhook_event_id": {"type": ["string", "null"]},
                "by": {"type": "string", "description": "Only on a vote cast in `approver`'s place: the delegate who cast it."},
                "passkey": {"type": "string", "description": "Only on a passkey vote: the credential id (base64url) that signed it; the certificate carries the signature."}
            }
        },
        "Approval": {
            "type": "object",
            "additionalProperties": false,
            "required": ["id", "status", "requested_by", "action", "approvers", "policy", "context", "idempotency_key", "created_at", "expires_at", "votes", "decision", "execution"],
            "properties": {
                "id": {"$ref": "#/components/schemas/ApprovalId"},
                "status": {"$ref": "#/components/schemas/ApprovalStatus"},
                "requested_by": {"type": ["string", "null"]},
                "requested_by_key_id": {"type": "string", "description": "The table API key that created it (absent for an `API_KEYS` key)."},
                "action": {
                    "type": "object", "additionalProperties": false, "required": ["type", "payload"],
                    "properties": {
                        "type": {"type": "string"},
                        "payload": {"type": "object"},
                        "executes": {"type": "boolean", "enum": [false], "description": "Only on an approval-only type: Countersign executes nothing; the caller claims the approved execution (`POST /approvals/{id}/execution/claim`) and reports its outcome."}
                    }
                },
                "approvers": {"type": "array", "items": {"type": "string"}},
                "policy": nullable(json!({
                    "type": "object", "additionalProperties": false, "required": ["rules", "source"],
                    "description": "`null`: one approving vote decides, and no deployment's approval policy decided it.",
                    "properties": {
                        "rules": {"type": "array", "items": {
                            "type": "object", "additionalProperties": false,
                            "required": ["name", "approvers", "min_approvals", "approvals"],
                            "properties": {
                                "name": {"type": "string"},
                                "group": {"type": "string", "description": "A deployment's group rule: the group its approval policy requires (its approvers: the members at create, less the requester)."},
                                "approvers": {"type": "array", "items": {"type": "string"}},
                                "min_approvals": {"type": "integer", "minimum": 1},
                                "approvals": {"type": "integer", "minimum": 0, "description": "Approving votes counted so far."}
                            }
                        }},
                        "source": nullable(json!({
                            "type": "object", "additionalProperties": false,
                            "required": ["version", "sha256", "policies"],
                            "description": "The tenant's approval policy that decided it (docs/POLICY.md): `null` when none did.",
                            "properties": {
                                "version": {"type": "integer", "minimum": 1},
                                "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
                                "policies": {"type": "array", "items": {"type": "string"}, "description": "The `@id`s of the permits that decided."}
                            }
                        }))
                    }
                })),
                "assurance": {"type": "string", "enum": ["passkey"], "description": "Only on a passkey-only approval: every vote a passkey signature over the exact action."},
                "certificate": {"$ref": "#/components/schemas/Certificate", "description": "Only in a claim's answer, on a passkey-only approval."},
                "context": {"type": "object"},
                "idempotency_key": {"type": "string"},
                "created_at": timestamp(),
                "expires_at": timestamp(),
                "votes": {"type": "array", "items": {"$ref": "#/components/schemas/Vote"}},
                "decision": nullable(json!({
                    "type": "object", "additionalProperties": false,
                    "required": ["outcome", "approver", "decided_at", "channel", "comment", "webhook_event_id"],
                    "properties": {
                        "outcome": {"type": "string", "enum": ["approved", "rejected"]},
                        "approver": {"type": "string"},
                        "decided_at": timestamp(),
                        "channel": channel,
                        "comment": {"type": ["string", "null"]},
                        "webhook_event_id": {"type": ["string", "null"]},
                        "by": {"type": "string", "description": "Only when the deciding vote was cast in `approver`'s place: the delegate."},
                        "actor": {
                            "type": "object", "additionalProperties": false, "required": ["type", "id", "version"],
                            "description": "Only on an approval its approval policy approved at create (`@require(\"none\")`): the policy.",
                            "properties": {"type": {"type": "string", "enum": ["policy"]}, "id": {"type": "string"}, "version": {"type": "integer", "minimum": 1}}
                        }
                    }
                })),
                "cancellation": {
                    "type": "object", "additionalProperties": false, "required": ["by", "at", "reason"],
                    "description": "Only on a cancelled approval.",
                    "properties": {"by": {"type": "string"}, "at": timestamp(), "reason": {"type": ["string", "null"]}}
                },
                "execution": {
                    "type": "object", "additionalProperties": false,
                    "required": ["status", "attempts", "last_error", "updated_at"],
                    "properties": {
                        "status": {"$ref": "#/components/schemas/ExecutionStatus"},
                        "attempts": {"type": "integer", "minimum": 0},
                        "last_error": {"type": ["string", "null"]},
                        "updated_at": timestamp(),
                        "note": {"type": "string", "description": "An operator's resolution note, or the claimer's reported detail."},
                        "claimed_by": {"type": "string", "description": "Approval-only types: the Idempotency-Key of the request that claimed the execution."},
                        "late_reports": {"type": "array", "items": {"type": "string"}},
                        "status_checks": {"type": "array", "items": {
                            "type": "object", "additionalProperties": false, "required": ["at", "answer", "detail"],
                            "properties": {"at": timestamp(), "answer": {"type": "string"}, "detail": {"type": ["string", "null"]}}
                        }}
                    }
                },
                "slack": {
                    "type": "object", "additionalProperties": false, "required": ["channel", "ts"],
                    "description": "Where its Slack message is, once posted (tenants with `SLACK`).",
                    "properties": {"channel": {"type": "string"}, "ts": {"type": "string"}}
                },
                "reminders": {"$ref": "#/components/schemas/RemindersView"},
                "escalation": {"$ref": "#/components/schemas/EscalationView"},
                "resume": {"$ref": "#/components/schemas/ResumeView"}
            }
        },
        "ApprovalPage": {
            "type": "object", "additionalProperties": false, "required": ["approvals", "next_cursor"],
            "properties": {
                "approvals": {"type": "array", "items": {"$ref": "#/components/schemas/Approval"}},
                "next_cursor": {"type": ["string", "null"]}
            }
        },
        "Event": {
            "type": "object", "additionalProperties": false, "required": ["id", "type", "at", "actor", "data"],
            "properties": {
                "id": {"type": "string", "pattern": "^evt_[0-9a-f]{32}$", "description": "Stable: a redelivered callback carries the same id."},
                "type": {"type": "string", "enum": EventType::ALL.iter().map(|t| t.as_str()).collect::<Vec<_>>()},
                "at": timestamp(),
                "actor": {"type": ["object", "null"]},
                "data": {"type": "object"}
            }
        },
        "EventPage": {
            "type": "object", "additionalProperties": false, "required": ["events", "next_cursor"],
            "properties": {
                "events": {"type": "array", "items": {"$ref": "#/components/schemas/Event"}},
                "next_cursor": {"type": ["string", "null"]}
            }
        },
        "FieldError": {
            "type": "object", "additionalProperties": false, "required": ["field", "message"],
            "properties": {
                "field": {"type": "string", "description": "A path into the body (`policy.rules[0].name`), a query parameter, or empty for the whole body."},
                "message": {"type": "string"}
            }
        },
        "Problem": {
            "type": "object",
            "additionalProperties": false,
            "required": ["type", "title", "status", "detail", "code"],
            "description": "RFC 9457. `code` is stable: branch on it.",
            "properties": {
                "type": {"type": "string"},
                "title": {"type": "string"},
                "status": {"type": "integer"},
                "detail": {"type": "string"},
                "code": {"type": "string", "enum": ApiError::CODES.iter().map(|(c, _)| *c).collect::<Vec<_>>()},
                "errors": {"type": "array", "items": {"$ref": "#/components/schemas/FieldError"}, "description": "`invalid_request` and `policy_unsatisfiable`: every field at fault (a group the approval policy requires: `group <name>`)."},
                "policies": {"type": "array", "items": {"type": "string"}, "description": "`policy_forbidden` and `policy_error`: the `@id`s of the approval policies that refused (none: no policy permits it)."},
                "policy_errors": {"type": "array", "items": {
                    "type": "object", "additionalProperties": false, "required": ["policy", "message"],
                    "properties": {"policy": {"type": "string"}, "message": {"type": "string"}}
                }, "description": "`policy_error`: each policy that could not be evaluated on the request, and Cedar's reason."},
                "group": {"type": "string", "description": "`forbidden` for a vote by someone removed from a group since the create: the group."},
                "approval": {"$ref": "#/components/schemas/Approval", "description": "`already_decided`, `already_voted`, `not_retryable`, `not_resolvable`: the approval as it is."}
            }
        }
    })
}
