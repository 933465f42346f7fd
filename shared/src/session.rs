//! Approvers' sessions after sign-in (issue 47's groundwork; not yet served by a route): the
//! session is the cookie — no session store, so a vote after sign-in costs what a review-page
//! vote costs — signed with keys derived from `DECISION_TOKEN_SECRET`'s (each with its key id
//! inside, so a rotation signs nobody out early). Also the short-lived cookie that carries a
//! sign-in's `state`, `nonce` and PKCE verifier from the login to the callback, the CSRF token a
//! form carries (bound to its session), and the one rule for `return_to`.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::domain::{Approver, EpochSeconds, TenantId};
use crate::review_token::TokenSecret;

/// The session cookie's name: `__Host-` (Secure, no Domain, Path=/), so no other origin or path
/// can set it.
pub const SESSION_COOKIE: &str = "__Host-countersign-session";
/// The sign-in cookies' name (from the login to the callback): a tenant's is this, a dash and
/// the tenant ([`sign_in_cookie`]). One per tenant: a sign-in started again (another tab, a
/// retry) replaces the one under way, so a browser never piles up cookies past what a request
/// header may carry (API Gateway's 10 KB).
pub const SIGN_IN_COOKIE: &str = "__Host-countersign-sign-in";
/// The longest `return_to` kept (a sign-in cookie must stay well under a browser's 4 KB).
pub const MAX_RETURN_TO_BYTES: usize = 2048;
/// How long a sign-in may take at the provider.
pub const SIGN_IN_SECONDS: i64 = 600;

/// A signed-in approver: who, vouched for by which provider, until when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    #[serde(rename = "t")]
    pub tenant: TenantId,
    /// The identity claim's value, spelled as an approver.
    #[serde(rename = "i")]
    pub identity: Approver,
    #[serde(rename = "iss")]
    pub issuer: String,
    pub sub: String,
    /// When the person last authenticated at the provider (`max_auth_age_seconds` counts from
    /// it).
    #[serde(rename = "at", skip_serializing_if = "Option::is_none", default)]
    pub auth_time: Option<EpochSeconds>,
    #[serde(rename = "exp")]
    pub expires_at: EpochSeconds,
    /// A random id of this session: what its CSRF token is bound to.
    #[serde(rename = "n")]
    pub nonce: String,
}

/// A sign-in under way, from the login to the callback.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignInState {
    #[serde(rename = "t")]
    pub tenant: TenantId,
    pub state: String,
    pub nonce: String,
    #[serde(rename = "v")]
    pub pkce_verifier: String,
    #[serde(rename = "r")]
    pub return_to: String,
    #[serde(rename = "exp")]
    pub expires_at: EpochSeconds,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    #[error("the cookie is malformed")]
    Malformed,
    #[error("the cookie does not verify")]
    BadSignature,
    #[error("the cookie has expired")]
    Expired,
    #[error("the cookie is another tenant's")]
    OtherTenant,
}

/// The keys of sessions, sign-ins and CSRF tokens: each derived per purpose from every
/// `DECISION_TOKEN_SECRET` key, by key id (the first signs).
#[derive(Clone)]
pub struct SessionKeys {
    sessions: Vec<(String, Vec<u8>)>,
    sign_ins: Vec<(String, Vec<u8>)>,
    csrf: Vec<(String, Vec<u8>)>,
    passkeys: Vec<(String, Vec<u8>)>,
}

impl std::fmt::Debug for SessionKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionKeys(…)")
    }
}

fn tag(key: &[u8], payload: &str) -> Hmac<Sha256> {
    let mut mac =
        <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC takes keys of any length");
    mac.update(payload.as_bytes());
    mac
}

/// How long a passkey vote's nonce is valid: the page's statement must be signed within it.
pub const VOTE_NONCE_SECONDS: EpochSeconds = 300;

/// `{key id}.{base64url(json)}.{base64url(mac)}`, signed with the first key.
fn seal<T: Serialize>(keys: &[(String, Vec<u8>)], value: &T) -> String {
    let (id, key) = &keys[0];
    let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(value).unwrap_or_default());
    let mac = tag(key, &payload).finalize().into_bytes();
    format!("{id}.{payload}.{}", URL_SAFE_NO_PAD.encode(mac))
}

/// The value sealed in `cookie`, if a listed key's MAC verifies (compared in constant time).
fn open<T: for<'de> Deserialize<'de>>(
    keys: &[(String, Vec<u8>)],
    cookie: &str,
) -> Result<T, SessionError> {
    let [id, payload, mac] = cookie.split('.').collect::<Vec<_>>()[..] else {
        return Err(SessionError::Malformed);
    };
    let mac = URL_SAFE_NO_PAD
        .decode(mac)
        .map_err(|_| SessionError::Malformed)?;
    let verified = keys
        .iter()
        .filter(|(key_id, _)| key_id == id)
        .any(|(_, key)| tag(key, payload).verify_slice(&mac).is_ok());
    if !verified {
        return Err(SessionError::BadSignature);
    }
    let json = URL_SAFE_NO_PAD
        .decode(payload)
        .map_err(|_| SessionError::Malformed)?;
    serde_json::from_slice(&json).map_err(|_| SessionError::Malformed)
}

/// An opened cookie counts for its own tenant (`ours`) until its expiry.
fn in_force(ours: bool, expires_at: EpochSeconds, now: EpochSeconds) -> Result<(), SessionError> {
    if !ours {
        return Err(SessionError::OtherTenant);
    }
    if now >= expires_at {
        return Err(SessionError::Expired);
    }
    Ok(())
}

impl SessionKeys {
    pub fn new(secret: &TokenSecret) -> Self {
        Self {
            sessions: secret.derive("countersign session v1"),
            sign_ins: secret.derive("countersign sign-in v1"),
            csrf: secret.derive("countersign csrf v1"),
            passkeys: secret.derive("countersign passkey v1"),
        }
    }

    /// The session cookie's value.
    pub fn seal_session(&self, session: &Session) -> String {
        seal(&self.sessions, session)
    }

    /// The session `cookie` carries, valid at `now` for `tenant` only.
    pub fn open_session(
        &self,
        cookie: &str,
        tenant: &TenantId,
        now: EpochSeconds,
    ) -> Result<Session, SessionError> {
        let session: Session = open(&self.sessions, cookie)?;
        in_force(session.tenant == *tenant, session.expires_at, now)?;
        Ok(session)
    }

    /// The sign-in cookie's value.
    pub fn seal_sign_in(&self, sign_in: &SignInState) -> String {
        seal(&self.sign_ins, sign_in)
    }

    /// The sign-in `cookie` carries, for `tenant`, not past its time.
    pub fn open_sign_in(
        &self,
        cookie: &str,
        tenant: &TenantId,
        now: EpochSeconds,
    ) -> Result<SignInState, SessionError> {
        let sign_in: SignInState = open(&self.sign_ins, cookie)?;
        in_force(sign_in.tenant == *tenant, sign_in.expires_at, now)?;
        Ok(sign_in)
    }

    /// The CSRF token of `session`'s forms (signed with the first key).
    pub fn csrf_token(&self, session: &Session) -> String {
        let (id, key) = &self.csrf[0];
        let mac = tag(key, &session.nonce).finalize().into_bytes();
        format!("{id}.{}", URL_SAFE_NO_PAD.encode(mac))
    }

    /// A passkey vote's nonce: bound to `session` and to `binding` (the approval and what the
    /// page read of its action), valid [`VOTE_NONCE_SECONDS`] from `now`:
    /// `{key id}.{expiry}.{random}.{mac}`.
    pub fn vote_nonce(&self, session: &Session, binding: &str, now: EpochSeconds) -> String {
        let (id, key) = &self.passkeys[0];
        let expiry = now + VOTE_NONCE_SECONDS;
        let random = URL_SAFE_NO_PAD.encode(rand::random::<[u8; 12]>());
        let mac = tag(
            key,
            &format!("{}|{binding}|{expiry}|{random}", session.nonce),
        )
        .finalize()
        .into_bytes();
        format!(
            "{id}.{expiry}.{random}.{}",
            URL_SAFE_NO_PAD.encode(&mac[..16])
        )
    }

    /// Whether `nonce` is one of `session`'s for `binding`, still valid at `now` (its MAC in
    /// constant time).
    pub fn vote_nonce_holds(
        &self,
        session: &Session,
        binding: &str,
        nonce: &str,
        now: EpochSeconds,
    ) -> bool {
        let [id, expiry, random, mac] = nonce.split('.').collect::<Vec<_>>()[..] else {
            return false;
        };
        let (Ok(at), Ok(mac)) = (expiry.parse::<EpochSeconds>(), URL_SAFE_NO_PAD.decode(mac))
        else {
            return false;
        };
        if now > at || at > now + VOTE_NONCE_SECONDS || mac.len() != 16 {
            return false;
        }
        self.passkeys
            .iter()
            .filter(|(key_id, _)| key_id == id)
            .any(|(_, key)| {
                tag(
                    key,
                    &format!("{}|{binding}|{expiry}|{random}", session.nonce),
                )
                .verify_truncated_left(&mac)
                .is_ok()
            })
    }

    /// A passkey page's state (a registration under way), sealed for its form.
    pub fn seal_passkey<T: Serialize>(&self, value: &T) -> String {
        seal(&self.passkeys, value)
    }

    pub fn open_passkey<T: for<'de> Deserialize<'de>>(
        &self,
        sealed: &str,
    ) -> Result<T, SessionError> {
        open(&self.passkeys, sealed)
    }

    /// Whether `token` is `session`'s CSRF token (in constant time).
    pub fn csrf_holds(&self, session: &Session, token: &str) -> bool {
        let Some((id, mac)) = token.split_once('.') else {
            return false;
        };
        let Ok(mac) = URL_SAFE_NO_PAD.decode(mac) else {
            return false;
        };
        self.csrf
            .iter()
            .filter(|(key_id, _)| key_id == id)
            .any(|(_, key)| tag(key, &session.nonce).verify_slice(&mac).is_ok())
    }
}

/// The name of the cookie of a sign-in to `tenant` (a tenant id's characters are a cookie
/// name's).
pub fn sign_in_cookie(tenant: &TenantId) -> String {
    format!("{SIGN_IN_COOKIE}-{tenant}")
}

/// Where a sign-in may send the person back: a path on this origin (`/…`, not `//…` nor `/\…`,
/// printable ASCII, at most [`MAX_RETURN_TO_BYTES`]), else `fallback` (the inbox).
pub fn return_to<'a>(requested: Option<&'a str>, fallback: &'a str) -> &'a str {
    match requested {
        Some(path)
            if path.starts_with('/')
                && !path.starts_with("//")
                && path.len() <= MAX_RETURN_TO_BYTES
                && path.bytes().all(|b| b.is_ascii_graphic() && b != b'\\') =>
        {
            path
        }
        _ => fallback,
    }
}

/// A `Set-Cookie` value: `__Host-` cookies are `Secure`, `Path=/`, without `Domain`; `HttpOnly`
/// and `SameSite=Lax` (sent on the top-level navigation back from the provider).
pub fn set_cookie(name: &str, value: &str, max_age_seconds: i64) -> String {
    format!("{name}={value}; Secure; HttpOnly; SameSite=Lax; Path=/; Max-Age={max_age_seconds}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(secret: &str) -> SessionKeys {
        SessionKeys::new(&TokenSecret::parse(secret).unwrap())
    }

    const ONE: &str = "a-session-secret-of-at-least-32-bytes!";
    const TWO: &str = "another-session-secret-of-32-bytes-at-least";

    fn session(tenant: &str) -> Session {
        Session {
            tenant: TenantId::parse(tenant).unwrap(),
            identity: Approver::parse("alice@example.com").unwrap(),
            issuer: "https://idp.example.com".to_owned(),
            sub: "alice-1".to_owned(),
            auth_time: Some(900),
            expires_at: 1_000,
            nonce: "n0nce".to_owned(),
        }
    }

    #[test]
    fn a_session_opens_for_its_tenant_until_it_expires_and_through_a_rotation() {
        let acme = TenantId::parse("acme").unwrap();
        let cookie = keys(ONE).seal_session(&session("acme"));
        assert_eq!(
            keys(ONE).open_session(&cookie, &acme, 999),
            Ok(session("acme"))
        );
        assert_eq!(
            keys(ONE).open_session(&cookie, &acme, 1_000),
            Err(SessionError::Expired)
        );
        let other = TenantId::parse("globex").unwrap();
        assert_eq!(
            keys(ONE).open_session(&cookie, &other, 999),
            Err(SessionError::OtherTenant)
        );
        // Rotated: the new key signs, the old one still opens what it signed.
        let rotated = keys(&format!(r#"["{TWO}", "{ONE}"]"#));
        assert!(rotated.open_session(&cookie, &acme, 999).is_ok());
        assert_eq!(
            keys(TWO).open_session(&cookie, &acme, 999),
            Err(SessionError::BadSignature)
        );
    }

    #[test]
    fn a_tampered_or_misplaced_cookie_opens_nothing() {
        let acme = TenantId::parse("acme").unwrap();
        let k = keys(ONE);
        let cookie = k.seal_session(&session("acme"));
        let (head, mac) = cookie.rsplit_once('.').unwrap();
        let (id, _) = head.split_once('.').unwrap();
        // Another payload under the same MAC (the tenant changed).
        let forged = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&session("globex")).unwrap());
        assert_eq!(
            k.open_session(&format!("{id}.{forged}.{mac}"), &acme, 1),
            Err(SessionError::BadSignature)
        );
        for junk in ["", "a.b", "a.b.c.d", "x.y.!!"] {
            assert!(k.open_session(junk, &acme, 1).is_err(), "{junk}");
        }
        // A sign-in cookie is not a session, nor a session a sign-in (keys per purpose).
        let sign_in = k.seal_sign_in(&SignInState {
            tenant: acme.clone(),
            state: "s".to_owned(),
            nonce: "n".to_owned(),
            pkce_verifier: "v".to_owned(),
            return_to: "/inbox/acme".to_owned(),
            expires_at: 600,
        });
        assert_eq!(
            k.open_session(&sign_in, &acme, 1),
            Err(SessionError::BadSignature)
        );
        assert_eq!(
            k.open_sign_in(&cookie, &acme, 1),
            Err(SessionError::BadSignature)
        );
        assert!(k.open_sign_in(&sign_in, &acme, 599).is_ok());
        assert_eq!(
            k.open_sign_in(&sign_in, &acme, 600),
            Err(SessionError::Expired)
        );
    }

    #[test]
    fn a_csrf_token_holds_for_its_own_session_only() {
        let k = keys(ONE);
        let mine = session("acme");
        let mut theirs = session("acme");
        theirs.nonce = "another".to_owned();
        let token = k.csrf_token(&mine);
        assert!(k.csrf_holds(&mine, &token));
        assert!(!k.csrf_holds(&theirs, &token));
        assert!(!k.csrf_holds(&mine, ""));
        assert!(!k.csrf_holds(&mine, &format!("{token}x")));
    }

    #[test]
    fn return_to_is_a_path_on_this_origin_only() {
        for ok in ["/inbox/acme", "/approvals/apr_1/review?x=1"] {
            assert_eq!(return_to(Some(ok), "/inbox/acme"), ok);
        }
        for bad in [
            "https://evil.example",
            "//evil.example/x",
            "/\\evil.example",
            "inbox",
            "/a\nb",
            "/a\\b",
            "/caf\u{e9}",
            "/a b",
        ] {
            assert_eq!(return_to(Some(bad), "/inbox/acme"), "/inbox/acme", "{bad}");
        }
        assert_eq!(return_to(None, "/inbox/acme"), "/inbox/acme");
        let long = format!("/{}", "a".repeat(MAX_RETURN_TO_BYTES));
        assert_eq!(return_to(Some(&long), "/inbox/acme"), "/inbox/acme");
        assert_eq!(
            sign_in_cookie(&TenantId::parse("acme.eu-1").unwrap()),
            "__Host-countersign-sign-in-acme.eu-1"
        );
        assert!(
            set_cookie(SESSION_COOKIE, "v", 60).starts_with(
                "__Host-countersign-session=v; Secure; HttpOnly; SameSite=Lax; Path=/"
            )
        );
    }
}
