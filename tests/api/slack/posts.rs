//! Posting an approval's message: one post per approval whatever happens to a post's answer
//! (a lost answer is looked for in the channel's history, paging; another app's message carrying
//! our metadata is not adopted), and a message Slack takes at every limit and with a hostile or
//! empty summary.

use std::time::Duration;

use countersign_tests::slack::{Fault, U_ALICE};
use countersign_tests::{ALICE, BOB, CreateBody, KEY_A, TENANT_A, TestApp};
use serde_json::json;

use super::{APPROVE, Message, deploy, posted, wait_for_arrival};
use crate::helpers::WAIT;

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
