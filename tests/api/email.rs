//! Approvers reached by email (docs/EMAIL.md): for a tenant of `EMAIL`, every approver whose
//! identity is an address is emailed through SES — the real SDK against the local SES, as the
//! executor's role — once per notification however often its create is replayed or its sweep
//! runs; throttling is retried, a refusal recorded with SES's reason, an unknown outcome never
//! sent again.

use std::time::Duration;

use countersign::Function;
use countersign::jobs::Expirer;
use countersign_tests::email::{
    EMAIL_CONFIGURATION_SET, EMAIL_FROM, email_overrides, emails_about,
};
use countersign_tests::workflows::fault;
use countersign_tests::{
    ALICE, BOB, CreateBody, KEY_A, KEY_B, TestApp, events_of_type, eventually,
};
use futures::future::join_all;
use serde_json::{Value, json};

async fn start(extra: &[(&str, &str)]) -> TestApp {
    let overrides = email_overrides();
    let mut all: Vec<(&str, &str)> = overrides.iter().map(|(k, v)| (*k, v.as_str())).collect();
    all.push(("SWEEP_INTERVAL_SECONDS", "3600"));
    all.extend_from_slice(extra);
    TestApp::start_jobs(&all).await
}

/// Waits until the jobs queue is empty: every job done with.
async fn drained(t: &TestApp) {
    eventually("the jobs queue did not drain", || async {
        t.queue_depth(&t.queues().queue_url).await == 0
    })
    .await;
}

/// The trail's notification events on the email channel.
async fn email_events(t: &TestApp, id: &str) -> Vec<Value> {
    t.trail(KEY_A, id, 100)
        .await
        .into_iter()
        .filter(|e| e["actor"]["channel"] == "email")
        .collect()
}

/// The first `kind` event on the email channel (for `approver`, if given).
async fn find_event(t: &TestApp, id: &str, kind: &str, approver: Option<&str>) -> Option<Value> {
    events_of_type(&email_events(t, id).await, kind)
        .into_iter()
        .find(|e| approver.is_none_or(|a| e["data"]["approver"] == a))
        .cloned()
}

async fn email_event(t: &TestApp, id: &str, kind: &str, approver: Option<&str>) -> Value {
    eventually(&format!("no {kind} on the email channel"), || async {
        find_event(t, id, kind, approver).await.is_some()
    })
    .await;
    find_event(t, id, kind, approver)
        .await
        .expect("found above")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_approver_is_emailed_once_under_replayed_creates_and_concurrent_sweeps() {
    let t = start(&[]).await;
    let body = CreateBody::new("deploy", &[ALICE, BOB, "U024BE7LH"])
        .context(json!({"summary": "Deploy api 1042 to prod"}))
        .with(
            "reminders",
            json!({"after_seconds": 60, "every_seconds": 300, "max": 2}),
        )
        .to_string();
    let replies = join_all((0..25).map(|_| t.create(KEY_A, "email-once-1", &body))).await;
    assert!(replies.iter().all(|r| r.status == 201));
    let id = replies[0].json()["id"].as_str().unwrap().to_owned();
    for approver in [ALICE, BOB] {
        eventually("each approver's email", || async {
            !emails_about(&id, approver).await.is_empty()
        })
        .await;
    }
    drained(&t).await;
    for approver in [ALICE, BOB] {
        let emails = emails_about(&id, approver).await;
        assert_eq!(emails.len(), 1, "{approver}: {emails:#?}");
        assert_eq!(emails[0]["from"], EMAIL_FROM);
        assert_eq!(emails[0]["configuration_set"], EMAIL_CONFIGURATION_SET);
        assert_eq!(
            emails[0]["subject"],
            "Approval requested: Deploy api 1042 to prod"
        );
        assert!(
            emails[0]["html"]
                .as_str()
                .unwrap()
                .contains("Deploy api 1042 to prod")
        );
    }
    // Beside the notifier, which still gets its call per approver (the Slack id included).
    assert_eq!(
        t.downstream()
            .calls_to("/notify")
            .iter()
            .filter(|(_, b)| b["approval_id"] == id.as_str())
            .count(),
        3
    );

    t.clock.advance(61);
    let sweeps = join_all((0..5).map(|_| async {
        Expirer::new(t.function(Function::Sweeper))
            .run()
            .await
            .expect("the sweep")
            .reminded
    }))
    .await;
    assert_eq!(sweeps.iter().sum::<usize>(), 1, "one sweep's write won");
    for approver in [ALICE, BOB] {
        eventually("each approver's reminder", || async {
            emails_about(&id, approver).await.len() == 2
        })
        .await;
    }
    drained(&t).await;
    for approver in [ALICE, BOB] {
        let emails = emails_about(&id, approver).await;
        assert_eq!(emails.len(), 2, "{approver}: {emails:#?}");
        assert_eq!(emails[1]["subject"], "Reminder 1: Deploy api 1042 to prod");
    }
    let sent = events_of_type(&email_events(&t, &id).await, "notification.sent").len();
    assert_eq!(sent, 4, "two emails to each, each recorded once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_throttled_email_is_sent_once_and_a_refused_or_unknown_one_never_again() {
    let t = start(&[]).await;
    let (throttled, rejected, unknown) = (
        "throttled@example.com",
        "rejected@example.com",
        "unknown@example.com",
    );
    fault("SendEmail", "TooManyRequestsException", 2, throttled).await;
    fault("SendEmail", "MessageRejected", 1, rejected).await;
    fault("SendEmail", "InternalFailure", 1, unknown).await;
    let body = CreateBody::new("deploy", &[throttled, rejected, unknown]).to_string();
    let id = t.create_ok(KEY_A, "email-faults-1", &body).await;

    let sent = email_event(&t, &id, "notification.sent", None).await;
    assert_eq!(sent["data"]["approver"], throttled);
    eventually("the throttled email", || async {
        emails_about(&id, throttled).await.len() == 1
    })
    .await;
    let refused = email_event(&t, &id, "notification.failed", Some(rejected)).await;
    assert_eq!(refused["data"]["outcome"], "failed");
    assert!(
        refused["data"]["error"]
            .as_str()
            .unwrap()
            .contains("MessageRejected")
            && refused["data"]["error"]
                .as_str()
                .unwrap()
                .contains("not verified"),
        "SES's reason: {refused}"
    );
    let doubt = email_event(&t, &id, "notification.failed", Some(unknown)).await;
    assert_eq!(doubt["data"]["outcome"], "unknown");
    drained(&t).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    // The fault was one call: a second send would have gone out.
    assert!(
        emails_about(&id, unknown).await.is_empty(),
        "never sent again"
    );
    assert!(emails_about(&id, rejected).await.is_empty());
    assert_eq!(emails_about(&id, throttled).await.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_email_escapes_the_summary_and_its_one_link_opens_the_review_page() {
    let t = start(&[]).await;
    let summary = "Refund <b>all</b> & \"everything\" 'now'\u{7}\nBcc: evil@example.com";
    let body = CreateBody::new("deploy", &[ALICE])
        .context(json!({"summary": summary}))
        .to_string();
    let id = t.create_ok(KEY_A, "email-escape-1", &body).await;
    eventually("alice's email", || async {
        !emails_about(&id, ALICE).await.is_empty()
    })
    .await;
    let email = emails_about(&id, ALICE).await.remove(0);
    let subject = email["subject"].as_str().unwrap();
    assert!(
        !subject.chars().any(char::is_control),
        "one line: {subject:?}"
    );
    assert_eq!(
        subject,
        "Approval requested: Refund <b>all</b> & \"everything\" 'now' Bcc: evil@example.com"
    );
    let html = email["html"].as_str().unwrap();
    assert!(
        html.contains("Refund &lt;b&gt;all&lt;/b&gt; &amp; &quot;everything&quot;"),
        "{html}"
    );
    assert!(!html.contains("<b>all") && !html.contains('\u{7}'));
    assert_eq!(html.matches("href=").count(), 1, "one link");
    let text = email["text"].as_str().unwrap();
    assert!(
        text.contains("do not forward"),
        "without OIDC the link is the credential"
    );
    let link = text
        .lines()
        .find_map(|l| l.strip_prefix("Review it: "))
        .expect("the link")
        .to_owned();
    let path = link
        .strip_prefix("https://approvals.example.com")
        .expect("on PUBLIC_BASE_URL");
    let page = t.send(t.http.get(t.url(path))).await;
    assert_eq!(page.status, 200, "the link opens the review page");
    assert!(page.text().contains("Approve"));
    // A mail scanner's GET decided nothing.
    assert_eq!(t.get(KEY_A, &id).await.json()["status"], "pending");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_sign_in_the_email_says_to_sign_in_and_a_tenant_without_email_gets_none() {
    let oidc = r#"{"tenant-a": {"issuer": "http://127.0.0.1:9", "client_id": "countersign", "client_secret": "a-secret-of-the-client"}}"#;
    let t = start(&[("OIDC", oidc)]).await;
    let id = t
        .create_ok(
            KEY_A,
            "email-oidc-1",
            &CreateBody::new("deploy", &[ALICE]).to_string(),
        )
        .await;
    eventually("alice's email", || async {
        !emails_about(&id, ALICE).await.is_empty()
    })
    .await;
    let text = emails_about(&id, ALICE).await[0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(text.contains("sign in before you decide") && !text.contains("do not forward"));
    assert!(text.contains(&format!("/approvals/{id}/review?token=")));

    // tenant-b has no sender in EMAIL: its approver is told by the notifier only.
    let other = t
        .create_ok(
            KEY_B,
            "email-none-1",
            &CreateBody::new("deploy", &[BOB]).to_string(),
        )
        .await;
    eventually("the notifier's call", || async {
        t.downstream()
            .calls_to("/notify")
            .iter()
            .any(|(_, b)| b["approval_id"] == other.as_str())
    })
    .await;
    drained(&t).await;
    assert!(emails_about(&other, BOB).await.is_empty());
}
