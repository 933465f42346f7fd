//! One long-lived local stack — the real `countersign-local` binary, as `make run` starts it —
//! taken through mixed use: replays, duplicates, refused requests, then more work; every approval
//! must still reach its end. State-dependent bugs live here: a runner once stopped executing
//! anything after the first replayed create, and every per-test fresh stack passed.
//!
//! Here the quickstart and the load; the runner's HTTP client is in `long_lived/client.rs`, the
//! rounds that follow the load on the same runner in `long_lived/rounds.rs`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use countersign::webhook::WebhookSecret;
use countersign_tests::github::FakeGithub;
use countersign_tests::jobs::Downstream;
use countersign_tests::local_runner::{LocalRunner, isolated_env};
use countersign_tests::slack::{FakeSlack, Fault, SLACK_SIGNING_SECRET, U_ALICE, slack_headers};
use countersign_tests::{
    ACME_SECRET, ALICE, BOB, DECIDER_A, KEY_A, MALLORY, TENANT_A, TOKEN_SECRET, decided_event,
    execute_key, moto_resident_bytes, signed_delivery, test_api_keys,
};
use futures::StreamExt;
use serde_json::json;

// This binary's root is tests/long_lived.rs: without a path, its modules would be looked for in
// tests/ itself, beside the other binaries.
#[path = "long_lived/client.rs"]
mod client;
#[path = "long_lived/passkey_round.rs"]
mod passkey_round;
#[path = "long_lived/resume_round.rs"]
mod resume_round;
#[path = "long_lived/rounds.rs"]
mod rounds;
#[path = "long_lived/sign_in_round.rs"]
mod sign_in_round;
#[path = "long_lived/stall_round.rs"]
mod stall_round;

use client::{create, decide, get, send, wait_until_executed};
use rounds::{approval_only_round, github_round, secret_for_agents};

/// The demo's requester key, and alice's and bob's approver keys.
const DEMO_KEY: &str = "cs_demo_key_0123456789";
const DEMO_ALICE_KEY: &str = "cs_demo_alice_0123456789";
const DEMO_BOB_KEY: &str = "cs_demo_bob_0123456789";

/// The README quickstart on `make run`'s demo, with the retry it advertises: create, the same
/// create again (a replay: a cancelled transaction in the store), a second approval, approve
/// both with alice's key (the requester's key may not), then the quorum example (alice AND
/// bob). Every echo is performed once, every execution succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_quickstart_with_a_replayed_create_executes_both_approvals_once() {
    let env = isolated_env(&format!(
        "qs-{}",
        ulid::Ulid::new().to_string().to_lowercase()
    ))
    .await;
    // No API_KEYS: the demo configuration, as `make run` starts with none.
    let runner = LocalRunner::start(&env).await;
    // As the README's quickstart: no approvers named, the demo's policy chose its owners.
    let body = r#"{"action": {"type": "echo", "payload": {"say": "hello"}}}"#;

    let first = send(create(&runner, DEMO_KEY, "demo-1", body)).await;
    assert_eq!((first.status, first.replayed), (201, false));
    assert_eq!(first.json()["approvers"], serde_json::json!([ALICE, BOB]));
    assert_eq!(
        first.json()["policy"]["source"]["policies"],
        serde_json::json!(["echo-needs-an-owner"])
    );
    let again = send(create(&runner, DEMO_KEY, "demo-1", body)).await;
    assert_eq!((again.status, again.replayed), (201, true));
    assert_eq!(again.body, first.body, "a replay is byte-identical");
    let second = send(create(&runner, DEMO_KEY, "demo-2", body)).await;
    assert_eq!((second.status, second.replayed), (201, false));
    let ids = [first.json(), second.json()].map(|a| a["id"].as_str().expect("id").to_owned());
    assert_ne!(ids[0], ids[1]);

    let refused = send(decide(&runner, DEMO_KEY, &ids[0], ALICE)).await;
    assert_eq!(refused.status, 403, "the requester's key does not decide");
    for id in &ids {
        let approved = send(decide(&runner, DEMO_ALICE_KEY, id, ALICE)).await;
        assert_eq!(approved.status, 200);
        assert_eq!(approved.json()["execution"]["status"], "queued");
    }

    // The quorum example: alice AND bob, each with their own key.
    let quorum = json!({
        "action": {"type": "echo", "payload": {"say": "both of us"}},
        "approvers": [ALICE, BOB],
        "policy": {"rules": [{"name": "both-of-us", "approvers": [ALICE, BOB], "min_approvals": 2}]}
    })
    .to_string();
    let third = send(create(&runner, DEMO_KEY, "demo-3", &quorum)).await;
    assert_eq!(third.status, 201);
    let third = third.json()["id"].as_str().expect("id").to_owned();
    let first_vote = send(decide(&runner, DEMO_ALICE_KEY, &third, ALICE)).await;
    assert_eq!(first_vote.json()["status"], "pending");
    assert_eq!(first_vote.json()["policy"]["rules"][0]["approvals"], 1);
    let second_vote = send(decide(&runner, DEMO_BOB_KEY, &third, BOB)).await;
    assert_eq!(second_vote.json()["status"], "approved");
    let ids = [ids[0].clone(), ids[1].clone(), third];
    let done = wait_until_executed(&runner, DEMO_KEY, &ids, Duration::from_secs(30)).await;
    for approval in &done {
        assert_eq!(approval["execution"]["status"], "succeeded", "{approval}");
        assert_eq!(approval["execution"]["attempts"], 1, "{approval}");
    }
    for (id, key) in ids.iter().zip(["demo-1", "demo-2", "demo-3"]) {
        assert_eq!(
            runner
                .stdout_lines_with(&format!("echo: performing demo:{key}:"))
                .len(),
            1,
            "{key} performed once:\n{}",
            runner.log_tail()
        );
        assert_eq!(
            runner
                .stdout_lines_with(&format!("notify: {ALICE} — review {id} "))
                .len(),
            1,
            "alice notified once of {id}:\n{}",
            runner.log_tail()
        );
    }
    assert!(
        runner.stdout_lines_with("already performed").is_empty(),
        "no second call reached the echo target"
    );
    // The demo subscribes its own receiver to every event: each approval's execution is
    // called back once, verified (the receiver refuses what does not verify).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    for id in &ids {
        let line = "callback: execution.succeeded evt_";
        loop {
            let lines: Vec<String> = runner
                .stdout_lines_with(line)
                .into_iter()
                .filter(|l| l.contains(&format!("(approval {id}, signature verified)")))
                .collect();
            if lines.len() == 1 {
                break;
            }
            assert!(
                lines.len() < 2 && std::time::Instant::now() < deadline,
                "{id}: execution.succeeded called back {} times:\n{}",
                lines.len(),
                runner.log_tail()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    assert!(
        runner.stdout_lines_with("did not verify").is_empty(),
        "every callback verified"
    );
}

/// What one client did to one approval, and what it was answered.
#[derive(Default)]
struct Tally {
    requests: AtomicUsize,
    webhook_decided: AtomicUsize,
    slack_decided: AtomicUsize,
    refused: AtomicUsize,
}

/// 200 approvals, each created twice and approved twice (the two copies sent at once), by 8
/// concurrent clients against one runner, with webhook duplicates and refused requests mixed
/// in: every approval is executed exactly once, none is left `queued`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_hundred_approvals_created_and_approved_twice_each_execute_exactly_once() {
    const APPROVALS: usize = 200;
    const CLIENTS: usize = 8;
    let downstream = Downstream::default();
    let target = downstream.serve().await;
    // Tenant A decides in Slack too: every approval gets its message, some are decided there.
    let slack = FakeSlack::start().await;
    // ... and gates GitHub deployments (after the rest, on the same runner).
    let github = FakeGithub::start().await;
    // ... and its approvers sign in (after the rest): the runner's port is chosen first, as
    // the provider must know its redirect URI.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let base = format!("http://127.0.0.1:{port}");
    let provider =
        countersign_tests::oidc::TestProvider::start(sign_in_round::provider_config(&base)).await;
    let prefix = format!("ll-{}", ulid::Ulid::new().to_string().to_lowercase());
    let mut env = isolated_env(&prefix).await;
    env.extend(
        [
            // ... and bob's own approver key: he votes in carol's place as her delegate.
            ("API_KEYS", stall_round::with_bobs_key(&test_api_keys())),
            (
                "ACTION_TARGETS",
                json!({"deploy": {"url": format!("{target}/ok"), "idempotent": true},
                       "agent": {"executes": false}})
                .to_string(),
            ),
            ("NOTIFIER_URL", format!("{target}/notify")),
            (
                "WEBHOOK_SOURCES",
                json!({"acme": {"tenant": TENANT_A, "secrets": [ACME_SECRET]}}).to_string(),
            ),
            ("DECISION_TOKEN_SECRET", TOKEN_SECRET.to_owned()),
            ("PORT", port.to_string()),
            ("PUBLIC_BASE_URL", base.clone()),
            ("OIDC", sign_in_round::oidc_env(&provider.issuer)),
            // As a deployment gives them: the bot token and the App's key apart from the
            // rest, where the webhook function cannot read them.
            slack.split_env()[0].clone(),
            slack.split_env()[1].clone(),
            github.split_env()[0].clone(),
            github.split_env()[1].clone(),
            // A revoked table key stops within a second.
            ("KEY_CACHE_SECONDS", "1".to_owned()),
            // The last round moves the runner's clock, and its sweeps follow within 2 s.
            ("LOCAL_CLOCK", "advanceable".to_owned()),
            ("SWEEP_INTERVAL_SECONDS", "2".to_owned()),
            // The resume round's workflows: a state machine's tokens and a durable callback.
            ("RESUME_TYPES", "stepfunctions,lambda_durable".to_owned()),
        ]
        .map(|(k, v)| (k.to_owned(), v)),
    );
    let runner = LocalRunner::start(&env).await;
    // A third of the creates use a table key of the same holder, rolled half-way through.
    let store = countersign::Store::new(
        aws_sdk_dynamodb::Client::new(&countersign_tests::sdk_config().await),
        countersign::store::Tables::with_prefix(&prefix),
    );
    let first_table_key =
        countersign_tests::table_key(&store, TENANT_A, TENANT_A, &["requester", "reader"], None)
            .await;
    let table_key = std::sync::Mutex::new(first_table_key.expose().to_owned());
    // Two posts whose answers are lost along the way: found in the channel, not posted again.
    slack.fault_next(
        "chat.postMessage",
        Fault::LoseAnswer(Duration::from_secs(12)),
    );
    let secret = WebhookSecret::parse(ACME_SECRET).expect("secret");
    let tally = Tally::default();

    let started = Instant::now();
    let created: Vec<(usize, String)> = futures::stream::iter(0..APPROVALS)
        .map(|i| {
            let (runner, secret, tally, slack) = (&runner, &secret, &tally, &slack);
            let (store, table_key, first_table_key) = (&store, &table_key, &first_table_key);
            async move {
                if i == APPROVALS / 2 {
                    // Rolled mid-run with an hour's overlap: the old key goes on working.
                    let new = countersign::domain::TableKey::generate(
                        countersign::domain::KeyId::random(),
                    );
                    let old = store
                        .key(first_table_key.id())
                        .await
                        .expect("read")
                        .expect("key");
                    let successor = countersign::domain::KeyRecord {
                        id: new.id().clone(),
                        key_hash: new.digest(),
                        ..old
                    };
                    let now = countersign::Clock::system().now();
                    store
                        .roll_key(first_table_key.id(), &successor, (now, now + 3600))
                        .await
                        .expect("roll");
                    *table_key.lock().expect("key lock") = new.expose().to_owned();
                }
                let requester = if i % 3 == 0 {
                    table_key.lock().expect("key lock").clone()
                } else {
                    KEY_A.to_owned()
                };
                let requester = requester.as_str();
                let key = format!("ll-{i}");
                let body = json!({
                    "action": {"type": "deploy", "payload": {"build": i}},
                    "approvers": [ALICE, BOB],
                    "context": {"summary": format!("build {i}")}
                })
                .to_string();
                let (a, b) = futures::join!(
                    send(create(runner, requester, &key, &body)),
                    send(create(runner, KEY_A, &key, &body))
                );
                tally.requests.fetch_add(2, Ordering::Relaxed);
                assert_eq!((a.status, b.status), (201, 201));
                assert_eq!(a.body, b.body, "the replay is byte-identical");
                assert!(a.replayed != b.replayed, "exactly one of the two created");
                let id = a.json()["id"].as_str().expect("id").to_owned();

                if i % 10 == 0 {
                    // The same key with another body: refused, nothing written.
                    let other = body.replace("build", "other");
                    let reused = send(create(runner, KEY_A, &key, &other)).await;
                    assert_eq!(reused.status, 409);
                    tally.refused.fetch_add(1, Ordering::Relaxed);
                    tally.requests.fetch_add(1, Ordering::Relaxed);
                }
                if i == APPROVALS / 2 {
                    slack.fault_next(
                        "chat.postMessage",
                        Fault::LoseAnswer(Duration::from_secs(12)),
                    );
                }
                if i % 10 == 5 {
                    // An approver the approval does not list: refused by the condition.
                    let stranger = send(decide(runner, DECIDER_A, &id, MALLORY)).await;
                    assert_eq!(stranger.status, 403);
                    tally.refused.fetch_add(1, Ordering::Relaxed);
                    tally.requests.fetch_add(1, Ordering::Relaxed);
                }

                let answers = if i % 4 == 1 {
                    // Double-clicked in Slack.
                    let click = || {
                        let body = slack.click_body(U_ALICE, "countersign.approve", &id);
                        let mut request = runner
                            .http
                            .post(runner.url(&format!("/slack/interactions/{TENANT_A}")))
                            .body(body.clone());
                        let now = countersign::Clock::system().now();
                        for (name, value) in slack_headers(SLACK_SIGNING_SECRET, now, &body) {
                            request = request.header(name, value);
                        }
                        request
                    };
                    let (a, b) = futures::join!(send(click()), send(click()));
                    assert_eq!((a.status, b.status), (200, 200));
                    tally.slack_decided.fetch_add(1, Ordering::Relaxed);
                    2
                } else if i % 4 == 3 {
                    // Through the webhook channel, delivered twice at once (a redelivery).
                    let event = decided_event(&id, "approve", ALICE);
                    let event_id = format!("msg_ll_{i}");
                    let url = runner.url("/webhooks/acme");
                    let deliver = || signed_delivery(&runner.http, &url, secret, &event_id, &event);
                    let (a, b) = futures::join!(send(deliver()), send(deliver()));
                    tally.webhook_decided.fetch_add(1, Ordering::Relaxed);
                    let mut statuses = [a.json()["status"].clone(), b.json()["status"].clone()];
                    statuses.sort_by_key(|s| s.to_string());
                    assert_eq!(statuses, [json!("duplicate"), json!("processed")]);
                    assert_eq!(a.json()["outcome"], "applied");
                    assert_eq!(b.json()["outcome"], "applied");
                    // And an API client that approves again afterwards: a repeat.
                    let late = send(decide(runner, DECIDER_A, &id, ALICE)).await;
                    assert_eq!((late.status, late.replayed), (200, true));
                    3
                } else {
                    let (a, b) = futures::join!(
                        send(decide(runner, DECIDER_A, &id, ALICE)),
                        send(decide(runner, DECIDER_A, &id, ALICE))
                    );
                    assert_eq!((a.status, b.status), (200, 200));
                    assert!(a.replayed != b.replayed, "exactly one of the two decided");
                    2
                };
                tally.requests.fetch_add(answers, Ordering::Relaxed);
                (i, id)
            }
        })
        .buffer_unordered(CLIENTS)
        .collect()
        .await;
    let ids: Vec<String> = created.iter().map(|(_, id)| id.clone()).collect();
    let load = started.elapsed();
    let requests = tally.requests.load(Ordering::Relaxed);

    // Every approval executes; how long it took is a figure (printed below), not a pass mark —
    // on this 2-core machine about 58 s, too close to any fixed bound for a test that must not
    // flake on a slower one. The bound only keeps a stalled pipeline from hanging the run.
    let budget = Duration::from_secs(240).saturating_sub(load);
    let done = wait_until_executed(&runner, KEY_A, &ids, budget).await;
    // The rolled key still works in its overlap until revoked; then only its successor does.
    let old_key = first_table_key.expose().to_owned();
    let new_key = table_key.lock().expect("key lock").clone();
    assert_ne!(old_key, new_key, "rolled mid-run");
    assert_eq!(send(get(&runner, &old_key, &ids[0])).await.status, 200);
    store
        .revoke_key(first_table_key.id(), countersign::Clock::system().now())
        .await
        .expect("revoke");
    let deadline = Instant::now() + Duration::from_secs(10);
    while send(get(&runner, &old_key, &ids[0])).await.status != 401 {
        assert!(Instant::now() < deadline, "the revoked key still works");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(send(get(&runner, &new_key, &ids[0])).await.status, 200);
    let executed = started.elapsed();
    for approval in &done {
        assert_eq!(approval["execution"]["status"], "succeeded", "{approval}");
        assert_eq!(approval["execution"]["attempts"], 1, "{approval}");
    }
    for (i, id) in &created {
        let key = execute_key(&format!("ll-{i}"), id);
        assert_eq!(
            (downstream.calls(&key), downstream.effects(&key)),
            (1, 1),
            "{key}: one call, one effect"
        );
    }
    let notified = downstream.calls_to("/notify").len();
    assert_eq!(notified, 2 * APPROVALS, "each approver notified once");
    // One Slack message per approval, each drawn to its end: approved, succeeded, no buttons.
    let slack_deadline = Instant::now() + Duration::from_secs(120);
    for id in &ids {
        loop {
            let messages = slack.messages_of(id);
            assert!(messages.len() <= 1, "{id}: {} messages", messages.len());
            if messages
                .first()
                .is_some_and(|m| !m.has_buttons() && m.shown().contains("execution: *succeeded*"))
            {
                break;
            }
            assert!(Instant::now() < slack_deadline, "{id}: {messages:?}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    let slack_decided = tally.slack_decided.load(Ordering::Relaxed);
    let (posts, updates, lookups) = (
        slack.calls("chat.postMessage").len(),
        slack.calls("chat.update").len(),
        slack.calls("conversations.history").len(),
    );
    assert_eq!(
        posts, APPROVALS,
        "one post per approval, lost answers included"
    );
    assert!(lookups >= 2, "the lost answers were looked for");
    println!(
        "Slack: {posts} posts, {updates} updates, {lookups} history lookups for {APPROVALS} \
         approvals ({slack_decided} decided by a double click in Slack)"
    );
    let agents = approval_only_round(&runner, secret_for_agents(), &downstream).await;
    println!(
        "then {agents} approval-only approvals on the same runner: each claimed once by one of two racing claimers, reported, never dispatched"
    );
    let (deployments, told) = github_round(&runner, &github).await;
    println!(
        "then {deployments} GitHub deployments on the same runner, each a storm of deliveries: \
         one approval each, GitHub told {told} decisions, one per round, none for a run that ended"
    );
    let passkey_only = passkey_round::passkey_round(&runner, &secret_for_agents()).await;
    println!(
        "then {passkey_only} passkey-only approvals on the same runner: every decider vote and \
         webhook refused passkey_required, recording nothing; each cancelled, nothing executed"
    );
    let signed_in = sign_in_round::sign_in_round(&runner, &provider, &downstream).await;
    println!(
        "then {signed_in} 2-of-2 approvals decided on the same runner by two signed-in approvers, \
         each clicking twice at once, with sessionless and cross-site posts mixed in: each \
         executed once"
    );
    let (reminded, escalated, delegated) = stall_round::stall_round(&runner, &downstream).await;
    println!(
        "then {reminded} approvals reminded twice, {escalated} escalated to a lead and \
         {delegated} decided by a delegate in the delegator's place on the same runner, its clock \
         moved forward: each reminder to whoever had not voted (and their delegate), each step's \
         notification, each execution once"
    );
    let (resumed, resumed_approved) = resume_round::resume_round(&runner).await;
    println!(
        "then {resumed} workflows waiting on approvals resumed on the same runner, each once: \
         {resumed_approved} approved (succeeded with their decision document), the rest failed \
         with Countersign.Rejected or Countersign.Cancelled"
    );
    let webhook_decided = tally.webhook_decided.load(Ordering::Relaxed);
    let refused = tally.refused.load(Ordering::Relaxed);
    let moto_rss = moto_resident_bytes();
    println!(
        "long-lived runner: {APPROVALS} approvals, {requests} API requests by {CLIENTS} clients in \
         {:.1} s ({:.0} requests/s; {webhook_decided} decided by webhook with a redelivery, \
         {refused} refused); all executed once after {:.1} s; moto RSS {}",
        load.as_secs_f64(),
        requests as f64 / load.as_secs_f64(),
        executed.as_secs_f64(),
        moto_rss.map_or("n/a (not our moto)".to_owned(), |b| format!(
            "{:.0} MiB",
            b as f64 / 1048576.0
        ))
    );
    if let Some(rss) = moto_rss {
        assert!(rss < 1 << 30, "moto holds {rss} bytes");
    }
}
