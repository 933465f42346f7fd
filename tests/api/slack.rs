//! Deciding in Slack, against a fake Slack Web API the tests run (real HTTP, answering like
//! Slack, recording every call): one message per approval whatever happens to a post's answer,
//! signed clicks as votes counted once, refusals told to the clicking user alone, and a message
//! that follows the approval to its end, never drawn back to an older state.
//!
//! Here what its tests share (the deploy they create, waiting for a post or a call); the tests
//! in `slack/posts.rs`, `slack/clicks.rs`, `slack/delegates.rs` and `slack/redraws.rs`.

use std::time::Duration;

use countersign_tests::{ALICE, BOB, CAROL, CreateBody, KEY_A, TestApp};
use serde_json::{Value, json};

use crate::helpers::WAIT;

mod clicks;
mod delegates;
mod posts;
mod redraws;

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

/// Message predicates.
struct Message;

impl Message {
    fn pending(m: &countersign_tests::slack::Message) -> bool {
        m.has_buttons()
    }
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
