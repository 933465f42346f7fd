//! Passkeys in a real headless Chromium with its virtual authenticator (WebDriver's WebAuthn
//! extension, through chromedriver), through the real OpenID Provider: two approvers register
//! a passkey on their passkeys page and meet a 2-of-2 passkey-only quorum on the review page
//! (our script asks the browser for an assertion over the vote's statement); the action runs
//! once, its call carries the certificate, and `countersign verify` accepts it, pinned to the
//! passkeys `countersign passkeys export` writes.

use std::time::{Duration, Instant};

use assert_cmd::Command;
use countersign_tests::browser::Browser;
use countersign_tests::runtime_api::function_binary;
use countersign_tests::sign_in::{SignInStack, two_of_two};
use countersign_tests::{ALICE, BOB, KEY_A, TENANT_A, eventually, execute_key};
use fantoccini::Locator;
use fantoccini::wd::WebDriverCompatibleCommand;
use serde_json::{Value, json};

use super::screenshot_path;

const PAGE_WAIT: Duration = Duration::from_secs(20);

/// `POST /session/{id}/webauthn/authenticator` (WebAuthn Level 2, §11.3 "Add Virtual
/// Authenticator"): a platform authenticator that verifies its user, as a phone or a laptop's
/// fingerprint reader does.
#[derive(Debug)]
struct AddVirtualAuthenticator;

impl WebDriverCompatibleCommand for AddVirtualAuthenticator {
    fn endpoint(
        &self,
        base_url: &url::Url,
        session_id: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base_url.join(&format!(
            "session/{}/webauthn/authenticator",
            session_id.unwrap_or_default()
        ))
    }

    fn method_and_body(&self, _: &url::Url) -> (axum::http::Method, Option<String>) {
        let options = json!({
            "protocol": "ctap2", "transport": "internal", "hasResidentKey": true,
            "hasUserVerification": true, "isUserConsenting": true, "isUserVerified": true,
        });
        (axum::http::Method::POST, Some(options.to_string()))
    }
}

async fn wait_for(browser: &Browser, css: &str) -> fantoccini::elements::Element {
    browser
        .client
        .wait()
        .at_most(PAGE_WAIT)
        .every(Duration::from_millis(50))
        .for_element(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("no {css} on the page: {e}"))
}

async fn count(browser: &Browser, css: &str) -> usize {
    browser
        .client
        .find_all(Locator::Css(css))
        .await
        .map(|found| found.len())
        .unwrap_or(0)
}

/// Signs in at the provider's own pages as `login`, the browser being on its way there.
async fn sign_in_at_provider(browser: &Browser, login: &str) {
    wait_for(browser, "input[name=login]")
        .await
        .send_keys(login)
        .await
        .expect("type the login");
    wait_for(browser, "input[name=password]")
        .await
        .send_keys("any password")
        .await
        .expect("type a password");
    wait_for(browser, "button[type=submit]")
        .await
        .click()
        .await
        .expect("submit the login");
    browser
        .client
        .wait()
        .at_most(PAGE_WAIT)
        .for_element(Locator::XPath("//button[normalize-space()='Continue']"))
        .await
        .expect("the provider's consent page")
        .click()
        .await
        .expect("Continue");
}

/// A person with a virtual authenticator signs in on their passkeys page and adds a passkey.
async fn register(s: &SignInStack, browser: &Browser, login: &str) {
    browser
        .client
        .issue_cmd(AddVirtualAuthenticator)
        .await
        .expect("a virtual authenticator");
    let page = format!("{}/auth/{TENANT_A}/passkeys", s.origin());
    browser.client.goto(&page).await.expect("the passkeys page");
    sign_in_at_provider(browser, login).await;
    wait_for(browser, "#passkey-add")
        .await
        .click()
        .await
        .expect("Add a passkey");
    let deadline = Instant::now() + PAGE_WAIT;
    while count(browser, "form.passkey").await == 0 {
        let status = match browser.client.find(Locator::Css("main")).await {
            Ok(main) => main.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        };
        assert!(Instant::now() < deadline, "no passkey listed: {status}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Opens the review link (by the relying party's name) and approves with the passkey.
async fn approve_with_passkey(browser: &Browser, link: &str, shot: Option<&str>) {
    browser.client.goto(link).await.expect("the review link");
    let button = wait_for(browser, "button.approve[data-challenge]").await;
    if let Some(name) = shot {
        let png = browser.client.screenshot().await.expect("screenshot");
        std::fs::write(screenshot_path(name), png).expect("write screenshot");
    }
    button.click().await.expect("Approve with passkey");
    let deadline = Instant::now() + PAGE_WAIT;
    while count(browser, "#outcome").await == 0 {
        let shown = match browser.client.find(Locator::Css("main")).await {
            Ok(main) => main.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        };
        assert!(
            Instant::now() < deadline,
            "no outcome after the passkey vote: {shown}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn admin_cli(table: &str, args: &[&str]) -> Command {
    let mut command = Command::new(function_binary("countersign", "debug"));
    command
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("KEYS_TABLE", table)
        .args(args)
        .timeout(Duration::from_secs(60));
    if let Some(endpoint) = countersign_tests::aws_endpoint() {
        command.env("AWS_ENDPOINT_URL", endpoint);
    }
    command
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_approvers_register_passkeys_and_meet_a_passkey_only_2_of_2_whose_certificate_verifies()
{
    let s = SignInStack::start_for_passkeys(json!({}), &[]).await;
    let t = &s.t;
    let mut body: Value = serde_json::from_str(&two_of_two(4242, &[ALICE, BOB])).expect("a body");
    body["assurance"] = json!("passkey");
    let id = t
        .create_ok(KEY_A, "browser-passkeys", &body.to_string())
        .await;
    let (alice, bob) = tokio::join!(Browser::start(), Browser::start());
    tokio::join!(register(&s, &alice, ALICE), register(&s, &bob, BOB));

    // The review links by the relying party's name (WebAuthn refuses an IP address).
    let by_name = |link: String| link.replace(&t.base, &s.origin());
    let (alice_link, bob_link) = (
        by_name(t.review_link(&id, ALICE)),
        by_name(t.review_link(&id, BOB)),
    );
    approve_with_passkey(&alice, &alice_link, Some("review-passkey.png")).await;
    let halfway = s.approval(&id).await;
    assert_eq!(halfway["status"], "pending", "{halfway}");
    approve_with_passkey(&bob, &bob_link, None).await;
    let png = bob.client.screenshot().await.expect("screenshot");
    std::fs::write(screenshot_path("review-passkey-approved.png"), png).expect("screenshot");

    let decided = s.approval(&id).await;
    assert_eq!(decided["status"], "approved", "{decided}");
    let votes = decided["votes"].as_array().expect("votes");
    assert_eq!(votes.len(), 2);
    assert!(votes.iter().all(|v| v["passkey"].is_string()), "{decided}");

    // The action ran once, and its call carried the certificate.
    let ran = t
        .wait_for_execution(KEY_A, &id, Duration::from_secs(30))
        .await;
    assert_eq!(ran["execution"]["status"], "succeeded", "{ran}");
    let key = execute_key("browser-passkeys", &id);
    let key = &key;
    eventually("the target saw the execution", || async move {
        t.downstream().effects(key) == 1
    })
    .await;
    let calls = t.downstream().calls_to("/ok");
    let (_, call) = calls
        .iter()
        .find(|(k, _)| k == key)
        .expect("the execute call");
    let certificate = &call["certificate"];
    assert_eq!(certificate["approval_id"], id.as_str(), "{call}");
    assert_eq!(t.downstream().calls(key), 1, "one call");

    // `countersign verify` accepts it, pinned to the exported passkeys.
    let dir = std::env::temp_dir().join(format!("browser-verify-{}", ulid::Ulid::new()));
    std::fs::create_dir_all(&dir).expect("a directory");
    let table = t.app.store.tables().api_keys.clone();
    let exported = tokio::task::spawn_blocking(move || {
        admin_cli(&table, &["passkeys", "export", "--tenant", TENANT_A])
            .assert()
            .success()
            .get_output()
            .stdout
            .clone()
    })
    .await
    .expect("export");
    std::fs::write(dir.join("credentials.json"), &exported).expect("credentials");
    std::fs::write(dir.join("certificate.json"), certificate.to_string()).expect("certificate");
    let jwks = format!("{}/.well-known/countersign/jwks.json", t.base);
    let dir_for = dir.clone();
    let verified = tokio::task::spawn_blocking(move || {
        let mut command = Command::new(function_binary("countersign", "debug"));
        command
            .env_clear()
            .arg("verify")
            .arg(dir_for.join("certificate.json"))
            .args(["--jwks", &jwks, "--credentials"])
            .arg(dir_for.join("credentials.json"))
            .timeout(Duration::from_secs(60));
        command.assert()
    })
    .await
    .expect("verify");
    let lines = String::from_utf8_lossy(&verified.get_output().stdout).into_owned();
    verified.success();
    assert_eq!(
        lines.trim(),
        format!("rule both: met, 2 of 2 required, by {ALICE}, {BOB}")
    );
    let _ = std::fs::remove_dir_all(&dir);
    alice.close().await;
    bob.close().await;
}
