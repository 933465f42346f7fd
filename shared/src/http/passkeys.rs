//! A signed-in person's passkeys (`GET`/`POST /auth/{tenant}/passkeys`): the list, a remove
//! button each, and — within 5 minutes of a sign-in — WebAuthn registration of another
//! (`webauthn-rs`; user verification required; the relying party is `PUBLIC_BASE_URL`'s host).
//! The registration's state travels sealed in the page's form, bound to the session, so the
//! function keeps nothing between the two requests.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use maud::html;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use webauthn_rs::prelude::{
    COSEKeyType, ECDSACurve, PasskeyRegistration, RegisterPublicKeyCredential, Url, Uuid,
    WebauthnBuilder,
};

use super::extract::read_body;
use super::html::{notice, page, see_other, unavailable, when};
use super::sign_in;
use crate::App;
use crate::domain::passkey::{Jwk, b64};
use crate::domain::{EpochSeconds, TenantId};
use crate::session::{Session, SessionKeys};
use crate::store::{MAX_PASSKEYS, PasskeyRecord, PasskeyRefusal};

/// How recent a sign-in must be to add a passkey: whoever holds an older session (a laptop
/// left open) must prove they are its person again before their key can sign votes.
pub const FRESH_SIGN_IN_SECONDS: EpochSeconds = 300;

const BODY_LIMIT: usize = 64 * 1024;

/// The relying party: `PUBLIC_BASE_URL`'s host (browsers refuse an IP address there) and its
/// origin.
pub(crate) fn relying_party(app: &App) -> Option<(String, String)> {
    let base = Url::parse(app.config.public_base_url.as_deref()?).ok()?;
    let host = base.domain()?.to_owned();
    Some((host, base.origin().ascii_serialization()))
}

fn keys(app: &App) -> Option<SessionKeys> {
    app.secrets()
        .decision_token_secret
        .as_ref()
        .map(SessionKeys::new)
}

/// A registration under way, sealed in the page's form.
#[derive(Serialize, Deserialize)]
struct Pending {
    /// The session it was started in (its random id).
    s: String,
    exp: EpochSeconds,
    state: PasskeyRegistration,
}

fn fresh(session: &Session, now: EpochSeconds) -> bool {
    session
        .auth_time
        .is_some_and(|at| now.saturating_sub(at) <= FRESH_SIGN_IN_SECONDS)
}

fn page_path(app: &App, tenant: &TenantId) -> String {
    format!("{}/auth/{tenant}/passkeys", sign_in::base_path(app))
}

/// A stable WebAuthn user handle for a person: no name or email in it.
fn user_handle(tenant: &TenantId, session: &Session) -> Uuid {
    let digest = Sha256::digest(format!("{tenant}#{}", session.identity.identity()));
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    Uuid::from_bytes(bytes)
}

fn webauthn(app: &App) -> Option<webauthn_rs::Webauthn> {
    let (rp_id, origin) = relying_party(app)?;
    let origin = Url::parse(&origin).ok()?;
    WebauthnBuilder::new(&rp_id, &origin)
        .ok()?
        .rp_name("Countersign")
        .build()
        .ok()
}

fn tenant_of(raw: Result<Path<String>, PathRejection>) -> Option<TenantId> {
    raw.ok().and_then(|Path(raw)| TenantId::parse(&raw).ok())
}

fn not_here() -> Response {
    notice(
        StatusCode::NOT_FOUND,
        "No passkeys",
        "Passkeys are not set up here",
        "This organisation's approvers do not sign in to Countersign, or it has no public address.",
    )
}

/// `GET /auth/{tenant}/passkeys`.
pub async fn show(
    State(app): State<Arc<App>>,
    tenant: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> Response {
    let Some(tenant) = tenant_of(tenant) else {
        return not_here();
    };
    let (Some(_), Some(webauthn), Some(keys)) =
        (sign_in::oidc_of(&app, &tenant), webauthn(&app), keys(&app))
    else {
        return not_here();
    };
    let here = page_path(&app, &tenant);
    let Some(session) = sign_in::session_of(&app, &headers, &tenant) else {
        return see_other(&sign_in::login_path(&app, &tenant, &here, false));
    };
    let passkeys = match app.store.passkeys(&tenant, &session.identity).await {
        Ok(passkeys) => passkeys,
        Err(err) => {
            tracing::error!(error = %err, "passkeys page: store");
            return unavailable();
        }
    };
    let now = app.clock.now();
    let csrf = sign_in::csrf_token(&app, &session).unwrap_or_default();
    // Registration only after a fresh sign-in, and below the cap.
    let registration = match (fresh(&session, now), passkeys.len() < MAX_PASSKEYS as usize) {
        (true, true) => {
            let exclude = passkeys
                .iter()
                .filter_map(|p| crate::domain::passkey::unb64(&p.credential_id))
                .collect();
            let started = webauthn.start_passkey_registration(
                user_handle(&tenant, &session),
                session.identity.as_str(),
                session.identity.as_str(),
                Some(exclude),
            );
            match started {
                Ok((options, state)) => {
                    let pending = Pending {
                        s: session.nonce.clone(),
                        exp: now + FRESH_SIGN_IN_SECONDS,
                        state,
                    };
                    Some((
                        serde_json::to_string(&options).unwrap_or_default(),
                        keys.seal_passkey(&pending),
                    ))
                }
                Err(error) => {
                    tracing::error!(%error, "passkeys page: no registration options");
                    None
                }
            }
        }
        _ => None,
    };
    let again = sign_in::login_path(&app, &tenant, &here, true);
    page(
        StatusCode::OK,
        "Passkeys",
        html! {
            nav { a href=(sign_in::inbox_path(&app, &tenant)) { "Inbox" } span.who.muted { "Signed in as " strong { (session.identity.as_str()) } } }
            div.card #passkeys {
                h1 { "Your passkeys" }
                p.muted { "A passkey-only request takes your vote as a passkey signature over the exact action: the certificate anyone can check carries it." }
                @if passkeys.is_empty() { p #none { "You have no passkey yet." } }
                @for passkey in &passkeys {
                    form.passkey method="post" action=(here) {
                        input type="hidden" name="csrf" value=(csrf);
                        input type="hidden" name="op" value="remove";
                        input type="hidden" name="credential_id" value=(passkey.credential_id);
                        p { code { (passkey.credential_id) } br; span.muted { "Added " (when(passkey.registered_at)) } }
                        button.quiet type="submit" { "Remove" }
                    }
                }
            }
            div.card #add {
                h2 { "Add a passkey" }
                @match &registration {
                    Some((options, sealed)) => {
                        form #register method="post" action=(here) data-passkey="register" data-options=(options) {
                            input type="hidden" name="csrf" value=(csrf);
                            input type="hidden" name="op" value="add";
                            input type="hidden" name="state" value=(sealed);
                            input type="hidden" name="credential" value="";
                            p.passkey-status.muted {}
                            div.actions { button #passkey-add type="button" { "Add a passkey" } }
                        }
                    }
                    None if passkeys.len() >= MAX_PASSKEYS as usize => {
                        p.muted { "You have " (MAX_PASSKEYS) " passkeys, the most one person may: remove one to add another." }
                    }
                    None => {
                        p.muted { "Adding a passkey needs a sign-in within the last 5 minutes." }
                        div.actions { a.button #sign-in href=(again) { "Sign in again to add a passkey" } }
                    }
                }
            }
        },
    )
}

/// `POST /auth/{tenant}/passkeys`: add (`op=add`, the sealed `state` and the browser's
/// `credential`) or remove (`op=remove`, `credential_id`); 303 back to the page.
pub async fn post(
    State(app): State<Arc<App>>,
    tenant: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let Some(tenant) = tenant_of(tenant) else {
        return not_here();
    };
    let (Some(_), Some(webauthn), Some(keys)) =
        (sign_in::oidc_of(&app, &tenant), webauthn(&app), keys(&app))
    else {
        return not_here();
    };
    let Ok(body) = read_body(body, &headers, BODY_LIMIT).await else {
        return refused(
            StatusCode::PAYLOAD_TOO_LARGE,
            "That form is larger than this page sends.",
        );
    };
    if !sign_in::same_origin(&app, &headers) {
        return refused(
            StatusCode::FORBIDDEN,
            "That form did not come from this site.",
        );
    }
    let here = page_path(&app, &tenant);
    let Some(session) = sign_in::session_of(&app, &headers, &tenant) else {
        return see_other(&sign_in::login_path(&app, &tenant, &here, false));
    };
    let fields: Vec<(String, String)> = url::form_urlencoded::parse(&body).into_owned().collect();
    let field = |name: &str| {
        fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    };
    if !sign_in::csrf_holds(&app, &session, field("csrf")) {
        return refused(
            StatusCode::FORBIDDEN,
            "That form has expired: open the page again.",
        );
    }
    let now = app.clock.now();
    match field("op") {
        Some("remove") => {
            let id = field("credential_id").unwrap_or_default();
            match app
                .store
                .remove_passkey(&tenant, &session.identity, id)
                .await
            {
                Ok(_) => see_other(&here),
                Err(err) => {
                    tracing::error!(error = %err, "passkeys: remove");
                    unavailable()
                }
            }
        }
        Some("add") => {
            if !fresh(&session, now) {
                return refused(
                    StatusCode::FORBIDDEN,
                    "Adding a passkey needs a sign-in within the last 5 minutes: sign in again.",
                );
            }
            let pending = field("state")
                .and_then(|sealed| keys.open_passkey::<Pending>(sealed).ok())
                .filter(|p| p.s == session.nonce && now <= p.exp);
            let Some(pending) = pending else {
                return refused(
                    StatusCode::FORBIDDEN,
                    "That registration has expired: open the page again.",
                );
            };
            let Some(credential) = field("credential")
                .and_then(|c| serde_json::from_str::<RegisterPublicKeyCredential>(c).ok())
            else {
                return refused(
                    StatusCode::BAD_REQUEST,
                    "The browser's answer was not understood.",
                );
            };
            let passkey = match webauthn.finish_passkey_registration(&credential, &pending.state) {
                Ok(passkey) => passkey,
                Err(error) => {
                    tracing::warn!(%error, "passkeys: registration refused");
                    return refused(
                        StatusCode::BAD_REQUEST,
                        &format!("The passkey was refused ({error})."),
                    );
                }
            };
            let COSEKeyType::EC_EC2(key) = &passkey.get_public_key().key else {
                return refused(
                    StatusCode::BAD_REQUEST,
                    "Only P-256 (ES256) passkeys sign votes.",
                );
            };
            let Some(public_key) = (key.curve == ECDSACurve::SECP256R1)
                .then(|| Jwk::p256(&key.x, &key.y))
                .flatten()
            else {
                return refused(
                    StatusCode::BAD_REQUEST,
                    "Only P-256 (ES256) passkeys sign votes.",
                );
            };
            if passkey.cred_id().len() > crate::domain::passkey::MAX_CREDENTIAL_ID_BYTES {
                return refused(
                    StatusCode::BAD_REQUEST,
                    "This passkey's id is longer than Countersign keeps (256 bytes).",
                );
            }
            let record = PasskeyRecord {
                tenant: tenant.clone(),
                identity: session.identity.clone(),
                credential_id: b64(passkey.cred_id().as_ref()),
                public_key,
                iss: session.issuer.clone(),
                sub: session.sub.clone(),
                registered_at: now,
            };
            match app.store.add_passkey(&record).await {
                Ok(()) => see_other(&here),
                Err(PasskeyRefusal::Store(err)) => {
                    tracing::error!(error = %err, "passkeys: add");
                    unavailable()
                }
                Err(refusal) => refused(StatusCode::CONFLICT, &refusal.to_string()),
            }
        }
        _ => refused(StatusCode::BAD_REQUEST, "That form was not understood."),
    }
}

fn refused(status: StatusCode, why: &str) -> Response {
    notice(status, "Not recorded", "No passkey was changed", why)
}
