//! Votes a third party can verify (docs/VERIFY.md): a passkey-only approval's certificate, the
//! key that verifies it, and the passkeys page (HTML, the decide function).

use serde_json::{Value, json};

use super::{html, responses};

pub(super) fn tag() -> Value {
    json!({"name": "passkeys", "description": "Passkey-only approvals: the certificate of an approved one, Countersign's public keys, and the approvers' passkeys page (docs/VERIFY.md)."})
}

pub(super) fn schemas() -> Value {
    let text = json!({"type": "string"});
    json!({
        "Jwk": {
            "type": "object",
            "required": ["kty", "crv", "x", "y"],
            "properties": {
                "kty": {"const": "EC"}, "crv": {"const": "P-256"}, "x": text, "y": text,
                "kid": text, "alg": {"const": "ES256"}, "use": {"const": "sig"}
            }
        },
        "Certificate": {
            "type": "object",
            "additionalProperties": false,
            "required": ["v", "approval_id", "tenant", "requested_by", "action", "payload_sha256", "policy", "votes", "decided_at", "issued_at", "signature"],
            "properties": {
                "v": {"const": 1},
                "approval_id": text,
                "tenant": text,
                "requested_by": {"type": ["string", "null"]},
                "action": {"type": "object", "required": ["type", "payload"], "properties": {"type": text, "payload": {"type": "object"}}},
                "payload_sha256": {"type": "string", "description": "Hex SHA-256 of the payload's RFC 8785 form."},
                "policy": {
                    "type": "object",
                    "required": ["version", "sha256", "rules"],
                    "properties": {
                        "version": {"type": ["integer", "null"]},
                        "sha256": {"type": ["string", "null"]},
                        "rules": {"type": "array", "items": {
                            "type": "object",
                            "required": ["name", "min_approvals", "approvers"],
                            "properties": {"name": text, "group": text, "min_approvals": {"type": "integer"}, "approvers": {"type": "array", "items": text}}
                        }}
                    }
                },
                "votes": {"type": "array", "items": {
                    "type": "object",
                    "required": ["statement", "credential_id", "authenticator_data", "client_data_json", "signature", "public_key_jwk", "identity", "iss", "sub", "registered_at"],
                    "properties": {
                        "statement": {"type": "string", "description": "The vote statement's RFC 8785 form: its SHA-256 is the assertion's challenge."},
                        "credential_id": text, "authenticator_data": text, "client_data_json": text,
                        "signature": {"type": "string", "description": "The assertion's DER ECDSA signature, base64url."},
                        "public_key_jwk": {"$ref": "#/components/schemas/Jwk"},
                        "identity": text, "iss": text, "sub": text, "registered_at": text
                    }
                }},
                "decided_at": text,
                "issued_at": text,
                "signature": {"type": "string", "description": "A compact JWS (ES256) with a detached payload (`header..signature`): the payload is the RFC 8785 form of the certificate without `signature`."}
            }
        }
    })
}

pub(super) fn paths() -> Value {
    let tenant = json!({"name": "tenant", "in": "path", "required": true, "schema": {"type": "string", "minLength": 1}});
    let page = |op: &str, summary: &str, description: &str| {
        json!({
            "operationId": op,
            "tags": ["passkeys"],
            "summary": summary,
            "description": description,
            "security": [{"session": []}],
            "responses": {
                "200": html("The passkeys page."),
                "303": {"description": "Done (back to the page), or not signed in (to sign in, and back).", "headers": {"Location": {"$ref": "#/components/headers/Location"}}},
                "400": html("A form not understood, or a registration the browser's answer does not complete."),
                "403": html("Not from this origin, an expired form, or a sign-in older than 5 minutes (to add)."),
                "404": html("No such tenant, its approvers do not sign in, or this deployment has no relying party (`PUBLIC_BASE_URL`)."),
                "409": html("The passkey is registered already, or the person has 10."),
                "413": html("A form larger than the page sends."),
                "503": html("The store is not reachable; try again.")
            }
        })
    };
    json!({
        "/approvals/{id}/certificate": {
            "parameters": [{"$ref": "#/components/parameters/ApprovalId"}],
            "get": {
                "operationId": "getCertificate",
                "tags": ["passkeys"],
                "summary": "The certificate of an approved passkey-only approval (every role)",
                "description": "Countersign's signed record of the action, the rules that required the votes, and every vote's passkey signature over its statement: what a target, an auditor or `countersign verify` checks offline. 404 `no_certificate` until the approval is approved (it is issued a moment after), or for an approval that is not passkey-only.",
                "responses": responses(
                    json!({"200": {"description": "The certificate.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Certificate"}}}}}),
                    &["unauthorized", "not_found", "no_certificate"],
                )
            }
        },
        "/.well-known/countersign/jwks.json": {
            "get": {
                "operationId": "getJwks",
                "tags": ["passkeys"],
                "summary": "Countersign's public keys (the certificate key, from KMS)",
                "description": "A JWK Set: the key whose `kid` a certificate's JWS header names. Public; cache it for 5 minutes, or pin it.",
                "security": [],
                "responses": responses(
                    json!({"200": {"description": "The keys.", "content": {"application/json": {"schema": {
                        "type": "object", "required": ["keys"],
                        "properties": {"keys": {"type": "array", "items": {"$ref": "#/components/schemas/Jwk"}}}
                    }}}}}),
                    &[],
                )
            }
        },
        "/auth/{tenant}/passkeys": {
            "parameters": [tenant],
            "get": page("showPasskeys", "The signed-in person's passkeys (HTML)", "The list, a Remove button each, and — within 5 minutes of a sign-in, below 10 — Add a passkey (WebAuthn registration, user verification required). Without a session: 303 to sign in, and back."),
            "post": page("changePasskeys", "Add or remove a passkey (HTML; a form post from this origin)", "`op=add` with the page's sealed `state` and the browser's `credential` (registration within 5 minutes of a sign-in), or `op=remove` with `credential_id`; the session's `csrf`. 303 back to the page.")
        }
    })
}
