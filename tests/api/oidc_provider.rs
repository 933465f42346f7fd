//! The sign-in tests' OpenID Provider itself (tests/support/oidc.rs: oidc-provider from npm):
//! its discovery, a sign-in through its own pages with PKCE, and a code exchanged once only — so
//! a failing sign-in test is about Countersign, not about the harness.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use countersign_tests::oidc::{TestProvider, form_body};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

const CLIENT_ID: &str = "acme";
const CLIENT_SECRET: &str = "acme-secret";
const REDIRECT_URI: &str = "http://127.0.0.1:9/auth/acme/callback";

async fn provider() -> TestProvider {
    TestProvider::start(json!({
        "clients": [{
            "client_id": CLIENT_ID,
            "client_secret": CLIENT_SECRET,
            "redirect_uris": [REDIRECT_URI],
        }],
        "accounts": [
            {"sub": "alice-0001", "email": "alice@example.com", "email_verified": true},
            {"sub": "mallory-0002", "email": "mallory@example.com", "email_verified": false},
        ],
    }))
    .await
}

/// The middle part of a JWT, decoded (not verified).
fn jwt_payload(jwt: &str) -> Value {
    let payload = jwt.split('.').nth(1).expect("a JWT has three parts");
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).expect("base64url")).expect("JSON")
}

async fn exchange(
    p: &TestProvider,
    token_endpoint: &str,
    code: &str,
    verifier: &str,
) -> (u16, Value) {
    let reply = p
        .http
        .post(token_endpoint)
        .basic_auth(CLIENT_ID, Some(CLIENT_SECRET))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form_body(&[
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", REDIRECT_URI),
            ("code_verifier", verifier),
        ]))
        .send()
        .await
        .expect("POST the token endpoint");
    let status = reply.status().as_u16();
    (
        status,
        reply.json().await.expect("the token endpoint answers JSON"),
    )
}

#[tokio::test]
async fn the_test_provider_signs_in_with_pkce_and_issues_email_claims_in_the_id_token() {
    let started = std::time::Instant::now();
    let p = provider().await;
    println!("oidc-provider started in {:?}", started.elapsed());

    let discovery = p.discovery().await;
    assert_eq!(discovery["issuer"], p.issuer.as_str());
    assert!(p.issuer.starts_with("http://127.0.0.1:"), "{}", p.issuer);
    let endpoint = |name: &str| {
        let url = discovery[name]
            .as_str()
            .unwrap_or_else(|| panic!("{name} in {discovery}"));
        assert!(url.starts_with(&p.issuer), "{name}: {url}");
        url.to_owned()
    };
    let authorization_endpoint = endpoint("authorization_endpoint");
    let token_endpoint = endpoint("token_endpoint");
    endpoint("jwks_uri");
    assert!(
        discovery["code_challenge_methods_supported"]
            .as_array()
            .is_some_and(|m| m.contains(&json!("S256"))),
        "{discovery}"
    );

    let verifier = "a-pkce-verifier-of-forty-three-characters-or-more-0123456789";
    let authorize = authorize_url(&authorization_endpoint, verifier, "the-state", "the-nonce");

    let started = std::time::Instant::now();
    let callback = p.sign_in(authorize.as_str(), "alice@example.com").await;
    println!(
        "signed in through the provider's pages in {:?}",
        started.elapsed()
    );
    assert!(
        callback.as_str().starts_with(&format!("{REDIRECT_URI}?")),
        "{callback}"
    );
    let query = |name: &str| query(&callback, name);
    assert_eq!(query("state").as_deref(), Some("the-state"), "{callback}");
    assert_eq!(
        query("iss").as_deref(),
        Some(p.issuer.as_str()),
        "{callback}"
    );
    let code = code_of(&callback);

    let (status, tokens) = exchange(&p, &token_endpoint, &code, verifier).await;
    assert_eq!(status, 200, "{tokens}");
    let id_token = tokens["id_token"]
        .as_str()
        .unwrap_or_else(|| panic!("{tokens}"));
    let claims = jwt_payload(id_token);
    assert_eq!(claims["iss"], p.issuer.as_str(), "{claims}");
    assert_eq!(claims["aud"], CLIENT_ID, "{claims}");
    assert_eq!(claims["sub"], "alice-0001", "{claims}");
    assert_eq!(claims["nonce"], "the-nonce", "{claims}");
    assert_eq!(claims["email"], "alice@example.com", "{claims}");
    assert_eq!(claims["email_verified"], true, "{claims}");

    // A code is good once.
    let (status, refused) = exchange(&p, &token_endpoint, &code, verifier).await;
    assert_eq!(status, 400, "{refused}");
    assert_eq!(refused["error"], "invalid_grant", "{refused}");

    // Signing in by sub; an unverified address is said so.
    let verifier = "another-pkce-verifier-of-forty-three-characters-or-more-987";
    let authorize = authorize_url(&authorization_endpoint, verifier, "state-2", "nonce-2");
    let callback = p.sign_in(authorize.as_str(), "mallory-0002").await;
    let (status, tokens) = exchange(&p, &token_endpoint, &code_of(&callback), verifier).await;
    assert_eq!(status, 200, "{tokens}");
    let claims = jwt_payload(
        tokens["id_token"]
            .as_str()
            .unwrap_or_else(|| panic!("{tokens}")),
    );
    assert_eq!(claims["sub"], "mallory-0002", "{claims}");
    assert_eq!(claims["nonce"], "nonce-2", "{claims}");
    assert_eq!(claims["email"], "mallory@example.com", "{claims}");
    assert_eq!(claims["email_verified"], false, "{claims}");
}

/// An authorization request for the one client: the code flow, `openid email`, PKCE S256.
fn authorize_url(endpoint: &str, verifier: &str, state: &str, nonce: &str) -> url::Url {
    let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
    let mut url = url::Url::parse(endpoint).expect("the authorization endpoint is a URL");
    url.query_pairs_mut()
        .append_pair("response_type", "code")
        .append_pair("client_id", CLIENT_ID)
        .append_pair("redirect_uri", REDIRECT_URI)
        .append_pair("scope", "openid email")
        .append_pair("state", state)
        .append_pair("nonce", nonce)
        .append_pair("code_challenge", &challenge)
        .append_pair("code_challenge_method", "S256");
    url
}

fn query(url: &url::Url, name: &str) -> Option<String> {
    url.query_pairs()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

fn code_of(callback: &url::Url) -> String {
    query(callback, "code").unwrap_or_else(|| panic!("no code in {callback}"))
}

/// A configuration the provider refuses fails the start, with its reason.
#[tokio::test]
#[should_panic(expected = "client acme: client_secret is mandatory property")]
async fn a_client_the_provider_refuses_fails_the_start() {
    TestProvider::start(json!({
        "clients": [{"client_id": CLIENT_ID, "redirect_uris": [REDIRECT_URI]}],
        "accounts": [],
    }))
    .await;
}
