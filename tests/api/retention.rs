//! Retention (`RETENTION_DAYS`): every item of an approval that has ended carries its TTL
//! (`retain_until`), set by writes that happen anyway, so DynamoDB deletes the approval with its
//! trail, index entries and ledger records; a pending or running one carries none on its own
//! item, and nothing of it can go before it. Through the real router, dispatcher and executor
//! against the local AWS.

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use countersign_tests::{ALICE, CreateBody, KEY_A, TENANT_A, TestApp, event_types, eventually};
use serde_json::json;

type Item = HashMap<String, AttributeValue>;

const DAY: i64 = 86_400;
const WAIT: Duration = Duration::from_secs(60);

fn number(item: &Item, name: &str) -> Option<i64> {
    match item.get(name) {
        Some(AttributeValue::N(n)) => n.parse().ok(),
        _ => None,
    }
}

fn string<'a>(item: &'a Item, name: &str) -> &'a str {
    match item.get(name) {
        Some(AttributeValue::S(s)) => s,
        _ => "",
    }
}

/// The approval `id`'s own item, and every other item of it: its trail, its index entries and
/// its jobs' ledger records (each named by table).
async fn items_of(t: &TestApp, id: &str) -> (Item, Vec<(&'static str, Item)>) {
    let tables = &t.app.config.tables;
    let pk = format!("{TENANT_A}#{id}");
    let approval = t.item(&tables.approvals, &pk).await.expect("the approval");
    let mut others = Vec::new();
    for item in t.scan_items(&tables.events).await {
        if string(&item, "pk") == pk {
            others.push(("events", item));
        }
    }
    for item in t.scan_items(&tables.approval_index).await {
        if string(&item, "id") == id {
            others.push(("approval_index", item));
        }
    }
    for item in t.scan_items(&tables.execution_ledger).await {
        if string(&item, "approval_id") == id {
            others.push(("execution_ledger", item));
        }
    }
    (approval, others)
}

fn has_ttl(items: &[(&str, Item)]) -> bool {
    items
        .iter()
        .any(|(_, item)| item.contains_key("retain_until"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_ended_approval_and_every_item_of_it_expire_within_the_retention_a_pending_one_never() {
    let retention = 2 * DAY;
    let t = TestApp::start_jobs(&[("RETENTION_DAYS", "2"), ("JOB_MAX_ATTEMPTS", "2")]).await;
    let began = t.clock.now();
    let body = |kind: &str| CreateBody::new(kind, &[ALICE]).to_string();
    let pending = t.create_ok(KEY_A, "keep-pending", &body("deploy")).await;
    let rejected = t.create_ok(KEY_A, "rejected", &body("deploy")).await;
    let reply = t
        .decide(
            countersign_tests::DECIDER_A,
            &rejected,
            countersign_tests::decision_body("reject", ALICE),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    let succeeded = t.create_approved("succeeded", &body("deploy"), ALICE).await;
    let done = t.wait_for_execution(KEY_A, &succeeded, WAIT).await;
    assert_eq!(done["execution"]["status"], "succeeded");
    let failed = t
        .create_approved("failed", &body("always_503"), ALICE)
        .await;
    let done = t.wait_for_execution(KEY_A, &failed, WAIT).await;
    assert_eq!(done["execution"]["status"], "failed");
    // Every change is in the trail (the dispatcher's writes), every notification sent (the
    // notify jobs' ledger records).
    for (id, last) in [
        (&rejected, "approval.rejected"),
        (&succeeded, "execution.succeeded"),
        (&failed, "execution.failed"),
        (&pending, "notification.sent"),
    ] {
        eventually(&format!("{last} recorded for {id}"), || async {
            let trail = event_types(&t.trail(KEY_A, id, 50).await);
            trail.iter().any(|e| e == last) && trail.iter().any(|e| e == "notification.sent")
        })
        .await;
    }
    let ended_by = t.clock.now();

    for id in [&rejected, &succeeded, &failed] {
        let (approval, others) = items_of(&t, id).await;
        let until = number(&approval, "retain_until").expect("an ended approval has its TTL");
        assert!(
            (began + retention..=ended_by + retention).contains(&until),
            "its end + the retention: {until} not in {}..={}",
            began + retention,
            ended_by + retention
        );
        assert!(
            others.iter().any(|(table, _)| *table == "events")
                && others.iter().any(|(table, _)| *table == "approval_index")
                && others.iter().any(|(table, _)| *table == "execution_ledger"),
            "{id}: a trail, index entries and ledger records: {others:?}"
        );
        for (table, item) in &others {
            let item_until = number(item, "retain_until")
                .unwrap_or_else(|| panic!("{table} item of {id} without a TTL: {item:?}"));
            assert!(
                item_until >= until,
                "{table} item of {id} would go before its approval ({item_until} < {until})"
            );
            // No item outlives the approval's own pending window plus the retention: a job's
            // ledger record and the events it records are bounded by the approval's expiry,
            // which the job carries (review of v6, finding 13: they took the write's time + 30
            // days, past a 7-day approval's expiry + retention).
            let expires_at = number(&approval, "expires_at").expect("its expiry");
            assert!(
                item_until <= expires_at.max(ended_by) + retention,
                "{table} item of {id} outlives its approval's expiry + the retention: \
                 {item_until} > {}",
                expires_at.max(ended_by) + retention
            );
        }
        // Its create's idempotency record keeps its own, shorter life.
        let record = t
            .item(
                &t.app.config.tables.idempotency_keys,
                &format!("{TENANT_A}#{}", string(&approval, "idempotency_key")),
            )
            .await;
        if let Some(record) = record {
            let expires = number(&record, "expires_at").expect("an idempotency record's TTL");
            assert!(expires <= ended_by + retention);
        }
    }

    // Pending: its own item has no TTL, and nothing of it can go before it could end.
    let (approval, others) = items_of(&t, &pending).await;
    assert!(
        !approval.contains_key("retain_until"),
        "a pending approval is never deleted: {approval:?}"
    );
    let expires_at = number(&approval, "expires_at").expect("its expiry");
    assert!(has_ttl(&others), "its trail and index carry their bound");
    for (table, item) in &others {
        if let Some(item_until) = number(item, "retain_until") {
            assert!(
                item_until >= expires_at.max(began) + retention,
                "{table} item of a pending approval could go before it ends"
            );
        }
    }

    // An operator's retry gives the failed execution something due again: its TTL goes in
    // the same write (the runner is stopped, so nothing ends it again meanwhile), and comes
    // back with its new end.
    assert!(number(&items_of(&t, &failed).await.0, "retain_until").is_some());
    t.stop_runner().await;
    let retried = t.send(t.retry_request(&failed, Some("retry-1"))).await;
    assert_eq!(retried.status, 202, "{}", retried.text());
    let (approval, _) = items_of(&t, &failed).await;
    assert_eq!(
        t.get(KEY_A, &failed).await.json()["execution"]["status"],
        "queued"
    );
    assert!(
        !approval.contains_key("retain_until"),
        "a resumed execution keeps no TTL while it is due: {approval:?}"
    );
    t.start_runner();
    let done = t.wait_for_execution(KEY_A, &failed, WAIT).await;
    assert_eq!(done["execution"]["status"], "failed");
    eventually(
        "the retried execution's end carries a TTL again",
        || async { number(&items_of(&t, &failed).await.0, "retain_until").is_some() },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn zero_days_keeps_everything() {
    let t = TestApp::start_jobs(&[("RETENTION_DAYS", "0")]).await;
    let id = t
        .create_approved(
            "kept",
            &CreateBody::new("deploy", &[ALICE]).to_string(),
            ALICE,
        )
        .await;
    let done = t.wait_for_execution(KEY_A, &id, WAIT).await;
    assert_eq!(done["execution"]["status"], "succeeded");
    eventually("the trail is recorded", || async {
        event_types(&t.trail(KEY_A, &id, 50).await)
            .iter()
            .any(|e| e == "execution.succeeded")
    })
    .await;
    let (approval, others) = items_of(&t, &id).await;
    assert!(!approval.contains_key("retain_until"), "{approval:?}");
    assert!(!others.is_empty());
    assert!(!has_ttl(&others), "nothing of it expires: {others:?}");
}

/// An approval that ends after its expiry without changing status (here an approval-only
/// type's claim reported an hour after its expiry) is kept from that end: its listing entries
/// are put again with the later bound, so it is listed for as long as it is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_approval_ending_after_its_expiry_stays_listed_as_long_as_it_is_kept() {
    let t = TestApp::start_jobs(&[("RETENTION_DAYS", "2")]).await;
    let body = CreateBody::new("agent", &[ALICE])
        .expires_in(60)
        .to_string();
    let id = t.create_approved("late-end", &body, ALICE).await;
    eventually("the approval is indexed as approved", || async {
        event_types(&t.trail(KEY_A, &id, 50).await)
            .iter()
            .any(|e| e == "approval.approved")
    })
    .await;
    t.clock.advance(3_600);
    let claim = t
        .http
        .post(t.url(&format!("/approvals/{id}/execution/claim")))
        .bearer_auth(KEY_A)
        .header("idempotency-key", "tool-use-late");
    let claimed = t.send(claim).await;
    assert_eq!(claimed.status, 200, "{}", claimed.text());
    let report = t
        .http
        .post(t.url(&format!("/approvals/{id}/execution/report")))
        .bearer_auth(KEY_A)
        .header("idempotency-key", "tool-use-late")
        .json(&json!({"outcome": "succeeded"}));
    let reported = t.send(report).await;
    assert_eq!(reported.status, 200, "{}", reported.text());

    let (approval, _) = items_of(&t, &id).await;
    let until = number(&approval, "retain_until").expect("ended: its TTL");
    let expires_at = number(&approval, "expires_at").expect("its expiry");
    assert!(until > expires_at + 2 * DAY, "kept from its late end");
    eventually("its listing entries are kept as long as it is", || async {
        let (_, others) = items_of(&t, &id).await;
        let index: Vec<i64> = others
            .iter()
            .filter(|(table, _)| *table == "approval_index")
            .filter_map(|(_, item)| number(item, "retain_until"))
            .collect();
        !index.is_empty() && index.iter().all(|bound| *bound >= until)
    })
    .await;
}
