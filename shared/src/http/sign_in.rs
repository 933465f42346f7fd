//! Approvers sign in with their organisation's identity provider (`OIDC`, docs/SIGN-IN.md):
//! `GET /auth/{tenant}/login` sends them to it (authorization code flow with PKCE, `state` and
//! `nonce`, kept in a short-lived cookie), `GET /auth/{tenant}/callback` takes them back with a
//! session cookie, `POST /auth/{tenant}/logout` ends it. The session is the cookie: nothing is
//! stored, so deciding after sign-in costs what a review-page vote costs.

use std::sync::Arc;

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use base64::Engine;
use maud::html;
use rand::Rng;
use subtle::ConstantTimeEq;

use super::html::{notice, page, redirect, see_other, unavailable};
use crate::App;
use crate::config::OidcTenant;
use crate::domain::{Approver, EpochSeconds, SignIn, TenantId};
use crate::session::{
    SESSION_COOKIE, SIGN_IN_SECONDS, Session, SessionKeys, SignInState, return_to, set_cookie,
    sign_in_cookie,
};

/// The path of this deployment's root on its origin: `PUBLIC_BASE_URL`'s path (an API stage's
/// prefix, or nothing).
pub(super) fn base_path(app: &App) -> String {
    app.config
        .public_base_url
        .as_deref()
        .and_then(|base| url::Url::parse(base).ok())
        .map(|url| url.path().trim_end_matches('/').to_owned())
        .unwrap_or_default()
}

/// `PUBLIC_BASE_URL`'s origin: where every form of these pages must be posted from.
fn public_origin(app: &App) -> Option<String> {
    let base = url::Url::parse(app.config.public_base_url.as_deref()?).ok()?;
    Some(base.origin().ascii_serialization())
}

/// Whether a form post comes from this origin (its `Origin` header, which a browser sends with
/// every POST and a page of another site cannot forge).
pub(super) fn same_origin(app: &App, headers: &HeaderMap) -> bool {
    let origin = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok());
    matches!((origin, public_origin(app)), (Some(sent), Some(ours)) if sent == ours)
}

/// `tenant`'s sign-in, if its approvers sign in.
pub(super) fn oidc_of(app: &App, tenant: &TenantId) -> Option<OidcTenant> {
    app.secrets().oidc.get(tenant).cloned()
}

/// Where a form of `tenant`'s pages may lead to sign in (its `form-action`): the provider's
/// authorization endpoint's origin once discovered (Cognito's is not its issuer's), else the
/// issuer's. A post without a session is sent there through the login route, and browsers check
/// `form-action` on each redirect.
pub(super) fn provider_origin(app: &App, tenant: &TenantId, oidc: &OidcTenant) -> Option<String> {
    if let Some(origin) = app
        .relying_parties
        .discovered(tenant, &oidc.settings)
        .and_then(|party| party.authorization_origin())
    {
        return Some(origin);
    }
    let url = url::Url::parse(&oidc.settings.issuer).ok()?;
    Some(url.origin().ascii_serialization())
}

fn keys(app: &App) -> Option<SessionKeys> {
    app.secrets()
        .decision_token_secret
        .as_ref()
        .map(SessionKeys::new)
}

/// The value of cookie `name` in the request's `Cookie` headers.
fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, value)| value)
}

/// The request's session for `tenant`, if it carries one in force (signed by a key of the
/// keyring, this tenant's, not expired).
pub(super) fn session_of(app: &App, headers: &HeaderMap, tenant: &TenantId) -> Option<Session> {
    let cookie = cookie(headers, SESSION_COOKIE)?;
    let keys = keys(app)?;
    match keys.open_session(cookie, tenant, app.clock.now()) {
        Ok(session) => Some(session),
        Err(crate::session::SessionError::BadSignature) => {
            // Perhaps sealed with a rotated key this function has not read yet.
            app.secret_failed();
            None
        }
        Err(_) => None,
    }
}

/// The CSRF token of `session`'s forms.
pub(super) fn csrf_token(app: &App, session: &Session) -> Option<String> {
    Some(keys(app)?.csrf_token(session))
}

/// Whether `token` is `session`'s CSRF token.
pub(super) fn csrf_holds(app: &App, session: &Session, token: Option<&str>) -> bool {
    match (keys(app), token) {
        (Some(keys), Some(token)) => keys.csrf_holds(session, token),
        _ => false,
    }
}

/// Whether an authentication at `auth_time` is recent enough to decide (`max_auth_age_seconds`).
pub(super) fn fresh_enough(
    oidc: &OidcTenant,
    auth_time: Option<EpochSeconds>,
    now: EpochSeconds,
) -> bool {
    match oidc.max_auth_age_seconds {
        None => true,
        Some(max) => auth_time
            .is_some_and(|at| now.saturating_sub(at) <= i64::try_from(max).unwrap_or(i64::MAX)),
    }
}

/// What a vote cast in `session` records of the person.
pub(super) fn sign_in_of(session: &Session) -> SignIn {
    SignIn {
        issuer: session.issuer.clone(),
        sub: session.sub.clone(),
        auth_time: session.auth_time,
    }
}

/// Where to sign in to `tenant` and come back to `back_to` (a path on this origin);
/// `step_up`: authenticate again even if the provider remembers the person.
pub(super) fn login_path(app: &App, tenant: &TenantId, back_to: &str, step_up: bool) -> String {
    let query = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("return_to", back_to)
        .extend_pairs(step_up.then_some(("step_up", "1")))
        .finish();
    format!("{}/auth/{tenant}/login?{query}", base_path(app))
}

/// The inbox's path: where a sign-in with nowhere else to go lands.
pub(super) fn inbox_path(app: &App, tenant: &TenantId) -> String {
    format!("{}/inbox/{tenant}", base_path(app))
}

fn redirect_uri(app: &App, tenant: &TenantId) -> Option<String> {
    let base = app.config.public_base_url.as_deref()?;
    Some(format!("{base}/auth/{tenant}/callback"))
}

fn query_param(query: Option<&str>, name: &str) -> Option<String> {
    url::form_urlencoded::parse(query?.as_bytes())
        .find(|(n, _)| n == name)
        .map(|(_, value)| value.into_owned())
}

fn with_cookie(mut response: Response, value: &str) -> Response {
    if let Ok(value) = HeaderValue::from_str(value) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    response
}

fn no_sign_in() -> Response {
    notice(
        StatusCode::NOT_FOUND,
        "No sign-in",
        "Sign-in is not set up here",
        "This organisation's approvers do not sign in to Countersign.",
    )
}

/// A failed or tampered sign-in: the same page whatever failed (the reason is logged); the
/// sign-in's cookie (`cookie_name`, when known) is cleared.
fn failed(status: StatusCode, reason: &str, cookie_name: Option<&str>) -> Response {
    tracing::warn!(reason, "sign-in refused");
    let response = notice(
        status,
        "Sign-in failed",
        "Sign-in did not complete",
        "Nothing was signed in. Go back to the link you followed and sign in again.",
    );
    match cookie_name {
        Some(name) => with_cookie(response, &set_cookie(name, "", 0)),
        None => response,
    }
}

/// The signing-in tenant named by the path, with its sign-in configuration and this
/// deployment's redirect URI for it.
fn signing_in_tenant(
    app: &App,
    tenant: Result<Path<String>, PathRejection>,
) -> Result<(TenantId, OidcTenant, String, SessionKeys), Box<Response>> {
    let tenant = tenant
        .ok()
        .and_then(|Path(raw)| TenantId::parse(&raw).ok())
        .ok_or_else(|| Box::new(no_sign_in()))?;
    let oidc = oidc_of(app, &tenant).ok_or_else(|| Box::new(no_sign_in()))?;
    let (Some(redirect_uri), Some(keys)) = (redirect_uri(app, &tenant), keys(app)) else {
        return Err(Box::new(unavailable()));
    };
    Ok((tenant, oidc, redirect_uri, keys))
}

/// `GET /auth/{tenant}/login?return_to=…[&step_up=1]`: 302 to the provider.
pub async fn login(
    State(app): State<Arc<App>>,
    tenant: Result<Path<String>, PathRejection>,
    RawQuery(query): RawQuery,
) -> Response {
    let (tenant, oidc, redirect_uri, keys) = match signing_in_tenant(&app, tenant) {
        Ok(found) => found,
        Err(response) => return *response,
    };
    let party = match app.relying_parties.of(&tenant, &oidc.settings).await {
        Ok(party) => party,
        Err(error) => {
            tracing::error!(%error, %tenant, "sign-in: the provider could not be discovered");
            return unavailable();
        }
    };
    let fallback = inbox_path(&app, &tenant);
    let requested = query_param(query.as_deref(), "return_to");
    let back_to = return_to(requested.as_deref(), &fallback).to_owned();
    let step_up = query_param(query.as_deref(), "step_up").as_deref() == Some("1");
    let authorization = match party.authorization(&redirect_uri, oidc.max_auth_age_seconds, step_up)
    {
        Ok(authorization) => authorization,
        Err(error) => {
            tracing::error!(%error, %tenant, "sign-in: no authorization request");
            return unavailable();
        }
    };
    let sign_in = SignInState {
        tenant,
        state: authorization.state,
        nonce: authorization.nonce,
        pkce_verifier: authorization.pkce_verifier,
        return_to: back_to,
        expires_at: app.clock.now() + SIGN_IN_SECONDS,
    };
    // One per tenant: a sign-in started again replaces the one under way.
    let name = sign_in_cookie(&sign_in.tenant);
    let cookie = set_cookie(&name, &keys.seal_sign_in(&sign_in), SIGN_IN_SECONDS);
    with_cookie(
        redirect(StatusCode::FOUND, authorization.url.as_str()),
        &cookie,
    )
}

/// `GET /auth/{tenant}/callback?code=…&state=…`: the code exchanged, the ID token verified,
/// the session set, 303 to where the sign-in started.
pub async fn callback(
    State(app): State<Arc<App>>,
    tenant: Result<Path<String>, PathRejection>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    let (tenant, oidc, redirect_uri, keys) = match signing_in_tenant(&app, tenant) {
        Ok(found) => found,
        Err(response) => return *response,
    };
    let now = app.clock.now();
    let state = query_param(query.as_deref(), "state").unwrap_or_default();
    let cookie_name = sign_in_cookie(&tenant);
    let name = Some(cookie_name.as_str());
    let Some(sign_in) = cookie(&headers, &cookie_name)
        .and_then(|cookie| keys.open_sign_in(cookie, &tenant, now).ok())
    else {
        return failed(StatusCode::BAD_REQUEST, "no sign-in under way", name);
    };
    if !bool::from(state.as_bytes().ct_eq(sign_in.state.as_bytes())) {
        // Another sign-in's (a newer one replaced this one's cookie, or the state is forged):
        // that cookie is left for its own callback.
        return failed(StatusCode::FORBIDDEN, "state mismatch", None);
    }
    if let Some(error) = query_param(query.as_deref(), "error") {
        return failed(
            StatusCode::FORBIDDEN,
            &format!("the provider said {error}"),
            name,
        );
    }
    let Some(code) = query_param(query.as_deref(), "code") else {
        return failed(StatusCode::BAD_REQUEST, "no code", name);
    };
    let party = match app.relying_parties.of(&tenant, &oidc.settings).await {
        Ok(party) => party,
        Err(error) => {
            tracing::error!(%error, %tenant, "sign-in: the provider could not be discovered");
            return unavailable();
        }
    };
    let signed_in = match party
        .sign_in(&redirect_uri, &code, &sign_in.pkce_verifier, &sign_in.nonce)
        .await
    {
        Ok(signed_in) => signed_in,
        Err(error) => return failed(StatusCode::FORBIDDEN, &error.to_string(), name),
    };
    let Ok(identity) = Approver::parse(&signed_in.identity) else {
        return failed(
            StatusCode::FORBIDDEN,
            "the identity is not an approver's",
            name,
        );
    };
    if signed_in.subject.len() > SignIn::MAX_SUB_BYTES
        || signed_in.issuer.len() > SignIn::MAX_ISSUER_BYTES
    {
        return failed(
            StatusCode::FORBIDDEN,
            "sub or iss longer than 128 bytes",
            name,
        );
    }
    // Asked with `max_age`, a provider must state `auth_time` and authenticate again when it is
    // older: one that does neither would send the person round "sign in again" for ever.
    if oidc.max_auth_age_seconds.is_some() && !fresh_enough(&oidc, signed_in.auth_time, now) {
        return failed(
            StatusCode::FORBIDDEN,
            "the provider stated no auth_time within max_auth_age_seconds",
            name,
        );
    }
    let session = Session {
        tenant,
        identity,
        issuer: signed_in.issuer,
        sub: signed_in.subject,
        auth_time: signed_in.auth_time,
        expires_at: now + app.config.session_seconds,
        nonce: base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(rand::rng().random::<[u8; 16]>()),
    };
    tracing::info!(tenant = %session.tenant, sub = %session.sub, "signed in");
    let response = see_other(&sign_in.return_to);
    let response = with_cookie(
        response,
        &set_cookie(
            SESSION_COOKIE,
            &keys.seal_session(&session),
            app.config.session_seconds,
        ),
    );
    with_cookie(response, &set_cookie(&cookie_name, "", 0))
}

/// `POST /auth/{tenant}/logout`: the session cookie cleared (from this origin's pages only).
pub async fn logout(
    State(app): State<Arc<App>>,
    tenant: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
) -> Response {
    let (tenant, _, _, _) = match signing_in_tenant(&app, tenant) {
        Ok(found) => found,
        Err(response) => return *response,
    };
    if !same_origin(&app, &headers) {
        return notice(
            StatusCode::FORBIDDEN,
            "Not signed out",
            "Not signed out",
            "Sign out from Countersign's own pages.",
        );
    }
    let sign_in = login_path(&app, &tenant, &inbox_path(&app, &tenant), false);
    let response = page(
        StatusCode::OK,
        "Signed out",
        html! { div.card { h1 { "You are signed out" } p { a href=(sign_in) { "Sign in again" } } } },
    );
    with_cookie(response, &set_cookie(SESSION_COOKIE, "", 0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oidc::OidcSettings;
    use crate::session::SIGN_IN_COOKIE;

    fn oidc(max_auth_age_seconds: Option<u64>) -> OidcTenant {
        OidcTenant {
            settings: OidcSettings {
                issuer: "https://idp.example.com".to_owned(),
                client_id: "c".to_owned(),
                client_secret: "a-client-secret".to_owned(),
                identity_claim: "email".to_owned(),
                scopes: vec!["openid".to_owned()],
            },
            max_auth_age_seconds,
        }
    }

    #[test]
    fn a_cookie_is_found_by_its_exact_name_in_any_cookie_header() {
        let mut headers = HeaderMap::new();
        headers.append(
            header::COOKIE,
            HeaderValue::from_static("a=1; x__Host-countersign-session=forged"),
        );
        headers.append(
            header::COOKIE,
            HeaderValue::from_static("b=2;__Host-countersign-session=v.p.m"),
        );
        assert_eq!(cookie(&headers, SESSION_COOKIE), Some("v.p.m"));
        assert_eq!(cookie(&headers, "a"), Some("1"));
        assert_eq!(cookie(&headers, SIGN_IN_COOKIE), None);
    }

    #[test]
    fn deciding_needs_an_authentication_no_older_than_max_auth_age() {
        assert!(fresh_enough(&oidc(None), None, 5_000), "no limit");
        let limited = oidc(Some(300));
        assert!(fresh_enough(&limited, Some(4_700), 5_000));
        assert!(!fresh_enough(&limited, Some(4_699), 5_000));
        assert!(
            !fresh_enough(&limited, None, 5_000),
            "an unknown auth_time is old"
        );
    }
}
