//! A stack from before v5 upgrades in place (issue 38). Its tables, as that stack left them —
//! `tests/fixtures/before-v5/state.json`, written by `generate.py` beside it from the landed
//! head's own local runner: five approvals (pending with one vote of two, executed, rejected,
//! cancelled, and one whose execution was in flight when the runner died), their trails, index
//! items, ledger items and idempotency records, and the messages left in its queue — are
//! created as they were, take the template's upgrade steps (one index per deploy), and today's
//! code then reads and carries on with everything: each approval, trail and listing answers
//! what the old stack answered, a cursor and a review link it gave out still work, a create's
//! replay answers its first response, and the pending approval and the one in flight end
//! executed, each action run once.
//!
//! Here the tests and what they check; the old stack's set-up in `upgrade/old_stack.rs`, the
//! template's index deploys in `upgrade/index_steps.rs`.

use std::collections::BTreeSet;
use std::time::Duration;

use countersign::store::Tables;
use countersign_tests::*;
use serde_json::{Value, json};

mod index_steps;
mod old_stack;

use index_steps::{IndexStep, active, index_steps};
use old_stack::{continue_the_old_stream, create_as_before, fixture};

/// The demo's configuration at that commit (`functions/local/src/main.rs`): its keys, its
/// review-token secret (which also signs cursors) and its callback secret.
const CI_KEY: &str = "cs_demo_key_0123456789";
const ALICE_KEY: &str = "cs_demo_alice_0123456789";
const BOB_KEY: &str = "cs_demo_bob_0123456789";
const TOKEN_SECRET: &str = "countersign-demo-review-token-secret";
const CALLBACK_SECRET: &str = "whsec_Y291bnRlcnNpZ24tZGVtby1jYWxsYmFjay1zZWNyZXQh";

/// Every listing the old stack answered, answered alike (the approval then in flight, whose
/// status moves on, left out), and a cursor it gave out resuming right after its page.
async fn listings_answer_as_before(t: &TestApp, state: &Value) {
    let old = &state["responses"];
    let in_flight = state["ids"]["in_flight"].as_str().expect("an id");
    for (query, listed) in old["listings"].as_object().expect("listings") {
        let page = get(t, &format!("/approvals?limit=100&{query}")).await;
        let now: Vec<&str> = page["approvals"]
            .as_array()
            .expect("approvals")
            .iter()
            .filter_map(|a| a["id"].as_str())
            .filter(|listed| *listed != in_flight)
            .collect();
        let then: Vec<&str> = listed
            .as_array()
            .expect("ids")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert_eq!(now, then, "{query:?}");
    }
    // A cursor the old stack gave out resumes the listing right after its page.
    let cursor = old["cursor"]["next_cursor"].as_str().expect("a cursor");
    let rest = get(t, &format!("/approvals?limit=100&cursor={cursor}")).await;
    let rest: Vec<&str> = rest["approvals"]
        .as_array()
        .expect("approvals")
        .iter()
        .filter_map(|a| a["id"].as_str())
        .collect();
    let all: Vec<&str> = old["listings"][""]
        .as_array()
        .expect("ids")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(rest, all[2..], "the old cursor resumes after its page");
}

/// An approval as a stack before v7 showed it: v7 adds `policy.source` beside an approval's
/// rules, `null` on every approval no deployment's policy decided (all of an old stack's).
fn as_before_v7(mut approval: Value) -> Value {
    if let Some(policy) = approval["policy"].as_object_mut() {
        assert_eq!(
            policy.remove("source"),
            Some(Value::Null),
            "an old approval's source"
        );
    }
    approval
}

async fn get(t: &TestApp, path: &str) -> Value {
    let reply = t.get_path(CI_KEY, path).await;
    assert_eq!(reply.status, 200, "{path}: {}", reply.text());
    reply.json()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stack_from_before_v5_upgrades_in_place_and_keeps_every_approval() {
    let state = fixture();
    let tables = Tables::with_prefix(&format!(
        "u-{}",
        ulid::Ulid::new().to_string().to_lowercase()
    ));
    let keys = json!([
        {"tenant": "demo", "principal": "ci@demo", "roles": ["requester", "operator"], "key": CI_KEY},
        {"tenant": "demo", "principal": ALICE, "roles": ["approver"], "key": ALICE_KEY},
        {"tenant": "demo", "principal": BOB, "roles": ["approver"], "key": BOB_KEY},
    ])
    .to_string();
    let targets = json!({
        "echo": {"url": "{downstream}/ok", "idempotent": true},
        "stall": {"url": "{downstream}/ok", "idempotent": true},
    })
    .to_string();
    let subscriptions =
        json!({"demo": {"url": "{downstream}/callback", "secret": CALLBACK_SECRET}}).to_string();
    let mut overrides = tables.variables().to_vec();
    overrides.extend([
        ("API_KEYS", keys.as_str()),
        ("ACTION_TARGETS", &targets),
        ("EVENT_SUBSCRIPTIONS", &subscriptions),
        ("DECISION_TOKEN_SECRET", TOKEN_SECRET),
    ]);
    // The old tables first (the app's start finds them and leaves them as they are).
    let setup = TestApp::build(&[]).await;
    create_as_before(&setup, &tables, &state).await;
    let steps = index_steps(&tables, &state);
    assert_eq!(
        steps.iter().map(IndexStep::name).collect::<Vec<_>>(),
        [
            "approvals: create by_status_keys",
            "approvals: delete by_tenant",
            "approvals: delete by_status"
        ],
        "the template's three deploys"
    );
    // The first deploy: by_status_keys added, today's code live while DynamoDB backfills it,
    // its roles those of ApprovalsIndexesStep 1 (a listing may read the old by_status).
    steps[0].apply(&setup).await;
    let first_deploy = countersign::runner::Deployment {
        parameters: &[("ApprovalsIndexesStep", "1")],
        ..Default::default()
    };
    let t = TestApp::jobs_deployed(&overrides, None, first_deploy).await;
    assert!(!active(&t, "by_status_keys").await, "still backfilling");
    continue_the_old_stream(&t, &state).await;
    // The clock reads a minute after the old stack stopped, whenever this runs: the lease of the
    // execution in flight has ended, the create's replay window (a day) and the pending
    // approval's expiry (a week) have not.
    let stopped = state["tables"]["events"]["items"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e["at"]["N"].as_str()?.parse::<i64>().ok())
        .max()
        .expect("old events");
    t.clock.advance(stopped + 60 - t.clock.now());
    let ids = &state["ids"];
    let id = |name: &str| ids[name].as_str().expect("an id").to_owned();
    let old = &state["responses"];

    // Read before anything moves: every listing as the old stack answered, through by_status
    // while by_status_keys backfills; every approval and trail.
    listings_answer_as_before(&t, &state).await;
    for name in ["pending", "executed", "rejected", "cancelled"] {
        assert_eq!(
            as_before_v7(get(&t, &format!("/approvals/{}", id(name))).await),
            old["approvals"][name],
            "{name}"
        );
        let trail = get(&t, &format!("/approvals/{}/events?limit=100", id(name))).await;
        assert_eq!(trail["events"], old["trails"][name], "{name}'s trail");
    }
    // A create's replay answers the old first response, byte for byte as JSON.
    let create = &old["create"];
    let replay = t
        .create(
            CI_KEY,
            create["key"].as_str().expect("a key"),
            &create["body"].to_string(),
        )
        .await;
    assert_eq!(replay.status, 201, "{}", replay.text());
    assert_eq!(replay.json(), create["response"]);

    // The next two deploys, once the index is ACTIVE: the old indexes gone, the listings the same.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !active(&t, "by_status_keys").await {
        assert!(
            std::time::Instant::now() < deadline,
            "by_status_keys never ACTIVE"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for step in &steps[1..] {
        step.apply(&t).await;
    }
    listings_answer_as_before(&t, &state).await;

    // Then the jobs the old stack left in its queue, and today's runner.
    let sqs = aws_sdk_sqs::Client::new(&t.sdk);
    for body in state["queue"].as_array().expect("messages") {
        sqs.send_message()
            .queue_url(&t.queues().queue_url)
            .message_body(body.as_str().expect("a body"))
            .send()
            .await
            .expect("queue an old job");
    }
    t.start_runner();

    // A review link minted before still opens the approval, and its vote completes the quorum.
    let pending = id("pending");
    let secret = countersign::review_token::TokenSecret::parse(TOKEN_SECRET).expect("secret");
    let approval = countersign::domain::ApprovalId::parse(&pending).expect("an id");
    let tenant = countersign::domain::TenantId::parse("demo").expect("a tenant");
    let bob = countersign::domain::Approver::parse(BOB).expect("bob");
    let token = secret.mint(&tenant, &approval, &bob, t.clock.now() + 86_400);
    let page = t
        .send(
            t.http
                .get(t.url(&format!("/approvals/{pending}/review?token={token}"))),
        )
        .await;
    assert_eq!(page.status, 200, "the review link opens: {}", page.text());
    let voted = t
        .decide(
            BOB_KEY,
            &pending,
            json!({"decision": "approve", "approver": BOB}),
        )
        .await;
    assert_eq!(voted.status, 200, "{}", voted.text());
    assert_eq!(voted.json()["status"], "approved");

    // Both end executed, each action run once: the pending one on the ledger kept on its
    // approval, the one in flight on its own ledger item, taken over once its lease had ended.
    let wait = Duration::from_secs(60);
    for name in ["pending", "in_flight"] {
        let done = t.wait_for_execution(CI_KEY, &id(name), wait).await;
        assert_eq!(done["execution"]["status"], "succeeded", "{name}: {done}");
    }
    let downstream = t.downstream();
    for (name, key) in [
        ("pending", "upgrade-pending"),
        ("in_flight", "upgrade-in-flight"),
    ] {
        let business = format!("demo:{key}:{}", id(name));
        assert_eq!(downstream.effects(&business), 1, "{name}: one effect");
    }
    eventually("the runner is idle", || async {
        t.queue_depth(&t.queues().queue_url).await == 0
    })
    .await;

    // The pending approval's trail goes on after its old events, each event once, in order
    // (once the stream's last records are dispatched).
    let trail_path = format!("/approvals/{pending}/events?limit=100");
    eventually("the execution's end is on the trail", || async {
        get(&t, &trail_path).await["events"]
            .as_array()
            .is_some_and(|e| e.iter().any(|e| e["type"] == "execution.succeeded"))
    })
    .await;
    let trail = get(&t, &trail_path).await;
    let events = trail["events"].as_array().expect("events");
    let before = old["trails"]["pending"].as_array().expect("events");
    assert_eq!(&events[..before.len()], &before[..], "the old events first");
    let types: Vec<&str> = events[before.len()..]
        .iter()
        .filter_map(|e| e["type"].as_str())
        .filter(|t| !t.starts_with("callback."))
        .collect();
    assert_eq!(
        types,
        [
            "approval.vote_recorded",
            "approval.approved",
            "execution.queued",
            "execution.attempt_started",
            "execution.attempt_ended",
            "execution.succeeded"
        ]
    );
    for name in ["pending", "in_flight"] {
        let trail = get(&t, &format!("/approvals/{}/events?limit=100", id(name))).await;
        let ids: BTreeSet<&str> = trail["events"]
            .as_array()
            .expect("events")
            .iter()
            .filter_map(|e| e["id"].as_str())
            .collect();
        assert_eq!(
            ids.len(),
            trail["events"].as_array().map_or(0, Vec::len),
            "{name}: no event twice"
        );
    }
    // The listing follows: the pending one is approved now, under the new index's key.
    let approved = get(&t, "/approvals?limit=100&status=approved").await;
    let approved: BTreeSet<&str> = approved["approvals"]
        .as_array()
        .expect("approvals")
        .iter()
        .filter_map(|a| a["id"].as_str())
        .collect();
    assert!(approved.contains(pending.as_str()), "{approved:?}");
    let bobs = get(
        &t,
        &format!("/approvals?limit=100&status=pending&approver={BOB}"),
    )
    .await;
    assert_eq!(
        bobs["approvals"],
        json!([]),
        "nothing pending for bob any more"
    );
}

/// An execution whose first attempt, before v5, asked for a retry: its ledger item says
/// `retry_wait` and its approval `queued`, one attempt counted, no ledger on the approval. The
/// retry takes the ledger item's path (not a fresh ledger on the approval beside it), ends it,
/// and the action runs once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_execution_waiting_for_its_retry_before_v5_retries_on_its_ledger_item() {
    use aws_sdk_dynamodb::types::AttributeValue;
    let t = TestApp::jobs_without_runner(&[], None).await;
    let created = t
        .create(KEY_A, "retry-before-v5", &deploy_body(1, &[ALICE]))
        .await;
    assert_eq!(created.status, 201, "{}", created.text());
    let id = created.json()["id"].as_str().expect("an id").to_owned();
    let approve = json!({"decision": "approve", "approver": ALICE});
    assert_eq!(t.decide(DECIDER_A, &id, approve).await.status, 200);
    // What the code before v5 left: its first attempt counted on the approval, its ledger item
    // waiting for the retry.
    let now = t.clock.now();
    let tables = &t.app.config.tables;
    t.dynamodb
        .update_item()
        .table_name(&tables.approvals)
        .key("pk", AttributeValue::S(format!("{TENANT_A}#{id}")))
        .update_expression("SET #e.#a = :one, #e.#l = :error")
        .expression_attribute_names("#e", "execution")
        .expression_attribute_names("#a", "attempts")
        .expression_attribute_names("#l", "last_error")
        .expression_attribute_values(":one", AttributeValue::N("1".into()))
        .expression_attribute_values(":error", AttributeValue::S("HTTP 503".into()))
        .send()
        .await
        .expect("the approval as before v5");
    let ledger_pk = format!("{id}#execute");
    let legacy = [
        ("pk", AttributeValue::S(ledger_pk.clone())),
        ("approval_id", AttributeValue::S(id.clone())),
        ("tenant", AttributeValue::S(TENANT_A.into())),
        ("kind", AttributeValue::S("execute".into())),
        ("status", AttributeValue::S("retry_wait".into())),
        ("generation", AttributeValue::N("0".into())),
        ("attempts", AttributeValue::N("1".into())),
        ("token", AttributeValue::S("01OLDWORKERTOKEN".into())),
        ("last_error", AttributeValue::S("HTTP 503".into())),
        ("updated_at", AttributeValue::N(now.to_string())),
    ];
    let mut put = t.dynamodb.put_item().table_name(&tables.execution_ledger);
    for (name, value) in legacy {
        put = put.item(name, value);
    }
    put.send().await.expect("the ledger item as before v5");

    t.start_runner();
    let done = t
        .wait_for_execution(KEY_A, &id, Duration::from_secs(60))
        .await;
    assert_eq!(done["execution"]["status"], "succeeded", "{done}");
    assert_eq!(done["execution"]["attempts"], 2, "{done}");
    let business = format!("{TENANT_A}:retry-before-v5:{id}");
    assert_eq!(t.downstream().effects(&business), 1, "one effect");
    let item = t
        .item(&tables.execution_ledger, &ledger_pk)
        .await
        .expect("the ledger item");
    assert_eq!(
        item["status"].as_s().ok().map(String::as_str),
        Some("succeeded")
    );
    assert_eq!(item["attempts"].as_n().ok().map(String::as_str), Some("2"));
    let approval = t.approval_item(&id).await;
    let execution = approval["execution"].as_m().expect("the execution");
    assert!(
        !execution.contains_key("lg_status"),
        "no second ledger on the approval: {execution:?}"
    );
}
