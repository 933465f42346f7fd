//! Approved must become done exactly once: dispatch from the stream, SQS, the executor and its
//! ledger, against moto's DynamoDB, DynamoDB Streams and SQS, with a downstream that counts
//! calls and effects per Idempotency-Key. (What an operator does with an execution that did not
//! end well is in operator.rs.)

use std::time::{Duration, Instant};

use countersign::domain::ApprovalId;
use countersign::review_token::TokenSecret;
use countersign_tests::{
    ALICE, BOB, DECIDER_A, KEY_A, TestApp, decision_body, eventually, execute_key,
};
use futures::future::join_all;
use serde_json::{Value, json};

use crate::helpers::{WAIT, action_body, approved};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn approved_action_runs_once_with_the_business_key() {
    let t = TestApp::start_jobs(&[]).await;
    let id = t
        .create_ok(KEY_A, "deploy-1", &action_body("deploy", &[ALICE, BOB]))
        .await;
    let approved = t.approve(&id, ALICE).await;
    assert_eq!(
        approved["execution"]["status"], "queued",
        "approval queues the execution"
    );
    let approved_at = Instant::now();

    let done = t.wait_for_execution(KEY_A, &id, WAIT).await;
    let key = &execute_key("deploy-1", &id);
    let latency = t
        .downstream()
        .first_arrival(key)
        .expect("called")
        .duration_since(approved_at);
    println!(
        "end-to-end latency, approval → downstream call: {} ms",
        latency.as_millis()
    );
    assert_eq!(done["execution"]["status"], "succeeded");
    assert_eq!(done["execution"]["attempts"], 1);
    assert_eq!(done["status"], "approved");
    assert_eq!(done["decision"]["approver"], ALICE);
    assert_eq!(
        (t.downstream().calls(key), t.downstream().effects(key)),
        (1, 1)
    );

    let call = &t.downstream().calls_to("/ok")[0].1;
    assert_eq!(call["approval_id"], id.as_str());
    assert_eq!(call["tenant"], "tenant-a");
    assert_eq!(
        call["action"],
        json!({"type": "deploy", "payload": {"n": 1}})
    );
    assert_eq!(call["decision"]["outcome"], "approved");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_approver_gets_one_review_link() {
    let t = TestApp::start_jobs(&[]).await;
    let id = t
        .create_ok(KEY_A, "notify-1", &action_body("deploy", &[ALICE, BOB]))
        .await;
    eventually("notifications did not arrive", || async {
        t.downstream().calls_to("/notify").len() >= 2
    })
    .await;
    let secret = TokenSecret::parse("test-review-token-secret-0123456789").unwrap();
    let approval = ApprovalId::parse(&id).unwrap();
    for approver in [ALICE, BOB] {
        let key = format!("{id}:notify:{approver}");
        assert_eq!(t.downstream().calls(&key), 1, "{approver}");
        let (_, call) = t
            .downstream()
            .calls_to("/notify")
            .into_iter()
            .find(|(k, _)| *k == key)
            .unwrap();
        let url = call["review_url"].as_str().unwrap();
        let prefix = format!("https://approvals.example.com/approvals/{id}/review?token=");
        let token = url.strip_prefix(&prefix).expect("review link shape");
        let grant = secret
            .verify(token, &approval, t.clock.now())
            .expect("the token verifies");
        assert_eq!(
            (grant.tenant.as_str(), grant.approver.as_str()),
            ("tenant-a", approver)
        );
        assert_eq!(call["action"]["type"], "deploy");
        assert_eq!(call["context"]["why"], "test");
        assert!(call["expires_at"].as_str().unwrap().ends_with('Z'));
    }
    let stored = t.get(KEY_A, &id).await.json();
    assert!(
        !stored.to_string().contains("token="),
        "review links never appear in API responses"
    );
}

/// An approval's notifications are one job: each approver is called once with its own key, at
/// once; the ones the notifier answers are recorded together, and only the others are called
/// again. A notification refused for good is recorded failed, and the job's message goes on to
/// the DLQ (its alarm) once every approver is done.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_approvals_notifications_are_one_job_and_a_retry_calls_only_those_not_done() {
    let t = TestApp::start_jobs(&[]).await;
    let (flaky, refused) = ("flaky-bob@example.com", "refused-carol@example.com");
    let id = t
        .create_ok(
            KEY_A,
            "notify-mixed",
            &action_body("deploy", &[ALICE, flaky, refused]),
        )
        .await;
    eventually("every approver's notification is recorded", || async {
        let trail = t.trail(KEY_A, &id, 100).await;
        trail
            .iter()
            .filter(|e| e["type"] == "notification.sent" || e["type"] == "notification.failed")
            .count()
            == 3
    })
    .await;
    let key = |approver: &str| format!("{id}:notify:{approver}");
    assert_eq!(
        t.downstream().calls(&key(ALICE)),
        1,
        "done at once, never again"
    );
    assert_eq!(t.downstream().calls(&key(flaky)), 2, "503, then sent");
    assert_eq!(
        t.downstream().calls(&key(refused)),
        1,
        "410: failed for good"
    );
    let trail = t.trail(KEY_A, &id, 100).await;
    let outcome = |approver: &str| {
        trail
            .iter()
            .filter(|e| e["data"]["approver"] == approver)
            .map(|e| e["type"].as_str().unwrap_or_default().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(outcome(ALICE), ["notification.sent"]);
    assert_eq!(outcome(flaky), ["notification.sent"]);
    assert_eq!(outcome(refused), ["notification.failed"]);
    let ledger = &t.app.config.tables.execution_ledger;
    let item = t
        .item(ledger, &format!("{id}#notify"))
        .await
        .expect("one ledger item");
    assert_eq!(countersign_tests::attr_s(&item, "status"), "failed");
    eventually("the notify job's message reached the DLQ", || async {
        t.queue_depth(&t.queues().dlq_url).await >= 1
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn server_errors_are_retried_with_the_same_key() {
    let t = TestApp::start_jobs(&[]).await;
    let id = approved(&t, "flaky-1", "flaky").await;
    let done = t.wait_for_execution(KEY_A, &id, WAIT).await;
    assert_eq!(done["execution"]["status"], "succeeded");
    assert_eq!(done["execution"]["attempts"], 3);
    assert_eq!(done["execution"]["last_error"], Value::Null);
    let key = &execute_key("flaky-1", &id);
    assert_eq!(
        (t.downstream().calls(key), t.downstream().effects(key)),
        (3, 1)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_identical_creates_notify_each_approver_once() {
    let t = TestApp::start_jobs(&[]).await;
    let create_body = action_body("deploy", &[ALICE, BOB]);
    let replies = join_all((0..32).map(|_| t.create(KEY_A, "same-create", &create_body))).await;
    assert!(replies.iter().all(|r| r.status == 201));
    let id = replies[0].json()["id"].as_str().unwrap().to_owned();
    eventually("notifications did not arrive", || async {
        t.downstream().calls_to("/notify").len() >= 2
    })
    .await;
    // Give any duplicate the time to show up: two visibility timeouts.
    tokio::time::sleep(Duration::from_secs(4)).await;
    for approver in [ALICE, BOB] {
        assert_eq!(
            t.downstream().calls(&format!("{id}:notify:{approver}")),
            1,
            "{approver}"
        );
    }
    assert_eq!(t.downstream().calls_to("/notify").len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn approve_reject_race_executes_at_most_once() {
    let t = TestApp::start_jobs(&[]).await;
    let id = t
        .create_ok(KEY_A, "race-1", &action_body("deploy", &[ALICE, BOB]))
        .await;
    let decisions = (0..40).map(|i| {
        let decision = if i % 2 == 0 {
            decision_body("approve", ALICE)
        } else {
            decision_body("reject", BOB)
        };
        t.decide(DECIDER_A, &id, decision)
    });
    let replies = join_all(decisions).await;
    assert_eq!(
        replies
            .iter()
            .filter(|r| r.status == 200 && !r.replayed())
            .count(),
        1
    );
    let key = &execute_key("race-1", &id);
    let status = t.get(KEY_A, &id).await.json()["status"]
        .as_str()
        .unwrap()
        .to_owned();
    if status == "approved" {
        let done = t.wait_for_execution(KEY_A, &id, WAIT).await;
        assert_eq!(done["execution"]["status"], "succeeded");
        tokio::time::sleep(Duration::from_secs(4)).await;
        assert_eq!(
            (t.downstream().calls(key), t.downstream().effects(key)),
            (1, 1)
        );
    } else {
        // The notifications prove the pipeline ran; no execute job may follow a rejection.
        eventually("the pipeline did not run", || async {
            t.downstream().calls_to("/notify").len() >= 2
        })
        .await;
        tokio::time::sleep(Duration::from_secs(4)).await;
        assert_eq!(t.downstream().calls(key), 0);
        assert_eq!(
            t.get(KEY_A, &id).await.json()["execution"]["status"],
            "not_started"
        );
    }
    println!("race winner: {status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_same_message_delivered_twice_has_one_effect() {
    let t = TestApp::start_jobs(&[]).await;
    let id = t
        .create_ok(KEY_A, "twice-1", &action_body("deploy", &[ALICE]))
        .await;
    // The same execute job, as SQS would redeliver it, sent next to the dispatcher's own.
    let stored = t
        .app
        .store
        .get_approval(
            &countersign::domain::TenantId::parse("tenant-a").unwrap(),
            &ApprovalId::parse(&id).unwrap(),
        )
        .await
        .unwrap()
        .unwrap();
    let mut approved = stored.clone();
    t.approve(&id, ALICE).await;
    approved = t
        .app
        .store
        .get_approval(&approved.tenant, &approved.id)
        .await
        .unwrap()
        .unwrap();
    let jobs = countersign::jobs::jobs_for_change(Some(&stored), Some(&approved), "");
    assert_eq!(jobs.len(), 1);
    let message = serde_json::to_string(&jobs[0]).unwrap();
    let sqs = aws_sdk_sqs::Client::new(&t.sdk);
    for _ in 0..2 {
        sqs.send_message()
            .queue_url(&t.queues().queue_url)
            .message_body(&message)
            .send()
            .await
            .unwrap();
    }
    let done = t.wait_for_execution(KEY_A, &id, WAIT).await;
    assert_eq!(done["execution"]["status"], "succeeded");
    tokio::time::sleep(Duration::from_secs(4)).await;
    let key = &execute_key("twice-1", &id);
    assert_eq!(
        (t.downstream().calls(key), t.downstream().effects(key)),
        (1, 1)
    );
    assert_eq!(
        t.queue_depth(&t.queues().queue_url).await,
        0,
        "every copy acknowledged"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_target_that_never_answers_does_not_hold_the_job() {
    let t = TestApp::start_jobs(&[]).await;
    let id = approved(&t, "hang-1", "hang_once").await;
    let done = t.wait_for_execution(KEY_A, &id, WAIT).await;
    assert_eq!(done["execution"]["status"], "succeeded");
    assert_eq!(done["execution"]["attempts"], 2);
    let key = &execute_key("hang-1", &id);
    assert_eq!(
        (t.downstream().calls(key), t.downstream().effects(key)),
        (2, 1),
        "retried with the same key"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn exhausted_retries_fail_and_go_to_the_dlq() {
    let t = TestApp::start_jobs(&[("JOB_MAX_ATTEMPTS", "2")]).await;
    let id = approved(&t, "dead-1", "always_503").await;
    let done = t.wait_for_execution(KEY_A, &id, WAIT).await;
    assert_eq!(done["execution"]["status"], "failed");
    assert_eq!(done["execution"]["last_error"], "HTTP 503");
    assert_eq!(done["execution"]["attempts"], 2);
    assert_eq!(t.downstream().calls(&execute_key("dead-1", &id)), 2);
    // At least one: the stream may have dispatched the job twice (at-least-once), and each copy
    // ends in the DLQ.
    eventually("the message did not reach the DLQ", || async {
        t.queue_depth(&t.queues().dlq_url).await >= 1
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn jobs_pending_while_the_runner_is_down_complete_when_it_returns() {
    let t = TestApp::start_jobs(&[]).await;
    let first = t
        .create_ok(KEY_A, "restart-1", &action_body("deploy", &[ALICE]))
        .await;
    let notified = format!("{first}:notify:{ALICE}");
    eventually("the first notification never came", || async {
        t.downstream().calls(&notified) > 0
    })
    .await;
    t.stop_runner().await;

    // Committed while nothing is running: a new approval, and an approval of the first.
    let second = t
        .create_ok(KEY_A, "restart-2", &action_body("deploy", &[ALICE]))
        .await;
    t.approve(&first, ALICE).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        t.downstream().calls(&execute_key("restart-1", &first)),
        0,
        "nothing runs while the runner is down"
    );

    t.start_runner();
    let done = t.wait_for_execution(KEY_A, &first, WAIT).await;
    assert_eq!(done["execution"]["status"], "succeeded");
    eventually("the second approval's notification never came", || async {
        t.downstream().calls(&format!("{second}:notify:{ALICE}")) > 0
    })
    .await;
    assert_eq!(t.downstream().effects(&execute_key("restart-1", &first)), 1);
    // The runner resumed from its saved position: what was dispatched before the stop was not
    // dispatched again (a restart from the stream's start would notify twice, then dedupe).
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        t.downstream().calls(&notified),
        1,
        "no replay from the start of the stream"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_non_idempotent_target_is_not_called_again_after_an_unknown_outcome() {
    let t = TestApp::start_jobs(&[]).await;
    // A 5xx from a target that does not dedupe may hide an action that ran; so may a timeout.
    // And a 303 from a target that acts, then redirects (post-redirect-get): retrying it (an
    // operator's retry of a `failed` execution) would act twice.
    for (action, key) in [
        ("unsafe_flaky", "unsafe-5xx"),
        ("unsafe_hang", "unsafe-timeout"),
        ("unsafe_see_other", "unsafe-303"),
    ] {
        let id = approved(&t, key, action).await;
        let done = t.wait_for_execution(KEY_A, &id, WAIT).await;
        assert_eq!(
            done["execution"]["status"], "needs_reconciliation",
            "{action}"
        );
        assert!(
            done["execution"]["last_error"]
                .as_str()
                .unwrap()
                .contains("not idempotent")
        );
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(
            t.downstream().calls(&execute_key(key, &id)),
            1,
            "{action}: called once"
        );
    }
}

/// Ten approvals whose jobs are ~150 KiB each (a 40 KiB body whose numbers are written out in
/// full), committed while the runner is down and so read in one stream batch: sent in batches
/// SQS takes (by bytes, not only by ten), every approver is notified.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn large_jobs_are_sent_in_batches_the_queue_takes() {
    let t = TestApp::start_jobs(&[]).await;
    t.stop_runner().await;
    let numbers = vec!["1e15"; 8_000].join(",");
    let large = format!(
        r#"{{"action": {{"type": "deploy", "payload": {{"v": [{numbers}]}}}}, "approvers": ["{ALICE}"]}}"#
    );
    let ids: Vec<String> = join_all((0..10).map(|i| {
        let (t, large) = (&t, &large);
        async move { t.create_ok(KEY_A, &format!("large-{i}"), large).await }
    }))
    .await;
    t.start_runner();
    eventually("every approver notified", || async {
        t.downstream().calls_to("/notify").len() >= ids.len()
    })
    .await;
    for id in &ids {
        assert_eq!(t.downstream().calls(&format!("{id}:notify:{ALICE}")), 1);
    }
}

/// Strings may hold any character JSON allows, U+FFFE and U+FFFF included, in the payload, the
/// context, an approver's name and a vote's comment. serde_json writes those two raw, and SQS
/// refuses a message holding them (InvalidMessageContents; the local stack refuses them as SQS
/// does): the approval would never execute. Job bodies escape them: it runs once, and the target
/// gets every value as it was sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn noncharacters_everywhere_reach_the_target_value_for_value() {
    let t = TestApp::start_jobs(&[]).await;
    let odd = "a\u{FFFF}b\u{FFFE}c\u{0}d\u{10FFFF}";
    // A name may not hold a noncharacter (unassigned: refused since issue 36), but any letter.
    let approver = "jos\u{e9}@example.com".to_owned();
    let payload = json!({"say": odd, odd: [odd]});
    let context = json!({"summary": odd});
    let body = json!({"action": {"type": "deploy", "payload": payload},
                      "approvers": [approver], "context": context})
    .to_string();
    let id = t.create_ok(KEY_A, "odd-1", &body).await;
    let decided = t
        .decide(
            DECIDER_A,
            &id,
            json!({"decision": "approve", "approver": approver, "comment": odd}),
        )
        .await;
    assert_eq!(decided.status, 200, "{}", decided.text());
    let done = t.wait_for_execution(KEY_A, &id, WAIT).await;
    assert_eq!(done["execution"]["status"], "succeeded", "{done}");
    let key = execute_key("odd-1", &id);
    let calls = t.downstream().calls_to("/ok");
    let (_, sent) = calls.iter().find(|(k, _)| *k == key).expect("the call");
    assert_eq!(sent["action"]["payload"], payload);
    assert_eq!(sent["context"], context);
    assert_eq!(sent["decision"]["approver"], approver.as_str());
    assert_eq!(sent["decision"]["comment"], odd);
    // The notification's key carries the name percent-encoded (a header holds visible ASCII).
    eventually("the approver is notified", || async {
        t.downstream()
            .calls(&format!("{id}:notify:jos%C3%A9@example.com"))
            == 1
    })
    .await;
    let notified = t.downstream().calls_to("/notify");
    assert_eq!(
        notified[0].1["approver"],
        approver.as_str(),
        "the name as it was"
    );
}

/// A test app whose tenant A subscribes to every event at the downstream's `/callback`, with
/// its runner stopped, and an approval created under `key` (its jobs not dispatched).
async fn subscribed_and_stopped(key: &str) -> (TestApp, String) {
    let subscription = json!({"tenant-a": {"url": "{downstream}/callback",
        "secret": crate::helpers::CALLBACK_SECRET}})
    .to_string();
    let t = TestApp::start_jobs(&[("EVENT_SUBSCRIPTIONS", &subscription)]).await;
    t.stop_runner().await;
    let id = t
        .create_ok(KEY_A, key, &action_body("deploy", &[ALICE]))
        .await;
    (t, id)
}

/// A callback keeps no ledger item (issue 24): its outcome event is its record. Every callback
/// job of a change sent twice (a dispatch retried after sending) reaches the subscriber with one
/// `webhook-id` per event, however many copies ran, and records one outcome per event.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_callback_sent_twice_records_one_outcome_per_event() {
    use countersign::jobs::Dispatcher;
    let (t, id) = subscribed_and_stopped("cb-twice").await;
    let change = t
        .whole_stream()
        .await
        .pop()
        .expect("the approval's creation");
    let dispatcher = Dispatcher::new(t.function(countersign::Function::Dispatch));
    for _ in 0..2 {
        dispatcher
            .dispatch(std::slice::from_ref(&change))
            .await
            .unwrap();
    }
    t.start_runner();
    eventually("the queue drains", || async {
        t.queue_depth(&t.queues().queue_url).await == 0
    })
    .await;
    let deliveries = t.downstream().calls_to("/callback");
    let created: Vec<&Value> = deliveries
        .iter()
        .map(|(_, body)| body)
        .filter(|body| body["type"] == "approval.created")
        .collect();
    assert!(
        (1..=2).contains(&created.len()),
        "{} deliveries",
        created.len()
    );
    let event_id = &created[0]["data"]["event"]["id"];
    assert!(
        created
            .iter()
            .all(|b| &b["data"]["event"]["id"] == event_id)
    );
    let trail = t.trail(KEY_A, &id, 100).await;
    let outcomes: Vec<&Value> = trail
        .iter()
        .filter(|e| e["type"] == "callback.delivered" || e["type"] == "callback.failed")
        .collect();
    assert_eq!(outcomes.len(), 1, "{trail:?}");
    assert_eq!(outcomes[0]["type"], "callback.delivered");
    assert_eq!(outcomes[0]["data"]["event_id"], *event_id);
}

/// A callback's outcome is stored once, under one id for both outcomes: a failure recorded
/// first gives way to a delivery (another copy of the job reached the subscriber after all);
/// nothing gives way to a delivery.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callbacks_delivery_outdoes_its_failure_and_nothing_outdoes_its_delivery() {
    use countersign::domain::Completion;
    use countersign::domain::trail::{EventType, events_for_change};
    let (t, id) = subscribed_and_stopped("cb-outcome").await;
    let tenant = countersign::domain::TenantId::parse("tenant-a").unwrap();
    let approval = t
        .app
        .store
        .get_approval(&tenant, &ApprovalId::parse(&id).unwrap())
        .await
        .unwrap()
        .unwrap();
    let events = events_for_change(None, Some(&approval), "p");
    let job = &countersign::jobs::callback_jobs(
        &approval,
        &events,
        t.app.secrets().event_subscriptions.get(&tenant),
    )[0];
    let failed = job
        .ended_event(&Completion::Failed("HTTP 410".into()), 1)
        .unwrap();
    let delivered = job.ended_event(&Completion::Succeeded, 2).unwrap();
    let store = &t.app.store;
    let failure = Some(EventType::CallbackFailed);
    assert!(store.put_event_once(&failed, None, None).await.unwrap());
    assert!(
        !store.put_event_once(&failed, None, None).await.unwrap(),
        "once"
    );
    assert!(
        store
            .put_event_once(&delivered, failure, None)
            .await
            .unwrap()
    );
    assert!(!store.put_event_once(&failed, None, None).await.unwrap());
    assert!(
        !store
            .put_event_once(&delivered, failure, None)
            .await
            .unwrap()
    );
    assert_eq!(
        store.recorded_event(&failed).await.unwrap(),
        Some(EventType::CallbackDelivered),
        "one record of the callback's outcome, delivered"
    );
}
