//! A delegate in the delegator's place on the channels that tell and ask them (docs/API.md
//! "Delegation"): the delegate gets a copy of the delegator's notification, whose review link
//! opens the page in that place, and deciding there records the delegator's vote cast by the
//! delegate — once; a link naming a place that was not delegated decides nothing.

use countersign::domain::rfc3339;
use countersign_tests::{
    ALICE, ALICE_KEY, ApiKeys, BOB, CAROL, CI, CI_KEY, CreateBody, ERIN, TestApp, eventually,
};
use serde_json::{Value, json};

const BOB_KEY: &str = "bob-key-0123456789abcdef";

fn api_keys() -> String {
    ApiKeys::new()
        .key(CI, &["requester", "reader"], CI_KEY)
        .key(ALICE, &["approver"], ALICE_KEY)
        .key(BOB, &["approver"], BOB_KEY)
        .to_string()
}

/// The notifier's call to `approver` about `id`, once made.
async fn notification(t: &TestApp, id: &str, key: &str) -> Value {
    eventually("the notification", || async {
        t.downstream().calls(key) >= 1
    })
    .await;
    t.downstream()
        .calls_to("/notify")
        .into_iter()
        .find(|(k, body)| k == key && body["approval_id"] == id)
        .map(|(_, body)| body)
        .expect("the call")
}

/// A form post of the review page's fields.
fn form(t: &TestApp, id: &str, fields: &[(&str, &str)]) -> reqwest::RequestBuilder {
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(fields)
        .finish();
    t.http
        .post(t.url(&format!("/approvals/{id}/decision")))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body)
}

/// The review link's path and query on this app (the notifier's URL names the public base).
fn on_this_app(t: &TestApp, review_url: &str) -> String {
    let at = review_url.find("/approvals/").expect("a review path");
    format!("{}{}", t.base, &review_url[at..])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_delegate_is_told_in_the_delegators_place_and_decides_there_once() {
    let t = TestApp::start_jobs(&[("API_KEYS", &api_keys())]).await;
    let until = rfc3339(t.clock.now() + 7 * 86_400);
    let set = t
        .send(
            t.http
                .put(t.url(&format!("/delegations/{ALICE}")))
                .bearer_auth(ALICE_KEY)
                .json(&json!({"delegate": ERIN, "until": until, "reason": "on leave"})),
        )
        .await;
    assert_eq!(set.status, 200, "{}", set.text());
    let body = CreateBody::new("deploy", &[ALICE, BOB])
        .policy(json!({"rules": [{"name": "pair", "approvers": [ALICE, BOB], "min_approvals": 2}]}))
        .to_string();
    let id = t.create_ok(CI_KEY, "places-1", &body).await;

    let copy = notification(&t, &id, &format!("{id}:notify:{ERIN}:delegate")).await;
    assert_eq!(copy["approver"], ERIN);
    assert_eq!(copy["in_place_of"], ALICE);
    let link = copy["review_url"].as_str().expect("a link");
    assert!(link.contains("place=alice%40example.com"), "{link}");
    // Alice and bob are told as ever; bob, who delegated nothing, has no copy.
    notification(&t, &id, &format!("{id}:notify:{ALICE}")).await;
    notification(&t, &id, &format!("{id}:notify:{BOB}")).await;
    assert_eq!(t.downstream().calls_to("/notify").len(), 3);

    let page = t.send(t.http.get(on_this_app(&t, link))).await;
    assert_eq!(page.status, 200);
    let html = page.text();
    assert!(
        html.contains(&format!("As {ERIN}, in the place of {ALICE}")),
        "{html}"
    );
    let token = link
        .split("token=")
        .nth(1)
        .and_then(|rest| rest.split('&').next())
        .expect("the token");
    let token = url::form_urlencoded::parse(format!("t={token}").as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .expect("decoded");
    let post = || {
        form(
            &t,
            &id,
            &[
                ("token", token.as_str()),
                ("decision", "approve"),
                ("place", ALICE),
            ],
        )
    };
    let (a, b) = futures::join!(t.send_any(post()), t.send_any(post()));
    // Each 303 to the page in alice's place (followed), which shows her place filled.
    assert_eq!((a.status, b.status), (200, 200));
    assert!(
        a.text()
            .contains(&format!("The place of {ALICE} is filled")),
        "{}",
        a.text()
    );
    let approval = t.get(CI_KEY, &id).await.json();
    let votes = approval["votes"].as_array().expect("votes");
    assert_eq!(votes.len(), 1, "{approval}");
    assert_eq!(
        (&votes[0]["approver"], &votes[0]["by"], &votes[0]["channel"]),
        (&json!(ALICE), &json!(ERIN), &json!("review_page"))
    );
    assert_eq!(approval["policy"]["rules"][0]["approvals"], 1);

    // Separation of duties is the write's own condition, whatever the channel: a vote in bob's
    // place cast by the requester is refused even when no sender is named.
    let now = t.clock.now();
    let by_requester = countersign::domain::Decision {
        outcome: countersign::domain::Outcome::Approved,
        approver: countersign::domain::Approver::parse(BOB).unwrap(),
        decided_at: now,
        channel: countersign::domain::Channel::ReviewPage,
        comment: None,
        webhook_event_id: None,
        key_id: None,
        signed_in: None,
        by: Some(countersign::domain::Approver::parse(CI).unwrap()),
        delegation_set_by: None,
        passkey: None,
    };
    // On a fresh approval, where the vote would be counted without completing anything (a
    // completing vote is also refused by the store's reading of the refusal).
    let fresh = t.create_ok(CI_KEY, "places-2", &body).await;
    let tenant = countersign::domain::TenantId::parse("tenant-a").unwrap();
    let approval_id = countersign::domain::ApprovalId::parse(&fresh).unwrap();
    let refused = t
        .app
        .store
        .decide(
            &tenant,
            &approval_id,
            &by_requester,
            countersign::store::VoteBy::default(),
            now,
        )
        .await
        .expect("the store answers");
    assert!(
        matches!(refused, countersign::store::DecideOutcome::Refused(_)),
        "the requester stood in for bob"
    );

    // Carol was delegated nothing: her link naming alice's place shows and decides nothing.
    let carol = t.review_token("tenant-a", &id, CAROL);
    let page = t
        .send_any(t.http.get(t.url(&format!(
            "/approvals/{id}/review?token={carol}&place=alice%40example.com"
        ))))
        .await;
    assert_eq!(page.status, 403);
    let refused = t
        .send_any(form(
            &t,
            &id,
            &[
                ("token", carol.as_str()),
                ("decision", "approve"),
                ("place", ALICE),
            ],
        ))
        .await;
    assert_eq!(refused.status, 403);
    let approval = t.get(CI_KEY, &id).await.json();
    assert_eq!(approval["votes"].as_array().map(Vec::len), Some(1));

    // Bob delegates to erin too: a copy is keyed by the delegate, not the delegator (review of
    // v6, finding 12), so erin is told once, in the place of the first of them listed.
    let set = t
        .send(
            t.http
                .put(t.url(&format!("/delegations/{BOB}")))
                .bearer_auth(BOB_KEY)
                .json(&json!({"delegate": ERIN, "until": until})),
        )
        .await;
    assert_eq!(set.status, 200, "{}", set.text());
    let both = t.create_ok(CI_KEY, "places-3", &body).await;
    let copy = notification(&t, &both, &format!("{both}:notify:{ERIN}:delegate")).await;
    assert_eq!(copy["in_place_of"], ALICE);
    notification(&t, &both, &format!("{both}:notify:{BOB}")).await;
    notification(&t, &both, &format!("{both}:notify:{ALICE}")).await;
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let to_erin: Vec<_> = t
        .downstream()
        .calls_to("/notify")
        .into_iter()
        .filter(|(_, body)| body["approval_id"] == both.as_str() && body["approver"] == ERIN)
        .collect();
    assert_eq!(to_erin.len(), 1, "one copy for erin: {to_erin:?}");
}
