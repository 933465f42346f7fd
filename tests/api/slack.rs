//! Deciding in Slack, against a fake Slack Web API the tests run (real HTTP, answering like
//! Slack, recording every call): one message per approval whatever happens to a post's answer,
//! signed clicks as votes counted once, refusals told to the clicking user alone, and a message
//! that follows the approval to its end, never drawn back to an older state.

use std::time::Duration;

use countersign::jobs::{Job, SlackJob};
use countersign::slack::MessageState;
use countersign_tests::slack::{
    Fault, SLACK_SIGNING_SECRET, U_ALICE, U_BOB, U_CAROL, U_ERIN, U_NOBODY, U_REQUESTER,
    slack_headers,
};
use countersign_tests::{
    ALICE, BOB, CAROL, CreateBody, KEY_A, TENANT_A, TENANT_B, TestApp, execute_key,
};
use futures::future::join_all;
use serde_json::{Value, json};

use crate::helpers::WAIT;

const APPROVE: &str = "countersign.approve";
const REJECT: &str = "countersign.reject";

/// A deploy of `build` for `approvers`, with a summary.
fn deploy(build: u64, approvers: &[&str]) -> String {
    CreateBody::new("deploy", approvers)
        .payload(json!({"build": build}))
        .context(json!({"summary": format!("Deploy api build {build} to prod")}))
        .to_string()
}

/// Waits until the approval records where its message is; returns the approval.
async fn posted(t: &TestApp, id: &str) -> Value {
    t.wait_for_approval(KEY_A, id, WAIT, |a| a["slack"]["ts"].is_string())
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_approval_is_one_post_even_when_a_posts_answer_is_lost() {
    let (t, slack) = TestApp::start_slack(&[]).await;
    // History in pages of one message: a lookup pages as soon as the channel holds two.
    slack.set_history_page(1);

    let id = t
        .create_ok(KEY_A, "slack-1", &deploy(1, &[ALICE, BOB]))
        .await;
    let approval = posted(&t, &id).await;
    let message = slack.wait_for_message(&id, WAIT, Message::pending).await;
    assert_eq!(
        approval["slack"],
        json!({"channel": message.channel, "ts": message.ts})
    );
    assert_eq!(slack.posts_of(&id).len(), 1);
    assert!(
        slack.calls("conversations.history").is_empty(),
        "no doubt, no lookup"
    );
    let shown = message.shown();
    assert!(
        shown.contains("Deploy api build 1 to prod") && shown.contains("sha256:"),
        "{shown}"
    );
    assert_eq!(message.metadata["event_payload"]["tenant"], TENANT_A);

    // The post is made, its answer never arrives: the channel is asked, the message found.
    slack.fault_next(
        "chat.postMessage",
        Fault::LoseAnswer(Duration::from_secs(3)),
    );
    let lost = t
        .create_ok(KEY_A, "slack-2", &deploy(2, &[ALICE, BOB]))
        .await;
    let approval = posted(&t, &lost).await;
    assert_eq!(slack.posts_of(&lost).len(), 1, "found, not posted again");
    assert_eq!(slack.messages_of(&lost).len(), 1);
    assert_eq!(
        approval["slack"]["ts"],
        slack.messages_of(&lost)[0].ts.as_str()
    );
    let lookups = slack.calls("conversations.history");
    assert!(!lookups.is_empty(), "a post in doubt is looked for");
    assert!(
        lookups
            .iter()
            .all(|l| l.body["include_all_metadata"] == "true")
    );

    // The post really failed (500, nothing posted): looked for, not found, posted again.
    slack.fault_next("chat.postMessage", Fault::Fail);
    let failed = t
        .create_ok(KEY_A, "slack-3", &deploy(3, &[ALICE, BOB]))
        .await;
    posted(&t, &failed).await;
    let answers: Vec<String> = slack
        .posts_of(&failed)
        .into_iter()
        .map(|c| c.answer)
        .collect();
    assert_eq!(answers, ["http_500", "ok"]);
    assert_eq!(slack.messages_of(&failed).len(), 1);
    // The fake answers pages of one message: the lookup paged.
    assert!(
        slack
            .calls("conversations.history")
            .iter()
            .any(|c| c.body["cursor"].is_string()),
        "the lookup followed the cursor"
    );
    assert_eq!(slack.messages().len(), 3, "one message per approval");
}

/// Message predicates.
struct Message;

impl Message {
    fn pending(m: &countersign_tests::slack::Message) -> bool {
        m.has_buttons()
    }
}

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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_older_state_never_overwrites_a_newer_one_and_ratelimited_is_honoured() {
    let (t, slack) = TestApp::start_slack(&[]).await;
    let id = t
        .create_ok(KEY_A, "slack-order", &deploy(8, &[ALICE, BOB]))
        .await;
    slack.wait_for_message(&id, WAIT, Message::pending).await;
    let pending = t.stored_approval(&id).await;

    // Slack is rate limiting: the update waits the Retry-After it names.
    slack.fault_next("chat.update", Fault::RateLimited(2));
    assert_eq!(
        t.click(&slack, U_ALICE, APPROVE, &id, false).await.status,
        200
    );
    let message = slack
        .wait_for_message(&id, WAIT, |m| m.shown().contains("*succeeded*"))
        .await;
    assert!(!message.has_buttons());
    let updates = slack.calls("chat.update");
    let limited = updates
        .iter()
        .position(|c| c.answer == "ratelimited")
        .expect("rate limited");
    let next = &updates[limited + 1];
    let waited = next.at.duration_since(updates[limited].at);
    assert!(
        waited >= Duration::from_secs(2),
        "came back after {waited:?}"
    );

    // The pending state's job, delivered again now (a late copy): refused by the message's
    // ledger item as older than the state shown; Slack is not called.
    let calls_before = slack.calls("chat.update").len();
    let late = Job::Slack(SlackJob {
        version: "0".repeat(40),
        created_at: pending.created_at,
        message: MessageState::of(&pending),
        trace: None,
    });
    let sqs = aws_sdk_sqs::Client::new(&t.sdk);
    sqs.send_message()
        .queue_url(&t.queues().queue_url)
        .message_body(late.to_body().unwrap())
        .send()
        .await
        .expect("send the late job");
    // The queue empties once the executor has taken and acknowledged it.
    let deadline = std::time::Instant::now() + WAIT;
    while t.queue_depth(&t.queues().queue_url).await > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the late job was not taken"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        slack.calls("chat.update").len(),
        calls_before,
        "no older render sent"
    );
    let message = &slack.messages_of(&id)[0];
    assert!(message.shown().contains("*succeeded*") && !message.has_buttons());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_slow_older_update_holds_the_newer_back_until_it_is_done() {
    // Leases long enough for a slow call (the call timeout is a third of the visibility).
    let (t, slack) = TestApp::start_slack(&[("JOB_VISIBILITY_TIMEOUT_SECONDS", "6")]).await;
    let id = all_three_must_approve(&t, &slack, "slack-slow").await;
    // A second executor beside the first, as a second Lambda instance: bob's job need not wait
    // for the first executor's batch.
    let _second = t.start_another_runner();
    // alice's vote's update is slow at Slack; bob's vote comes while it is under way.
    slack.fault_next("chat.update", Fault::Slow(Duration::from_millis(1_500)));
    assert_eq!(
        t.click(&slack, U_ALICE, APPROVE, &id, false).await.status,
        200
    );
    wait_for_arrival(&slack, "chat.update").await;
    assert_eq!(
        t.click(&slack, U_BOB, APPROVE, &id, false).await.status,
        200
    );
    let message = slack.wait_for_message(&id, WAIT, |m| m.updates == 2).await;
    // Drawn in order: alice's state, then bob's over it — never bob's overwritten by alice's
    // late one.
    let shown = message.shown();
    assert!(shown.contains(&format!("*{ALICE}* approved")), "{shown}");
    assert!(shown.contains(&format!("*{BOB}* approved")), "{shown}");
    assert!(
        shown.contains("*all*: 2 of 3") && message.has_buttons(),
        "{shown}"
    );
    let updates = slack.calls("chat.update");
    let bob_shown = |c: &countersign_tests::slack::Call| {
        c.body["blocks"]
            .to_string()
            .contains(&format!("*{BOB}* approved"))
    };
    assert_eq!(
        updates.iter().map(bob_shown).collect::<Vec<_>>(),
        [false, true]
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(slack.calls("chat.update").len(), 2, "nothing redrawn after");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_worker_that_stops_mid_draw_holds_the_message_only_until_its_lease_ends() {
    // Two attempts per job, leases of about 5 s: the newer states' jobs wait for the stopped
    // worker's lease longer than their attempts would last, if waiting spent them.
    let (t, slack) = TestApp::start_slack(&[
        ("JOB_VISIBILITY_TIMEOUT_SECONDS", "6"),
        ("JOB_MAX_ATTEMPTS", "2"),
    ])
    .await;
    let id = all_three_must_approve(&t, &slack, "slack-stopped").await;

    // alice's vote: its update reaches Slack and hangs there; its worker stops mid-call.
    slack.fault_next("chat.update", Fault::LoseAnswer(Duration::from_secs(30)));
    assert_eq!(
        t.click(&slack, U_ALICE, APPROVE, &id, false).await.status,
        200
    );
    wait_for_arrival(&slack, "chat.update").await;
    t.stop_runner().await;
    t.start_runner();
    // More changes while the stopped worker's lease lasts.
    for user in [U_BOB, U_CAROL] {
        assert_eq!(t.click(&slack, user, APPROVE, &id, false).await.status, 200);
    }
    let message = slack
        .wait_for_message(&id, WAIT, |m| m.shown().contains("execution: *succeeded*"))
        .await;
    let shown = message.shown();
    assert!(!message.has_buttons(), "{shown}");
    for who in [ALICE, BOB, CAROL] {
        assert!(shown.contains(&format!("*{who}* approved")), "{shown}");
    }
    assert_eq!(slack.posts_of(&id).len(), 1);
    assert_eq!(
        t.queue_depth(&t.queues().dlq_url).await,
        0,
        "no job spent its attempts waiting"
    );
}

/// Waits until a call of `method` has reached the fake (answered or not).
async fn wait_for_arrival(slack: &countersign_tests::slack::FakeSlack, method: &str) {
    let deadline = std::time::Instant::now() + WAIT;
    while slack.arrivals(method) == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "no {method} call arrived"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cancel_and_an_expiry_take_the_buttons_away() {
    let (t, slack) = TestApp::start_slack(&[]).await;
    let cancelled = t
        .create_ok(KEY_A, "slack-cancel", &deploy(9, &[ALICE]))
        .await;
    let expiring = CreateBody::new("deploy", &[ALICE])
        .context(json!({"summary": "Expires soon"}))
        .expires_in(60)
        .to_string();
    let expiring = t.create_ok(KEY_A, "slack-expire", &expiring).await;
    for id in [&cancelled, &expiring] {
        slack.wait_for_message(id, WAIT, Message::pending).await;
    }

    assert_eq!(t.cancel(KEY_A, &cancelled, "wrong build").await.status, 200);
    let message = slack
        .wait_for_message(&cancelled, WAIT, |m| !m.has_buttons())
        .await;
    assert!(
        message.shown().contains("Status: *cancelled*"),
        "{}",
        message.shown()
    );

    t.clock.advance(61);
    let report = countersign::jobs::Expirer::new(t.function(countersign::Function::Sweeper))
        .run()
        .await
        .expect("the expiry sweep");
    assert_eq!(report.expired, 1);
    let message = slack
        .wait_for_message(&expiring, WAIT, |m| !m.has_buttons())
        .await;
    assert!(
        message.shown().contains("Status: *expired*"),
        "{}",
        message.shown()
    );
    // A click from a client that still shows the buttons: told why, nothing recorded.
    assert_eq!(
        t.click(&slack, U_ALICE, APPROVE, &expiring, false)
            .await
            .status,
        200
    );
    let told = slack.ephemerals();
    assert_eq!(told.len(), 1, "{told:?}");
    assert!(
        told[0]["text"].as_str().unwrap().contains("expired"),
        "{told:?}"
    );
    assert_eq!(t.get(KEY_A, &expiring).await.json()["votes"], json!([]));
}

/// Slack's limits, which the fake enforces as Slack does (`invalid_blocks`): a summary of 11,000
/// characters and twenty approvers of 320 characters each still make a message Slack takes, cut
/// to its block limits.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_message_at_every_limit_is_one_slack_takes() {
    let (t, slack) = TestApp::start_slack(&[]).await;
    let mut approvers: Vec<String> = (0..19)
        .map(|i| format!("{i:02}{}", "a".repeat(318)))
        .collect();
    approvers.push(ALICE.to_owned());
    let approvers: Vec<&str> = approvers.iter().map(String::as_str).collect();
    let body = CreateBody::new("deploy", &approvers)
        .context(json!({"summary": "<!channel> ".repeat(1_000)}))
        .to_string();
    let id = t.create_ok(KEY_A, "slack-limits", &body).await;
    let message = slack.wait_for_message(&id, WAIT, Message::pending).await;
    assert!(message.shown().contains("&lt;!channel&gt;") || message.shown().contains("<!channel>"));
    assert_eq!(
        t.click(&slack, U_ALICE, APPROVE, &id, false).await.status,
        200
    );
    slack
        .wait_for_message(&id, WAIT, |m| m.shown().contains("execution: *succeeded*"))
        .await;
    let refused: Vec<_> = ["chat.postMessage", "chat.update"]
        .iter()
        .flat_map(|m| slack.calls(m))
        .filter(|c| c.answer != "ok")
        .map(|c| c.answer)
        .collect();
    assert!(refused.is_empty(), "Slack would refuse: {refused:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_update_slack_applies_after_its_caller_gave_up_is_waited_out() {
    // Calls end after 3 s (a third of the 9 s visibility): alice's update is applied by Slack
    // 4 s after it was sent, when its worker has given it up — and bob's job, coming back every
    // second while alice's worker holds the message, would draw bob's state between the two.
    let (t, slack) = TestApp::start_slack(&[("JOB_VISIBILITY_TIMEOUT_SECONDS", "9")]).await;
    let id = all_three_must_approve(&t, &slack, "slack-late").await;
    let _second = t.start_another_runner();
    slack.fault_next(
        "chat.update",
        Fault::LateApply(Duration::from_millis(4_000)),
    );
    assert_eq!(
        t.click(&slack, U_ALICE, APPROVE, &id, false).await.status,
        200
    );
    wait_for_arrival(&slack, "chat.update").await;
    assert_eq!(
        t.click(&slack, U_BOB, APPROVE, &id, false).await.status,
        200
    );
    // Nobody draws the message until alice's update has settled: bob's state is drawn last.
    let message = slack
        .wait_for_message(&id, WAIT, |m| {
            m.shown().contains(&format!("*{BOB}* approved"))
        })
        .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let message = slack.messages_of(&id).pop().unwrap_or(message);
    let shown = message.shown();
    assert!(
        shown.contains(&format!("*{ALICE}* approved"))
            && shown.contains(&format!("*{BOB}* approved")),
        "{shown}"
    );
}

/// A deploy that alice, bob and carol must all approve (after two votes it is still pending, so
/// no later change redraws its message), created under `key`, once its message is posted.
async fn all_three_must_approve(
    t: &TestApp,
    slack: &countersign_tests::slack::FakeSlack,
    key: &str,
) -> String {
    let body = CreateBody::new("deploy", &[ALICE, BOB, CAROL])
        .policy(json!({"rules": [{"name": "all", "approvers": [ALICE, BOB, CAROL], "min_approvals": 3}]}))
        .to_string();
    let id = t.create_ok(KEY_A, key, &body).await;
    slack.wait_for_message(&id, WAIT, Message::pending).await;
    id
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

/// The notification text of a hostile summary pings no one and shows no link; an empty summary
/// posts (the action type stands in for it) instead of ending in the DLQ (issue 36).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hostile_summary_pings_no_one_and_an_empty_one_posts() {
    let (t, slack) = TestApp::start_slack(&[]).await;
    let hostile = CreateBody::new("deploy", &[ALICE, BOB])
        .context(json!({"summary": "<!channel> <https://evil.example|Approve here>"}))
        .to_string();
    let id = t.create_ok(KEY_A, "slack-hostile", &hostile).await;
    let message = slack.wait_for_message(&id, WAIT, Message::pending).await;
    assert!(
        !message.text.contains('<') && !message.text.contains('>'),
        "{}",
        message.text
    );
    assert!(
        message.text.contains("&lt;!channel&gt;"),
        "{}",
        message.text
    );

    let empty = CreateBody::new("deploy", &[ALICE, BOB])
        .context(json!({"summary": ""}))
        .to_string();
    let id = t.create_ok(KEY_A, "slack-empty", &empty).await;
    let message = slack.wait_for_message(&id, WAIT, Message::pending).await;
    assert_eq!(message.text, "Approval requested: deploy");
    assert!(
        slack.posts_of(&id).iter().all(|c| c.answer == "ok"),
        "posted at the first attempt"
    );
}

/// After a post in doubt, another app's message carrying Countersign's metadata (newer, so
/// first in the history) is not adopted: the lookup finds this app's own message, which then
/// follows the approval to its end (issue 36).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_impostor_message_in_the_history_is_not_adopted() {
    let (t, slack) = TestApp::start_slack(&[]).await;
    slack.fault_next(
        "chat.postMessage",
        Fault::LoseAnswer(Duration::from_secs(3)),
    );
    let id = t
        .create_ok(KEY_A, "slack-impostor", &deploy(9, &[ALICE, BOB]))
        .await;
    wait_for_arrival(&slack, "chat.postMessage").await;
    let impostor = slack.plant_impostor(countersign_tests::slack::SLACK_CHANNEL, &id);
    let approval = posted(&t, &id).await;
    let ours = slack.messages_of(&id);
    assert_eq!(ours.len(), 1, "found, not posted again");
    assert_eq!(approval["slack"]["ts"], ours[0].ts.as_str());
    assert_ne!(approval["slack"]["ts"], impostor.as_str());
    assert_eq!(slack.calls("auth.test").len(), 1, "asked once");

    assert_eq!(
        t.click(&slack, U_ALICE, APPROVE, &id, false).await.status,
        200
    );
    let done = slack
        .wait_for_message(&id, WAIT, |m| !m.has_buttons())
        .await;
    assert_eq!(
        done.ts, ours[0].ts,
        "this app's message follows the approval"
    );
    let planted = slack.messages().into_iter().find(|m| m.ts == impostor);
    assert_eq!(
        planted.map(|m| m.updates),
        Some(0),
        "the impostor is never drawn over"
    );
}
