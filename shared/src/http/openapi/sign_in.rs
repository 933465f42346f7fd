//! The sign-in routes and the approver's inbox (a tenant with `OIDC`, docs/SIGN-IN.md): HTML
//! pages and redirects for a browser, served by the decide function.

use serde_json::{Value, json};

use super::html;
use crate::session::{SESSION_COOKIE, SIGN_IN_COOKIE, SIGN_IN_SECONDS};

/// The tag of these routes.
pub(super) fn tag() -> Value {
    json!({"name": "sign-in", "description": "Approvers signing in with their organisation's identity provider (`OIDC`, docs/SIGN-IN.md), and their inbox: HTML for a browser."})
}

/// The session cookie, as a security scheme.
pub(super) fn session_scheme() -> Value {
    json!({
        "type": "apiKey",
        "in": "cookie",
        "name": SESSION_COOKIE,
        "description": "An approver's sign-in (`GET /auth/{tenant}/callback` sets it): sealed, bound to its tenant, in force for `SESSION_SECONDS`. Its forms carry its `csrf` token and are posted from this origin."
    })
}

fn tenant() -> Value {
    json!({"name": "tenant", "in": "path", "required": true, "schema": {"type": "string", "minLength": 1}})
}

fn redirect(description: &str, cookie: Option<&str>) -> Value {
    let mut headers = json!({
        "Location": {"$ref": "#/components/headers/Location"},
        "x-request-id": {"$ref": "#/components/headers/RequestId"}
    });
    if let Some(cookie) = cookie {
        headers["Set-Cookie"] = set_cookie(cookie);
    }
    json!({"description": description, "headers": headers})
}

fn set_cookie(description: &str) -> Value {
    json!({"description": description, "schema": {"type": "string"}})
}

/// An HTML page that also sets (or clears) a cookie.
fn html_with_cookie(description: &str, cookie: &str) -> Value {
    let mut page = html(description);
    page["headers"]["Set-Cookie"] = set_cookie(cookie);
    page
}

fn no_sign_in() -> Value {
    html("No such tenant, or its approvers do not sign in (no `OIDC` entry).")
}

fn unavailable() -> Value {
    html(
        "The provider could not be discovered or answered, or this deployment cannot sign in (no `PUBLIC_BASE_URL`); try again.",
    )
}

pub(super) fn paths() -> Value {
    json!({
        "/auth/{tenant}/login": {
            "parameters": [tenant()],
            "get": {
                "operationId": "signIn",
                "tags": ["sign-in"],
                "summary": "Sign in with the tenant's identity provider (HTML)",
                "description": format!("The authorization code flow with PKCE, `state` and `nonce`: 302 to the provider's authorization endpoint, with the sign-in in a sealed cookie (`{SIGN_IN_COOKIE}`, {SIGN_IN_SECONDS} s). The provider sends the person back to `/auth/{{tenant}}/callback` (register `{{PUBLIC_BASE_URL}}/auth/{{tenant}}/callback` there)."),
                "security": [],
                "parameters": [
                    {"name": "return_to", "in": "query", "required": false, "description": "Where to go once signed in: a path on this origin (`/…`, not `//…`); anything else, or none, is the tenant's inbox.", "schema": {"type": "string"}},
                    {"name": "step_up", "in": "query", "required": false, "description": "`1`: authenticate again even if the provider remembers the person (a session older than the tenant's `max_auth_age_seconds`).", "schema": {"type": "string", "enum": ["1"]}}
                ],
                "responses": {
                    "302": redirect("To the provider.", Some("The sign-in under way (state, nonce, PKCE verifier, return_to).")),
                    "404": no_sign_in(),
                    "503": unavailable()
                }
            }
        },
        "/auth/{tenant}/callback": {
            "parameters": [tenant()],
            "get": {
                "operationId": "signInCallback",
                "tags": ["sign-in"],
                "summary": "The provider's redirect back: the code exchanged, the session set (HTML)",
                "description": format!("Needs the sign-in cookie `/auth/{{tenant}}/login` set, whose `state` the query must carry. The code is exchanged (with the PKCE verifier), the ID token verified (issuer, audience, nonce, signature), and the person named by the tenant's `identity_claim` signed in: 303 to the sign-in's `return_to` with the session cookie (`{SESSION_COOKIE}`; Secure, HttpOnly, SameSite=Lax, Path=/; `SESSION_SECONDS`). A failed or tampered step answers the same page whatever failed (the reason is logged) and signs nothing in."),
                "security": [],
                "parameters": [
                    {"name": "code", "in": "query", "required": false, "schema": {"type": "string"}},
                    {"name": "state", "in": "query", "required": false, "schema": {"type": "string"}},
                    {"name": "error", "in": "query", "required": false, "description": "The provider's refusal.", "schema": {"type": "string"}}
                ],
                "responses": {
                    "303": redirect("Signed in: to where the sign-in started.", Some("The session; and the sign-in cookie cleared.")),
                    "400": html_with_cookie("No sign-in under way (no cookie, or expired), or no code.", "The sign-in cookie cleared."),
                    "403": html_with_cookie("The provider refused, the state did not match, or the ID token or identity did not hold.", "The sign-in cookie cleared."),
                    "404": no_sign_in(),
                    "503": unavailable()
                }
            }
        },
        "/auth/{tenant}/logout": {
            "parameters": [tenant()],
            "post": {
                "operationId": "signOut",
                "tags": ["sign-in"],
                "summary": "Sign out (HTML; a form post from this origin)",
                "description": "The session cookie cleared. Only from this origin's pages: the `Origin` header must be `PUBLIC_BASE_URL`'s origin.",
                "security": [],
                "responses": {
                    "200": html_with_cookie("Signed out.", "The session cookie cleared."),
                    "403": html("Not from this origin: nothing was done."),
                    "404": no_sign_in(),
                    "503": unavailable()
                }
            }
        },
        "/inbox/{tenant}": {
            "parameters": [tenant()],
            "get": {
                "operationId": "showInbox",
                "tags": ["sign-in"],
                "summary": "The signed-in approver's inbox (HTML)",
                "description": "The approvals pending on the signed-in person, newest first, in pages of 50 (the listing's approver facet, as `GET /approvals?approver=me&status=pending`); with `status`, those decided so. Each row links to its review page, where the session decides. Without a session: 303 to sign in, and back here.",
                "security": [{"session": []}],
                "parameters": [
                    {"name": "status", "in": "query", "required": false, "schema": {"$ref": "#/components/schemas/ApprovalStatus"}},
                    {"name": "cursor", "in": "query", "required": false, "description": "The page's \"Older\" link: bound to the tenant, the person and the status.", "schema": {"type": "string"}}
                ],
                "responses": {
                    "200": html("A page of the inbox."),
                    "303": redirect("Not signed in: to `/auth/{tenant}/login`, coming back here.", None),
                    "400": html("A status or cursor not understood (or given twice), or another parameter."),
                    "404": html("No such tenant, or its approvers do not sign in (no `OIDC` entry)."),
                    "503": html("The store is not reachable; try again.")
                }
            }
        }
    })
}
