//! Clicks as votes: signed clicks counted once per person (double clicks, Slack's retries),
//! approve and reject clicked at once with one outcome, unsigned or forged clicks refused with
//! 401, refused clicks told to the clicking user alone, and a user mapping matched by identity.

use countersign_tests::slack::{
    SLACK_SIGNING_SECRET, U_ALICE, U_BOB, U_CAROL, U_ERIN, U_NOBODY, U_REQUESTER, slack_headers,
};
use countersign_tests::{
    ALICE, BOB, CAROL, CreateBody, KEY_A, TENANT_A, TENANT_B, TestApp, execute_key,
};
use futures::future::join_all;
use serde_json::{Value, json};

use super::{APPROVE, Message, REJECT, deploy};
use crate::helpers::WAIT;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_quorum_decided_by_signed_clicks_counts_each_person_once() {
    let (t, slack) = TestApp::start_slack(&[]).await;
    let body = CreateBody::new("deploy", &[ALICE, BOB, CAROL])
        .payload(json!({"build": 42}))
        .context(json!({"summary": "Deploy api build 42 to prod"}))
        .policy(json!({"rules": [
            {"name": "leads", "approvers": [ALICE, BOB, CAROL], "min_approvals": 2}]}))
        .to_string();
    let id = t.create_ok(KEY_A, "slack-quorum", &body).await;
    slack.wait_for_message(&id, WAIT, Message::pending).await;

    // alice double-clicks Approve while bob clicks once; then Slack delivers bob's click again
    // (`X-Slack-Retry-Num: 1`).
    let mut replies = join_all([
        t.click(&slack, U_ALICE, APPROVE, &id, false),
        t.click(&slack, U_ALICE, APPROVE, &id, false),
        t.click(&slack, U_BOB, APPROVE, &id, false),
    ])
    .await;
    replies.push(t.click(&slack, U_BOB, APPROVE, &id, true).await);
    for reply in &replies {
        assert_eq!(reply.status, 200, "{}", reply.text());
    }
    let done = t.wait_for_execution(KEY_A, &id, WAIT).await;
    assert_eq!(done["status"], "approved");
    assert_eq!(done["execution"]["status"], "succeeded");
    let votes = done["votes"].as_array().unwrap();
    assert_eq!(votes.len(), 2, "{votes:?}");
    assert!(
        votes
            .iter()
            .all(|v| v["channel"] == "slack" && v["vote"] == "approve")
    );
    let key = execute_key("slack-quorum", &id);
    assert_eq!(
        (t.downstream().calls(&key), t.downstream().effects(&key)),
        (1, 1)
    );

    // The message follows: both votes, approved, the execution's end, no buttons.
    let message = slack
        .wait_for_message(&id, WAIT, |m| m.shown().contains("*succeeded*"))
        .await;
    let shown = message.shown();
    assert!(!message.has_buttons(), "{shown}");
    for who in [ALICE, BOB] {
        assert!(
            shown.contains(&format!(":white_check_mark: *{who}* approved (via slack)")),
            "{shown}"
        );
    }
    assert!(
        shown.contains("*leads*: 2 of 2") && shown.contains("Status: *approved*"),
        "{shown}"
    );
    assert_eq!(slack.posts_of(&id).len(), 1);
    // alice's second click is told it counted once; Slack's retry of bob's is not answered.
    let told = slack.ephemerals();
    assert_eq!(told.len(), 1, "{told:?}");
    assert_eq!(told[0]["user"], U_ALICE);
    assert_eq!(told[0]["response_type"], "ephemeral");
    assert!(told[0]["text"].as_str().unwrap().contains("counts once"));

    // A click whose first delivery never arrived: Slack's retry alone is the vote.
    let single = t
        .create_ok(KEY_A, "slack-retried", &deploy(43, &[CAROL]))
        .await;
    assert_eq!(
        t.click(&slack, U_CAROL, APPROVE, &single, true)
            .await
            .status,
        200
    );
    let decided = t.get(KEY_A, &single).await.json();
    assert_eq!(decided["status"], "approved");
    assert_eq!(decided["decision"]["approver"], CAROL);
    assert_eq!(decided["decision"]["channel"], "slack");
    assert_eq!(slack.ephemerals().len(), 1, "nothing told");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn twenty_rounds_of_approve_and_reject_clicked_at_once_have_one_outcome_each() {
    let (t, slack) = TestApp::start_slack(&[]).await;
    let mut ids = Vec::new();
    for round in 0..20 {
        let id = t
            .create_ok(
                KEY_A,
                &format!("round-{round}"),
                &deploy(round, &[ALICE, BOB]),
            )
            .await;
        ids.push(id);
    }
    for id in &ids {
        slack.wait_for_message(id, WAIT, Message::pending).await;
    }
    // How long a click waits for its answer (a figure, printed; Slack gives 3 s).
    let mut answered = Vec::new();
    for id in &ids {
        let started = std::time::Instant::now();
        let replies = join_all([
            t.click(&slack, U_ALICE, APPROVE, id, false),
            t.click(&slack, U_BOB, REJECT, id, false),
        ])
        .await;
        answered.push(started.elapsed());
        assert!(replies.iter().all(|r| r.status == 200));
    }
    answered.sort();
    println!(
        "two clicks at once, answered in: median {} ms, slowest {} ms (the loser's answer includes telling its user)",
        answered[answered.len() / 2].as_millis(),
        answered[answered.len() - 1].as_millis()
    );
    let mut outcomes = (0, 0);
    for id in &ids {
        let approval = t
            .wait_for_approval(KEY_A, id, WAIT, |a| a["status"] != "pending")
            .await;
        let status = approval["status"].as_str().unwrap().to_owned();
        assert_eq!(
            approval["votes"].as_array().unwrap().len(),
            1,
            "one vote decides: {approval}"
        );
        match status.as_str() {
            "approved" => outcomes.0 += 1,
            "rejected" => outcomes.1 += 1,
            other => panic!("{other}"),
        }
        let message = slack
            .wait_for_message(id, WAIT, |m| {
                !m.has_buttons() && m.shown().contains(&format!("Status: *{status}*"))
            })
            .await;
        let (winner, verb) = match status.as_str() {
            "approved" => (ALICE, "approved"),
            _ => (BOB, "rejected"),
        };
        assert!(
            message.shown().contains(&format!("*{winner}* {verb}")),
            "{}",
            message.shown()
        );
    }
    println!(
        "20 rounds: {} approved, {} rejected",
        outcomes.0, outcomes.1
    );
    // Each round's loser was told, alone, that it was already decided.
    let told = slack.ephemerals();
    assert_eq!(told.len(), 20, "{told:?}");
    assert!(
        told.iter()
            .all(|e| e["text"].as_str().unwrap().contains("already"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn unsigned_clicks_are_401_and_refused_clicks_are_told_to_the_clicker_alone() {
    let (t, slack) = TestApp::start_slack(&[]).await;
    // The requester (tenant A's key) is listed too: separation of duties refuses its click.
    let id = t
        .create_ok(KEY_A, "slack-refused", &deploy(7, &[ALICE, BOB, TENANT_A]))
        .await;
    slack.wait_for_message(&id, WAIT, Message::pending).await;
    let body = slack.click_body(U_ALICE, APPROVE, &id);
    let now = t.clock.now();

    let mut forged = slack_headers(SLACK_SIGNING_SECRET, now, &body);
    forged[1].1 = format!("v0={}", "0".repeat(64));
    let stale = slack_headers(SLACK_SIGNING_SECRET, now - 301, &body);
    let other_secret = slack_headers("another-apps-signing-secret-012345", now, &body);
    let unsigned = vec![(
        "content-type",
        "application/x-www-form-urlencoded".to_owned(),
    )];
    for (what, headers, tenant) in [
        ("forged", &forged, TENANT_A),
        ("stale", &stale, TENANT_A),
        ("another app's secret", &other_secret, TENANT_A),
        ("unsigned", &unsigned, TENANT_A),
        (
            "a tenant without Slack",
            &slack_headers(SLACK_SIGNING_SECRET, now, &body),
            TENANT_B,
        ),
    ] {
        let reply = t.slack_interaction(tenant, headers, &body).await;
        assert_eq!(reply.status, 401, "{what}: {}", reply.text());
        reply.assert_problem(401, "invalid_signature");
    }
    // Signed, but not a click on our buttons: acknowledged, ignored.
    let other = url::form_urlencoded::Serializer::new(String::new())
        .append_pair(
            "payload",
            &json!({"type": "view_submission", "user": {"id": U_ALICE}}).to_string(),
        )
        .finish();
    let reply = t
        .slack_interaction(
            TENANT_A,
            &slack_headers(SLACK_SIGNING_SECRET, now, &other),
            &other,
        )
        .await;
    assert_eq!(reply.status, 200);

    // Verified clicks that decide nothing: answered 200, told to the clicking user alone.
    for user in [U_NOBODY, U_REQUESTER, U_ERIN, U_CAROL] {
        assert_eq!(t.click(&slack, user, APPROVE, &id, false).await.status, 200);
    }
    let bogus = slack.click_body(U_ALICE, APPROVE, "apr_nothing_here");
    let reply = t
        .slack_interaction(
            TENANT_A,
            &slack_headers(SLACK_SIGNING_SECRET, now, &bogus),
            &bogus,
        )
        .await;
    assert_eq!(reply.status, 200);

    let approval = t.get(KEY_A, &id).await.json();
    assert_eq!(approval["status"], "pending");
    assert_eq!(approval["votes"], json!([]), "nothing recorded");
    let told = slack.ephemerals();
    let said = |user: &str| -> String {
        told.iter()
            .filter(|e| e["user"] == user)
            .map(|e| e["text"].as_str().unwrap().to_owned())
            .collect()
    };
    assert!(said(U_NOBODY).contains("not mapped"), "{told:?}");
    assert!(
        said(U_REQUESTER).contains("You requested this approval"),
        "{told:?}"
    );
    assert!(said(U_ERIN).contains("not an approver"), "{told:?}");
    assert!(said(U_CAROL).contains("not an approver"), "{told:?}");
    assert!(said(U_ALICE).contains("names no approval"), "{told:?}");
    assert_eq!(told.len(), 5, "one answer per refused click: {told:?}");
    assert!(told.iter().all(|e| e["response_type"] == "ephemeral"));

    // The message still asks; a real click still decides.
    assert_eq!(t.click(&slack, U_BOB, REJECT, &id, false).await.status, 200);
    let message = slack
        .wait_for_message(&id, WAIT, |m| !m.has_buttons())
        .await;
    assert!(
        message.shown().contains("Status: *rejected*"),
        "{}",
        message.shown()
    );
}

/// Listed is by identity (issue 36): a `SLACK.users` entry spelled `Alice@Example.com` votes on
/// an approval listing `alice@example.com`, recorded as listed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_mixed_case_user_mapping_votes_as_the_listed_approver() {
    let slack = countersign_tests::slack::FakeSlack::start().await;
    let mut config: Value = serde_json::from_str(&slack.config()).unwrap();
    config[TENANT_A]["users"][U_ALICE] = json!(ALICE.to_uppercase());
    let config = config.to_string();
    let t = TestApp::start_jobs(&[("SLACK", &config)]).await;
    let id = t
        .create_ok(KEY_A, "slack-case", &deploy(7, &[ALICE, BOB]))
        .await;
    slack.wait_for_message(&id, WAIT, Message::pending).await;
    let reply = t.click(&slack, U_ALICE, APPROVE, &id, false).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let done = t.wait_for_execution(KEY_A, &id, WAIT).await;
    assert_eq!(done["status"], "approved");
    assert_eq!(done["votes"][0]["approver"], ALICE, "recorded as listed");
    assert_eq!(done["votes"][0]["channel"], "slack");
}
