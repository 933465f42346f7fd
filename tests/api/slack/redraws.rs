//! The message following its approval: never drawn back to an older state (a late job, a slow
//! or late-applied update, a worker stopped mid-draw), `ratelimited` honoured, and the buttons
//! taken away when the approval is cancelled or expires.

use std::time::Duration;

use countersign::jobs::{Job, SlackJob};
use countersign::slack::MessageState;
use countersign_tests::slack::{Fault, U_ALICE, U_BOB, U_CAROL};
use countersign_tests::{ALICE, BOB, CAROL, CreateBody, KEY_A, TestApp};
use serde_json::json;

use super::{APPROVE, Message, all_three_must_approve, deploy, wait_for_arrival};
use crate::helpers::WAIT;

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
