//! A listing page (`GET /approvals`) and the round trip v5 added to it (issue 38): the
//! approvals' index holds keys only, so a page is its queries (sent together) and then one
//! BatchGetItem of the approvals they name, where an index holding whole items answered in one
//! query. Measured on one tenant's 120 approvals (60 pending, 30 approved, 30 rejected), pages
//! of 20: the route in-process, and the raw requests it is made of — the query alone (what the
//! one round trip before v5 was) and the query followed by the BatchGetItem.

use std::collections::HashMap;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes};
use axum::body::Body;
use axum::http::Request;
use countersign_tests::{ALICE, BOB, CAROL, DECIDER_A, KEY_A, TENANT_A, TestApp, deploy_body};
use serde_json::json;
use tower::ServiceExt;

use crate::{Stats, drive};

const PAGE: usize = 20;
const ROUNDS: usize = 3;

#[derive(Clone, Copy)]
enum Row {
    /// The route, no filter: one query per status (five), then the BatchGetItem.
    Unfiltered,
    /// The route, `status=pending`: one query, then the BatchGetItem.
    Pending,
    /// The route, `status=pending&approver=…`: the facet's query and the one for items
    /// indexed before v5, then the BatchGetItem.
    PendingForApprover,
    /// Raw: the `status=pending` page's query alone.
    RawQuery,
    /// Raw: that query, then the BatchGetItem of the 20 approvals it names.
    RawQueryAndGet,
}

impl Row {
    fn name(self) -> &'static str {
        match self {
            Row::Unfiltered => "route: no filter",
            Row::Pending => "route: status=pending",
            Row::PendingForApprover => "route: pending, approver",
            Row::RawQuery => "raw: query alone",
            Row::RawQueryAndGet => "raw: query + BatchGetItem",
        }
    }

    fn path(self) -> Option<String> {
        let approver = ALICE.replace('@', "%40");
        match self {
            Row::Unfiltered => Some(format!("/approvals?limit={PAGE}")),
            Row::Pending => Some(format!("/approvals?limit={PAGE}&status=pending")),
            Row::PendingForApprover => Some(format!(
                "/approvals?limit={PAGE}&status=pending&approver={approver}"
            )),
            Row::RawQuery | Row::RawQueryAndGet => None,
        }
    }
}

const ROWS: [Row; 5] = [
    Row::RawQuery,
    Row::RawQueryAndGet,
    Row::Pending,
    Row::PendingForApprover,
    Row::Unfiltered,
];

async fn fill(t: &TestApp) {
    for i in 0..120u64 {
        let created = t
            .create(
                KEY_A,
                &format!("listing-{i}"),
                &deploy_body(i, &[ALICE, BOB, CAROL]),
            )
            .await;
        assert_eq!(created.status, 201, "{}", created.text());
        let id = created.json()["id"].as_str().expect("an id").to_owned();
        let decision = match i % 4 {
            0 => "approve",
            1 => "reject",
            _ => continue,
        };
        let decided = t
            .decide(
                DECIDER_A,
                &id,
                json!({"decision": decision, "approver": ALICE}),
            )
            .await;
        assert_eq!(decided.status, 200, "{}", decided.text());
    }
    // The index items are the dispatcher's, and the jobs the runner's: both done before the
    // timing starts, so no row shares the store with them.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(600);
    loop {
        let page = t
            .get_path(
                KEY_A,
                &format!("/approvals?limit=100&status=pending&approver={ALICE}"),
            )
            .await;
        let listed = page.json()["approvals"].as_array().map_or(0, Vec::len);
        if listed == 60 && t.queue_depth(&t.queues().queue_url).await == 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the listing index and the jobs not done"
        );
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    t.calls.take();
}

async fn raw_page(raw: &Client, t: &TestApp, get: bool) {
    let tables = &t.app.config.tables;
    let page = raw
        .query()
        .table_name(&tables.approvals)
        .index_name("by_status_keys")
        .key_condition_expression("#tenant = :tenant AND begins_with(#status_id, :prefix)")
        .expression_attribute_names("#tenant", "tenant")
        .expression_attribute_names("#status_id", "status_id")
        .expression_attribute_values(":tenant", AttributeValue::S(TENANT_A.to_owned()))
        .expression_attribute_values(":prefix", AttributeValue::S("pending#".to_owned()))
        .scan_index_forward(false)
        .limit(PAGE as i32 + 1)
        .send()
        .await
        .expect("Query");
    assert!(page.items().len() > PAGE, "a full page");
    if !get {
        return;
    }
    let keys: Vec<HashMap<String, AttributeValue>> = page.items()[..PAGE]
        .iter()
        .map(|item| HashMap::from([("pk".to_owned(), item["pk"].clone())]))
        .collect();
    let got = raw
        .batch_get_item()
        .request_items(
            &tables.approvals,
            KeysAndAttributes::builder()
                .set_keys(Some(keys))
                .consistent_read(true)
                .build()
                .expect("keys"),
        )
        .send()
        .await
        .expect("BatchGetItem");
    let items = got
        .responses()
        .and_then(|r| r.get(&tables.approvals))
        .map_or(0, Vec::len);
    assert_eq!(items, PAGE, "the page's approvals");
}

async fn route_page(router: &axum::Router, path: &str) {
    let response = router
        .clone()
        .oneshot(
            Request::get(path)
                .header("authorization", format!("Bearer {KEY_A}"))
                .body(Body::empty())
                .expect("request"),
        )
        .await
        .expect("router");
    assert_eq!(response.status(), 200, "{path}");
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("body");
    let page: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
    assert_eq!(
        page["approvals"].as_array().map_or(0, Vec::len),
        PAGE,
        "{path}"
    );
}

pub async fn run(ops: usize) {
    let t = TestApp::start_jobs(&[]).await;
    fill(&t).await;
    let raw = Client::new(&countersign_tests::sdk_config().await);
    let router = countersign::http::local_router(|f| t.function(f));
    println!(
        "\nA listing page of {PAGE} ({ops} pages per row, median of {ROUNDS} rounds, one tenant's 120 approvals; raw = the SDK alone)"
    );
    println!(
        "{:<26} {:>4} {:>9} {:>9} {:>9} {:>13}",
        "page", "conc", "pages/s", "p50 ms", "p99 ms", "DynamoDB/page"
    );
    for concurrency in [1, 8] {
        for row in ROWS {
            let mut rounds: Vec<(Stats, f64)> = Vec::new();
            for _ in 0..ROUNDS {
                let (t, raw, router) = (&t, &raw, &router);
                let path = row.path();
                let stats = drive(ops, concurrency, |_| {
                    let path = path.clone();
                    async move {
                        match (row, path) {
                            (_, Some(path)) => route_page(router, &path).await,
                            (Row::RawQuery, None) => raw_page(raw, t, false).await,
                            _ => raw_page(raw, t, true).await,
                        }
                    }
                })
                .await;
                let calls = match row {
                    Row::RawQuery => 1.0,
                    Row::RawQueryAndGet => 2.0,
                    _ => t.calls.take().len() as f64 / ops as f64,
                };
                rounds.push((stats, calls));
            }
            rounds.sort_by(|a, b| a.0.ops_per_s.total_cmp(&b.0.ops_per_s));
            let (stats, calls) = &rounds[ROUNDS / 2];
            println!(
                "{:<26} {:>4} {:>9.0} {:>9.2} {:>9.2} {:>13.2}",
                row.name(),
                concurrency,
                stats.ops_per_s,
                stats.p50.as_secs_f64() * 1000.0,
                stats.p99.as_secs_f64() * 1000.0,
                calls
            );
        }
    }
}
