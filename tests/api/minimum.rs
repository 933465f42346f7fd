//! A deployment with only the minimum configuration (docs/DEPLOY.md): no notifier (a Slack- or
//! GitHub-only deployment) and no webhook sources. Every function starts; an approval is
//! decided and executed as anywhere else; no notify job is made (none fails, nothing is
//! called); the webhook route answers every source 404.

use std::time::Duration;

use countersign_tests::{ACME_SECRET, ALICE, CreateBody, KEY_A, TestApp, event_types, eventually};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_a_notifier_or_webhook_sources_approvals_still_run_and_nobody_is_notified() {
    let t = TestApp::start_jobs(&[("NOTIFIER_URL", ""), ("WEBHOOK_SOURCES", "")]).await;
    let body = CreateBody::new("deploy", &[ALICE]).to_string();
    let id = t.create_approved("minimum-1", &body, ALICE).await;
    let done = t
        .wait_for_execution(KEY_A, &id, Duration::from_secs(60))
        .await;
    assert_eq!(done["execution"]["status"], "succeeded");
    eventually("the execution's end is in the trail", || async {
        event_types(&t.trail(KEY_A, &id, 50).await)
            .iter()
            .any(|e| e == "execution.succeeded")
    })
    .await;
    // Every job is done (the stream's changes are in the trail, the queue is empty): no notify
    // job was made.
    eventually("the jobs queue drains", || async {
        t.queue_depth(&t.queues().queue_url).await == 0
    })
    .await;
    let trail = event_types(&t.trail(KEY_A, &id, 50).await);
    assert!(
        !trail.iter().any(|e| e.starts_with("notification.")),
        "no notification, sent or failed: {trail:?}"
    );
    assert!(t.downstream().calls_to("/notify").is_empty());
    assert_eq!(
        t.queue_depth(&t.queues().dlq_url).await,
        0,
        "no job failed for want of a notifier"
    );

    let reply = t.deliver("acme", ACME_SECRET, "evt-1", "{}").await;
    reply.assert_problem(404, "not_found");
    assert!(reply.text().contains("no such webhook source"));
}
