//! What sign-in refuses, through the app's routes against a real OpenID Provider: a review link
//! without a session decides nothing however it is fetched; a form without the session, with
//! another session's CSRF token or from another origin records nothing; a tampered `state`, a
//! replayed code, an unverified email, a cookie of another tenant, tampered or expired set or
//! count as no session; a person not listed gets 403 and the requester cannot decide; a
//! `return_to` elsewhere lands in the inbox. Also: the provider's key rotation, and step-up
//! past `max_auth_age_seconds`. (The ID token's own checks — another client's or issuer's
//! token, expired, an unknown key, `alg: none`, another `nonce` — are the relying party's, in
//! oidc_sign_in.rs.)

use countersign::domain::TenantId;
use countersign::review_token::TokenSecret;
use countersign::session::{Session, SessionKeys};
use countersign_tests::sign_in::{
    SESSION_COOKIE, SignInStack, hidden, link, location, set_cookie, two_of_two,
};
use countersign_tests::{
    ALICE, ApiKeys, BOB, CAROL, CreateBody, KEY_A, KEY_B, MALLORY, TENANT_A, TENANT_B, TOKEN_SECRET,
};
use serde_json::{Value, json};

fn keys() -> SessionKeys {
    SessionKeys::new(&TokenSecret::parse(TOKEN_SECRET).expect("the test secret"))
}

/// The session a cookie carries (the test knows the keys).
fn opened(cookie: &str, tenant: &str, now: i64) -> Session {
    keys()
        .open_session(cookie, &TenantId::parse(tenant).unwrap(), now)
        .expect("a session in force")
}

async fn votes(s: &SignInStack, id: &str) -> Vec<Value> {
    let t = &s.t;
    let approval = t
        .send(
            t.http
                .get(t.url(&format!("/approvals/{id}")))
                .bearer_auth(KEY_A),
        )
        .await
        .json();
    approval["votes"].as_array().cloned().unwrap_or_default()
}

fn decision<'a>(token: &'a str, csrf: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![("token", token), ("csrf", csrf), ("decision", "approve")]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_link_without_a_session_decides_nothing_however_it_is_fetched() {
    let s = SignInStack::start(json!({}), &[]).await;
    let t = &s.t;
    let id = t
        .create_ok(KEY_A, "scan-1", &two_of_two(0, &[ALICE, BOB]))
        .await;
    let link_url = t.review_link(&id, ALICE);
    for _ in 0..3 {
        let page = s.get(&link_url, None).await;
        assert_eq!(page.status, 200);
        let html = page.text();
        assert!(html.contains("Sign in to decide"), "{html}");
        assert!(
            !html.contains(r#"value="approve""#),
            "no form without a session"
        );
    }
    for _ in 0..2 {
        let head = t.send(s.http.head(&link_url)).await;
        assert_eq!(head.status, 200);
    }
    // A scanner that follows every redirect it meets.
    let prefetch = t.send(reqwest::Client::new().get(&link_url)).await;
    assert_eq!(prefetch.status, 200);

    let path = format!("/approvals/{id}/decision");
    let token = t.review_token(TENANT_A, &id, ALICE);
    // No session: to sign in, coming back to the review page; nothing recorded.
    let posted = s
        .post_form(&path, &decision(&token, "x"), None, Some(&s.origin()))
        .await;
    assert_eq!(posted.status, 303);
    assert!(
        location(&posted).starts_with(&format!(
            "/auth/{TENANT_A}/login?return_to=%2Fapprovals%2F{id}%2Freview"
        )),
        "{}",
        location(&posted)
    );
    // Another session's CSRF token, no Origin, another Origin: 403.
    let alice = s.sign_in(ALICE, "/").await;
    let bob = s.sign_in(BOB, "/").await;
    let now = t.clock.now();
    let bobs_csrf = keys().csrf_token(&opened(&bob.cookie, TENANT_A, now));
    let alices_csrf = keys().csrf_token(&opened(&alice.cookie, TENANT_A, now));
    let refused = [
        (bobs_csrf.as_str(), Some(s.origin())),
        (alices_csrf.as_str(), None),
        (
            alices_csrf.as_str(),
            Some("https://evil.example".to_owned()),
        ),
        ("", Some(s.origin())),
    ];
    for (csrf, origin) in refused {
        let posted = s
            .post_form(
                &path,
                &decision(&token, csrf),
                Some(&alice.cookie),
                origin.as_deref(),
            )
            .await;
        assert_eq!(posted.status, 403, "csrf {csrf:?}, origin {origin:?}");
    }
    assert!(votes(&s, &id).await.is_empty(), "nothing was recorded");
    // Her own token, her own origin: it counts.
    let posted = s.approve(&id, &token, &alices_csrf, &alice.cookie).await;
    assert_eq!(posted.status, 303);
    assert_eq!(votes(&s, &id).await.len(), 1);

    // Tenant B has no OIDC: its links are v1's bearer credentials, and still decide.
    let theirs = t
        .create_ok(KEY_B, "scan-2", &two_of_two(0, &[ALICE, BOB]))
        .await;
    let token = t.review_token(TENANT_B, &theirs, ALICE);
    let posted = s
        .post_form(
            &format!("/approvals/{theirs}/decision"),
            &[("token", token.as_str()), ("decision", "approve")],
            None,
            None,
        )
        .await;
    assert_eq!(posted.status, 303);
    let approval = t
        .send(
            t.http
                .get(t.url(&format!("/approvals/{theirs}")))
                .bearer_auth(KEY_B),
        )
        .await
        .json();
    assert_eq!(approval["votes"].as_array().map(Vec::len), Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_sign_ins_set_no_session() {
    // `OIDC` read from its secret, by the decide function's role.
    let s = SignInStack::start_from_secret(json!({})).await;
    // A tampered state.
    let (authorize, cookie) = s.begin("/", false).await;
    let back = s.provider().sign_in(authorize.as_str(), ALICE).await;
    let mut tampered = back.clone();
    let pairs: Vec<(String, String)> = back
        .query_pairs()
        .map(|(k, v)| {
            let v = if k == "state" {
                format!("{v}x")
            } else {
                v.into_owned()
            };
            (k.into_owned(), v)
        })
        .collect();
    tampered.query_pairs_mut().clear().extend_pairs(pairs);
    let reply = s.finish(&tampered, Some(&cookie)).await;
    assert_eq!(reply.status, 403);
    assert_eq!(set_cookie(&reply, SESSION_COOKIE), None);
    // Without the sign-in cookie.
    let reply = s.finish(&back, None).await;
    assert_eq!(reply.status, 400);
    assert_eq!(set_cookie(&reply, SESSION_COOKIE), None);
    // Another sign-in's cookie (its state, nonce and verifier), sent under this sign-in's name.
    let (_, other) = s.begin("/", false).await;
    let (name, _) = cookie.split_once('=').expect("name=value");
    let (_, other_value) = other.split_once('=').expect("name=value");
    let other_cookie = format!("{name}={other_value}");
    let reply = s.finish(&back, Some(&other_cookie)).await;
    assert_eq!(reply.status, 403);
    assert_eq!(set_cookie(&reply, SESSION_COOKIE), None);
    // A sign-in started again (another tab) replaces the one under way: one cookie per tenant,
    // never a pile of them past a request header's limit (review of v6, finding 9). The first
    // sign-in's callback then meets the second's cookie: refused, and that cookie is left to
    // its own callback (not cleared).
    assert_eq!(other.split_once('=').map(|p| p.0), Some(name));
    let reply = s.finish(&back, Some(&other)).await;
    assert_eq!(reply.status, 403, "not this sign-in's cookie");
    assert_eq!(
        set_cookie(&reply, name),
        None,
        "the newer sign-in's cookie is kept"
    );
    // The untouched callback signs in once; its code replayed, never again.
    let reply = s.finish(&back, Some(&cookie)).await;
    assert_eq!(reply.status, 303, "{}", reply.text());
    assert!(set_cookie(&reply, SESSION_COOKIE).is_some());
    let replayed = s.finish(&back, Some(&cookie)).await;
    assert_eq!(replayed.status, 403);
    assert_eq!(set_cookie(&replayed, SESSION_COOKIE), None);
    // An email the provider has not verified is no identity.
    let (authorize, cookie) = s.begin("/", false).await;
    let back = s
        .provider()
        .sign_in(authorize.as_str(), "eve@example.com")
        .await;
    let reply = s.finish(&back, Some(&cookie)).await;
    assert_eq!(reply.status, 403);
    assert_eq!(set_cookie(&reply, SESSION_COOKIE), None);
    assert!(
        !reply.text().contains("verified"),
        "the page reveals nothing"
    );
    // A return_to elsewhere lands in the inbox.
    for elsewhere in [
        "https://evil.example/x",
        "//evil.example/x",
        "/\\evil.example",
        "inbox",
    ] {
        let signed_in = s.sign_in(ALICE, elsewhere).await;
        assert_eq!(
            signed_in.location,
            format!("/inbox/{TENANT_A}"),
            "{elsewhere}"
        );
    }
    // A tenant without OIDC has no sign-in.
    let reply = s.get(&format!("/auth/{TENANT_B}/login"), None).await;
    assert_eq!(reply.status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_of_another_tenant_tampered_forged_or_expired_is_no_session() {
    let s = SignInStack::start(json!({}), &[]).await;
    let t = &s.t;
    let id = t
        .create_ok(KEY_A, "cookie-1", &two_of_two(0, &[ALICE, BOB]))
        .await;
    let alice = s.sign_in(ALICE, "/").await;
    let now = t.clock.now();
    let session = opened(&alice.cookie, TENANT_A, now);
    let other_tenant = Session {
        tenant: TenantId::parse(TENANT_B).unwrap(),
        ..session.clone()
    };
    let expired = Session {
        expires_at: now - 1,
        ..session.clone()
    };
    let forged =
        SessionKeys::new(&TokenSecret::parse("another-secret-of-at-least-32-bytes!").unwrap())
            .seal_session(&session);
    let mut tampered = alice.cookie.clone();
    tampered.insert(tampered.find('.').unwrap() + 3, 'A');
    let cookies = [
        ("another tenant's", keys().seal_session(&other_tenant)),
        ("expired", keys().seal_session(&expired)),
        ("forged", forged),
        ("tampered", tampered),
    ];
    let token = t.review_token(TENANT_A, &id, ALICE);
    let csrf = keys().csrf_token(&session);
    for (what, cookie) in &cookies {
        let page = s.get(&t.review_link(&id, ALICE), Some(cookie)).await;
        assert!(
            page.text().contains("Sign in to decide"),
            "{what}: read-only"
        );
        let posted = s.approve(&id, &token, &csrf, cookie).await;
        assert_eq!(posted.status, 303, "{what}");
        assert!(location(&posted).contains("/login?"), "{what}: to sign in");
        assert_eq!(
            s.get(&format!("/inbox/{TENANT_A}"), Some(cookie))
                .await
                .status,
            303
        );
    }
    assert!(votes(&s, &id).await.is_empty(), "nothing was recorded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_not_listed_gets_403_and_the_requester_cannot_decide() {
    const CAROL_KEY: &str = "carol-key-0123456789abcdef";
    let keys_config = ApiKeys::new()
        .key_in(
            TENANT_A,
            TENANT_A,
            &["requester", "approver", "operator", "reader"],
            KEY_A,
        )
        .key(CAROL, &["requester"], CAROL_KEY)
        .to_string();
    let s = SignInStack::start(json!({}), &[("API_KEYS", &keys_config)]).await;
    let t = &s.t;
    let id = t
        .create_ok(KEY_A, "listed-1", &two_of_two(0, &[ALICE, BOB]))
        .await;
    let mallory = s.sign_in(MALLORY, "/").await;
    let page = s
        .get(&t.review_link(&id, ALICE), Some(&mallory.cookie))
        .await;
    assert_eq!(page.status, 403);
    assert!(
        page.text()
            .contains("You are not an approver of this request")
    );
    let csrf = keys().csrf_token(&opened(&mallory.cookie, TENANT_A, t.clock.now()));
    let token = t.review_token(TENANT_A, &id, ALICE);
    let posted = s.approve(&id, &token, &csrf, &mallory.cookie).await;
    assert_eq!(posted.status, 403);
    assert!(votes(&s, &id).await.is_empty());

    // Carol requests an approval that lists her: signed in, she reads it and cannot decide it.
    let body = CreateBody::new("deploy", &[CAROL, ALICE])
        .payload(json!({}))
        .to_string();
    let hers = t.create_ok(CAROL_KEY, "listed-2", &body).await;
    let carol = s.sign_in(CAROL, "/").await;
    let page = s
        .get(&t.review_link(&hers, CAROL), Some(&carol.cookie))
        .await;
    assert_eq!(page.status, 200);
    assert!(page.text().contains("You requested this approval"));
    assert!(!page.text().contains(r#"value="approve""#));
    let csrf = keys().csrf_token(&opened(&carol.cookie, TENANT_A, t.clock.now()));
    let token = t.review_token(TENANT_A, &hers, CAROL);
    let posted = s.approve(&hers, &token, &csrf, &carol.cookie).await;
    assert_eq!(posted.status, 403);
    assert!(posted.text().contains("You requested this approval"));
    assert!(
        votes(&s, &hers).await.is_empty(),
        "self-approval records nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_outlive_a_provider_key_rotation_and_new_sign_ins_verify_under_the_new_key() {
    let mut s = SignInStack::start(json!({}), &[]).await;
    let id =
        s.t.create_ok(KEY_A, "rotate-1", &two_of_two(0, &[ALICE, BOB]))
            .await;
    let alice = s.sign_in(ALICE, "/").await;
    s.rotate_provider_keys().await;
    // Her session is the app's cookie: it goes on.
    let page = s
        .get(&s.t.review_link(&id, ALICE), Some(&alice.cookie))
        .await;
    let (token, csrf) = (
        hidden(&page.text(), "token").unwrap(),
        hidden(&page.text(), "csrf").unwrap(),
    );
    let posted = s.approve(&id, &token, &csrf, &alice.cookie).await;
    assert_eq!(posted.status, 303);
    // Bob's ID token is signed by the new key, which the app fetches when it meets it.
    let bob = s.sign_in(BOB, "/").await;
    let page = s.get(&s.t.review_link(&id, BOB), Some(&bob.cookie)).await;
    let (token, csrf) = (
        hidden(&page.text(), "token").unwrap(),
        hidden(&page.text(), "csrf").unwrap(),
    );
    let posted = s.approve(&id, &token, &csrf, &bob.cookie).await;
    assert_eq!(posted.status, 303);
    let voters: Vec<Value> = votes(&s, &id)
        .await
        .iter()
        .map(|v| v["approver"].clone())
        .collect();
    assert_eq!(voters, [json!(ALICE), json!(BOB)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_sign_in_signs_in_again_before_deciding() {
    let s = SignInStack::start(json!({"max_auth_age_seconds": 300}), &[]).await;
    let t = &s.t;
    let id = t
        .create_ok(KEY_A, "step-up-1", &two_of_two(0, &[ALICE, BOB]))
        .await;
    let alice = s.sign_in(ALICE, "/").await;
    let now = t.clock.now();
    // Her sign-in, as it will be 1,000 s after she authenticated.
    let mut session = opened(&alice.cookie, TENANT_A, now);
    session.auth_time = Some(now - 1_000);
    let old = keys().seal_session(&session);
    let page = s.get(&t.review_link(&id, ALICE), Some(&old)).await.text();
    assert!(
        !page.contains(r#"value="approve""#),
        "no form for an old sign-in"
    );
    let again = link(&page, "Sign in again to decide").expect("the step-up link");
    assert!(again.contains("step_up=1"), "{again}");
    let token = t.review_token(TENANT_A, &id, ALICE);
    let posted = s
        .approve(&id, &token, &keys().csrf_token(&session), &old)
        .await;
    assert_eq!(posted.status, 303);
    assert!(location(&posted).contains("step_up=1"));
    assert!(votes(&s, &id).await.is_empty());
    // The provider is asked to authenticate her again, at most 300 s ago.
    let return_to = format!("/approvals/{id}/review?token={token}");
    let (authorize, _) = s.begin(&return_to, true).await;
    let query = authorize.query().unwrap_or_default().to_owned();
    assert!(
        query.contains("prompt=login") && query.contains("max_age=300"),
        "{query}"
    );
    // Signed in again: she decides.
    let fresh = s.sign_in_with(ALICE, &return_to, true).await;
    assert_eq!(fresh.location, return_to);
    let page = s.get(&fresh.location, Some(&fresh.cookie)).await.text();
    let csrf = hidden(&page, "csrf").expect("the form, now");
    let posted = s.approve(&id, &token, &csrf, &fresh.cookie).await;
    assert_eq!(posted.status, 303);
    assert_eq!(votes(&s, &id).await.len(), 1);
}
