//! A delegate's click (docs/SLACK.md, docs/API.md "Delegation"): someone the approval does not
//! list, standing in for someone it does, fills the first listed place they stand in for that
//! has no vote — recorded as that person's, by the delegate — and is told whose; one vote per
//! person and separation of duties hold as on every channel, and a listed approver's click
//! costs what it did.

use countersign::domain::rfc3339;
use countersign_tests::slack::{U_ALICE, U_BOB, U_ERIN, U_REQUESTER};
use countersign_tests::{
    ALICE, BOB, CAROL, CreateBody, ERIN, KEY_A, TENANT_A, TestApp, execute_key,
};
use serde_json::{Value, json};

use super::{APPROVE, Message, REJECT, all_three_must_approve};
use crate::helpers::WAIT;

const WEEK: i64 = 7 * 86_400;

/// `delegator` lets `delegate` vote in their place for a week (set by tenant A's operator key).
async fn delegate(t: &TestApp, delegator: &str, delegate: &str) {
    let until = rfc3339(t.clock.now() + WEEK);
    let reply = t
        .send(
            t.http
                .put(t.url(&format!("/delegations/{delegator}")))
                .bearer_auth(KEY_A)
                .json(&json!({"delegate": delegate, "until": until,
                              "reason": "set for the test by the tenant's operator"})),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
}

/// A deploy that alice and bob must both approve.
fn both_must_approve(build: u64) -> String {
    CreateBody::new("deploy", &[ALICE, BOB])
        .payload(json!({"build": build}))
        .policy(json!({"rules": [{"name": "both", "approvers": [ALICE, BOB], "min_approvals": 2}]}))
        .to_string()
}

/// What `user` was told, in order.
fn told(slack: &countersign_tests::slack::FakeSlack, user: &str) -> Vec<String> {
    slack
        .ephemerals()
        .iter()
        .filter(|e| e["user"] == user)
        .map(|e| e["text"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn votes(approval: &Value) -> Vec<Value> {
    approval["votes"].as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_delegate_s_click_fills_the_delegator_s_place_once() {
    let (t, slack) = TestApp::start_slack(&[]).await;
    let id = t
        .create_ok(KEY_A, "slack-delegate", &both_must_approve(1))
        .await;
    slack.wait_for_message(&id, WAIT, Message::pending).await;

    // Without a delegation erin approves nothing here, as before.
    assert_eq!(
        t.click(&slack, U_ERIN, APPROVE, &id, false).await.status,
        200
    );
    assert_eq!(votes(&t.get(KEY_A, &id).await.json()), Vec::<Value>::new());
    assert_eq!(told(&slack, U_ERIN).len(), 1);
    assert!(told(&slack, U_ERIN)[0].contains("not an approver"));

    // bob delegates to erin: her click is a vote in his place, and she is told whose.
    delegate(&t, BOB, ERIN).await;
    assert_eq!(
        t.click(&slack, U_ERIN, APPROVE, &id, false).await.status,
        200
    );
    let approval = t.get(KEY_A, &id).await.json();
    assert_eq!(approval["status"], "pending", "{approval}");
    let cast = votes(&approval);
    assert_eq!(cast.len(), 1, "{cast:?}");
    assert_eq!(
        (
            &cast[0]["approver"],
            &cast[0]["by"],
            &cast[0]["channel"],
            &cast[0]["vote"]
        ),
        (
            &json!(BOB),
            &json!(ERIN),
            &json!("slack"),
            &json!("approve")
        )
    );
    assert_eq!(
        told(&slack, U_ERIN)[1],
        format!("Approved in {BOB}'s place.")
    );
    let message = slack
        .wait_for_message(&id, WAIT, |m| m.shown().contains("(by "))
        .await;
    assert!(
        message
            .shown()
            .contains(&format!("*{BOB} (by {ERIN})* approved")),
        "{}",
        message.shown()
    );

    // Her second click repeats her vote; the other button is her one vote spent; Slack's retry
    // of her click is not answered; bob's own click finds his place filled. Nothing recorded.
    for (action, retry) in [(APPROVE, false), (REJECT, false), (APPROVE, true)] {
        assert_eq!(
            t.click(&slack, U_ERIN, action, &id, retry).await.status,
            200
        );
    }
    assert_eq!(
        t.click(&slack, U_BOB, APPROVE, &id, false).await.status,
        200
    );
    assert_eq!(votes(&t.get(KEY_A, &id).await.json()).len(), 1);
    let erin = told(&slack, U_ERIN);
    assert_eq!(erin.len(), 4, "the retry is not answered: {erin:?}");
    assert!(
        erin[2].contains(&format!(
            "already recorded, in {BOB}'s place; it counts once"
        )),
        "{erin:?}"
    );
    assert!(
        erin[3].contains(&format!(
            "already voted on this request (approve), in {BOB}'s place: one vote per person"
        )),
        "{erin:?}"
    );
    let bob = told(&slack, U_BOB);
    assert_eq!(bob.len(), 1, "{bob:?}");
    assert!(
        bob[0].contains(&format!(
            "Your place on this request is already filled (approve by {ERIN})"
        )),
        "{bob:?}"
    );

    // alice's click completes the quorum: approved, executed once.
    assert_eq!(
        t.click(&slack, U_ALICE, APPROVE, &id, false).await.status,
        200
    );
    let done = t.wait_for_execution(KEY_A, &id, WAIT).await;
    assert_eq!(done["status"], "approved", "{done}");
    assert_eq!(votes(&done).len(), 2);
    let key = execute_key("slack-delegate", &id);
    assert_eq!(t.downstream().calls(&key), 1);
}

/// The first listed place with no vote, in the approvers' order; never one whose owner voted;
/// a delegate who requested the approval is refused as the requester is.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_click_fills_the_first_open_place_and_never_the_requester_s() {
    let (t, slack) = TestApp::start_slack(&[]).await;
    let id = all_three_must_approve(&t, &slack, "slack-first-place").await;
    delegate(&t, ALICE, ERIN).await;
    delegate(&t, CAROL, ERIN).await;
    // bob's delegate is the requester (tenant A's key's principal).
    delegate(&t, BOB, TENANT_A).await;

    assert_eq!(
        t.click(&slack, U_ALICE, APPROVE, &id, false).await.status,
        200
    );
    assert_eq!(
        t.click(&slack, U_REQUESTER, APPROVE, &id, false)
            .await
            .status,
        200
    );
    assert_eq!(
        t.click(&slack, U_ERIN, REJECT, &id, false).await.status,
        200
    );
    let approval = t
        .wait_for_approval(KEY_A, &id, WAIT, |a| a["status"] != "pending")
        .await;
    assert_eq!(approval["status"], "rejected", "{approval}");
    let cast = votes(&approval);
    assert_eq!(cast.len(), 2, "{cast:?}");
    assert_eq!(
        (&cast[0]["approver"], &cast[0]["by"]),
        (&json!(ALICE), &Value::Null)
    );
    // alice's place is filled: erin's click goes to carol's (bob has not delegated to her).
    assert_eq!(
        (&cast[1]["approver"], &cast[1]["by"], &cast[1]["vote"]),
        (&json!(CAROL), &json!(ERIN), &json!("reject"))
    );
    assert_eq!(
        told(&slack, U_ERIN),
        [format!("Rejected in {CAROL}'s place.")]
    );
    assert!(
        told(&slack, U_REQUESTER)
            .iter()
            .any(|s| s.contains("You requested this approval")),
        "{:?}",
        slack.ephemerals()
    );
}

/// A listed approver's click costs what it did (one `UpdateItem`, no read); a click by someone
/// not listed adds the one read of the open places' delegations (a `BatchGetItem`), then the
/// vote in a place; a delegate who voted already is refused by the first write alone.
#[tokio::test]
async fn a_delegate_s_click_costs_one_batch_read_more() {
    let slack = countersign_tests::slack::FakeSlack::start().await;
    let t = TestApp::start_with(&[("SLACK", &slack.config())]).await;
    let id = t
        .create_ok(KEY_A, "rt-delegate", &both_must_approve(2))
        .await;
    t.calls.take();

    assert_eq!(
        t.click(&slack, U_ERIN, APPROVE, &id, false).await.status,
        200
    );
    assert_eq!(
        t.calls.take(),
        ["UpdateItem", "BatchGetItem"],
        "not listed, no delegation"
    );
    delegate(&t, BOB, ERIN).await;
    t.calls.take();
    assert_eq!(
        t.click(&slack, U_ALICE, APPROVE, &id, false).await.status,
        200
    );
    assert_eq!(
        t.calls.take(),
        ["UpdateItem"],
        "a listed approver, as before"
    );
    // erin's vote in bob's place completes the quorum: shaped as the completing write from the
    // approval its refused first write returned, in one transaction with the delegation's check.
    assert_eq!(
        t.click(&slack, U_ERIN, APPROVE, &id, false).await.status,
        200
    );
    assert_eq!(
        t.calls.take(),
        ["UpdateItem", "BatchGetItem", "TransactWriteItems"],
        "in bob's place, completing"
    );
    assert_eq!(
        t.click(&slack, U_ERIN, APPROVE, &id, false).await.status,
        200
    );
    assert_eq!(t.calls.take(), ["UpdateItem"], "her vote cast: no read");
    let done = t.get(KEY_A, &id).await.json();
    assert_eq!(done["status"], "approved", "{done}");
    assert_eq!(done["decision"]["by"], ERIN);
}
