//! The large-table row: create first on tables that start empty, then on the same tables once
//! 20,000 approvals are written straight into them, so that a write's cost is seen not to grow
//! with the table. Apart from the hot-path rows (`paths.rs`), whose measurement it reuses.

use std::collections::HashMap;

use aws_sdk_dynamodb::Client;
use countersign_tests::TestApp;

use super::raw::{n, s};
use super::{Bench, Mode, Op, measure, print_table};

/// Approvals (and their idempotency records) written straight to the tables before the large-
/// table row.
const LARGE_TABLE: usize = 20_000;

/// create first on tables that start empty, then on the same tables holding 20,000 approvals:
/// the cost of a write must not grow with the table. Returns in-process ops/s large ÷ empty.
/// `keys_table`: where the run's table keys are (each app has tables of its own).
pub(super) async fn table_size(ops: usize, keys_table: &str) -> f64 {
    let t = TestApp::start_with(&[("KEYS_TABLE", keys_table), ("KEY_CACHE_SECONDS", "300")]).await;
    let raw = Client::new(&countersign_tests::sdk_config().await);
    let mut cells = 0;
    let empty_label = "create first (empty)";
    let large_label = "create first (20,000)";
    let mut rows = measure(&t, ops, Op::CreateFirst, empty_label, 8, &mut cells).await;
    fill(&t, &raw, LARGE_TABLE).await;
    rows.extend(measure(&t, ops, Op::CreateFirst, large_label, 8, &mut cells).await);
    print_table(
        &rows,
        ops,
        "tables that start empty, then the same tables after 20,000 approvals were written",
    );
    let at = |label: &str| {
        rows.iter()
            .find(|r| r.operation == label && r.mode == Mode::InProcess)
            .map_or(0.0, |r| r.stats.ops_per_s)
    };
    at(large_label) / at(empty_label)
}

/// Writes `count` approvals and their idempotency records with BatchWriteItem (25 items a
/// call), outside any timing.
async fn fill(t: &TestApp, raw: &Client, count: usize) {
    use aws_sdk_dynamodb::types::{PutRequest, WriteRequest};
    use futures::StreamExt;
    let tables = &t.app.config.tables;
    let now = t.clock.now();
    let started = std::time::Instant::now();
    futures::stream::iter(
        (0..count)
            .collect::<Vec<_>>()
            .chunks(25)
            .map(<[usize]>::to_vec),
    )
    .map(|chunk| async move {
        let mut approvals = Vec::new();
        let mut keys = Vec::new();
        for i in chunk {
            let id = format!("apr_{}", ulid::Ulid::new());
            let key = format!("fill-{i}");
            let put = |item| {
                WriteRequest::builder()
                    .put_request(
                        PutRequest::builder()
                            .set_item(Some(item))
                            .build()
                            .expect("put"),
                    )
                    .build()
            };
            approvals.push(put(Bench::raw_approval_item(&id, &key, now)));
            keys.push(put(HashMap::from([
                ("pk".to_owned(), s(format!("tenant-a#{key}"))),
                ("fingerprint".to_owned(), s("0".repeat(64))),
                ("approval_id".to_owned(), s(&id)),
                ("response_status".to_owned(), n(201)),
                ("created_at".to_owned(), n(now)),
                ("expires_at".to_owned(), n(now + 86_400)),
            ])));
        }
        for (table, requests) in [
            (&tables.approvals, approvals),
            (&tables.idempotency_keys, keys),
        ] {
            let written = raw
                .batch_write_item()
                .request_items(table.as_str(), requests)
                .send()
                .await
                .expect("BatchWriteItem");
            assert!(
                written.unprocessed_items().is_none_or(|u| u.is_empty()),
                "moto left items unprocessed"
            );
        }
    })
    .buffer_unordered(4)
    .collect::<Vec<_>>()
    .await;
    t.calls.take();
    println!(
        "\nwrote {count} approvals and their idempotency records in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
