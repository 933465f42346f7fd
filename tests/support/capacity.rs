//! DynamoDB's capacity units, computed from the items' sizes by DynamoDB's documented rules
//! (Developer Guide, "Item sizes and formats" and "DynamoDB read and write operations"): an
//! item's size is its attribute names' UTF-8 lengths plus its values' sizes; a write is one unit
//! per 1 KB of the larger of the item before and after it (at least one), a strongly consistent
//! read one unit per 4 KB (half for an eventually consistent one), a query one read of the sum
//! of the items it reads; transactional reads and writes count twice; a write that changes what
//! an index holds writes the index too (an update of its entry one write, a move of its key a
//! delete and a put), at the standard rate. A failed conditional write still costs the units
//! of the item it checked. Stream reads by Lambda are free, and not counted.
//!
//! Sizes are computed on DynamoDB's JSON (`{"name": {"S": "..."}}`), which is what the meter
//! records on the wire; table snapshots and stream images are converted to it.

use std::collections::{BTreeMap, HashMap};

use aws_sdk_dynamodb::types::AttributeValue;
use base64::Engine;
use countersign::store::Tables;
use serde_json::{Map, Value, json};

use crate::meter::AwsCall;

pub type Item = Map<String, Value>;

/// One write of an item, as its table's stream tells it: (before, after).
pub type Change = (Option<Item>, Option<Item>);

/// Read and write request units (on demand: what is billed).
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Units {
    pub reads: f64,
    pub writes: f64,
}

impl std::ops::AddAssign for Units {
    fn add_assign(&mut self, other: Self) {
        self.reads += other.reads;
        self.writes += other.writes;
    }
}

/// The size DynamoDB bills a number at: one byte per two significant digits, plus one. Trailing
/// zeros are counted as significant here (DynamoDB trims them): a timestamp's size would
/// otherwise depend on the second it was taken, and so would this file. An upper bound, by a
/// byte or two per number.
fn number_size(n: &str) -> usize {
    let digits: String = n.chars().filter(char::is_ascii_digit).collect();
    let significant = digits.trim_start_matches('0').len().max(1);
    significant.div_ceil(2) + 1
}

fn binary_size(b: &Value) -> usize {
    base64::engine::general_purpose::STANDARD
        .decode(b.as_str().unwrap_or_default())
        .map_or(0, |bytes| bytes.len())
}

/// The size of one attribute value in DynamoDB JSON.
pub fn value_size(value: &Value) -> usize {
    let Some((kind, v)) = value.as_object().and_then(|o| o.iter().next()) else {
        return 0;
    };
    let each = |f: &dyn Fn(&Value) -> usize| v.as_array().map_or(0, |a| a.iter().map(f).sum());
    match kind.as_str() {
        "S" => v.as_str().map_or(0, str::len),
        "N" => number_size(v.as_str().unwrap_or_default()),
        "B" => binary_size(v),
        "BOOL" | "NULL" => 1,
        "SS" => each(&|s| s.as_str().map_or(0, str::len)),
        "NS" => each(&|s| number_size(s.as_str().unwrap_or_default())),
        "BS" => each(&binary_size),
        // A list or a map: 3 bytes, and 1 byte per element.
        "L" => 3 + each(&|e| 1 + value_size(e)),
        "M" => {
            3 + v.as_object().map_or(0, |m| {
                m.iter().map(|(k, e)| 1 + k.len() + value_size(e)).sum()
            })
        }
        _ => 0,
    }
}

pub fn item_size(item: &Item) -> usize {
    item.iter().map(|(k, v)| k.len() + value_size(v)).sum()
}

/// Units for `bytes` in blocks of `block` (at least one).
fn blocks(bytes: usize, block: usize) -> f64 {
    bytes.div_ceil(block).max(1) as f64
}

/// DynamoDB JSON of an SDK attribute value (table snapshots, stream images).
pub fn attr_json(value: &AttributeValue) -> Value {
    let b64 = |b: &aws_sdk_dynamodb::primitives::Blob| {
        base64::engine::general_purpose::STANDARD.encode(b.as_ref())
    };
    match value {
        AttributeValue::S(s) => json!({"S": s}),
        AttributeValue::N(n) => json!({"N": n}),
        AttributeValue::B(b) => json!({"B": b64(b)}),
        AttributeValue::Bool(b) => json!({"BOOL": b}),
        AttributeValue::Null(_) => json!({"NULL": true}),
        AttributeValue::Ss(v) => json!({"SS": v}),
        AttributeValue::Ns(v) => json!({"NS": v}),
        AttributeValue::Bs(v) => json!({"BS": v.iter().map(b64).collect::<Vec<_>>()}),
        AttributeValue::L(v) => json!({"L": v.iter().map(attr_json).collect::<Vec<_>>()}),
        AttributeValue::M(m) => json!({"M": item_json(m)}),
        _ => Value::Null,
    }
}

/// An SDK attribute value of DynamoDB JSON (what [`attr_json`] writes, as the AWS CLI and
/// boto3 do: binary values in base64).
pub fn json_attr(value: &Value) -> AttributeValue {
    let Some((kind, v)) = value.as_object().and_then(|o| o.iter().next()) else {
        panic!("not DynamoDB JSON: {value}");
    };
    let text = |v: &Value| v.as_str().expect("a string").to_owned();
    let blob = |v: &Value| {
        aws_sdk_dynamodb::primitives::Blob::new(
            base64::engine::general_purpose::STANDARD
                .decode(v.as_str().expect("base64"))
                .expect("base64"),
        )
    };
    let each = |v: &Value| v.as_array().expect("a list").clone();
    match kind.as_str() {
        "S" => AttributeValue::S(text(v)),
        "N" => AttributeValue::N(text(v)),
        "B" => AttributeValue::B(blob(v)),
        "BOOL" => AttributeValue::Bool(v.as_bool().expect("a boolean")),
        "NULL" => AttributeValue::Null(true),
        "SS" => AttributeValue::Ss(each(v).iter().map(text).collect()),
        "NS" => AttributeValue::Ns(each(v).iter().map(text).collect()),
        "BS" => AttributeValue::Bs(each(v).iter().map(blob).collect()),
        "L" => AttributeValue::L(each(v).iter().map(json_attr).collect()),
        "M" => AttributeValue::M(json_item(v)),
        other => panic!("an attribute of type {other}"),
    }
}

/// An SDK item of a DynamoDB JSON object.
pub fn json_item(item: &Value) -> HashMap<String, AttributeValue> {
    item.as_object()
        .expect("an item")
        .iter()
        .map(|(k, v)| (k.clone(), json_attr(v)))
        .collect()
}

pub fn item_json(item: &HashMap<String, AttributeValue>) -> Item {
    item.iter()
        .map(|(k, v)| (k.clone(), attr_json(v)))
        .collect()
}

/// One secondary index, as `infra/tables.json` declares it.
#[derive(Debug, Clone)]
struct Index {
    name: String,
    keys: Vec<String>,
    keys_only: bool,
}

/// One table: its name here, its key attributes and its indexes.
#[derive(Debug, Clone)]
struct Table {
    /// Its name in `infra/tables.json`.
    name: String,
    keys: Vec<String>,
    indexes: Vec<Index>,
    /// Its TTL attribute: an item that has it is deleted when it passes.
    ttl: Option<String>,
}

/// The app's tables as `infra/tables.json` declares them, by their names in this test.
#[derive(Debug, Clone)]
pub struct Schema {
    tables: BTreeMap<String, Table>,
}

fn key_names(spec: &Value) -> Vec<String> {
    ["partition_key", "sort_key"]
        .iter()
        .filter_map(|k| spec[*k].as_str().map(str::to_owned))
        .collect()
}

impl Schema {
    pub fn of(tables: &Tables) -> Self {
        let path = crate::workspace_root().join("infra/tables.json");
        let text = std::fs::read_to_string(&path).expect("infra/tables.json");
        let spec: Value = serde_json::from_str(&text).expect("tables.json parses");
        let named = |name: &str| match name {
            "approvals" => tables.approvals.clone(),
            "idempotency_keys" => tables.idempotency_keys.clone(),
            "webhook_inbox" => tables.webhook_inbox.clone(),
            "execution_ledger" => tables.execution_ledger.clone(),
            "events" => tables.events.clone(),
            "approval_index" => tables.approval_index.clone(),
            "api_keys" => tables.api_keys.clone(),
            other => panic!("tables.json names a table the app does not know: {other}"),
        };
        let tables = spec["tables"]
            .as_array()
            .expect("tables")
            .iter()
            .map(|t| {
                let indexes = t["indexes"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|i| Index {
                        name: i["name"].as_str().unwrap_or_default().to_owned(),
                        keys: key_names(i),
                        keys_only: i["projection"] == "KEYS_ONLY",
                    })
                    .collect();
                let table = Table {
                    name: t["name"].as_str().unwrap_or_default().to_owned(),
                    keys: key_names(t),
                    indexes,
                    ttl: t["ttl_attribute"].as_str().map(str::to_owned),
                };
                (named(t["name"].as_str().expect("name")), table)
            })
            .collect();
        Self { tables }
    }

    pub fn table_names(&self) -> impl Iterator<Item = &String> {
        self.tables.keys()
    }

    /// A table's name in `infra/tables.json`.
    pub fn logical(&self, table: &str) -> String {
        self.table(table).name.clone()
    }

    fn table(&self, name: &str) -> &Table {
        self.tables
            .get(name)
            .unwrap_or_else(|| panic!("a request to a table the schema lacks: {name}"))
    }

    /// An item's key, as a string that identifies it in its table.
    pub fn key_of(&self, table: &str, item: &Item) -> String {
        self.table(table)
            .keys
            .iter()
            .map(|k| item.get(k).map_or(String::new(), Value::to_string))
            .collect::<Vec<_>>()
            .join("|")
    }

    /// What index `index` of `table` holds for `item`, if it holds it (a sparse index holds only
    /// the items that have its key attributes).
    fn entry(&self, table: &Table, index: &Index, item: Option<&Item>) -> Option<Item> {
        let item = item?;
        if !index.keys.iter().all(|k| item.contains_key(k)) {
            return None;
        }
        if !index.keys_only {
            return Some(item.clone());
        }
        Some(
            table
                .keys
                .iter()
                .chain(&index.keys)
                .filter_map(|k| item.get(k).map(|v| (k.clone(), v.clone())))
                .collect(),
        )
    }

    /// The units of one write to `table` that turned `before` into `after`.
    pub fn write(
        &self,
        table: &str,
        before: Option<&Item>,
        after: Option<&Item>,
        transactional: bool,
    ) -> f64 {
        let spec = self.table(table);
        let size = |i: Option<&Item>| i.map_or(0, item_size);
        let factor = if transactional { 2.0 } else { 1.0 };
        let mut units = factor * blocks(size(before).max(size(after)), 1024);
        for index in &spec.indexes {
            let old = self.entry(spec, index, before);
            let new = self.entry(spec, index, after);
            let key = |e: &Option<Item>| {
                e.as_ref().map(|e| {
                    index
                        .keys
                        .iter()
                        .map(|k| e.get(k).cloned())
                        .collect::<Vec<_>>()
                })
            };
            units += match (&old, &new) {
                (Some(o), Some(n)) if o == n => 0.0,
                (Some(o), Some(n)) if key(&old) == key(&new) => {
                    blocks(item_size(o).max(item_size(n)), 1024)
                }
                (Some(o), Some(n)) => blocks(item_size(o), 1024) + blocks(item_size(n), 1024),
                (Some(e), None) | (None, Some(e)) => blocks(item_size(e), 1024),
                (None, None) => 0.0,
            };
        }
        units
    }

    /// The bytes DynamoDB bills as stored for what `snapshot` keeps for good (an item with its
    /// table's TTL attribute is deleted within days, and left out): each item's size and 100
    /// bytes of overhead, and each index entry's (its keys and projection) and 100 more
    /// ("Storage", DynamoDB pricing; "Item sizes and formats").
    pub fn kept_bytes(&self, snapshot: &Snapshot) -> usize {
        self.kept_items(snapshot)
            .map(|(table, item)| {
                let spec = self.table(table);
                {
                    let entries: usize = spec
                        .indexes
                        .iter()
                        .filter_map(|index| self.entry(spec, index, Some(item)))
                        .map(|entry| item_size(&entry) + 100)
                        .sum();
                    item_size(item) + 100 + entries
                }
            })
            .sum()
    }

    /// The items `snapshot` keeps for good (not those its table's TTL deletes), by table.
    pub fn kept_items<'s>(
        &'s self,
        snapshot: &'s Snapshot,
    ) -> impl Iterator<Item = (&'s str, &'s Item)> + 's {
        snapshot.0.iter().filter_map(|((table, _), item)| {
            let spec = self.table(table);
            let expires = spec.ttl.as_ref().is_some_and(|ttl| item.contains_key(ttl));
            (!expires).then_some((table.as_str(), item))
        })
    }

    /// The units of a write whose condition failed: the item it checked.
    pub fn refused_write(&self, before: Option<&Item>, transactional: bool) -> f64 {
        let factor = if transactional { 2.0 } else { 1.0 };
        factor * blocks(before.map_or(0, item_size), 1024)
    }

    /// The units of reading `bytes` (one item, or a query's sum).
    pub fn read(bytes: usize, consistent: bool, transactional: bool) -> f64 {
        let units = blocks(bytes, 4096);
        if transactional {
            2.0 * units
        } else if consistent {
            units
        } else {
            units / 2.0
        }
    }
}

/// The operations that read, and those that write, for reporting.
pub fn is_write(call: &AwsCall) -> bool {
    matches!(
        call.operation.as_str(),
        "PutItem" | "UpdateItem" | "DeleteItem" | "BatchWriteItem" | "TransactWriteItems"
    )
}

/// Every item of every table at one moment, by (table, key).
#[derive(Debug, Default, Clone)]
pub struct Snapshot(pub HashMap<(String, String), Item>);

impl Snapshot {
    fn get(&self, table: &str, key: &str) -> Option<&Item> {
        self.0.get(&(table.to_owned(), key.to_owned()))
    }
}

/// What one step (a request, an invocation) found and left: the tables before and after it, and
/// the approvals table's changes in it, from its stream (each write's own before and after).
pub struct StepImages<'a> {
    pub before: &'a Snapshot,
    pub after: &'a Snapshot,
    pub approvals_table: &'a str,
    /// Per key, the stream's (old, new) images in order.
    pub changes: HashMap<String, std::collections::VecDeque<Change>>,
    /// Write units per table (its indexes' included), added up as requests are priced.
    pub writes_by_table: BTreeMap<String, f64>,
}

impl StepImages<'_> {
    /// The item before and after this write: for the approvals table the stream's record of the
    /// write itself; for the others, before and after the step (their items are written once
    /// per step, or, like the ledger's begin and complete, billed at the larger size twice).
    fn images(&mut self, table: &str, key: &str) -> Change {
        if table == self.approvals_table
            && let Some(change) = self.changes.get_mut(key).and_then(|q| q.pop_front())
        {
            return change;
        }
        (
            self.before.get(table, key).cloned(),
            self.after.get(table, key).cloned(),
        )
    }

    fn full(&self, table: &str, key: &str) -> Option<&Item> {
        self.before
            .get(table, key)
            .or_else(|| self.after.get(table, key))
    }
}

fn str_of<'v>(v: &'v Value, field: &str) -> &'v str {
    v[field].as_str().unwrap_or_default()
}

fn map_of(v: &Value) -> Item {
    v.as_object().cloned().unwrap_or_default()
}

impl Schema {
    /// The units one DynamoDB request consumed.
    pub fn units(&self, call: &AwsCall, step: &mut StepImages<'_>) -> Units {
        let request = &call.request;
        let ok = call.succeeded();
        let mut units = Units::default();
        let mut write = |table: &str, item: &Item, transactional: bool, ok: bool| {
            let key = self.key_of(table, item);
            let writes = if ok {
                let (before, after) = step.images(table, &key);
                self.write(table, before.as_ref(), after.as_ref(), transactional)
            } else {
                // A refused write changed nothing (and made no stream record): the item it
                // checked is the one the step began with.
                self.refused_write(step.before.get(table, &key), transactional)
            };
            units.writes += writes;
            *step.writes_by_table.entry(table.to_owned()).or_default() += writes;
        };
        match call.operation.as_str() {
            "PutItem" => write(
                str_of(request, "TableName"),
                &map_of(&request["Item"]),
                false,
                ok,
            ),
            "UpdateItem" | "DeleteItem" => {
                write(
                    str_of(request, "TableName"),
                    &map_of(&request["Key"]),
                    false,
                    ok,
                );
            }
            "BatchWriteItem" => {
                for (table, writes) in request["RequestItems"].as_object().into_iter().flatten() {
                    for w in writes.as_array().into_iter().flatten() {
                        let item = w["PutRequest"]["Item"]
                            .as_object()
                            .or(w["DeleteRequest"]["Key"].as_object());
                        write(table, &item.cloned().unwrap_or_default(), false, ok);
                    }
                }
            }
            "TransactWriteItems" => {
                for entry in request["TransactItems"].as_array().into_iter().flatten() {
                    let (kind, action) = entry
                        .as_object()
                        .and_then(|o| o.iter().next())
                        .expect("a transact item");
                    let item = map_of(if kind == "Put" {
                        &action["Item"]
                    } else {
                        &action["Key"]
                    });
                    // A condition check writes nothing, and is billed as a refused write.
                    write(
                        str_of(action, "TableName"),
                        &item,
                        true,
                        ok && kind != "ConditionCheck",
                    );
                }
            }
            "GetItem" => {
                let table = str_of(request, "TableName");
                let key = self.key_of(table, &map_of(&request["Key"]));
                let bytes = step.full(table, &key).map_or(0, item_size);
                units.reads += Self::read(bytes, request["ConsistentRead"] == true, false);
            }
            "BatchGetItem" => {
                for (table, spec) in request["RequestItems"].as_object().into_iter().flatten() {
                    for key in spec["Keys"].as_array().into_iter().flatten() {
                        let key = self.key_of(table, &map_of(key));
                        let bytes = step.full(table, &key).map_or(0, item_size);
                        units.reads += Self::read(bytes, spec["ConsistentRead"] == true, false);
                    }
                }
            }
            "TransactGetItems" => {
                for get in request["TransactItems"].as_array().into_iter().flatten() {
                    let table = str_of(&get["Get"], "TableName");
                    let key = self.key_of(table, &map_of(&get["Get"]["Key"]));
                    let bytes = step.full(table, &key).map_or(0, item_size);
                    units.reads += Self::read(bytes, true, true);
                }
            }
            "Query" => {
                let response = &call.response;
                assert_eq!(
                    response["ScannedCount"], response["Count"],
                    "a filtered query reads items it does not return: model it ({request})"
                );
                let table = str_of(request, "TableName");
                let spec = self.table(table);
                let index = request["IndexName"].as_str().map(|name| {
                    spec.indexes
                        .iter()
                        .find(|i| i.name == name)
                        .unwrap_or_else(|| panic!("a query of an index tables.json lacks: {name}"))
                });
                let bytes: usize = response["Items"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|returned| {
                        let key = self.key_of(table, &map_of(returned));
                        let full = step.full(table, &key);
                        match index {
                            Some(index) => {
                                self.entry(spec, index, full).as_ref().map_or(0, item_size)
                            }
                            None => full.map_or(0, item_size),
                        }
                    })
                    .sum();
                units.reads += Self::read(bytes, request["ConsistentRead"] == true, false);
            }
            "Scan" => panic!("a scan in an approval's life: {request}"),
            _ => {}
        }
        units
    }
}
