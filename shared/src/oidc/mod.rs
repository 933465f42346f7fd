//! Approvers sign in with their organisation's OpenID Provider: the relying party (Okta, Entra
//! ID, Google, Cognito, Keycloak, Auth0 — any provider with discovery). Built on the
//! `openidconnect` crate (discovery, PKCE, ID-token verification against the provider's JWKS)
//! rather than verifying tokens by hand; its HTTP calls go through this crate's `reqwest`, with
//! redirects off (a provider's answer never sends us elsewhere).
//!
//! What it checks of an ID token: the signature by one of the provider's keys (asymmetric
//! algorithms only: `none` and the HMAC family are refused, so the client secret can never sign
//! one), `iss`, `aud` containing the client id, `azp` when present, `exp`, `iat` and the `nonce`
//! of the sign-in that asked for it; then the identity claim (`email` by default, which counts
//! only with `email_verified: true`).

mod cache;

pub use cache::RelyingParties;

use std::future::Future;
use std::pin::Pin;

use openidconnect::core::{
    CoreAuthenticationFlow, CoreClient, CoreIdToken, CoreIdTokenClaims, CoreJsonWebKeySet,
    CoreJwsSigningAlgorithm, CoreProviderMetadata,
};
use openidconnect::{
    AuthorizationCode, ClaimsVerificationError, ClientId, ClientSecret, CsrfToken,
    EndpointMaybeSet, EndpointNotSet, EndpointSet, HttpRequest, HttpResponse, IssuerUrl, Nonce,
    PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, Scope, SignatureVerificationError,
    TokenResponse,
};

/// The claim that is an approver's identity, when the configuration names none.
pub const DEFAULT_IDENTITY_CLAIM: &str = "email";

/// The identity claims a relying party can read from an ID token.
pub const IDENTITY_CLAIMS: [&str; 3] = ["email", "preferred_username", "sub"];

/// The signature algorithms an ID token may use: the provider's own keys, never a shared secret.
const ALLOWED_ALGORITHMS: [CoreJwsSigningAlgorithm; 9] = [
    CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha256,
    CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha384,
    CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha512,
    CoreJwsSigningAlgorithm::RsaSsaPssSha256,
    CoreJwsSigningAlgorithm::RsaSsaPssSha384,
    CoreJwsSigningAlgorithm::RsaSsaPssSha512,
    CoreJwsSigningAlgorithm::EcdsaP256Sha256,
    CoreJwsSigningAlgorithm::EcdsaP384Sha384,
    CoreJwsSigningAlgorithm::EdDsa,
];

/// One tenant's provider and its registration there.
#[derive(Clone, PartialEq, Eq)]
pub struct OidcSettings {
    /// The provider's issuer (`https://…`, or `http://` on loopback only).
    pub issuer: String,
    pub client_id: String,
    pub client_secret: String,
    /// `email` (then `email_verified` must be true), `preferred_username` or `sub`.
    pub identity_claim: String,
    /// Asked for beside `openid`.
    pub scopes: Vec<String>,
}

impl std::fmt::Debug for OidcSettings {
    // Never the client secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OidcSettings")
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field("identity_claim", &self.identity_claim)
            .field("scopes", &self.scopes)
            .finish_non_exhaustive()
    }
}

/// Why a sign-in failed. Shown to nobody in detail (the page reveals nothing); logged.
#[derive(Debug, thiserror::Error)]
pub enum OidcError {
    #[error("the provider's discovery failed: {0}")]
    Discovery(String),
    #[error("the provider's metadata has no token endpoint")]
    NoTokenEndpoint,
    #[error("the redirect URI is not a URL: {0}")]
    RedirectUri(String),
    #[error("the code exchange failed: {0}")]
    Exchange(String),
    #[error("the token response has no ID token")]
    NoIdToken,
    #[error("the ID token was refused: {0}")]
    IdToken(String),
    #[error("the ID token has no usable {0} claim")]
    NoIdentity(&'static str),
    #[error("the email is not verified by the provider")]
    UnverifiedEmail,
}

/// A sign-in under way: where to send the person, and what must come back with them (kept in
/// a short-lived cookie until the callback).
pub struct Authorization {
    pub url: url::Url,
    pub state: String,
    pub nonce: String,
    pub pkce_verifier: String,
}

/// Who signed in, as the provider vouches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedIn {
    pub issuer: String,
    pub subject: String,
    /// The identity claim's value, as the provider spelled it.
    pub identity: String,
    /// When the person last authenticated at the provider, if it says.
    pub auth_time: Option<i64>,
}

/// A tenant's relying party: its settings and what discovery found.
pub struct RelyingParty {
    settings: OidcSettings,
    /// The provider's metadata with its keys, and when the keys were last fetched again (a
    /// rotation: a token naming a key not among them).
    metadata: std::sync::RwLock<(CoreProviderMetadata, Option<std::time::Instant>)>,
    /// When the keys held were fetched: older than `keys_max_age`, they are fetched again
    /// before a token is verified, so a key the provider withdrew stops being trusted.
    keys_fetched: std::sync::RwLock<std::time::Instant>,
    keys_max_age: std::time::Duration,
    http: reqwest::Client,
}

/// The clock skew tolerated between the provider and this function (as `exp` is checked).
const MAX_CLOCK_SKEW_SECONDS: i64 = 60;
/// The oldest an ID token's `iat` may be: the longest a sign-in may take at the provider.
const MAX_ID_TOKEN_AGE_SECONDS: i64 = 900;

/// The most often the provider's keys are fetched again for a token that names an unknown key.
const KEYS_REFETCH_INTERVAL: std::time::Duration = std::time::Duration::from_secs(60);
/// How long keys are trusted without fetching them again: a key the provider withdraws (a
/// compromise, a rotation's end) is no longer trusted after at most this long.
pub const KEYS_MAX_AGE: std::time::Duration = std::time::Duration::from_secs(15 * 60);

/// A client from discovery: its authorization endpoint set, its token and userinfo endpoints
/// as the provider's metadata has them.
type DiscoveredClient = CoreClient<
    EndpointSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointMaybeSet,
    EndpointMaybeSet,
>;

type Sent = Pin<Box<dyn Future<Output = Result<HttpResponse, HttpError>> + Send>>;

/// An HTTP failure talking to the provider.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct HttpError(String);

/// `openidconnect`'s HTTP calls, sent with `http` (which must not follow redirects).
fn sender(http: &reqwest::Client) -> impl Fn(HttpRequest) -> Sent + '_ {
    move |request: HttpRequest| {
        let http = http.clone();
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            let response = http
                .request(parts.method, parts.uri.to_string())
                .headers(parts.headers)
                .body(body)
                .send()
                .await
                .map_err(|e| HttpError(e.to_string()))?;
            let mut answer = http::Response::builder().status(response.status());
            for (name, value) in response.headers() {
                answer = answer.header(name, value);
            }
            let body = response
                .bytes()
                .await
                .map_err(|e| HttpError(e.to_string()))?;
            answer
                .body(body.to_vec())
                .map_err(|e| HttpError(e.to_string()))
        }) as Sent
    }
}

impl RelyingParty {
    /// Discovers the provider (`{issuer}/.well-known/openid-configuration`, then its JWKS).
    /// `http` must not follow redirects.
    pub async fn discover(
        settings: OidcSettings,
        http: reqwest::Client,
    ) -> Result<Self, OidcError> {
        let issuer = IssuerUrl::new(settings.issuer.clone())
            .map_err(|e| OidcError::Discovery(e.to_string()))?;
        let metadata = {
            let send = sender(&http);
            CoreProviderMetadata::discover_async(issuer, &send)
                .await
                .map_err(|e| OidcError::Discovery(e.to_string()))?
        };
        Ok(Self {
            settings,
            metadata: std::sync::RwLock::new((metadata, None)),
            keys_fetched: std::sync::RwLock::new(std::time::Instant::now()),
            keys_max_age: KEYS_MAX_AGE,
            http,
        })
    }

    /// Keys are fetched again once they are older than `max_age` ([`KEYS_MAX_AGE`] unless
    /// set: tests shorten it).
    pub fn keys_max_age(mut self, max_age: std::time::Duration) -> Self {
        self.keys_max_age = max_age;
        self
    }

    /// Whether the keys held are older than they may be trusted without a fetch.
    fn keys_stale(&self) -> bool {
        self.keys_fetched
            .read()
            .is_ok_and(|at| at.elapsed() >= self.keys_max_age)
    }

    /// Fetches the provider's keys and puts them in place of those held.
    async fn fetch_keys(&self) -> Result<(), OidcError> {
        let jwks_uri = {
            let guard = self
                .metadata
                .read()
                .map_err(|_| OidcError::Discovery("a poisoned lock".to_owned()))?;
            guard.0.jwks_uri().clone()
        };
        let send = sender(&self.http);
        let keys = CoreJsonWebKeySet::fetch_async(&jwks_uri, &send)
            .await
            .map_err(|e| OidcError::Discovery(e.to_string()))?;
        let mut guard = self
            .metadata
            .write()
            .map_err(|_| OidcError::Discovery("a poisoned lock".to_owned()))?;
        guard.0 = guard.0.clone().set_jwks(keys);
        if let Ok(mut at) = self.keys_fetched.write() {
            *at = std::time::Instant::now();
        }
        Ok(())
    }

    fn client(&self, redirect_uri: &str) -> Result<DiscoveredClient, OidcError> {
        let redirect = RedirectUrl::new(redirect_uri.to_owned())
            .map_err(|e| OidcError::RedirectUri(e.to_string()))?;
        let metadata = self
            .metadata
            .read()
            .map(|m| m.0.clone())
            .map_err(|_| OidcError::Discovery("a poisoned lock".to_owned()))?;
        Ok(CoreClient::from_provider_metadata(
            metadata,
            ClientId::new(self.settings.client_id.clone()),
            Some(ClientSecret::new(self.settings.client_secret.clone())),
        )
        .set_redirect_uri(redirect))
    }

    /// Where to send a person to sign in: the authorization code flow with PKCE (S256), a fresh
    /// `state` and `nonce`. `max_age` (seconds) asks the provider to authenticate them again if
    /// they last did longer ago (with `prompt=login` when `reauthenticate`).
    pub fn authorization(
        &self,
        redirect_uri: &str,
        max_age: Option<u64>,
        reauthenticate: bool,
    ) -> Result<Authorization, OidcError> {
        let client = self.client(redirect_uri)?;
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let mut request = client
            .authorize_url(
                CoreAuthenticationFlow::AuthorizationCode,
                CsrfToken::new_random,
                Nonce::new_random,
            )
            .set_pkce_challenge(challenge);
        for scope in &self.settings.scopes {
            if scope != "openid" {
                request = request.add_scope(Scope::new(scope.clone()));
            }
        }
        if let Some(seconds) = max_age {
            request = request.set_max_age(std::time::Duration::from_secs(seconds));
        }
        if reauthenticate {
            request = request.add_prompt(openidconnect::core::CoreAuthPrompt::Login);
        }
        let (url, state, nonce) = request.url();
        Ok(Authorization {
            url,
            state: state.secret().clone(),
            nonce: nonce.secret().clone(),
            pkce_verifier: verifier.secret().clone(),
        })
    }

    /// Exchanges the callback's `code` (with the sign-in's PKCE verifier) and verifies the ID
    /// token against the sign-in's `nonce`: who signed in.
    pub async fn sign_in(
        &self,
        redirect_uri: &str,
        code: &str,
        pkce_verifier: &str,
        nonce: &str,
    ) -> Result<SignedIn, OidcError> {
        let client = self.client(redirect_uri)?;
        let send = sender(&self.http);
        let tokens = client
            .exchange_code(AuthorizationCode::new(code.to_owned()))
            .map_err(|_| OidcError::NoTokenEndpoint)?
            .set_pkce_verifier(PkceCodeVerifier::new(pkce_verifier.to_owned()))
            .request_async(&send)
            .await
            .map_err(|e| OidcError::Exchange(e.to_string()))?;
        let id_token = tokens.id_token().ok_or(OidcError::NoIdToken)?;
        self.verified(id_token, nonce).await
    }

    /// Who an ID token (compact JWS, as a token endpoint answers it) names, if it verifies for
    /// this relying party and the sign-in whose `nonce` it must carry: what [`Self::sign_in`]
    /// does once it has the token.
    pub async fn verify_id_token(
        &self,
        id_token: &str,
        nonce: &str,
    ) -> Result<SignedIn, OidcError> {
        let id_token: CoreIdToken = id_token
            .parse()
            .map_err(|e: serde_json::Error| OidcError::IdToken(e.to_string()))?;
        self.verified(&id_token, nonce).await
    }

    async fn verified(&self, id_token: &CoreIdToken, nonce: &str) -> Result<SignedIn, OidcError> {
        if self.keys_stale() {
            // Not trusted for ever: a key the provider withdrew must stop verifying. A failed
            // fetch keeps the keys held (the provider may be briefly down) and says so.
            if let Err(e) = self.fetch_keys().await {
                tracing::warn!(error = %e, "the provider's keys were not fetched again; the keys held are kept");
            }
        }
        let nonce = Nonce::new(nonce.to_owned());
        let verify = || -> Result<CoreIdTokenClaims, ClaimsVerificationError> {
            let metadata = self
                .metadata
                .read()
                .map_err(|_| ClaimsVerificationError::Other("a poisoned lock".to_owned()))?;
            let client = CoreClient::from_provider_metadata(
                metadata.0.clone(),
                ClientId::new(self.settings.client_id.clone()),
                Some(ClientSecret::new(self.settings.client_secret.clone())),
            );
            // `iat` not in the future (beyond the clock skew `exp` is allowed), nor older than
            // the longest a sign-in may take: a token minted for this sign-in.
            let verifier = client
                .id_token_verifier()
                .set_allowed_algs(ALLOWED_ALGORITHMS)
                .set_issue_time_verifier_fn(|iat| {
                    let now = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
                    let age = now - iat.timestamp();
                    if age < -MAX_CLOCK_SKEW_SECONDS {
                        Err("issued in the future".to_owned())
                    } else if age > MAX_ID_TOKEN_AGE_SECONDS {
                        Err("issued too long ago".to_owned())
                    } else {
                        Ok(())
                    }
                });
            id_token.claims(&verifier, &nonce).cloned()
        };
        let claims = match verify() {
            // Signed by a key we do not have: the provider may have rotated its keys. Fetched
            // again (at most once a minute), then verified once more.
            Err(ClaimsVerificationError::SignatureVerification(
                SignatureVerificationError::NoMatchingKey,
            )) if self.refetch_keys().await? => verify(),
            other => other,
        }
        .map_err(|e| OidcError::IdToken(e.to_string()))?;
        // OpenID Connect Core 3.1.3.7, step 5: an `azp` present must be this client (the crate
        // leaves the check to its caller).
        if let Some(party) = claims.authorized_party()
            && party.as_str() != self.settings.client_id
        {
            return Err(OidcError::IdToken(
                "authorised for another party (azp is not this client)".to_owned(),
            ));
        }
        self.signed_in(&claims)
    }

    /// Fetches the provider's keys again unless that was done in the last minute: whether it
    /// was.
    async fn refetch_keys(&self) -> Result<bool, OidcError> {
        // Claimed before the fetch, so concurrent tokens naming an unknown key fetch once.
        {
            let mut guard = self
                .metadata
                .write()
                .map_err(|_| OidcError::Discovery("a poisoned lock".to_owned()))?;
            if guard
                .1
                .is_some_and(|at| at.elapsed() < KEYS_REFETCH_INTERVAL)
            {
                return Ok(false);
            }
            guard.1 = Some(std::time::Instant::now());
        }
        self.fetch_keys().await?;
        Ok(true)
    }

    /// The origin of the provider's authorization endpoint (where sign-in pages are; Cognito's
    /// is not its issuer's).
    pub fn authorization_origin(&self) -> Option<String> {
        let metadata = self.metadata.read().ok()?;
        Some(
            metadata
                .0
                .authorization_endpoint()
                .url()
                .origin()
                .ascii_serialization(),
        )
    }

    fn signed_in(&self, claims: &CoreIdTokenClaims) -> Result<SignedIn, OidcError> {
        let identity = match self.settings.identity_claim.as_str() {
            "email" => {
                let email = claims.email().ok_or(OidcError::NoIdentity("email"))?;
                if claims.email_verified() != Some(true) {
                    return Err(OidcError::UnverifiedEmail);
                }
                email.as_str().to_owned()
            }
            "preferred_username" => claims
                .preferred_username()
                .ok_or(OidcError::NoIdentity("preferred_username"))?
                .as_str()
                .to_owned(),
            _ => claims.subject().as_str().to_owned(),
        };
        Ok(SignedIn {
            issuer: claims.issuer().as_str().to_owned(),
            subject: claims.subject().as_str().to_owned(),
            identity,
            auth_time: claims.auth_time().map(|t| t.timestamp()),
        })
    }
}
