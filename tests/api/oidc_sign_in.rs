//! The relying party approvers sign in through (`countersign::oidc`), against a real OpenID
//! Provider (oidc-provider from npm, started per test): a verified person signs in with PKCE,
//! `state` and `nonce`; a replayed code, a wrong PKCE verifier, another `nonce`, another client's
//! code and an unverified email are refused.

use countersign::oidc::{OidcError, OidcSettings, RelyingParty, SignedIn};
use countersign_tests::oidc::TestProvider;
use serde_json::json;

const REDIRECT: &str = "http://127.0.0.1:9/auth/acme/callback";

async fn provider() -> TestProvider {
    TestProvider::start(json!({
        "clients": [
            {"client_id": "countersign", "client_secret": "countersign-secret-0123456789",
             "redirect_uris": [REDIRECT]},
            {"client_id": "other-app", "client_secret": "other-app-secret-0123456789",
             "redirect_uris": [REDIRECT]},
        ],
        "accounts": [
            {"sub": "alice-1", "email": "alice@example.com", "email_verified": true},
            {"sub": "mallory-1", "email": "mallory@example.com", "email_verified": false},
        ],
    }))
    .await
}

async fn relying_party(provider: &TestProvider, client: &str) -> RelyingParty {
    let settings = OidcSettings {
        issuer: provider.issuer.clone(),
        client_id: client.to_owned(),
        client_secret: format!("{client}-secret-0123456789"),
        identity_claim: "email".to_owned(),
        scopes: vec!["openid".to_owned(), "email".to_owned()],
    };
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("an HTTP client");
    RelyingParty::discover(settings, http)
        .await
        .expect("the provider's discovery")
}

/// The callback's `code` and `state`, from the provider's redirect.
fn callback(url: &url::Url) -> (String, String) {
    let get = |name: &str| {
        url.query_pairs()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
            .unwrap_or_else(|| panic!("no {name} in {url}"))
    };
    (get("code"), get("state"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verified_person_signs_in_once_per_code_with_pkce_state_and_nonce() {
    let provider = provider().await;
    let rp = relying_party(&provider, "countersign").await;
    let started = rp.authorization(REDIRECT, None, false).expect("a sign-in");
    let query: String = started.url.query().unwrap_or_default().to_owned();
    for part in [
        "code_challenge_method=S256",
        "response_type=code",
        "nonce=",
        "state=",
    ] {
        assert!(query.contains(part), "{part} in {query}");
    }
    let back = provider
        .sign_in(started.url.as_str(), "alice@example.com")
        .await;
    let (code, state) = callback(&back);
    assert_eq!(state, started.state, "the state comes back as sent");

    let signed_in = rp
        .sign_in(REDIRECT, &code, &started.pkce_verifier, &started.nonce)
        .await
        .expect("alice signs in");
    assert_eq!(
        (signed_in.issuer.as_str(), signed_in.identity.as_str()),
        (provider.issuer.as_str(), "alice@example.com")
    );
    assert!(!signed_in.subject.is_empty());

    // A code is good once: its replay is refused by the provider.
    let replayed = rp
        .sign_in(REDIRECT, &code, &started.pkce_verifier, &started.nonce)
        .await;
    assert!(
        matches!(replayed, Err(OidcError::Exchange(_))),
        "{replayed:?}"
    );
}

/// Signs `login` in through a fresh sign-in of `rp` and finishes it with `finish` changing
/// what the callback brings back (the verifier, the nonce).
async fn refused(
    provider: &TestProvider,
    rp: &RelyingParty,
    exchanging: &RelyingParty,
    login: &str,
    tamper: impl Fn(&mut (String, String)),
) -> Result<SignedIn, OidcError> {
    let started = rp.authorization(REDIRECT, None, false).expect("a sign-in");
    let (code, _) = callback(&provider.sign_in(started.url.as_str(), login).await);
    let mut kept = (started.pkce_verifier.clone(), started.nonce.clone());
    tamper(&mut kept);
    exchanging.sign_in(REDIRECT, &code, &kept.0, &kept.1).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_verifier_another_nonce_another_clients_code_and_an_unverified_email_are_refused() {
    let provider = provider().await;
    let rp = relying_party(&provider, "countersign").await;
    let other = relying_party(&provider, "other-app").await;

    let wrong_verifier = refused(&provider, &rp, &rp, "alice@example.com", |kept| {
        kept.0 = "x".repeat(64);
    })
    .await;
    assert!(
        matches!(wrong_verifier, Err(OidcError::Exchange(_))),
        "PKCE: {wrong_verifier:?}"
    );

    let other_nonce = refused(&provider, &rp, &rp, "alice@example.com", |kept| {
        kept.1 = "another-sign-in's-nonce".to_owned();
    })
    .await;
    assert!(
        matches!(other_nonce, Err(OidcError::IdToken(_))),
        "nonce: {other_nonce:?}"
    );

    // A code the provider issued to another client is not ours to exchange.
    let stolen = refused(&provider, &other, &rp, "alice@example.com", |_| {}).await;
    assert!(
        matches!(stolen, Err(OidcError::Exchange(_))),
        "another client's code: {stolen:?}"
    );

    let unverified = refused(&provider, &rp, &rp, "mallory@example.com", |_| {}).await;
    assert!(
        matches!(unverified, Err(OidcError::UnverifiedEmail)),
        "email_verified false: {unverified:?}"
    );
}

/// The provider rotates its signing keys (here: the same issuer started again with a new key).
/// A relying party that discovered the old keys fetches them again for a token that names a key
/// it does not have, and the sign-in verifies under the new key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sign_in_after_the_provider_rotates_its_keys_verifies_under_the_new_key() {
    let before = provider().await;
    let rp = relying_party(&before, "countersign").await;
    let port = url::Url::parse(&before.issuer)
        .ok()
        .and_then(|u| u.port())
        .expect("the issuer's port");
    let old_keys = before.http.get(format!("{}/jwks", before.issuer));
    let old_keys: serde_json::Value = old_keys.send().await.unwrap().json().await.unwrap();
    drop(before);

    let after = TestProvider::start_on(port, json!({
        "clients": [{"client_id": "countersign", "client_secret": "countersign-secret-0123456789",
                     "redirect_uris": [REDIRECT]}],
        "accounts": [{"sub": "alice-1", "email": "alice@example.com", "email_verified": true}],
    }))
    .await;
    let new_keys: serde_json::Value = after
        .http
        .get(format!("{}/jwks", after.issuer))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_ne!(
        old_keys["keys"][0]["kid"], new_keys["keys"][0]["kid"],
        "a new key"
    );

    let started = rp.authorization(REDIRECT, None, false).expect("a sign-in");
    let (code, _) = callback(
        &after
            .sign_in(started.url.as_str(), "alice@example.com")
            .await,
    );
    let signed_in = rp
        .sign_in(REDIRECT, &code, &started.pkce_verifier, &started.nonce)
        .await
        .expect("verified under the rotated key");
    assert_eq!(signed_in.identity, "alice@example.com");
}

/// ID tokens the relying party must refuse, made by hand beside a real provider whose signing
/// key is a test fixture (so a token can be signed as the provider signs, then altered in one
/// claim): another client's, another issuer's, expired, for another sign-in (`nonce`),
/// authorised for another party (`azp`), signed by a key the provider does not publish, with
/// `alg: none`, or with HMAC keyed by the client secret. The untouched one verifies, so each
/// refusal is the one claim's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_id_tokens_are_refused_whatever_they_alter() {
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use jsonwebtoken::{Algorithm, EncodingKey, Header};

    let jwk: serde_json::Value =
        serde_json::from_str(include_str!("../fixtures/oidc/provider_key.jwk.json"))
            .expect("the fixture JWK");
    let provider = TestProvider::start(json!({
        "clients": [{"client_id": "countersign", "client_secret": "countersign-secret-0123456789",
                     "redirect_uris": [REDIRECT]}],
        "accounts": [{"sub": "alice-1", "email": "alice@example.com", "email_verified": true}],
        "keys": [jwk],
    }))
    .await;
    let rp = relying_party(&provider, "countersign").await;
    let provider_key =
        EncodingKey::from_rsa_pem(include_bytes!("../fixtures/oidc/provider_key.pem"))
            .expect("the fixture key");
    let unknown_key = EncodingKey::from_rsa_pem(countersign_tests::github::APP_KEY.as_bytes())
        .expect("another RSA key");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let claims = json!({
        "iss": provider.issuer, "aud": "countersign", "sub": "alice-1", "iat": now,
        "exp": now + 300, "nonce": "the-nonce", "email": "alice@example.com",
        "email_verified": true,
    });
    let signed = |claims: &serde_json::Value, key: &EncodingKey| {
        let mut header = Header::new(Algorithm::RS256);
        header.kid = Some("countersign-test-key-1".to_owned());
        jsonwebtoken::encode(&header, claims, key).expect("a signed token")
    };
    let with = |key: &str, value: serde_json::Value| {
        let mut altered = claims.clone();
        altered[key] = value;
        altered
    };

    let verified = rp
        .verify_id_token(&signed(&claims, &provider_key), "the-nonce")
        .await
        .expect("the token as the provider would sign it");
    assert_eq!(verified.identity, "alice@example.com");

    let unsigned = format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(r#"{"alg":"none","typ":"JWT"}"#),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    let hmac = jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        &claims,
        &EncodingKey::from_secret(b"countersign-secret-0123456789").expect("an HMAC key"),
    )
    .expect("an HMAC token");
    let mut azp = with("aud", json!(["countersign", "other-app"]));
    azp["azp"] = json!("other-app");
    // One audience, ours, but authorised for another party: the crate alone accepts it (review
    // of v6, finding 9), so the relying party checks `azp` itself.
    let azp_alone = with("azp", json!("other-app"));
    for (what, token) in [
        (
            "another client",
            signed(&with("aud", json!("other-app")), &provider_key),
        ),
        (
            "another issuer",
            signed(
                &with("iss", json!("https://idp.example.com")),
                &provider_key,
            ),
        ),
        (
            "expired",
            signed(&with("exp", json!(now - 600)), &provider_key),
        ),
        (
            "another sign-in",
            signed(&with("nonce", json!("another-nonce")), &provider_key),
        ),
        ("authorised for another party", signed(&azp, &provider_key)),
        (
            "authorised for another party, one audience",
            signed(&azp_alone, &provider_key),
        ),
        ("an unknown key", signed(&claims, &unknown_key)),
        ("alg none", unsigned),
        ("HMAC with the client secret", hmac),
    ] {
        let refused = rp.verify_id_token(&token, "the-nonce").await;
        assert!(
            matches!(refused, Err(OidcError::IdToken(_))),
            "{what}: {refused:?}"
        );
    }
}

/// A key the provider withdraws stops being trusted: the relying party fetches the keys again
/// once those it holds are older than their age limit (`RelyingParty::keys_max_age`, 15 minutes
/// deployed, shortened here), not only for a token naming a key it does not know (review of v6,
/// finding 9). Before the limit, the key it holds still verifies; after, the same token is
/// refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_withdrawn_key_stops_verifying_once_the_keys_are_fetched_again() {
    use jsonwebtoken::{Algorithm, EncodingKey, Header};

    let jwk: serde_json::Value =
        serde_json::from_str(include_str!("../fixtures/oidc/provider_key.jwk.json"))
            .expect("the fixture JWK");
    let config = |keys: serde_json::Value| {
        json!({
            "clients": [{"client_id": "countersign", "client_secret": "countersign-secret-0123456789",
                         "redirect_uris": [REDIRECT]}],
            "accounts": [{"sub": "alice-1", "email": "alice@example.com", "email_verified": true}],
            "keys": keys,
        })
    };
    let before = TestProvider::start(config(json!([jwk]))).await;
    // Long enough for the discovery and the provider's restart below (about a second on a quiet
    // machine, more beside a build) to fall inside it.
    let max_age = std::time::Duration::from_secs(6);
    let fetched = std::time::Instant::now();
    let rp = relying_party(&before, "countersign")
        .await
        .keys_max_age(max_age);
    let port = url::Url::parse(&before.issuer)
        .ok()
        .and_then(|u| u.port())
        .expect("the issuer's port");
    let issuer = before.issuer.clone();
    drop(before);
    // The same issuer with a fresh key only: the fixture key is withdrawn.
    let _after = TestProvider::start_on(port, config(json!([]))).await;

    let key = EncodingKey::from_rsa_pem(include_bytes!("../fixtures/oidc/provider_key.pem"))
        .expect("the fixture key");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let claims = json!({
        "iss": issuer, "aud": "countersign", "sub": "alice-1", "iat": now, "exp": now + 300,
        "nonce": "the-nonce", "email": "alice@example.com", "email_verified": true,
    });
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some("countersign-test-key-1".to_owned());
    let token = jsonwebtoken::encode(&header, &claims, &key).expect("a signed token");

    assert!(fetched.elapsed() < max_age, "the restart took too long");
    rp.verify_id_token(&token, "the-nonce")
        .await
        .expect("the keys held are fresh: the key still verifies");
    tokio::time::sleep(
        (max_age + std::time::Duration::from_millis(1500)).saturating_sub(fetched.elapsed()),
    )
    .await;
    let refused = rp.verify_id_token(&token, "the-nonce").await;
    assert!(
        matches!(refused, Err(OidcError::IdToken(_))),
        "withdrawn: {refused:?}"
    );
}
