//! Approvers who sign in (OIDC) through the app's own routes, against a real OpenID Provider
//! (oidc-provider from npm): the inbox shows what waits on the signed-in person, the review
//! page decides for them and lands on the outcome, and the vote's trail names who the provider
//! vouched for. Round trips: an inbox page is the listing's reads, a vote the review page's.

use countersign_tests::sign_in::{SignInStack, hidden, link, location, two_of_two};
use countersign_tests::{ALICE, BOB, CAROL, KEY_A, TENANT_A};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_in_approver_sees_their_inbox_decides_and_the_trail_names_iss_and_sub() {
    let s = SignInStack::start(json!({}), &[]).await;
    let t = &s.t;
    let mine = t
        .create_ok(KEY_A, "inbox-1", &two_of_two(1, &[ALICE, BOB]))
        .await;
    let not_mine = t
        .create_ok(KEY_A, "inbox-2", &two_of_two(2, &[BOB, CAROL]))
        .await;

    // Signed in from the inbox: back to it.
    let inbox = format!("/inbox/{TENANT_A}");
    let alice = s.sign_in(ALICE, &inbox).await;
    assert_eq!(alice.location, inbox);
    s.inbox_listing(&inbox, &alice.cookie, 1).await;
    // Nothing in the background while round trips are counted (started again for the trail):
    // the runner stopped, and what it had under way finished.
    t.stop_runner().await;
    countersign_tests::eventually("the background is quiet", || async {
        t.calls.take().is_empty()
    })
    .await;
    let page = s.get(&inbox, Some(&alice.cookie)).await;
    let inbox_reads = t.calls.take();
    assert_eq!(page.status, 200, "{}", page.text());
    let html = page.text();
    assert!(html.contains("Deploy api build 1"), "{html}");
    assert!(
        !html.contains("Deploy api build 2"),
        "only what waits on her"
    );
    assert!(html.contains(mine.as_str()) && !html.contains(not_mine.as_str()));
    assert!(
        html.contains("both</strong>: 0 of 2"),
        "k-of-n progress: {html}"
    );
    assert!(html.contains("You have not voted."));
    assert_eq!(page.headers["cache-control"], "no-store");
    assert!(page.headers.contains_key("content-security-policy"));
    // The same reads as the API's listing of the same facet.
    let listed = t
        .send(
            t.http
                .get(t.url(&format!("/approvals?approver={ALICE}&status=pending")))
                .bearer_auth(KEY_A),
        )
        .await;
    assert_eq!(listed.status, 200);
    assert_eq!(inbox_reads, ["Query", "Query", "BatchGetItem"]);
    assert_eq!(
        inbox_reads,
        t.calls.take(),
        "an inbox page is the listing's reads"
    );

    // Its row links to the review page, which decides for her.
    let review = link(&html, "Deploy api build 1").expect("the row's link");
    let page = s.get(&review, Some(&alice.cookie)).await;
    assert_eq!(page.status, 200, "{}", page.text());
    let html = page.text();
    assert!(html.contains(&format!("As {ALICE}")), "{html}");
    let csrf = hidden(&html, "csrf").expect("the form's CSRF token");
    let token = hidden(&html, "token").expect("the form's token");
    t.calls.take();
    let posted = s.approve(&mine, &token, &csrf, &alice.cookie).await;
    assert_eq!(posted.status, 303, "{}", posted.text());
    assert_eq!(
        t.calls.take(),
        ["UpdateItem"],
        "a vote after sign-in costs one write"
    );
    t.start_runner();
    assert!(location(&posted).starts_with("review?token="));
    let landed = s
        .get(
            &format!("/approvals/{mine}/{}", location(&posted)),
            Some(&alice.cookie),
        )
        .await;
    assert!(
        landed.text().contains("Your vote is recorded"),
        "{}",
        landed.text()
    );

    let approval = t
        .send(
            t.http
                .get(t.url(&format!("/approvals/{mine}")))
                .bearer_auth(KEY_A),
        )
        .await
        .json();
    assert_eq!(approval["votes"][0]["approver"], ALICE);
    assert_eq!(approval["votes"][0]["channel"], "review_page");
    // The trail is written from the stream.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let vote = loop {
        let trail = t.trail(KEY_A, &mine, 50).await;
        if let Some(vote) = trail
            .into_iter()
            .find(|e| e["type"] == "approval.vote_recorded")
        {
            break vote;
        }
        assert!(std::time::Instant::now() < deadline, "no vote in the trail");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert_eq!(vote["actor"]["approver"], ALICE);
    assert_eq!(vote["actor"]["channel"], "review_page");
    assert_eq!(vote["actor"]["iss"], s.issuer().as_str());
    assert_eq!(vote["actor"]["sub"], "alice-1");
    assert!(vote["actor"]["auth_time"].is_string(), "{vote}");

    // Her inbox shows her vote and the progress.
    let html = s.get(&inbox, Some(&alice.cookie)).await.text();
    assert!(html.contains("both</strong>: 1 of 2"), "{html}");
    assert!(html.contains("Your vote: <strong>approved"), "{html}");
    // History: nothing approved yet; the status filter is the listing's.
    let approved = s
        .get(&format!("{inbox}?status=approved"), Some(&alice.cookie))
        .await;
    assert_eq!(approved.status, 200);
    assert!(!approved.text().contains(mine.as_str()));
    let bad = s
        .get(&format!("{inbox}?status=maybe"), Some(&alice.cookie))
        .await;
    assert_eq!(bad.status, 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inbox_pages_through_what_waits_with_signed_cursors() {
    let s = SignInStack::start(json!({}), &[]).await;
    let t = &s.t;
    for n in 0..52 {
        t.create_ok(
            KEY_A,
            &format!("page-{n}"),
            &two_of_two(100 + n, &[ALICE, BOB]),
        )
        .await;
    }
    let inbox = format!("/inbox/{TENANT_A}");
    let alice = s.sign_in(ALICE, &inbox).await;
    // Dispatch indexes them from the stream.
    s.inbox_listing(&inbox, &alice.cookie, 50).await;
    let ids = |html: &str| -> Vec<String> {
        html.split("data-id=\"")
            .skip(1)
            .map(|rest| rest[..rest.find('"').expect("quoted")].to_owned())
            .collect()
    };
    // Until dispatch has indexed the last of them.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let (on_first, older, on_second) = loop {
        let first = s.get(&inbox, Some(&alice.cookie)).await.text();
        let older = link(&first, "Older");
        if let Some(older) = older {
            let second = s.get(&older, Some(&alice.cookie)).await.text();
            if ids(&second).len() == 2 {
                assert!(link(&second, "Older").is_none());
                break (ids(&first), older, ids(&second));
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the inbox never listed 52"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    assert_eq!(on_first.len(), 50, "a page holds 50");
    let seen: std::collections::BTreeSet<&String> = on_first.iter().chain(&on_second).collect();
    assert_eq!(seen.len(), 52, "every approval once, none twice");
    // A cursor is the signed-in person's: Bob's inbox does not open it.
    let bob = s.sign_in(BOB, &inbox).await;
    assert_eq!(s.get(&older, Some(&bob.cookie)).await.status, 400);
    // Without a session: to sign-in, coming back here.
    let anonymous = s.get(&inbox, None).await;
    assert_eq!(anonymous.status, 303);
    assert!(
        location(&anonymous).starts_with(&format!("/auth/{TENANT_A}/login?return_to=%2Finbox"))
    );
}

/// Under the tenant's approval policy, the inbox says why an approval waits on the signed-in
/// person: which policy and version required them, as a member of which group.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inbox_says_which_policy_asked_the_signed_in_person() {
    use countersign::domain::approval_policy::Mode;
    let s = SignInStack::start(json!({}), &[]).await;
    let t = &s.t;
    t.set_group(TENANT_A, "sre", &[ALICE, BOB]).await;
    t.push_policy(
        TENANT_A,
        r#"@id("deploys-need-an-sre") @require("sre:1")
        permit(principal, action == Countersign::Action::"deploy", resource);"#,
        Mode::Enforce,
    )
    .await;
    let body = json!({"action": {"type": "deploy", "payload": {"service": "api", "build": 1}}})
        .to_string();
    let id = t.create_ok(KEY_A, "inbox-policy-1", &body).await;
    let approval = s.approval(&id).await;
    assert_eq!(approval["policy"]["rules"][0]["group"], "sre", "{approval}");

    let inbox = format!("/inbox/{TENANT_A}");
    let alice = s.sign_in(ALICE, &inbox).await;
    let html = s.inbox_listing(&inbox, &alice.cookie, 1).await;
    assert!(
        html.contains(
            "Asked of you by approval policy deploys-need-an-sre (version 1), as a member of sre."
        ),
        "{html}"
    );
}
