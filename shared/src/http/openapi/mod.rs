//! The OpenAPI 3.1 document of the HTTP API, served at `GET /openapi.json` and committed as
//! `docs/openapi.json` (a test keeps the two equal). Kept by hand beside the handlers, with every
//! enumeration taken from the code that answers it: problem codes and their statuses from
//! `ApiError`, event types from `EventType`, limits from the parsers' constants.

mod delegations;
mod passkeys;
mod resume;
mod schemas;
mod sign_in;
mod stall;

use serde_json::{Map, Value, json};

use super::approvals::{CANCEL_BODY_LIMIT, DECIDE_BODY_LIMIT};
use super::claims::REPORT_BODY_LIMIT;
use super::create::CREATE_BODY_LIMIT;
use super::listing::LIST_BODY_BUDGET;
use super::operator::RESOLVE_BODY_LIMIT;
use super::pages::{DEFAULT_LIMIT, MAX_LIMIT};
use super::problem::ApiError;
use crate::domain::Approver;
use schemas::schemas;

/// An approval id: `apr_` and a ULID (Crockford base 32); lower case is read as upper.
const APPROVAL_ID_PATTERN: &str = "^apr_[0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{26}$";
/// A string with something other than white space in it, and no control characters.
const PRINTABLE_PATTERN: &str = "^[^\\u0000-\\u001f\\u007f-\\u009f]*[^\\s\\u0000-\\u001f\\u007f-\\u009f][^\\u0000-\\u001f\\u007f-\\u009f]*$";
/// An Idempotency-Key: 1–255 printable ASCII characters.
const IDEMPOTENCY_KEY_PATTERN: &str = "^[\\u0020-\\u007e]{1,255}$";

/// The whole document.
pub fn document() -> Value {
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Countersign",
            "version": env!("CARGO_PKG_VERSION"),
            "summary": "A human approval in front of an action, executed exactly once.",
            "description": "Create an approval for an action; approvers vote (API, review page or a signed webhook); once its policy is met the action is executed exactly once, and every step is in the approval's audit trail. Errors are RFC 9457 problem+json with a stable `code`.",
            "license": {"name": "Apache-2.0", "identifier": "Apache-2.0"}
        },
        "servers": [{"url": "/"}],
        "security": [{"apiKey": []}],
        "tags": [
            {"name": "approvals", "description": "Create, read, list, cancel."},
            {"name": "decisions", "description": "Votes: the JSON API and the review page."},
            {"name": "executions", "description": "The operator's hand on an execution."},
            {"name": "webhooks", "description": "Decisions from a signed webhook (Standard Webhooks)."},
            sign_in::tag(),
            passkeys::tag(),
            delegations::tag(),
            {"name": "service", "description": "Health and this document."}
        ],
        "paths": paths(),
        "components": {
            "securitySchemes": {
                "apiKey": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "An API key — a table key (`csk_…`, created with `countersign keys create`) or an `API_KEYS` key: its tenant, principal and roles (requester, approver, decider, operator, reader)."
                },
                "reviewToken": {
                    "type": "apiKey",
                    "in": "query",
                    "name": "token",
                    "description": "The signed review-link token of one approver for one approval (sent in its notification). For a tenant with `OIDC` it only names the approval: the signed-in session decides."
                },
                "session": sign_in::session_scheme(),
                "slackSignature": {
                    "type": "apiKey",
                    "in": "header",
                    "name": "x-slack-signature",
                    "description": "Slack's request signature: `v0=<hex HMAC-SHA256 of \"v0:{x-slack-request-timestamp}:{body}\">` with the tenant's Slack signing secret, the timestamp within 5 minutes."
                },
                "githubSignature": {
                    "type": "apiKey",
                    "in": "header",
                    "name": "x-hub-signature-256",
                    "description": "GitHub's webhook signature: `sha256=<hex HMAC-SHA256 of the body>` with the tenant's GitHub App's webhook secret."
                },
                "webhookSignature": {
                    "type": "apiKey",
                    "in": "header",
                    "name": "webhook-signature",
                    "description": "Standard Webhooks: `v1,<base64 HMAC-SHA256 of \"{webhook-id}.{webhook-timestamp}.{body}\">` with the source's secret, the timestamp within 5 minutes."
                }
            },
            "schemas": merged(merged(schemas(), delegations::schemas()), passkeys::schemas()),
            "parameters": parameters(),
            "headers": headers(),
        }
    })
}

fn paths() -> Value {
    let paths = merged(api_paths(), sign_in::paths());
    let paths = merged(paths, delegations::paths());
    let paths = merged(paths, passkeys::paths());
    merged(paths, resume::paths())
}

/// `more`'s entries beside `all`'s.
fn merged(mut all: Value, more: Value) -> Value {
    if let (Some(all), Value::Object(more)) = (all.as_object_mut(), more) {
        all.extend(more);
    }
    all
}

fn api_paths() -> Value {
    let approval_links = json!({
        "GetApproval": {"operationId": "getApproval", "parameters": {"id": "$response.body#/id"}},
        "ListApprovalEvents": {"operationId": "listApprovalEvents", "parameters": {"id": "$response.body#/id"}},
        "DecideApproval": {
            "operationId": "decideApproval",
            "parameters": {"id": "$response.body#/id"},
            "requestBody": {"approver": "$response.body#/approvers/0"},
            "description": "A vote of the approval's first approver (through a decider key)."
        },
        "CancelApproval": {"operationId": "cancelApproval", "parameters": {"id": "$response.body#/id"}},
        "RetryExecution": {"operationId": "retryExecution", "parameters": {"id": "$response.body#/id"}},
        "ResolveExecution": {"operationId": "resolveExecution", "parameters": {"id": "$response.body#/id"}},
        "ClaimExecution": {"operationId": "claimExecution", "parameters": {"id": "$response.body#/id"}},
    });
    json!({
        "/approvals": {
            "post": {
                "operationId": "createApproval",
                "tags": ["approvals"],
                "summary": "Create an approval (requester)",
                "description": format!("Safe to retry: the same `Idempotency-Key` with the same body answers the first response again (`idempotent-replayed: true`); with another body, 409 `idempotency_key_reused`. Bodies over {CREATE_BODY_LIMIT} bytes are refused before they are read. The tenant's approval policy (docs/POLICY.md) decides first, before anything is written: 403 `policy_forbidden` (a forbid, or no permit), 403 `policy_error` (a policy that cannot be evaluated: fail closed), 400 `policy_unsatisfiable` (a required group with too few members besides the requester); a permit with `@require(\"none\")` creates it `approved`."),
                "parameters": [{"$ref": "#/components/parameters/IdempotencyKeyRequired"}],
                "requestBody": json_body("CreateApproval", true),
                "responses": responses(
                    json!({"201": {
                        "description": "Created (or the first response again, marked `idempotent-replayed`).",
                        "headers": {
                            "Location": {"$ref": "#/components/headers/Location"},
                            "idempotent-replayed": {"$ref": "#/components/headers/IdempotentReplayed"}
                        },
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Approval"}}},
                        "links": approval_links
                    }}),
                    &[
                        "idempotency_key_missing", "idempotency_key_invalid", "invalid_request",
                        "unknown_action_type", "policy_unsatisfiable", "unauthorized", "forbidden",
                        "idempotency_key_reused", "payload_too_large", "unsupported_media_type",
                        "resume_not_enabled", "resume_in_use", "policy_forbidden", "policy_error",
                    ],
                ),
            },
            "get": {
                "operationId": "listApprovals",
                "tags": ["approvals"],
                "summary": "List the tenant's approvals, newest first (every role)",
                "description": format!("Filtered by status, approver and requester (an approver's inbox: `status=pending&approver=me`). Pages carry a signed `next_cursor`, bound to the filters. A page holds at most `limit` approvals, and fewer when they are large: it ends before the approval that would take its approvals past {LIST_BODY_BUDGET} bytes as API Gateway carries the body (Lambda returns at most 6 MB), and always holds at least one. Follow `next_cursor` until it is null: every approval is listed exactly once."),
                "parameters": [
                    {"name": "status", "in": "query", "schema": {"$ref": "#/components/schemas/ApprovalStatus"}},
                    {"name": "approver", "in": "query", "description": "Approvals listing this approver (`me`: the caller's principal).", "schema": approver_schema()},
                    {"name": "requested_by", "in": "query", "description": "Approvals this principal requested (`me`: the caller).", "schema": approver_schema()},
                    {"$ref": "#/components/parameters/Limit"},
                    {"$ref": "#/components/parameters/Cursor"}
                ],
                "responses": responses(
                    json!({"200": {
                        "description": "A page of approvals.",
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ApprovalPage"}}}
                    }}),
                    &["invalid_request", "invalid_cursor", "unauthorized"],
                ),
            }
        },
        "/approvals/{id}": {
            "parameters": [{"$ref": "#/components/parameters/ApprovalId"}],
            "get": {
                "operationId": "getApproval",
                "tags": ["approvals"],
                "summary": "Read an approval (every role); with `wait`, wait for its decision without polling",
                "description": "With `wait=N` (1–20 s) the read holds while the approval is pending (`until=executed`: or approved with its execution not yet ended) and answers as soon as that changes, or after N seconds with the approval as it is then. It reads the approval at 0, 0.2, 0.6 and 1.4 s, then once a second: at most N + 4 reads per held request. Held reads have a cap (a deployment's `HeldReadConcurrency` less `HeldReadHeadroom`, locally `HELD_READ_CONCURRENCY`): a read that would hold beyond it is answered at once with 429 `too_many_waits` and `Retry-After` (the seconds until a held read ends), never queued. A read that need not hold (the approval is no longer pending) is never refused.",
                "parameters": [
                    {"name": "wait", "in": "query", "required": false, "description": "Seconds to hold while nothing the caller waits for has happened.", "schema": {"type": "integer", "minimum": 1, "maximum": 20}},
                    {"name": "until", "in": "query", "required": false, "description": "What to wait for (with `wait`): the decision (default), or the execution's end.", "schema": {"type": "string", "enum": ["decided", "executed"]}}
                ],
                "responses": responses(
                    json!({"200": approval_response("The approval.", false)}),
                    &["invalid_request", "unauthorized", "not_found", "too_many_waits"],
                ),
            }
        },
        "/approvals/{id}/events": {
            "parameters": [{"$ref": "#/components/parameters/ApprovalId"}],
            "get": {
                "operationId": "listApprovalEvents",
                "tags": ["approvals"],
                "summary": "The approval's audit trail, oldest first (every role)",
                "parameters": [
                    {"$ref": "#/components/parameters/Limit"},
                    {"$ref": "#/components/parameters/Cursor"}
                ],
                "responses": responses(
                    json!({"200": {
                        "description": "A page of events.",
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/EventPage"}}}
                    }}),
                    &["invalid_request", "invalid_cursor", "unauthorized", "not_found"],
                ),
            }
        },
        "/approvals/{id}/cancel": {
            "parameters": [{"$ref": "#/components/parameters/ApprovalId"}],
            "post": {
                "operationId": "cancelApproval",
                "tags": ["approvals"],
                "summary": "Cancel a pending approval (its requester, or an operator)",
                "description": format!("A repeat answers 200 with `idempotent-replayed: true`. The body (at most {CANCEL_BODY_LIMIT} bytes) is optional."),
                "requestBody": json_body("CancelApproval", false),
                "responses": responses(
                    json!({"200": approval_response("Cancelled (or cancelled already: a replay).", true)}),
                    &[
                        "invalid_request", "unauthorized", "forbidden", "not_found",
                        "already_decided", "approval_expired", "payload_too_large",
                        "unsupported_media_type",
                    ],
                ),
            }
        },
        "/approvals/{id}/decision": {
            "parameters": [{"$ref": "#/components/parameters/ApprovalId"}],
            "post": {
                "operationId": "decideApproval",
                "tags": ["decisions"],
                "summary": "Vote on an approval (approver as itself, decider for a listed approver; or the review page's form)",
                "description": format!("JSON with an API key: 200 with the approval; repeating the same vote answers it again (`idempotent-replayed`). The review page's form post (`application/x-www-form-urlencoded`, authorised by its `token` field) answers 303 to the review page. For a tenant with `OIDC` the token only names the approval and the signed-in session decides: the form needs the session's cookie, its `csrf` field and an `Origin` of this origin (403 page otherwise; without a session, or one older than the tenant's `max_auth_age_seconds`, 303 to sign in). Bodies over {DECIDE_BODY_LIMIT} bytes are refused."),
                "security": [{"apiKey": []}, {}],
                "requestBody": {
                    "required": true,
                    "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/Decide"}},
                        "application/x-www-form-urlencoded": {"schema": {"$ref": "#/components/schemas/DecideForm"}}
                    }
                },
                "responses": with_html(
                    responses(
                        json!({
                            "200": approval_response("The vote is recorded (or was already: a replay).", true),
                            "303": {
                                "description": "Form post: back to the review page, whatever became of the vote (or, for a tenant with `OIDC`, to sign in first).",
                                "headers": {"Location": {"$ref": "#/components/headers/Location"}}
                            }
                        }),
                        &[
                            "invalid_request", "unauthorized", "forbidden", "not_an_approver",
                            "self_approval_forbidden", "not_found", "already_decided",
                            "already_voted", "approval_expired", "payload_too_large",
                            "unsupported_media_type", "passkey_required",
                        ],
                    ),
                    &["400", "403", "503"],
                ),
            }
        },
        "/approvals/{id}/review": {
            "parameters": [{"$ref": "#/components/parameters/ApprovalId"}],
            "get": {
                "operationId": "showReviewPage",
                "tags": ["decisions"],
                "summary": "The review page of one approver (HTML)",
                "description": "Without `OIDC` the link is the credential: the page shows its approver's buttons. For a tenant with `OIDC` the token only names the approval: the page is read-only until an approver it lists signs in (a link to `/auth/{tenant}/login`), and then decides for the signed-in session (the form carries its `csrf` token and is posted from this origin); a signed-in person it does not list gets 403.",
                "security": [{"reviewToken": []}, {"reviewToken": [], "session": []}],
                "parameters": [{"name": "token", "in": "query", "schema": {"type": "string"}}],
                "responses": {
                    "200": html("The approval, and the approver's buttons while it is pending (for a tenant with `OIDC`: once a listed approver is signed in)."),
                    "403": html("The link is not valid (wrong, expired or for another approval), or the signed-in person is not listed."),
                    "503": html("The store is not reachable; try again.")
                }
            }
        },
        "/approvals/{id}/execution/retry": {
            "parameters": [{"$ref": "#/components/parameters/ApprovalId"}],
            "post": {
                "operationId": "retryExecution",
                "tags": ["executions"],
                "summary": "Run a failed or needs_reconciliation execution again (operator)",
                "description": "With an `Idempotency-Key`, a repeat answers 202 again (`idempotent-replayed`).",
                "parameters": [{"$ref": "#/components/parameters/IdempotencyKeyOptional"}],
                "responses": responses(
                    json!({"202": approval_response("Queued again.", true)}),
                    &["idempotency_key_invalid", "unauthorized", "forbidden", "not_found", "not_retryable"],
                ),
            }
        },
        "/approvals/{id}/execution/resolve": {
            "parameters": [{"$ref": "#/components/parameters/ApprovalId"}],
            "post": {
                "operationId": "resolveExecution",
                "tags": ["executions"],
                "summary": "Record what became of a needs_reconciliation execution (operator)",
                "description": format!("Bodies over {RESOLVE_BODY_LIMIT} bytes are refused."),
                "requestBody": json_body("Resolve", true),
                "responses": responses(
                    json!({"200": approval_response("Resolved (or resolved so already: a replay).", true)}),
                    &[
                        "invalid_request", "unauthorized", "forbidden", "not_found",
                        "not_resolvable", "payload_too_large", "unsupported_media_type",
                    ],
                ),
            }
        },
        "/approvals/{id}/execution/claim": {
            "parameters": [{"$ref": "#/components/parameters/ApprovalId"}],
            "post": {
                "operationId": "claimExecution",
                "tags": ["executions"],
                "summary": "Claim an approved approval-only execution, once (its requester, or an operator)",
                "description": "`not_started → running` with `claimed_by` = the `Idempotency-Key`: a single-use capability bound to the payload the approvers saw (the answer carries it). The same key again answers 200 (`idempotent-replayed`); another key 409 `already_claimed`; an approval not approved 409 `not_approved`; a type Countersign executes 409 `not_claimable`; a passkey-only approval whose certificate is not issued yet 409 `certificate_pending` (a moment after it is approved), and its claim's answer carries the certificate. A claim not reported within `STUCK_EXECUTION_SECONDS` becomes `needs_reconciliation`.",
                "parameters": [{"$ref": "#/components/parameters/IdempotencyKeyRequired"}],
                "responses": responses(
                    json!({"200": approval_response("Claimed (or claimed by this key before: a replay).", true)}),
                    &[
                        "idempotency_key_missing", "idempotency_key_invalid", "unauthorized", "forbidden",
                        "not_found", "not_claimable", "not_approved", "already_claimed",
                        "certificate_pending",
                    ],
                ),
            }
        },
        "/approvals/{id}/execution/report": {
            "parameters": [{"$ref": "#/components/parameters/ApprovalId"}],
            "post": {
                "operationId": "reportExecution",
                "tags": ["executions"],
                "summary": "Report the outcome of a claimed execution (with the claim's Idempotency-Key)",
                "description": format!("`running` (or `needs_reconciliation`) → `succeeded | failed`. The same report again answers 200 (`idempotent-replayed`); another key 409 `already_claimed`; not claimed 409 `not_claimed`; another outcome after a report 409 `already_reported`. Bodies over {REPORT_BODY_LIMIT} bytes are refused."),
                "parameters": [{"$ref": "#/components/parameters/IdempotencyKeyRequired"}],
                "requestBody": json_body("Report", true),
                "responses": responses(
                    json!({"200": approval_response("Reported (or reported so already: a replay).", true)}),
                    &[
                        "idempotency_key_missing", "idempotency_key_invalid", "invalid_request",
                        "unauthorized", "forbidden", "not_found", "not_claimable", "not_claimed",
                        "already_claimed", "already_reported", "payload_too_large", "unsupported_media_type",
                    ],
                ),
            }
        },
        "/webhooks/{source}": {
            "post": {
                "operationId": "ingestWebhook",
                "tags": ["webhooks"],
                "summary": "A signed event from a webhook source (`WEBHOOK_SOURCES`)",
                "description": "Verified (Standard Webhooks, any of the source's secrets) before it is parsed; recorded once per `webhook-id`: a redelivery answers `duplicate` with the first outcome.",
                "security": [{"webhookSignature": []}],
                "parameters": [
                    {"name": "source", "in": "path", "required": true, "schema": {"type": "string", "minLength": 1}},
                    {"name": "webhook-id", "in": "header", "required": true, "description": "The event's id: a redelivery carries the same one.", "schema": {"type": "string", "pattern": "^[!-~]{1,256}$"}},
                    {"name": "webhook-timestamp", "in": "header", "required": true, "description": "Unix seconds.", "schema": {"type": "string", "pattern": "^[0-9]{1,19}$"}}
                ],
                "requestBody": json_body("WebhookEvent", true),
                "responses": responses(
                    json!({"200": {
                        "description": "Recorded (or a redelivery of a recorded event).",
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/WebhookReceipt"}}}
                    }}),
                    &["invalid_signature", "invalid_request", "not_found", "payload_too_large"],
                ),
            }
        },
        "/slack/interactions/{tenant}": {
            "post": {
                "operationId": "slackInteraction",
                "tags": ["webhooks"],
                "summary": "Slack's interactivity requests for a tenant's app (`SLACK`): Approve and Reject clicks",
                "description": "Verified first, on the raw body (Slack's `v0` signature with the tenant's signing secret); anything unverified is 401 and records nothing. A click on `countersign.approve` / `countersign.reject` by a Slack user mapped in `users` is a vote (channel `slack`) through the same conditional write as every channel; answered 200 once committed. A refused click records nothing and is told to the clicking user alone (an ephemeral message to the payload's `response_url`); anything else verified is acknowledged and ignored. Slack's retries (`x-slack-retry-num`) count once.",
                "security": [{"slackSignature": []}],
                "parameters": [
                    {"name": "tenant", "in": "path", "required": true, "schema": {"type": "string", "minLength": 1}},
                    {"name": "x-slack-request-timestamp", "in": "header", "required": true, "description": "Unix seconds.", "schema": {"type": "string", "pattern": "^[0-9]{1,19}$"}}
                ],
                "requestBody": {
                    "required": true,
                    "content": {"application/x-www-form-urlencoded": {"schema": {
                        "type": "object", "required": ["payload"],
                        "properties": {"payload": {"type": "string", "description": "Slack's interaction payload (JSON)."}}
                    }}}
                },
                "responses": responses(
                    json!({"200": {"description": "Verified: the vote recorded, or the click refused (told to its user), or not ours."}}),
                    &["invalid_signature", "payload_too_large"],
                ),
            }
        },
        "/github/events/{tenant}": {
            "post": {
                "operationId": "githubEvent",
                "tags": ["webhooks"],
                "summary": "A tenant's GitHub App's webhook deliveries (`GITHUB`): jobs waiting on an environment, and runs that ended",
                "description": "Verified first, on the raw body (`X-Hub-Signature-256` with the App's webhook secret); anything unverified is 401 and records nothing. Each delivery is recorded by its `X-GitHub-Delivery` in the same write as its effect, so a redelivery changes nothing (`duplicate`). `deployment_protection_rule` / `requested` opens the round of (repository, run, environment) — an approval of the built-in type `github_deployment`, with the environment's approvers and policy — or joins the round open for it (a matrix of jobs is one decision); an environment without an entry opens a round already rejected (fail closed). `workflow_run` / `completed` closes the run's open rounds and cancels their pending approvals (GitHub is told nothing). `ping` and other events: 200, nothing recorded. Answered with DynamoDB writes only; GitHub is told each round's outcome once, by a job.",
                "security": [{"githubSignature": []}],
                "parameters": [
                    {"name": "tenant", "in": "path", "required": true, "schema": {"type": "string", "minLength": 1}},
                    {"name": "x-github-event", "in": "header", "required": true, "schema": {"type": "string"}},
                    {"name": "x-github-delivery", "in": "header", "required": true, "description": "The delivery's id: the same on every redelivery.", "schema": {"type": "string", "minLength": 1, "maxLength": 100}}
                ],
                "requestBody": {
                    "required": true,
                    "content": {"application/json": {"schema": {"type": "object", "description": "GitHub's event payload."}}}
                },
                "responses": responses(
                    json!({"200": {
                        "description": "Verified: recorded with its outcome, a redelivery of one recorded, or not acted on.",
                        "content": {"application/json": {"schema": {
                            "type": "object", "required": ["status", "outcome"],
                            "properties": {
                                "status": {"enum": ["processed", "duplicate"]},
                                "outcome": {"enum": ["opened", "joined", "refused", "cancelled", "ignored"]},
                                "approval_id": {"type": "string", "description": "The round's approval (opened, joined, refused), or the first one a run's end cancelled."}
                            }
                        }}}
                    }}),
                    &["invalid_request", "invalid_signature", "not_found", "payload_too_large"],
                ),
            }
        },
        "/health": {
            "get": {
                "operationId": "health",
                "tags": ["service"],
                "summary": "200 once the tables answer",
                "security": [],
                "responses": responses(
                    json!({"200": {
                        "description": "Healthy.",
                        "content": {"application/json": {"schema": {
                            "type": "object", "required": ["status"], "additionalProperties": false,
                            "properties": {"status": {"const": "ok"}}
                        }}}
                    }}),
                    &[],
                ),
            }
        },
        "/openapi.json": {
            "get": {
                "operationId": "openapi",
                "tags": ["service"],
                "summary": "This document",
                "security": [],
                "responses": {
                    "200": {
                        "description": "The OpenAPI 3.1 document.",
                        "headers": {"x-request-id": {"$ref": "#/components/headers/RequestId"}},
                        "content": {"application/json": {"schema": {"type": "object"}}}
                    }
                }
            }
        }
    })
}

/// `success` plus one problem response per status that `codes` answer with, plus the 503 every
/// route that reads the store can answer, each listing its codes.
pub(super) fn responses(success: Value, codes: &[&str]) -> Value {
    let mut out = success.as_object().cloned().unwrap_or_default();
    let mut by_status: Vec<(u16, Vec<&str>)> = Vec::new();
    for code in codes.iter().copied().chain(["unavailable"]) {
        let status = ApiError::status_of(code);
        match by_status.iter_mut().find(|(s, _)| *s == status) {
            Some((_, list)) => list.push(code),
            None => by_status.push((status, vec![code])),
        }
    }
    by_status.sort_by_key(|(s, _)| *s);
    for (status, list) in by_status {
        let mut headers = Map::new();
        headers.insert(
            "x-request-id".into(),
            json!({"$ref": "#/components/headers/RequestId"}),
        );
        match status {
            401 if list.contains(&"unauthorized") => {
                headers.insert(
                    "WWW-Authenticate".into(),
                    json!({"$ref": "#/components/headers/WwwAuthenticate"}),
                );
            }
            429 | 503 => {
                headers.insert(
                    "Retry-After".into(),
                    json!({"$ref": "#/components/headers/RetryAfter"}),
                );
            }
            _ => {}
        }
        out.insert(
            status.to_string(),
            json!({
                "description": format!("Problem: {}.", list.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(", ")),
                "headers": headers,
                "content": {"application/problem+json": {"schema": {
                    "allOf": [{"$ref": "#/components/schemas/Problem"}],
                    "properties": {"code": {"enum": list}, "status": {"const": status}}
                }}}
            }),
        );
    }
    for response in out.values_mut() {
        if let Some(headers) = response
            .as_object_mut()
            .map(|r| r.entry("headers").or_insert_with(|| json!({})))
            .and_then(Value::as_object_mut)
        {
            headers
                .entry("x-request-id")
                .or_insert_with(|| json!({"$ref": "#/components/headers/RequestId"}));
        }
    }
    Value::Object(out)
}

/// Adds `text/html` (the review form's pages) to the responses with these statuses.
fn with_html(mut responses: Value, statuses: &[&str]) -> Value {
    for status in statuses {
        if let Some(content) = responses
            .get_mut(*status)
            .and_then(|r| r.get_mut("content"))
            .and_then(Value::as_object_mut)
        {
            content.insert("text/html".into(), json!({"schema": {"type": "string"}}));
        }
    }
    responses
}

pub(super) fn html(description: &str) -> Value {
    json!({
        "description": description,
        "headers": {"x-request-id": {"$ref": "#/components/headers/RequestId"}},
        "content": {"text/html": {"schema": {"type": "string"}}}
    })
}

fn json_body(schema: &str, required: bool) -> Value {
    json!({
        "required": required,
        "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{schema}")}}}
    })
}

pub(super) fn approval_response(description: &str, replayable: bool) -> Value {
    let mut response = json!({
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Approval"}}}
    });
    if replayable {
        response["headers"] =
            json!({"idempotent-replayed": {"$ref": "#/components/headers/IdempotentReplayed"}});
    }
    response
}

fn approver_schema() -> Value {
    json!({"type": "string", "minLength": 1, "maxLength": Approver::MAX_CHARS, "pattern": PRINTABLE_PATTERN,
        "description": "One spelling per identity: in Unicode NFKC, with no format (zero-width, word joiner, BOM, bidi control), private-use or unassigned character (400 `invalid_request` naming the field). Compared by identity: trimmed, NFKC and fully case-folded, so `Alice@Example.com` is the listed `alice@example.com` and votes as it is listed."})
}

fn nullable(schema: Value) -> Value {
    json!({"oneOf": [schema, {"type": "null"}]})
}

fn timestamp() -> Value {
    json!({"type": "string", "format": "date-time"})
}

fn parameters() -> Value {
    let key = json!({"type": "string", "minLength": 1, "maxLength": 255, "pattern": IDEMPOTENCY_KEY_PATTERN});
    json!({
        "ApprovalId": {"name": "id", "in": "path", "required": true, "schema": {"$ref": "#/components/schemas/ApprovalId"}},
        "IdempotencyKeyRequired": {"name": "Idempotency-Key", "in": "header", "required": true, "description": "The client's key for this request: a retry with the same key and body answers the first response.", "schema": key},
        "IdempotencyKeyOptional": {"name": "Idempotency-Key", "in": "header", "required": false, "schema": key},
        "Limit": {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT}},
        "Cursor": {"name": "cursor", "in": "query", "description": "The previous page's `next_cursor`.", "schema": {"type": "string"}}
    })
}

fn headers() -> Value {
    json!({
        "RequestId": {"required": true, "description": "This request's id, as logged.", "schema": {"type": "string", "pattern": "^req_[0-9A-Z]{26}$"}},
        "Location": {"required": true, "schema": {"type": "string"}},
        "IdempotentReplayed": {"description": "`true`: this answer repeats an earlier outcome; nothing new was done.", "schema": {"type": "string", "enum": ["true"]}},
        "WwwAuthenticate": {"required": true, "schema": {"type": "string", "enum": ["Bearer"]}},
        "RetryAfter": {"required": true, "description": "Seconds.", "schema": {"type": "string", "pattern": "^[0-9]+$"}}
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_problem_code_is_in_the_document_with_its_status() {
        let doc = document();
        let codes = doc["components"]["schemas"]["Problem"]["properties"]["code"]["enum"]
            .as_array()
            .unwrap()
            .clone();
        for (code, _) in ApiError::CODES {
            assert!(codes.contains(&json!(code)), "{code}");
        }
        // Every response's codes answer with the status it is documented under.
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, operation) in item.as_object().unwrap() {
                let Some(responses) = operation["responses"].as_object() else {
                    continue;
                };
                for (status, response) in responses {
                    let schema = &response["content"]["application/problem+json"]["schema"];
                    for code in schema["properties"]["code"]["enum"]
                        .as_array()
                        .into_iter()
                        .flatten()
                    {
                        let code = code.as_str().unwrap();
                        assert_eq!(
                            ApiError::status_of(code).to_string(),
                            *status,
                            "{method} {path}: {code}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn every_reference_resolves() {
        let doc = document();
        let text = doc.to_string();
        for reference in text.split("\"$ref\":\"").skip(1) {
            let target = &reference[..reference.find('"').unwrap()];
            let pointer = target.trim_start_matches('#');
            assert!(doc.pointer(pointer).is_some(), "{target}");
        }
    }
}
