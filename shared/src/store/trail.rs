//! The events table: the audit trail (its events derived in [`crate::domain::trail`]).
//!
//! An approval's events are items under its key, sorted by the table's own sort key, so the
//! trail needs no index: each item holds the events that share an order up to its last `#`, as
//! a list `e` of `{i: id, t: type, a: at, c: actor, d: data}` (the `#NN` is the event's place in
//! the list). That is one item for the events one change derives (a stream record's,
//! `{position}`), and one for each event the executor records (`{cause}~{what}`). Writing an
//! item again writes the same item: a redelivered change adds nothing, and a callback's
//! delivered and failed share one item (one record, written once).
//!
//! Events stored before v5 are items of their own, keyed by event id and listed through the
//! `by_order` local index (`trail_order`); a trail reads both and merges them by order, so an
//! approval created before an upgrade keeps its trail. New items have no `trail_order`: the
//! index, which a table keeps for life, is never written again.

use std::collections::{BTreeMap, HashSet};

use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::query::QueryOutput;
use aws_sdk_dynamodb::types::{AttributeValue, Put, PutRequest, WriteRequest};
use serde_json::Value;

use super::attr::{Item, get_n, get_s, n, s};
use super::client::Store;
use super::error::{StoreError, is_transient};
use super::indexes::RETAIN_UNTIL;
use super::keys::trail_key;
use crate::domain::trail::{EventType, TrailEvent, order_place};
use crate::domain::{ApprovalId, EpochSeconds, TenantId};

/// The list of an item's events.
const EVENTS: &str = "e";

/// The item key an order is stored under.
fn item_key(order: &str) -> &str {
    order_place(order).0
}

fn event_entry(event: &TrailEvent) -> AttributeValue {
    AttributeValue::M(
        [
            ("i", s(&event.id)),
            ("t", s(event.kind.as_str())),
            ("a", n(event.at)),
            ("c", s(event.actor.to_string())),
            ("d", s(event.data.to_string())),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect(),
    )
}

/// The items `events` are stored as: one per item key, its events in their places, each with
/// the TTL `retain` gives its first event (an item's events are one approval's).
pub(crate) fn event_items(
    events: &[TrailEvent],
    retain: impl Fn(&TrailEvent) -> Option<EpochSeconds>,
) -> Vec<Item> {
    let mut items: BTreeMap<(String, &str), Vec<(usize, &TrailEvent)>> = BTreeMap::new();
    for event in events {
        let (key, index) = order_place(&event.order);
        items
            .entry((trail_key(&event.tenant, &event.approval_id), key))
            .or_default()
            .push((index, event));
    }
    items
        .into_iter()
        .map(|((pk, key), mut events)| {
            events.sort_by_key(|(index, _)| *index);
            let until = events.first().and_then(|(_, e)| retain(e));
            let list = events.iter().map(|(_, e)| event_entry(e)).collect();
            let mut item = Item::from([
                ("pk".to_owned(), s(pk)),
                ("id".to_owned(), s(key)),
                (EVENTS.to_owned(), AttributeValue::L(list)),
            ]);
            if let Some(until) = until {
                item.insert(RETAIN_UNTIL.to_owned(), n(until));
            }
            item
        })
        .collect()
}

fn json(value: &str, name: &'static str) -> Result<Value, StoreError> {
    serde_json::from_str(value).map_err(|_| StoreError::corrupt(name))
}

/// The events an item holds: a list of them, or (before v5) one event.
fn events_from_item(
    item: &Item,
    tenant: &TenantId,
    approval_id: &ApprovalId,
) -> Result<Vec<TrailEvent>, StoreError> {
    let Some(list) = item.get(EVENTS) else {
        return Ok(vec![TrailEvent {
            id: get_s(item, "id")?.to_owned(),
            kind: EventType::parse(get_s(item, "type")?).ok_or(StoreError::corrupt("type"))?,
            at: get_n(item, "at")?,
            actor: json(get_s(item, "actor")?, "actor")?,
            data: json(get_s(item, "data")?, "data")?,
            order: get_s(item, "trail_order")?.to_owned(),
            tenant: tenant.clone(),
            approval_id: approval_id.clone(),
        }]);
    };
    let key = get_s(item, "id")?;
    let list = list.as_l().map_err(|_| StoreError::corrupt(EVENTS))?;
    list.iter()
        .enumerate()
        .map(|(index, entry)| {
            let entry = entry.as_m().map_err(|_| StoreError::corrupt(EVENTS))?;
            Ok(TrailEvent {
                id: get_s(entry, "i")?.to_owned(),
                kind: EventType::parse(get_s(entry, "t")?).ok_or(StoreError::corrupt("t"))?,
                at: get_n(entry, "a")?,
                actor: json(get_s(entry, "c")?, "c")?,
                data: json(get_s(entry, "d")?, "d")?,
                order: format!("{key}#{index:02}"),
                tenant: tenant.clone(),
                approval_id: approval_id.clone(),
            })
        })
        .collect()
}

/// A page of an approval's trail.
#[derive(Debug, Clone)]
pub struct EventPage {
    pub events: Vec<TrailEvent>,
    /// Where the next page starts (the last event's order and id), if there may be one.
    pub next: Option<(String, String)>,
}

/// Where an event sorts in its trail: by order, then id (two events may share an order before
/// v5: a callback's and a GitHub answer's after the same event).
fn place(event: &TrailEvent) -> (&str, &str) {
    (&event.order, &event.id)
}

impl Store {
    /// The Puts of the events recorded with a transition (one item, for events of one end),
    /// for the transaction that commits them.
    /// A job records them: they take a job's TTL from their time and the approval's expiry.
    pub(crate) fn event_puts(
        &self,
        events: &[TrailEvent],
        expires_at: Option<EpochSeconds>,
    ) -> Result<Vec<Put>, StoreError> {
        event_items(events, |e| self.retention.after_job_write(e.at, expires_at))
            .into_iter()
            .map(|item| {
                Put::builder()
                    .table_name(&self.tables.events)
                    .set_item(Some(item))
                    .build()
                    .map_err(|e| StoreError::dynamo("TransactWriteItems", e))
            })
            .collect()
    }

    /// Stores events (derived from committed changes), one item per change. Writing one again
    /// writes the same item: a redelivered change adds nothing. `expiry` gives the expiry of
    /// the approval an event belongs to (from the change's image): its TTL is that or `now`
    /// (the write's time), whichever is later, + the retention.
    pub async fn put_events(
        &self,
        events: &[TrailEvent],
        now: EpochSeconds,
        expiry: impl Fn(&TrailEvent) -> Option<EpochSeconds>,
    ) -> Result<(), StoreError> {
        let retain = |e: &TrailEvent| match expiry(e) {
            Some(expires_at) => self.retention.after_expiry(expires_at, now),
            None => self.retention.after_job_write(now, None),
        };
        let mut requests = Vec::new();
        for item in event_items(events, retain) {
            let put = PutRequest::builder()
                .set_item(Some(item))
                .build()
                .map_err(|e| StoreError::dynamo("BatchWriteItem", e))?;
            requests.push(WriteRequest::builder().put_request(put).build());
        }
        self.batch_write(&self.tables.events, requests).await
    }

    /// The type of the event stored where `event` would be (a callback's outcome, delivered or
    /// failed), if one is: one strongly consistent read, before a callback is delivered again.
    pub async fn recorded_event(
        &self,
        event: &TrailEvent,
    ) -> Result<Option<EventType>, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.tables.events)
            .key("pk", s(trail_key(&event.tenant, &event.approval_id)))
            .key("id", s(item_key(&event.order)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| StoreError::from_sdk("GetItem", e))?;
        let Some(item) = output.item() else {
            return Ok(None);
        };
        let stored = events_from_item(item, &event.tenant, &event.approval_id)?;
        Ok(stored.first().map(|e| e.kind))
    }

    /// Stores `event` (alone in its item) unless its item is stored already (by this event, or
    /// another that shares it: a callback's two outcomes) — or holds `replaces` (a failure a
    /// delivery that came after all outdoes): true when this put stored it. One conditional
    /// write.
    pub async fn put_event_once(
        &self,
        event: &TrailEvent,
        replaces: Option<EventType>,
        expires_at: Option<EpochSeconds>,
    ) -> Result<bool, StoreError> {
        let put = self
            .client
            .put_item()
            .table_name(&self.tables.events)
            .set_item(
                event_items(std::slice::from_ref(event), |e| {
                    self.retention.after_job_write(e.at, expires_at)
                })
                .pop(),
            )
            .expression_attribute_names("#pk", "pk");
        let put = match replaces {
            None => put.condition_expression("attribute_not_exists(#pk)"),
            Some(kind) => put
                .condition_expression("attribute_not_exists(#pk) OR #e[0].#t = :replaces")
                .expression_attribute_names("#e", EVENTS)
                .expression_attribute_names("#t", "t")
                .expression_attribute_values(":replaces", s(kind.as_str())),
        };
        let result = put.send().await;
        match result {
            Ok(_) => Ok(true),
            Err(e) if is_transient(&e) => Err(StoreError::from_sdk("PutItem", e)),
            Err(e) => match e.into_service_error() {
                PutItemError::ConditionalCheckFailedException(_) => Ok(false),
                other => Err(StoreError::dynamo("PutItem", other)),
            },
        }
    }

    /// One page of the approval's events, oldest first, after `after` (a page's `next`): the
    /// table's items from the one that holds `after` on, and (for events stored before v5) the
    /// `by_order` index from `after`'s order on, queried together and merged.
    pub async fn list_events(
        &self,
        tenant: &TenantId,
        id: &ApprovalId,
        after: Option<(String, String)>,
        limit: i32,
    ) -> Result<EventPage, StoreError> {
        let key = trail_key(tenant, id);
        let from = after.as_ref().map(|(order, _)| order.as_str());
        // Items' keys begin with a stream position (digits); ids before v5 with `evt_`. One
        // item more than the page, as the first may hold only events the page starts after.
        let items = self
            .client
            .query()
            .table_name(&self.tables.events)
            .key_condition_expression("#pk = :pk AND #id BETWEEN :from AND :to")
            .expression_attribute_names("#pk", "pk")
            .expression_attribute_names("#id", "id")
            .expression_attribute_values(":pk", s(&key))
            .expression_attribute_values(":from", s(from.map_or("0", item_key)))
            .expression_attribute_values(":to", s(":"))
            .scan_index_forward(true)
            .limit(limit.saturating_add(1))
            .send();
        // Two events before v5 may share an order: read past them.
        let legacy = self
            .client
            .query()
            .table_name(&self.tables.events)
            .index_name("by_order")
            .expression_attribute_names("#pk", "pk")
            .expression_attribute_values(":pk", s(&key))
            .scan_index_forward(true)
            .limit(limit.saturating_add(2));
        let legacy = match from {
            Some(order) => legacy
                .key_condition_expression("#pk = :pk AND #order >= :order")
                .expression_attribute_names("#order", "trail_order")
                .expression_attribute_values(":order", s(order)),
            None => legacy.key_condition_expression("#pk = :pk"),
        }
        .send();
        let (items, legacy) = futures::future::try_join(items, legacy)
            .await
            .map_err(|e| StoreError::from_sdk("Query", e))?;
        let read = |output: &QueryOutput| -> Result<Vec<TrailEvent>, StoreError> {
            let mut events = Vec::new();
            for item in output.items() {
                events.extend(events_from_item(item, tenant, id)?);
            }
            Ok(events)
        };
        let sources = [read(&items)?, read(&legacy)?];
        // A source that stopped before its end may hold events before the other's last: the
        // page ends at the earliest place a source stopped.
        let stopped = [&items, &legacy]
            .iter()
            .zip(&sources)
            .filter(|(output, _)| output.last_evaluated_key().is_some())
            .filter_map(|(_, events)| events.iter().map(place).max())
            .min()
            .map(|(order, id)| (order.to_owned(), id.to_owned()));
        let mut events: Vec<TrailEvent> = sources
            .into_iter()
            .flatten()
            .filter(|e| {
                after
                    .as_ref()
                    .is_none_or(|(order, id)| place(e) > (order.as_str(), id.as_str()))
            })
            .filter(|e| {
                stopped
                    .as_ref()
                    .is_none_or(|(order, id)| place(e) <= (order.as_str(), id.as_str()))
            })
            .collect();
        events.sort_by(|a, b| place(a).cmp(&place(b)));
        // An event stored both ways (a change redelivered across the upgrade) is listed once.
        let mut seen = HashSet::new();
        events.retain(|e| seen.insert(e.id.clone()));
        let limit = usize::try_from(limit).unwrap_or(0);
        let more = stopped.is_some() || events.len() > limit;
        events.truncate(limit);
        let next = events
            .last()
            .filter(|_| more)
            .map(|e| (e.order.clone(), e.id.clone()));
        Ok(EventPage { events, next })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(order: &str, id: &str) -> TrailEvent {
        TrailEvent {
            id: id.to_owned(),
            kind: EventType::VoteRecorded,
            at: 1,
            actor: json!({"channel": "api"}),
            data: json!({}),
            order: order.to_owned(),
            tenant: TenantId::parse("tenant-a").unwrap(),
            approval_id: ApprovalId::generate_for(1),
        }
    }

    #[test]
    fn one_item_per_change_its_events_in_their_places_and_read_back_in_order() {
        let mut events = vec![
            event("p1#01", "evt_b"),
            event("p1#00", "evt_a"),
            event("p1~00c#00", "evt_c"),
        ];
        let id = events[0].approval_id.clone();
        for e in &mut events {
            e.approval_id = id.clone();
        }
        let items = event_items(&events, |_| None);
        assert_eq!(items.len(), 2, "the change's two events, and the callback");
        let tenant = TenantId::parse("tenant-a").unwrap();
        let back: Vec<TrailEvent> = items
            .iter()
            .flat_map(|item| events_from_item(item, &tenant, &id).unwrap())
            .collect();
        let orders: Vec<&str> = back.iter().map(|e| e.order.as_str()).collect();
        assert_eq!(orders, ["p1#00", "p1#01", "p1~00c#00"]);
        assert_eq!(back[0], events[1]);
        assert_eq!(item_key("p1~00c#00"), "p1~00c");
        assert_eq!(order_place("0042#07"), ("0042", 7));
        assert_eq!(order_place("0042#00#n#alice"), ("0042#00#n#alice", 0));
    }
}
