//! The review page in a real headless Chromium: double clicks, reloads, the back button, two
//! approvers at once, and hostile context. Disabling a button is not duplicate protection; the
//! server is — so the browser is left to do what browsers do. A tenant whose approvers sign in
//! at an OpenID Provider first: [`sign_in`].

use std::path::PathBuf;
use std::time::{Duration, Instant};

use countersign_tests::browser::Browser;
use countersign_tests::{ALICE, BOB, KEY_A, TestApp, deploy_body};
use fantoccini::Locator;
use fantoccini::actions::{InputSource, MOUSE_BUTTON_LEFT, MouseActions, PointerAction};
use serde_json::json;

mod passkeys;
mod sign_in;

/// Where screenshots go: `docs/screenshots/` with UPDATE_SCREENSHOTS=1 (they are shown in the
/// README), `target/screenshots/` otherwise.
fn screenshot_path(name: &str) -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = if std::env::var_os("UPDATE_SCREENSHOTS").is_some() {
        root.join("docs/screenshots")
    } else {
        root.join("target/screenshots")
    };
    std::fs::create_dir_all(&dir).expect("screenshot directory");
    dir.join(name)
}

/// Double-clicks an element, as a person does: two presses within a few milliseconds.
async fn double_click(browser: &Browser, selector: &str) {
    let element = browser
        .client
        .find(Locator::Css(selector))
        .await
        .expect("button");
    let mouse = MouseActions::new("mouse".to_owned())
        .then(PointerAction::MoveToElement {
            element,
            duration: None,
            x: 0.0,
            y: 0.0,
        })
        .then(PointerAction::Down {
            button: MOUSE_BUTTON_LEFT,
        })
        .then(PointerAction::Up {
            button: MOUSE_BUTTON_LEFT,
        })
        .then(PointerAction::Down {
            button: MOUSE_BUTTON_LEFT,
        })
        .then(PointerAction::Up {
            button: MOUSE_BUTTON_LEFT,
        });
    browser
        .client
        .perform_actions(mouse)
        .await
        .expect("double click");
}

/// Waits until the browser shows the decided review page; returns its outcome text.
async fn wait_for_outcome(browser: &Browser) -> String {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let url = browser.client.current_url().await.expect("url");
        if url.path().ends_with("/review")
            && let Ok(outcome) = browser.client.find(Locator::Css("#outcome")).await
        {
            return outcome.text().await.expect("outcome text");
        }
        assert!(
            Instant::now() < deadline,
            "the browser never reached the decided page (at {url})"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn decide_by_double_click(button: &str, outcome: &str, screenshots: bool) {
    let t = TestApp::start().await;
    let id = t
        .create_ok(
            KEY_A,
            &format!("browser-{button}"),
            &deploy_body(1042, &[ALICE, BOB]),
        )
        .await;
    let post_path = format!("/approvals/{id}/decision");
    let browser = Browser::start().await;
    let link = t.review_link(&id, ALICE);
    browser
        .client
        .goto(&link)
        .await
        .expect("open the review link");
    if screenshots {
        browser
            .client
            .set_window_size(420, 1450)
            .await
            .expect("phone width");
        let png = browser.client.screenshot().await.expect("screenshot");
        std::fs::write(screenshot_path("review-pending.png"), png).expect("write screenshot");
    }

    double_click(&browser, &format!("button.{button}")).await;
    let shown = wait_for_outcome(&browser).await;
    assert!(
        shown.contains(outcome) && shown.contains(ALICE),
        "the page shows the outcome: {shown}"
    );
    let url = browser.client.current_url().await.unwrap();
    assert_eq!(
        url.as_str(),
        link,
        "post-redirect-get: the browser ends on the GET review page"
    );
    let posts = t.requests.count("POST", &post_path);
    assert!((1..=2).contains(&posts), "{posts} posts");
    println!("double click sent {posts} POST(s)");
    let approval = t.get(KEY_A, &id).await.json();
    assert_eq!(approval["status"], outcome);
    assert_eq!(approval["decision"]["approver"], ALICE);
    assert_eq!(approval["decision"]["channel"], "review_page");
    if screenshots {
        let png = browser.client.screenshot().await.expect("screenshot");
        std::fs::write(screenshot_path("review-decided.png"), png).expect("write screenshot");
    }

    // Reload: a GET again, no second post, the same page.
    browser.client.refresh().await.expect("reload");
    assert_eq!(wait_for_outcome(&browser).await, shown);
    assert_eq!(
        t.requests.count("POST", &post_path),
        posts,
        "reload did not post"
    );

    // Back: harmless.
    browser.client.back().await.expect("back");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        t.requests.count("POST", &post_path),
        posts,
        "back did not post"
    );
    let source = browser.client.source().await.unwrap();
    assert!(
        !source.contains(r#"value="approve""#),
        "back shows no live buttons (no-store)"
    );
    assert_eq!(
        t.get(KEY_A, &id).await.json()["decision"],
        approval["decision"],
        "one decision"
    );
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn double_click_approve_records_one_decision() {
    decide_by_double_click("approve", "approved", true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn double_click_reject_records_one_decision() {
    decide_by_double_click("reject", "rejected", false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_approvers_deciding_at_once_see_one_outcome() {
    let t = TestApp::start().await;
    let id = t
        .create_ok(KEY_A, "two-tabs", &deploy_body(7, &[ALICE, BOB]))
        .await;
    let (alice, bob) = tokio::join!(Browser::start(), Browser::start());
    let (alice_link, bob_link) = (t.review_link(&id, ALICE), t.review_link(&id, BOB));
    let (a, b) = tokio::join!(alice.client.goto(&alice_link), bob.client.goto(&bob_link));
    a.unwrap();
    b.unwrap();
    let (approve, reject) = (
        alice
            .client
            .find(Locator::Css("button.approve"))
            .await
            .unwrap(),
        bob.client
            .find(Locator::Css("button.reject"))
            .await
            .unwrap(),
    );
    let (a, b) = tokio::join!(approve.click(), reject.click());
    a.unwrap();
    b.unwrap();
    let (shown_a, shown_b) = tokio::join!(wait_for_outcome(&alice), wait_for_outcome(&bob));
    let approval = t.get(KEY_A, &id).await.json();
    let outcome = approval["status"].as_str().unwrap().to_owned();
    let winner = approval["decision"]["approver"]
        .as_str()
        .unwrap()
        .to_owned();
    for shown in [&shown_a, &shown_b] {
        assert!(
            shown.contains(&outcome) && shown.contains(&winner),
            "both pages show {outcome} by {winner}: {shown}"
        );
    }
    println!("two tabs: {outcome} by {winner}");
    alice.close().await;
    bob.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_context_renders_as_text_and_runs_nothing() {
    let t = TestApp::start().await;
    let body = json!({
        "action": {"type": "deploy", "payload": {"x": "</pre><script>alert(3)</script>"}},
        "approvers": [ALICE],
        "context": {"summary": "<script>alert(1)</script>", "note": "\"><img src=x onerror=alert(2)>"}
    });
    let id = t.create_ok(KEY_A, "xss-browser", &body.to_string()).await;
    let browser = Browser::start().await;
    browser
        .client
        .goto(&t.review_link(&id, ALICE))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        browser.client.get_alert_text().await.is_err(),
        "no dialog opened"
    );
    assert!(
        browser
            .client
            .find_all(Locator::Css("script"))
            .await
            .unwrap()
            .is_empty(),
        "no script element"
    );
    assert!(
        browser
            .client
            .find_all(Locator::Css("img"))
            .await
            .unwrap()
            .is_empty(),
        "no img element"
    );
    let heading = browser
        .client
        .find(Locator::Css("h1"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(heading, "<script>alert(1)</script>", "shown as text");
    let page = browser
        .client
        .find(Locator::Css("main"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("\"><img src=x onerror=alert(2)>"));
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tampered_link_shows_the_403_page() {
    let t = TestApp::start().await;
    let id = t
        .create_ok(KEY_A, "tamper-browser", &deploy_body(1, &[ALICE]))
        .await;
    let browser = Browser::start().await;
    let link = t.review_link(&id, ALICE);
    browser.client.goto(&format!("{}x", link)).await.unwrap();
    let heading = browser
        .client
        .find(Locator::Css("h1"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(heading, "This link is not valid");
    assert!(
        browser
            .client
            .find_all(Locator::Css("button"))
            .await
            .unwrap()
            .is_empty()
    );
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_approver_submitting_from_two_tabs_records_one_decision() {
    let t = TestApp::start().await;
    let id = t
        .create_ok(KEY_A, "same-approver", &deploy_body(8, &[ALICE]))
        .await;
    let link = t.review_link(&id, ALICE);
    let (first, second) = tokio::join!(Browser::start(), Browser::start());
    let (a, b) = tokio::join!(first.client.goto(&link), second.client.goto(&link));
    a.unwrap();
    b.unwrap();
    let (one, two) = (
        first
            .client
            .find(Locator::Css("button.approve"))
            .await
            .unwrap(),
        second
            .client
            .find(Locator::Css("button.approve"))
            .await
            .unwrap(),
    );
    let (a, b) = tokio::join!(one.click(), two.click());
    a.unwrap();
    b.unwrap();
    let (shown_one, shown_two) = tokio::join!(wait_for_outcome(&first), wait_for_outcome(&second));
    assert_eq!(shown_one, shown_two);
    assert!(shown_one.contains("approved") && shown_one.contains(ALICE));
    assert_eq!(
        t.requests
            .count("POST", &format!("/approvals/{id}/decision")),
        2,
        "two submissions arrived"
    );
    let approval = t.get(KEY_A, &id).await.json();
    assert_eq!(
        (
            approval["status"].as_str(),
            approval["decision"]["approver"].as_str()
        ),
        (Some("approved"), Some(ALICE))
    );
    first.close().await;
    second.close().await;
}

/// The Slack message as the fake Slack draws it (header, fields, rules, votes, buttons), in
/// Chromium: what the README shows. Mid-quorum: one vote of two, the buttons still there.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_slack_message_shows_the_request_its_progress_and_its_buttons() {
    use countersign_tests::slack::U_ALICE;
    use countersign_tests::{CAROL, CreateBody};

    let (t, slack) = TestApp::start_slack(&[]).await;
    let body = CreateBody::new("deploy", &[ALICE, BOB, CAROL])
        .payload(json!({"service": "api", "build": 1042, "env": "prod"}))
        .context(json!({"summary": "Deploy api build 1042 to prod"}))
        .policy(json!({"rules": [
            {"name": "leads", "approvers": [ALICE, BOB, CAROL], "min_approvals": 2}]}))
        .to_string();
    let id = t.create_ok(KEY_A, "browser-slack", &body).await;
    let wait = Duration::from_secs(30);
    slack.wait_for_message(&id, wait, |m| m.has_buttons()).await;
    let reply = t
        .click(&slack, U_ALICE, "countersign.approve", &id, false)
        .await;
    assert_eq!(reply.status, 200);
    let message = slack
        .wait_for_message(&id, wait, |m| m.shown().contains("1 of 2"))
        .await;

    let browser = Browser::start().await;
    browser
        .client
        .goto(&format!("{}/messages/{}", slack.base, message.ts))
        .await
        .expect("open the fake Slack's page");
    browser
        .client
        .set_window_size(700, 640)
        .await
        .expect("window size");
    let text = browser
        .client
        .find(Locator::Css("body"))
        .await
        .expect("body")
        .text()
        .await
        .expect("text");
    for shown in [
        "Deploy api build 1042 to prod",
        "sha256:",
        "leads: 1 of 2",
        &format!("{ALICE} approved (via slack)"),
        "Status: pending",
        "Approve",
        "Reject",
    ] {
        assert!(text.contains(shown), "{shown:?} not in {text}");
    }
    let png = browser.client.screenshot().await.expect("screenshot");
    std::fs::write(screenshot_path("slack-message.png"), png).expect("write screenshot");
    browser.close().await;
}
