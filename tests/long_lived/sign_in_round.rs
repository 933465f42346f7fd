//! Sign-in on the long-lived runner, after its load: alice and bob sign in at a real OpenID
//! Provider (oidc-provider) through the runner's routes and meet 2-of-2 quorums from the review
//! page — each clicking twice, both at once — while posts without a session or from another
//! origin are mixed in. Every approval executes once; only the signed-in votes count.

use std::time::Duration;

use countersign_tests::jobs::Downstream;
use countersign_tests::local_runner::LocalRunner;
use countersign_tests::oidc::{TestProvider, form_body};
use countersign_tests::sign_in::{SESSION_COOKIE, SIGN_IN_COOKIE, hidden};
use countersign_tests::{ALICE, BOB, KEY_A, TENANT_A, TOKEN_SECRET, execute_key};
use futures::StreamExt;
use reqwest::header::{COOKIE, LOCATION, ORIGIN, SET_COOKIE};
use serde_json::json;

use crate::client::{create, send, wait_until_executed};

/// The provider's client for the runner at `base`, and its people.
pub(crate) fn provider_config(base: &str) -> serde_json::Value {
    json!({
        "clients": [{"client_id": "countersign", "client_secret": "countersign-client-secret-0123",
                     "redirect_uris": [format!("{base}/auth/{TENANT_A}/callback")],
                     "require_auth_time": true}],
        "accounts": [{"sub": "alice-1", "email": ALICE, "email_verified": true},
                     {"sub": "bob-1", "email": BOB, "email_verified": true}],
    })
}

/// The runner's `OIDC`: tenant A signs in at `issuer`.
pub(crate) fn oidc_env(issuer: &str) -> String {
    json!({TENANT_A: {"issuer": issuer, "client_id": "countersign",
                      "client_secret": "countersign-client-secret-0123"}})
    .to_string()
}

fn cookie_set(response: &reqwest::Response, name: &str) -> Option<String> {
    response
        .headers()
        .get_all(SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .filter_map(|v| v.split(';').next()?.split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v.to_owned())
}

/// Signs `login` in at the runner: its session cookie.
async fn sign_in(
    runner: &LocalRunner,
    http: &reqwest::Client,
    provider: &TestProvider,
    login: &str,
) -> String {
    let login_url = runner.url(&format!("/auth/{TENANT_A}/login?return_to=%2F"));
    let started = http.get(login_url).send().await.expect("login");
    assert_eq!(started.status(), 302);
    // Each sign-in's cookie is named after its state.
    let sign_in_cookie = started
        .headers()
        .get_all(SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok()?.split(';').next())
        .find(|pair| pair.starts_with(&format!("{SIGN_IN_COOKIE}-")))
        .expect("the sign-in cookie")
        .to_owned();
    let authorize = started.headers()[LOCATION]
        .to_str()
        .expect("ASCII")
        .to_owned();
    let back = provider.sign_in(&authorize, login).await;
    let callback = runner.url(&format!(
        "{}?{}",
        back.path(),
        back.query().unwrap_or_default()
    ));
    let done = http
        .get(callback)
        .header(COOKIE, sign_in_cookie)
        .send()
        .await
        .expect("callback");
    assert_eq!(done.status(), 303);
    cookie_set(&done, SESSION_COOKIE).expect("the session cookie")
}

/// Returns how many approvals the round made (each executed once).
pub(crate) async fn sign_in_round(
    runner: &LocalRunner,
    provider: &TestProvider,
    downstream: &Downstream,
) -> usize {
    const ROUND: usize = 20;
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("an HTTP client");
    let sessions = [
        (ALICE, sign_in(runner, &http, provider, ALICE).await),
        (BOB, sign_in(runner, &http, provider, BOB).await),
    ];
    let secret = countersign::review_token::TokenSecret::parse(TOKEN_SECRET).expect("secret");
    let now = countersign::Clock::system().now();
    let made: Vec<(String, String)> = futures::stream::iter(0..ROUND)
        .map(|i| {
            let (http, sessions, secret) = (&http, &sessions, &secret);
            async move {
                let key = format!("sign-in-{i}");
                let body = json!({
                    "action": {"type": "deploy", "payload": {"build": i}},
                    "approvers": [ALICE, BOB],
                    "policy": {"rules": [{"name": "both", "approvers": [ALICE, BOB], "min_approvals": 2}]},
                })
                .to_string();
                let created = send(create(runner, KEY_A, &key, &body)).await;
                assert_eq!(created.status, 201);
                let id = created.json()["id"].as_str().expect("id").to_owned();
                let approval = countersign::domain::ApprovalId::parse(&id).expect("id");
                let tenant = countersign::domain::TenantId::parse(TENANT_A).expect("tenant");
                let decision = runner.url(&format!("/approvals/{id}/decision"));
                // Both approvers at once, each clicking twice.
                let votes = sessions.iter().map(|(who, session)| {
                    let who = countersign::domain::Approver::parse(who).expect("approver");
                    let token = secret.mint(&tenant, &approval, &who, now + 86_400);
                    let (decision, id) = (decision.clone(), id.clone());
                    async move {
                        let page = http
                            .get(runner.url(&format!("/approvals/{id}/review?token={token}")))
                            .header(COOKIE, format!("{SESSION_COOKIE}={session}"))
                            .send()
                            .await
                            .expect("review page");
                        let html = page.text().await.expect("page");
                        let csrf = hidden(&html, "csrf").expect("the form's CSRF token");
                        let post = |session: Option<&str>, origin: &str| {
                            let mut request = http
                                .post(&decision)
                                .header("content-type", "application/x-www-form-urlencoded")
                                .header(ORIGIN, origin)
                                .body(form_body(&[("token", token.as_str()), ("csrf", &csrf), ("decision", "approve")]));
                            if let Some(session) = session {
                                request = request.header(COOKIE, format!("{SESSION_COOKIE}={session}"));
                            }
                            send(request)
                        };
                        let origin = runner.base.clone();
                        // A scanner's post (no session) and a cross-site one: nothing recorded.
                        if i % 5 == 0 {
                            assert_eq!(post(None, &origin).await.status, 303);
                            assert_eq!(post(Some(session), "https://evil.example").await.status, 403);
                        }
                        let (a, b) = futures::join!(post(Some(session), &origin), post(Some(session), &origin));
                        assert_eq!((a.status, b.status), (303, 303));
                    }
                });
                futures::future::join_all(votes).await;
                (key, id)
            }
        })
        .buffer_unordered(4)
        .collect()
        .await;
    let ids: Vec<String> = made.iter().map(|(_, id)| id.clone()).collect();
    let executed = wait_until_executed(runner, KEY_A, &ids, Duration::from_secs(120)).await;
    for approval in &executed {
        assert_eq!(approval["status"], "approved", "{approval}");
        assert_eq!(approval["execution"]["status"], "succeeded", "{approval}");
        let votes = approval["votes"].as_array().expect("votes");
        assert_eq!(votes.len(), 2, "{approval}");
        assert!(votes.iter().all(|v| v["channel"] == "review_page"));
    }
    for (key, id) in &made {
        assert_eq!(
            downstream.calls(&execute_key(key, id)),
            1,
            "{id} executed once"
        );
    }
    ROUND
}
