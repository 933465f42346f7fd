//! What a life leaves in the tables, and for how long: each item as DynamoDB bills it stored
//! (its size and 100 bytes of overhead, and each index entry's size and 100 more: "Item sizes
//! and formats", and the storage line of DynamoDB's pricing), kept until its table's TTL
//! attribute passes (an ended approval's `retain_until`, `RetentionDays` after its end; an
//! idempotency record's `expires_at`) or, without one, for good. What a TTL deletes within
//! [`SHORT_DAYS`] is counted apart: the idempotency record's saved response is deflated, and
//! its size varies by a few bytes with the ids in it, run to run.

use std::collections::BTreeMap;

use countersign_tests::TestApp;
use countersign_tests::capacity::{Item, Schema, item_json, item_size};
use serde_json::Value;

/// Items a TTL deletes within this many days are counted apart ([`Kept::short_lived`]).
pub(crate) const SHORT_DAYS: f64 = 30.0;

/// One table of `infra/tables.json`: what sizes its items and their index entries.
struct TableSpec {
    name: String,
    logical_id: String,
    keys: Vec<String>,
    ttl: Option<String>,
    /// (key attributes, keys only, local).
    indexes: Vec<(Vec<String>, bool, bool)>,
}

fn key_names(spec: &Value) -> Vec<String> {
    ["partition_key", "sort_key"]
        .iter()
        .filter_map(|k| spec[*k].as_str().map(str::to_owned))
        .collect()
}

fn specs() -> Vec<TableSpec> {
    let path = countersign_tests::workspace_root().join("infra/tables.json");
    let spec: Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("infra/tables.json"))
            .expect("tables.json parses");
    spec["tables"]
        .as_array()
        .expect("tables")
        .iter()
        .map(|t| TableSpec {
            name: t["name"].as_str().expect("a name").to_owned(),
            logical_id: t["logical_id"].as_str().expect("a logical id").to_owned(),
            keys: key_names(t),
            ttl: t["ttl_attribute"].as_str().map(str::to_owned),
            indexes: t["indexes"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|i| {
                    (
                        key_names(i),
                        i["projection"] == "KEYS_ONLY",
                        i["kind"] == "local",
                    )
                })
                .collect(),
        })
        .collect()
}

/// One table's share of a life, as billed stored.
#[derive(Debug, Default, Clone)]
pub(crate) struct Kept {
    pub(crate) logical_id: String,
    pub(crate) items: usize,
    /// The items' own sizes (what a read of them reads).
    pub(crate) item_bytes: usize,
    /// Billed stored: the items, their index entries, 100 bytes of overhead each.
    pub(crate) bytes: usize,
    /// What point-in-time recovery is billed on: the items and their local index entries.
    pub(crate) recovered_bytes: usize,
    /// `bytes` (and `recovered_bytes`) times the days each is kept, TTL-deleted items only.
    pub(crate) byte_days: f64,
    pub(crate) recovered_byte_days: f64,
    /// The longest any item is kept, in days.
    pub(crate) days: f64,
    /// Billed bytes with no TTL attribute: kept for good.
    pub(crate) for_good: usize,
    /// Billed byte-days of what a TTL deletes within [`SHORT_DAYS`], left out of the above.
    pub(crate) short_lived: f64,
}

impl Kept {
    fn add(&mut self, spec: &TableSpec, item: &Item, now: i64) {
        let entry = |(keys, keys_only, _): &(Vec<String>, bool, bool)| {
            if !keys.iter().all(|k| item.contains_key(k)) {
                return 0;
            }
            let entry: Item = if *keys_only {
                spec.keys
                    .iter()
                    .chain(keys)
                    .filter_map(|k| item.get(k).map(|v| (k.clone(), v.clone())))
                    .collect()
            } else {
                item.clone()
            };
            item_size(&entry) + 100
        };
        let own = item_size(item) + 100;
        let bytes = own + spec.indexes.iter().map(entry).sum::<usize>();
        let recovered = own
            + spec
                .indexes
                .iter()
                .filter(|i| i.2)
                .map(entry)
                .sum::<usize>();
        let expires = spec
            .ttl
            .as_ref()
            .and_then(|ttl| item.get(ttl)?["N"].as_str());
        let days = expires.map(|at| {
            let at: i64 = at.parse().expect("a TTL in epoch seconds");
            // Whole days: TTL deletes within days of it anyway, and a second more or less
            // between the write and this scan must not move a figure.
            ((at - now).max(0) as f64 / 86_400.0).round()
        });
        if let Some(days) = days.filter(|d| *d < SHORT_DAYS) {
            self.short_lived += bytes as f64 * days;
            return;
        }
        self.items += 1;
        self.item_bytes += item_size(item);
        self.bytes += bytes;
        self.recovered_bytes += recovered;
        match days {
            Some(days) => {
                self.byte_days += bytes as f64 * days;
                self.recovered_byte_days += recovered as f64 * days;
                self.days = self.days.max(days);
            }
            None => self.for_good += bytes,
        }
    }
}

/// Every item the tables hold now (they start empty for each life), by table (its name in
/// `infra/tables.json`), read with the test's own unmetered client.
pub(crate) async fn kept(t: &TestApp) -> BTreeMap<String, Kept> {
    let schema = Schema::of(&t.app.config.tables);
    let specs = specs();
    let now = t.clock.now();
    let mut kept = BTreeMap::new();
    for table in schema.table_names() {
        let name = schema.logical(table);
        let spec = specs.iter().find(|s| s.name == name).expect("a table spec");
        let items = t.scan_items(table).await;
        if items.is_empty() {
            continue;
        }
        let share: &mut Kept = kept.entry(name).or_default();
        share.logical_id.clone_from(&spec.logical_id);
        for item in &items {
            share.add(spec, &item_json(item), now);
        }
    }
    kept
}
