//! The review page and its form post over plain HTTP: tokens, status codes, headers, escaping.
//! (The browser behaviour — double clicks, reloads, back — is in tests/browser.rs.)

use countersign_tests::{ALICE, BOB, DECIDER_A, KEY_A, KEY_B, TestApp, decision_body, deploy_body};
use serde_json::json;

fn form(token: &str, decision: &str) -> String {
    url::form_urlencoded::Serializer::new(String::new())
        .append_pair("token", token)
        .append_pair("decision", decision)
        .append_pair("comment", "looks right")
        .finish()
}

async fn post_form(t: &TestApp, id: &str, body: String) -> countersign_tests::Reply {
    t.send(
        t.http
            .post(t.url(&format!("/approvals/{id}/decision")))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body),
    )
    .await
}

fn no_redirects() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

#[tokio::test]
async fn the_pending_page_shows_the_request_and_two_buttons() {
    let t = TestApp::start().await;
    let id = t
        .create_ok(KEY_A, "page-1", &deploy_body(1042, &[ALICE, BOB]))
        .await;
    let reply = t.send(t.http.get(t.review_link(&id, ALICE))).await;
    assert_eq!(reply.status, 200);
    let html = reply.text();
    assert!(html.contains("Deploy api build 1042 to prod"));
    assert!(html.contains("&quot;build&quot;: 1042") || html.contains("\"build\": 1042"));
    assert!(html.contains(ALICE) && html.contains(BOB));
    assert!(html.contains(r#"value="approve""#) && html.contains(r#"value="reject""#));
    assert_eq!(reply.headers["cache-control"], "no-store");
    // No referrer to another origin; this origin's own posts keep their `Origin`.
    assert_eq!(reply.headers["referrer-policy"], "same-origin");
    let csp = reply.headers["content-security-policy"].to_str().unwrap();
    assert!(
        csp.starts_with("default-src 'none'")
            && !csp.contains("unsafe-inline")
            && !csp.contains("script-src")
    );
}

#[tokio::test]
async fn the_form_post_decides_once_and_always_redirects_to_the_page() {
    let t = TestApp::start().await;
    let id = t
        .create_ok(KEY_A, "page-2", &deploy_body(1, &[ALICE, BOB]))
        .await;
    let alice = t.review_token("tenant-a", &id, ALICE);
    let bob = t.review_token("tenant-a", &id, BOB);
    let client = no_redirects();
    let post = |token: &str, decision: &str| {
        client
            .post(t.url(&format!("/approvals/{id}/decision")))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form(token, decision))
    };
    for (token, decision) in [(&alice, "approve"), (&alice, "approve"), (&bob, "reject")] {
        let reply = t.send(post(token, decision)).await;
        assert_eq!(reply.status, 303, "won, repeated or lost: always 303");
        assert_eq!(
            reply.headers["location"],
            format!("review?token={token}").as_str()
        );
    }
    let approval = t.get(KEY_A, &id).await.json();
    assert_eq!(approval["status"], "approved");
    assert_eq!(approval["decision"]["approver"], ALICE);
    assert_eq!(approval["decision"]["channel"], "review_page");
    assert_eq!(approval["decision"]["comment"], "looks right");

    let page = t.send(t.http.get(t.review_link(&id, BOB))).await.text();
    assert!(page.contains("approved") && page.contains(ALICE) && page.contains("the review page"));
    assert!(
        !page.contains(r#"value="approve""#),
        "no buttons once decided"
    );
}

#[tokio::test]
async fn bad_tokens_get_the_same_403_page() {
    let t = TestApp::start().await;
    let id = t.create_ok(KEY_A, "tok-1", &deploy_body(1, &[ALICE])).await;
    let other = t.create_ok(KEY_A, "tok-2", &deploy_body(2, &[BOB])).await;
    let good = t.review_token("tenant-a", &id, ALICE);
    // One character of the MAC changed: the token still decodes, only the signature fails.
    let mut parts: Vec<String> = good.split('.').map(str::to_owned).collect();
    let mac = parts[3].clone().into_bytes();
    let mut flipped = mac.clone();
    flipped[5] = if mac[5] == b'A' { b'B' } else { b'A' };
    parts[3] = String::from_utf8(flipped).unwrap();
    let tampered = parts.join(".");
    let bob_for_other = t.review_token("tenant-a", &other, BOB);
    let cases = [
        ("tampered", id.clone(), tampered),
        ("another approval's token", other.clone(), good.clone()),
        (
            "another approver's token, another approval",
            id.clone(),
            bob_for_other,
        ),
        (
            "another tenant",
            id.clone(),
            t.review_token("tenant-b", &id, ALICE),
        ),
        (
            "not an approver",
            id.clone(),
            t.review_token("tenant-a", &id, BOB),
        ),
        ("garbage", id.clone(), "not-a-token".to_owned()),
        ("empty", id.clone(), String::new()),
    ];
    let forbidden = t
        .send(t.http.get(t.url(&format!("/approvals/{id}/review"))))
        .await;
    assert_eq!(forbidden.status, 403, "no token");
    for (name, approval, token) in cases {
        let page = t
            .send(
                t.http
                    .get(t.url(&format!("/approvals/{approval}/review?token={token}"))),
            )
            .await;
        assert_eq!(page.status, 403, "{name}");
        assert_eq!(
            page.text(),
            forbidden.text(),
            "{name}: the page reveals nothing"
        );
        let post = post_form(&t, &approval, form(&token, "approve")).await;
        assert_eq!(post.status, 403, "{name}: form post");
    }
    // Expired: the link dies with its expiry.
    t.clock.advance(86_400);
    let expired = t
        .send(
            t.http
                .get(t.url(&format!("/approvals/{id}/review?token={good}"))),
        )
        .await;
    assert_eq!(expired.status, 403, "expired token");
    assert_eq!(t.get(KEY_A, &id).await.json()["status"], "expired");
    assert_eq!(
        t.get(KEY_A, &other).await.json()["decision"],
        serde_json::Value::Null
    );
    let _ = KEY_B;
}

#[tokio::test]
async fn a_bad_decision_value_is_a_400_page_and_records_nothing() {
    let t = TestApp::start().await;
    let id = t.create_ok(KEY_A, "bad-1", &deploy_body(1, &[ALICE])).await;
    let token = t.review_token("tenant-a", &id, ALICE);
    for body in [
        form(&token, "maybe"),
        format!("token={token}"),
        form(&token, "APPROVE"),
    ] {
        let reply = post_form(&t, &id, body).await;
        assert_eq!(reply.status, 400);
        assert!(
            reply.headers["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/html")
        );
    }
    assert_eq!(t.get(KEY_A, &id).await.json()["status"], "pending");
}

#[tokio::test]
async fn requester_controlled_text_is_escaped() {
    let t = TestApp::start().await;
    let body = json!({
        "action": {"type": "deploy", "payload": {"x": "</pre><script>alert(3)</script>"}},
        "approvers": [ALICE],
        "context": {"summary": "<script>alert(1)</script>", "note": "\"><img src=x onerror=alert(2)>"}
    });
    let id = t.create_ok(KEY_A, "xss-1", &body.to_string()).await;
    let html = t.send(t.http.get(t.review_link(&id, ALICE))).await.text();
    assert!(!html.contains("<script>"), "no script element");
    assert!(!html.contains("<img"), "no img element");
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(html.contains("&quot;&gt;&lt;img src=x onerror=alert(2)&gt;"));
}

#[tokio::test]
async fn the_expired_page_says_so() {
    let t = TestApp::start().await;
    let body =
        json!({"action": {"type": "deploy"}, "approvers": [ALICE], "expires_in_seconds": 3600});
    let id = t.create_ok(KEY_A, "exp-1", &body.to_string()).await;
    let link = t.review_link(&id, ALICE); // valid for a day, the approval for an hour
    t.clock.advance(3_600);
    let page = t.send(t.http.get(link)).await;
    assert_eq!(page.status, 200);
    assert!(page.text().contains("expired on"));
    assert!(!page.text().contains(r#"value="approve""#));
}

/// The action's fate, as the decided page tells it: waiting, ran, failed, or with an operator.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_decided_page_says_what_became_of_the_action() {
    let t = TestApp::start_jobs(&[
        ("JOB_VISIBILITY_TIMEOUT_SECONDS", "1"),
        ("JOB_MAX_ATTEMPTS", "1"),
    ])
    .await;
    let mut pages = Vec::new();
    for (key, kind) in [
        ("fate-ok", "deploy"),
        ("fate-503", "always_503"),
        ("fate-unknown", "unsafe_see_other"),
    ] {
        let body = json!({"action": {"type": kind}, "approvers": [ALICE]}).to_string();
        let id = t.create_ok(KEY_A, key, &body).await;
        let decided = t
            .decide(DECIDER_A, &id, decision_body("approve", ALICE))
            .await;
        assert_eq!(decided.status, 200);
        t.wait_for_execution(KEY_A, &id, std::time::Duration::from_secs(60))
            .await;
        pages.push(t.send(t.http.get(t.review_link(&id, ALICE))).await.text());
    }
    assert!(pages[0].contains("Ran 20"), "{}", pages[0]);
    assert!(pages[1].contains("Failed: HTTP 503"), "{}", pages[1]);
    assert!(pages[2].contains("Handed to an operator"), "{}", pages[2]);

    t.stop_runner().await;
    let body = json!({"action": {"type": "deploy"}, "approvers": [ALICE]}).to_string();
    let waiting = t.create_ok(KEY_A, "fate-waiting", &body).await;
    t.decide(DECIDER_A, &waiting, decision_body("approve", ALICE))
        .await;
    let page = t
        .send(t.http.get(t.review_link(&waiting, ALICE)))
        .await
        .text();
    assert!(page.contains("Waiting to run."), "{page}");

    let cancelled = t.create_ok(KEY_A, "fate-cancelled", &body).await;
    let reply = t.cancel(KEY_A, &cancelled, "wrong build").await;
    assert_eq!(reply.status, 200);
    let page = t
        .send(t.http.get(t.review_link(&cancelled, ALICE)))
        .await
        .text();
    assert!(
        page.contains("was cancelled") && page.contains("wrong build"),
        "{page}"
    );
    assert!(!page.contains(r#"value="approve""#));
}
