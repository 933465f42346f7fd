//! Votes cast in someone's place, with the delegation ending at the worst moment.

use std::time::Duration;

use countersign::domain::rfc3339;
use countersign_tests::{
    ALICE, ALICE_KEY, ApiKeys, BOB, BOB_KEY, CAROL, CI, CI_KEY, CreateBody, TestApp, decision_body,
};
use fail::FailScenario;
use serde_json::json;

/// Review of v6, finding 3: the delegation was read, then the vote written, so a vote could
/// still count after `DELETE /delegations/…` had answered 204. Here the vote stops between its
/// read and its write (a failpoint) while the delegation is deleted: once the delete has
/// answered, the vote's write — which checks the delegation as read in its own transaction —
/// is refused, 403, and nothing is recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_vote_in_someones_place_never_counts_after_its_delegation_ended() {
    let scenario = FailScenario::setup();
    let keys = ApiKeys::new()
        .key(CI, &["requester"], CI_KEY)
        .key(ALICE, &["approver"], ALICE_KEY)
        .key(BOB, &["approver"], BOB_KEY)
        .to_string();
    let t = TestApp::start_with(&[("API_KEYS", &keys)]).await;
    let until = rfc3339(t.clock.now() + 86_400);
    let delegations = t.url(&format!("/delegations/{ALICE}"));
    let set = t
        .send(
            t.http
                .put(&delegations)
                .bearer_auth(ALICE_KEY)
                .json(&json!({"delegate": BOB, "until": until})),
        )
        .await;
    assert_eq!(set.status, 200, "{}", set.text());
    let body = CreateBody::new("deploy", &[ALICE, CAROL]).to_string();
    let id = t.create_ok(CI_KEY, "in-place-race", &body).await;

    fail::cfg("vote::after_delegation_read", "1*return(1500)").unwrap();
    let vote = t.decide(BOB_KEY, &id, decision_body("approve", ALICE));
    let end = async {
        // Well inside the vote's pause: it has read the delegation and waits to write.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let ended = t
            .send(t.http.delete(&delegations).bearer_auth(ALICE_KEY))
            .await;
        assert_eq!(ended.status, 204, "{}", ended.text());
    };
    let (vote, ()) = tokio::join!(vote, end);

    vote.assert_problem(403, "forbidden");
    let approval = t.get(CI_KEY, &id).await.json();
    assert_eq!(approval["status"], "pending");
    assert_eq!(approval["votes"], json!([]), "nothing recorded");
    scenario.teardown();
}
