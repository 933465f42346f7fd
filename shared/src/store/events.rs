//! The events table: the audit trail, one item per event id (so an event derived twice is
//! stored once), listed in trail order through the `by_order` local index.

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::types::{AttributeValue, Put, PutRequest, WriteRequest};
use serde_json::Value;

use super::items::{Item, get_n, get_s, n, s};
use super::{Store, StoreError};
use crate::domain::{ApprovalId, TenantId};
use crate::events::{Event, EventType};

/// BatchWriteItem's limit.
const BATCH_ITEMS: usize = 25;
/// Tries of a batch whose items the store left unprocessed (throttled), with backoff between.
const BATCH_TRIES: u32 = 8;

fn events_key(tenant: &str, approval_id: &str) -> String {
    format!("{tenant}#{approval_id}")
}

pub(crate) fn event_to_item(event: &Event) -> Item {
    HashMap::from([
        (
            "pk".to_owned(),
            s(events_key(&event.tenant, &event.approval_id)),
        ),
        ("id".to_owned(), s(&event.id)),
        ("trail_order".to_owned(), s(&event.order)),
        ("type".to_owned(), s(event.kind.as_str())),
        ("at".to_owned(), n(event.at)),
        ("actor".to_owned(), s(event.actor.to_string())),
        ("data".to_owned(), s(event.data.to_string())),
        ("tenant".to_owned(), s(&event.tenant)),
        ("approval_id".to_owned(), s(&event.approval_id)),
    ])
}

fn event_from_item(item: &Item) -> Result<Event, StoreError> {
    let json = |name: &'static str| -> Result<Value, StoreError> {
        serde_json::from_str(get_s(item, name)?).map_err(|_| StoreError::corrupt(name))
    };
    Ok(Event {
        id: get_s(item, "id")?.to_owned(),
        kind: EventType::parse(get_s(item, "type")?).ok_or(StoreError::corrupt("type"))?,
        at: get_n(item, "at")?,
        actor: json("actor")?,
        data: json("data")?,
        order: get_s(item, "trail_order")?.to_owned(),
        tenant: get_s(item, "tenant")?.to_owned(),
        approval_id: get_s(item, "approval_id")?.to_owned(),
    })
}

/// The puts of `requests` with the last of each `pk`/`id` key kept, in the order of their first
/// put (a later put of a key replaces the earlier one: the stream delivers an approval's changes
/// in order, so the last is its latest state).
fn last_put_per_key(requests: Vec<WriteRequest>) -> Vec<WriteRequest> {
    let key = |request: &WriteRequest| {
        let item = request.put_request().map(|p| p.item());
        let part = |name: &str| {
            item.and_then(|i| i.get(name))
                .and_then(|v| v.as_s().ok())
                .cloned()
        };
        (part("pk"), part("id"))
    };
    let mut position: HashMap<(Option<String>, Option<String>), usize> = HashMap::new();
    let mut kept: Vec<WriteRequest> = Vec::with_capacity(requests.len());
    for request in requests {
        match position.entry(key(&request)) {
            std::collections::hash_map::Entry::Occupied(at) => kept[*at.get()] = request,
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(kept.len());
                kept.push(request);
            }
        }
    }
    kept
}

/// A page of an approval's trail.
#[derive(Debug, Clone)]
pub struct EventPage {
    pub events: Vec<Event>,
    /// Where the next page starts (the last event's order and id), if there may be one.
    pub next: Option<(String, String)>,
}

impl Store {
    /// A Put of the event, for a transaction that commits it with the transition it records.
    pub(crate) fn event_put(&self, event: &Event) -> Result<Put, StoreError> {
        Put::builder()
            .table_name(&self.tables.events)
            .set_item(Some(event_to_item(event)))
            .build()
            .map_err(|e| StoreError::dynamo("TransactWriteItems", e))
    }

    /// Stores events (derived from committed changes). Writing one again writes the same item:
    /// a redelivered change adds nothing.
    pub async fn put_events(&self, events: &[Event]) -> Result<(), StoreError> {
        let mut requests = Vec::with_capacity(events.len());
        for event in events {
            let put = PutRequest::builder()
                .set_item(Some(event_to_item(event)))
                .build()
                .map_err(|e| StoreError::dynamo("BatchWriteItem", e))?;
            requests.push(WriteRequest::builder().put_request(put).build());
        }
        self.batch_write(&self.tables.events, requests).await
    }

    /// BatchWriteItem in batches of 25, sending again what the store left unprocessed. The
    /// items are puts keyed by `pk` and `id` (events, index items); of several puts of one key,
    /// only the last is sent: DynamoDB refuses a whole batch that names one key twice
    /// ("Provided list of item keys contains duplicates"), and a stream batch routinely holds
    /// two changes of one approval (its insert and its decision), each making the same key.
    pub(crate) async fn batch_write(
        &self,
        table: &str,
        requests: Vec<WriteRequest>,
    ) -> Result<(), StoreError> {
        let requests = last_put_per_key(requests);
        for chunk in requests.chunks(BATCH_ITEMS) {
            let mut pending = chunk.to_vec();
            let mut pause = Duration::from_millis(25);
            for attempt in 1..=BATCH_TRIES {
                let output = self
                    .client
                    .batch_write_item()
                    .request_items(table, pending)
                    .send()
                    .await
                    .map_err(|e| StoreError::from_sdk("BatchWriteItem", e))?;
                pending = output
                    .unprocessed_items()
                    .and_then(|u| u.get(table))
                    .cloned()
                    .unwrap_or_default();
                if pending.is_empty() {
                    break;
                }
                if attempt == BATCH_TRIES {
                    return Err(StoreError::Unavailable {
                        operation: "BatchWriteItem",
                        message: format!("{} items still unprocessed", pending.len()),
                    });
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(1));
            }
        }
        Ok(())
    }

    /// One page of the approval's events, oldest first, after `after` (a page's `next`).
    pub async fn list_events(
        &self,
        tenant: &TenantId,
        id: &ApprovalId,
        after: Option<(String, String)>,
        limit: i32,
    ) -> Result<EventPage, StoreError> {
        let key = events_key(tenant.as_str(), id.as_str());
        let mut query = self
            .client
            .query()
            .table_name(&self.tables.events)
            .index_name("by_order")
            .key_condition_expression("#pk = :pk")
            .expression_attribute_names("#pk", "pk")
            .expression_attribute_values(":pk", s(&key))
            .scan_index_forward(true)
            .limit(limit);
        if let Some((order, event_id)) = after {
            query = query.set_exclusive_start_key(Some(HashMap::from([
                ("pk".to_owned(), s(&key)),
                ("id".to_owned(), AttributeValue::S(event_id)),
                ("trail_order".to_owned(), AttributeValue::S(order)),
            ])));
        }
        let output = query
            .send()
            .await
            .map_err(|e| StoreError::from_sdk("Query", e))?;
        let events = output
            .items()
            .iter()
            .map(event_from_item)
            .collect::<Result<Vec<_>, _>>()?;
        let next = output
            .last_evaluated_key()
            .filter(|_| !events.is_empty())
            .and_then(|_| events.last())
            .map(|e| (e.order.clone(), e.id.clone()));
        Ok(EventPage { events, next })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(pk: &str, id: &str, status: &str) -> WriteRequest {
        let item = HashMap::from([
            ("pk".to_owned(), s(pk)),
            ("id".to_owned(), s(id)),
            ("facet_status".to_owned(), s(status)),
        ]);
        WriteRequest::builder()
            .put_request(PutRequest::builder().set_item(Some(item)).build().unwrap())
            .build()
    }

    fn status(request: &WriteRequest) -> String {
        get_s(request.put_request().unwrap().item(), "facet_status")
            .unwrap()
            .to_owned()
    }

    #[test]
    fn a_batch_names_each_key_once_with_its_last_put() {
        let kept = last_put_per_key(vec![
            put("a", "1", "pending"),
            put("b", "1", "pending"),
            put("a", "2", "pending"),
            put("a", "1", "approved"),
            put("b", "1", "rejected"),
        ]);
        let got: Vec<String> = kept.iter().map(status).collect();
        assert_eq!(got, ["approved", "rejected", "pending"]);
    }
}
