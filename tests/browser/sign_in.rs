//! Signing in, in a real headless Chromium: the review link only shows the request until a
//! listed approver signs in at the tenant's OpenID Provider (oidc-provider's own login and
//! consent pages, typed into and clicked as a person does), and the session cookie
//! (`__Host-`, Secure, on http://127.0.0.1 — a secure context to Chromium) is what decides.

use std::time::{Duration, Instant};

use countersign_tests::browser::Browser;
use countersign_tests::sign_in::{SESSION_COOKIE, SignInStack, two_of_two};
use countersign_tests::{ALICE, BOB, KEY_A, MALLORY, TENANT_A, eventually, execute_key};
use fantoccini::Locator;
use fantoccini::elements::Element;
use serde_json::json;
use url::Url;

use super::screenshot_path;

/// How long a page may take to come (a sign-in is five page loads and three redirects).
const PAGE_WAIT: Duration = Duration::from_secs(20);

/// Waits for an element on the browser's page.
async fn element(browser: &Browser, css: &str) -> Element {
    browser
        .client
        .wait()
        .at_most(PAGE_WAIT)
        .every(Duration::from_millis(50))
        .for_element(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("no {css} on the page: {e}"))
}

async fn text(browser: &Browser, css: &str) -> String {
    element(browser, css).await.text().await.expect("text")
}

async fn count(browser: &Browser, css: &str) -> usize {
    browser
        .client
        .find_all(Locator::Css(css))
        .await
        .expect("find")
        .len()
}

/// Waits until the browser is at `path` on the app, its page loaded and holding `css`.
async fn wait_for_page(browser: &Browser, path: &str, css: &str) -> Url {
    let deadline = Instant::now() + PAGE_WAIT;
    loop {
        let url = browser.client.current_url().await.expect("url");
        if url.path() == path && count(browser, css).await > 0 {
            return url;
        }
        if Instant::now() > deadline {
            let shown = match browser.client.find(Locator::Css("body")).await {
                Ok(body) => body.text().await.unwrap_or_default(),
                Err(_) => String::new(),
            };
            panic!("the browser never showed {css} at {path} (at {url}), but: {shown}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Signs in as `login` on the provider's own pages, the browser being on its way there: the
/// login form (`login`, any password, submitted by its button), then the consent page's
/// Continue. The provider then sends the browser back through the app's callback.
async fn sign_in_at_provider(browser: &Browser, issuer: &str, login: &str) {
    element(browser, "input[name=login]")
        .await
        .send_keys(login)
        .await
        .expect("type the login");
    let url = browser.client.current_url().await.expect("url");
    assert_eq!(
        url.origin().ascii_serialization(),
        issuer,
        "the login page is the provider's"
    );
    element(browser, "input[name=password]")
        .await
        .send_keys("any password")
        .await
        .expect("type a password");
    element(browser, "button[type=submit]")
        .await
        .click()
        .await
        .expect("submit the login");
    browser
        .client
        .wait()
        .at_most(PAGE_WAIT)
        .every(Duration::from_millis(50))
        .for_element(Locator::XPath("//button[normalize-space()='Continue']"))
        .await
        .expect("the provider's consent page")
        .click()
        .await
        .expect("Continue");
}

/// Opens `link` signed out: the request, read-only, and "Sign in to decide".
async fn open_signed_out(browser: &Browser, link: &str) {
    browser
        .client
        .goto(link)
        .await
        .expect("open the review link");
    assert_signed_out(browser).await;
}

async fn assert_signed_out(browser: &Browser) {
    assert_eq!(text(browser, "a.button#sign-in").await, "Sign in to decide");
    assert_eq!(
        count(browser, "button.approve").await,
        0,
        "no Approve button"
    );
    assert_eq!(count(browser, "button.reject").await, 0, "no Reject button");
    assert_eq!(count(browser, "form").await, 0, "no form at all");
    assert!(
        browser
            .client
            .get_named_cookie(SESSION_COOKIE)
            .await
            .is_err(),
        "no session"
    );
}

/// From the signed-out review page of approval `id`: "Sign in to decide", the provider's
/// pages as `login`, and back on the review page with the Approve button.
async fn sign_in_from_review(s: &SignInStack, browser: &Browser, id: &str, login: &str) {
    element(browser, "a.button#sign-in")
        .await
        .click()
        .await
        .expect("Sign in to decide");
    sign_in_at_provider(browser, &s.issuer(), login).await;
    let review = format!("/approvals/{id}/review");
    wait_for_page(browser, &review, "button.approve").await;
    let decide = text(browser, "#decide").await;
    assert!(decide.contains(&format!("As {login}")), "{decide}");
    assert_session_cookie(browser).await;
}

/// Chromium stored the `__Host-` session cookie as set (Secure, HttpOnly, Lax, `/`), though
/// the origin is http://127.0.0.1: loopback is a secure context.
async fn assert_session_cookie(browser: &Browser) {
    let cookie = browser
        .client
        .get_named_cookie(SESSION_COOKIE)
        .await
        .expect("Chromium keeps the session cookie");
    assert_eq!(
        (
            cookie.secure(),
            cookie.http_only(),
            cookie.same_site().map(|s| s.to_string()),
            cookie.path()
        ),
        (Some(true), Some(true), Some("Lax".to_owned()), Some("/")),
        "{cookie:?}"
    );
}

/// Reloads until the page's `#outcome` card contains `wanted`; returns its text.
async fn reload_until_outcome(browser: &Browser, wanted: &str) -> String {
    let deadline = Instant::now() + PAGE_WAIT;
    loop {
        if let Ok(outcome) = browser.client.find(Locator::Css("#outcome")).await {
            let shown = outcome.text().await.expect("outcome text");
            if shown.contains(wanted) {
                return shown;
            }
            assert!(Instant::now() < deadline, "the outcome stays {shown:?}");
        }
        assert!(Instant::now() < deadline, "no outcome shown");
        tokio::time::sleep(Duration::from_millis(100)).await;
        browser.client.refresh().await.expect("reload");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_approvers_signed_in_at_once_in_two_browsers_meet_a_2_of_2_quorum_and_the_action_runs_once()
 {
    let s = SignInStack::start(json!({}), &[]).await;
    let t = &s.t;
    let id = t
        .create_ok(KEY_A, "browser-2of2", &two_of_two(2042, &[ALICE, BOB]))
        .await;
    let (alice, bob) = tokio::join!(Browser::start(), Browser::start());
    alice
        .client
        .set_window_size(420, 1450)
        .await
        .expect("phone width");
    let (alice_link, bob_link) = (t.review_link(&id, ALICE), t.review_link(&id, BOB));
    tokio::join!(
        open_signed_out(&alice, &alice_link),
        open_signed_out(&bob, &bob_link)
    );
    let png = alice.client.screenshot().await.expect("screenshot");
    std::fs::write(screenshot_path("review-signed-out.png"), png).expect("write screenshot");

    tokio::join!(
        sign_in_from_review(&s, &alice, &id, ALICE),
        sign_in_from_review(&s, &bob, &id, BOB)
    );
    // Back at the very link each followed (its token in the query).
    assert_eq!(
        alice.client.current_url().await.unwrap().as_str(),
        alice_link
    );
    assert_eq!(bob.client.current_url().await.unwrap().as_str(), bob_link);
    let png = alice.client.screenshot().await.expect("screenshot");
    std::fs::write(screenshot_path("review-signed-in.png"), png).expect("write screenshot");
    let (a, b) = tokio::join!(
        element(&alice, "button.approve"),
        element(&bob, "button.approve")
    );
    let (a, b) = tokio::join!(a.click(), b.click());
    a.expect("Alice approves");
    b.expect("Bob approves");

    // Post-redirect-get: both back on the review page, which shows the outcome.
    let review = format!("/approvals/{id}/review");
    tokio::join!(
        wait_for_page(&alice, &review, "#outcome"),
        wait_for_page(&bob, &review, "#outcome")
    );
    let decided = s.approval(&id).await;
    assert_eq!(decided["status"], "approved", "{decided}");
    let votes = decided["votes"].as_array().expect("votes");
    let mut voters: Vec<&str> = votes
        .iter()
        .filter_map(|v| v["approver"].as_str())
        .collect();
    voters.sort_unstable();
    assert_eq!(voters, [ALICE, BOB], "{decided}");
    for vote in votes {
        assert_eq!(
            (vote["vote"].as_str(), vote["channel"].as_str()),
            (Some("approve"), Some("review_page")),
            "{vote}"
        );
    }
    assert_eq!(
        t.requests
            .count("POST", &format!("/approvals/{id}/decision")),
        2,
        "one post each"
    );

    // The action ran, once.
    let ran = t
        .wait_for_execution(KEY_A, &id, Duration::from_secs(30))
        .await;
    assert_eq!(ran["execution"]["status"], "succeeded", "{ran}");
    let key = &execute_key("browser-2of2", &id);
    eventually("the downstream saw the execution", || async move {
        t.downstream().effects(key) == 1
    })
    .await;
    for browser in [&alice, &bob] {
        let shown = reload_until_outcome(browser, "approved").await;
        assert!(
            shown.contains(ALICE) || shown.contains(BOB),
            "the outcome names who completed it: {shown}"
        );
        eventually("the page tells the action ran", || async move {
            browser.client.refresh().await.expect("reload");
            text(browser, "#execution").await.contains("Ran")
        })
        .await;
    }
    assert_eq!(
        (t.downstream().calls(key), t.downstream().effects(key)),
        (1, 1),
        "one call downstream, one effect"
    );
    alice.close().await;
    bob.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_opened_without_signing_in_decides_nothing() {
    let s = SignInStack::start(json!({}), &[]).await;
    let t = &s.t;
    let id = t
        .create_ok(KEY_A, "browser-signed-out", &two_of_two(7, &[ALICE, BOB]))
        .await;
    let review = format!("/approvals/{id}/review");
    let link = t.review_link(&id, ALICE);
    let browser = Browser::start().await;
    open_signed_out(&browser, &link).await;
    for _ in 0..3 {
        browser.client.refresh().await.expect("reload");
        wait_for_page(&browser, &review, "a.button#sign-in").await;
        assert_signed_out(&browser).await;
    }
    // Followed as a link is: a click on an anchor of another page.
    browser
        .client
        .goto("about:blank")
        .await
        .expect("a blank page");
    browser
        .client
        .execute(
            "const a = document.createElement('a'); a.id = 'follow'; a.href = arguments[0]; \
             a.textContent = 'the review link'; document.body.appendChild(a);",
            vec![json!(link)],
        )
        .await
        .expect("a link to follow");
    element(&browser, "a#follow")
        .await
        .click()
        .await
        .expect("follow the link");
    wait_for_page(&browser, &review, "a.button#sign-in").await;
    assert_signed_out(&browser).await;
    assert_eq!(t.requests.count("GET", &review), 5, "each a GET");

    let untouched = s.approval(&id).await;
    assert_eq!(untouched["status"], "pending");
    assert_eq!(untouched["votes"], json!([]), "no vote: {untouched}");
    assert_eq!(
        t.requests
            .count("POST", &format!("/approvals/{id}/decision")),
        0
    );

    // Someone the approval does not list signs in through the same button.
    element(&browser, "a.button#sign-in")
        .await
        .click()
        .await
        .expect("Sign in to decide");
    sign_in_at_provider(&browser, &s.issuer(), MALLORY).await;
    wait_for_page(&browser, &review, "h1").await;
    let deadline = Instant::now() + PAGE_WAIT;
    while browser.client.title().await.expect("title") != "Not on the list · Countersign" {
        assert!(Instant::now() < deadline, "no 403 page");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        text(&browser, "h1").await,
        "You are not an approver of this request"
    );
    assert!(text(&browser, "main").await.contains(MALLORY));
    assert_eq!(count(&browser, "button.approve").await, 0);
    assert_eq!(count(&browser, "pre").await, 0, "the payload is not shown");
    let still = s.approval(&id).await;
    assert_eq!(
        (still["status"].as_str(), &still["votes"]),
        (Some("pending"), &json!([]))
    );
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inbox_after_sign_in_lists_the_approval_leads_to_its_review_page_and_signs_out() {
    let s = SignInStack::start(json!({}), &[]).await;
    let t = &s.t;
    let id = t
        .create_ok(KEY_A, "browser-inbox", &two_of_two(1042, &[ALICE, BOB]))
        .await;
    let inbox = format!("/inbox/{TENANT_A}");
    let browser = Browser::start().await;
    browser
        .client
        .set_window_size(700, 900)
        .await
        .expect("window size");
    // The inbox, signed out, sends its visitor to sign in, and back.
    browser.client.goto(&t.url(&inbox)).await.expect("inbox");
    sign_in_at_provider(&browser, &s.issuer(), ALICE).await;
    wait_for_page(&browser, &inbox, "nav").await;
    assert_session_cookie(&browser).await;
    // Dispatch indexes the approval from the stream, soon after it is made.
    let shown = &browser;
    eventually("the inbox lists the approval", || async move {
        shown.client.refresh().await.expect("reload");
        count(shown, "div.card.approval").await == 1
    })
    .await;
    let row = text(&browser, "div.card.approval").await;
    for shown in [
        "Deploy api build 1042",
        "both: 0 of 2",
        "You have not voted.",
    ] {
        assert!(row.contains(shown), "{shown:?} not in {row}");
    }
    assert!(
        text(&browser, "nav")
            .await
            .contains(&format!("Signed in as {ALICE}"))
    );
    let png = browser.client.screenshot().await.expect("screenshot");
    std::fs::write(screenshot_path("inbox.png"), png).expect("write screenshot");

    element(&browser, "div.card.approval h1 a")
        .await
        .click()
        .await
        .expect("open the row");
    wait_for_page(
        &browser,
        &format!("/approvals/{id}/review"),
        "button.approve",
    )
    .await;
    let decide = text(&browser, "#decide").await;
    assert!(decide.contains(&format!("As {ALICE}")), "{decide}");

    // Signing out (a form post from this page) ends the session: the page only reads again.
    let review = browser.client.current_url().await.expect("url");
    element(&browser, "nav form button")
        .await
        .click()
        .await
        .expect("Sign out");
    wait_for_page(&browser, &format!("/auth/{TENANT_A}/logout"), "h1").await;
    assert_eq!(text(&browser, "h1").await, "You are signed out");
    browser
        .client
        .goto(review.as_str())
        .await
        .expect("back to the review link");
    assert_signed_out(&browser).await;
    browser.close().await;
}
