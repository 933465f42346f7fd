//! The events table: the audit trail (its events derived in [`crate::domain::trail`]), one item per event id (so an event derived twice is
//! stored once), listed in trail order through the `by_order` local index.

use std::collections::HashMap;

use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::types::{AttributeValue, Put, PutRequest, WriteRequest};
use serde_json::Value;

use super::attr::{Item, get_n, get_s, n, s};
use super::client::Store;
use super::error::{StoreError, is_transient};
use super::keys::trail_key;
use crate::domain::trail::{EventType, TrailEvent};
use crate::domain::{ApprovalId, TenantId};

pub(crate) fn event_to_item(event: &TrailEvent) -> Item {
    HashMap::from([
        (
            "pk".to_owned(),
            s(trail_key(&event.tenant, &event.approval_id)),
        ),
        ("id".to_owned(), s(&event.id)),
        ("trail_order".to_owned(), s(&event.order)),
        ("type".to_owned(), s(event.kind.as_str())),
        ("at".to_owned(), n(event.at)),
        ("actor".to_owned(), s(event.actor.to_string())),
        ("data".to_owned(), s(event.data.to_string())),
        ("tenant".to_owned(), s(event.tenant.as_str())),
        ("approval_id".to_owned(), s(event.approval_id.as_str())),
    ])
}

fn event_from_item(item: &Item) -> Result<TrailEvent, StoreError> {
    let json = |name: &'static str| -> Result<Value, StoreError> {
        serde_json::from_str(get_s(item, name)?).map_err(|_| StoreError::corrupt(name))
    };
    Ok(TrailEvent {
        id: get_s(item, "id")?.to_owned(),
        kind: EventType::parse(get_s(item, "type")?).ok_or(StoreError::corrupt("type"))?,
        at: get_n(item, "at")?,
        actor: json("actor")?,
        data: json("data")?,
        order: get_s(item, "trail_order")?.to_owned(),
        tenant: TenantId::parse(get_s(item, "tenant")?)
            .map_err(|_| StoreError::corrupt("tenant"))?,
        approval_id: ApprovalId::parse(get_s(item, "approval_id")?)
            .map_err(|_| StoreError::corrupt("approval_id"))?,
    })
}

/// A page of an approval's trail.
#[derive(Debug, Clone)]
pub struct EventPage {
    pub events: Vec<TrailEvent>,
    /// Where the next page starts (the last event's order and id), if there may be one.
    pub next: Option<(String, String)>,
}

impl Store {
    /// A Put of the event, for a transaction that commits it with the transition it records.
    pub(crate) fn event_put(&self, event: &TrailEvent) -> Result<Put, StoreError> {
        Put::builder()
            .table_name(&self.tables.events)
            .set_item(Some(event_to_item(event)))
            .build()
            .map_err(|e| StoreError::dynamo("TransactWriteItems", e))
    }

    /// Stores events (derived from committed changes). Writing one again writes the same item:
    /// a redelivered change adds nothing.
    pub async fn put_events(&self, events: &[TrailEvent]) -> Result<(), StoreError> {
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

    /// The type of the event stored under `event_id` in the approval's trail, if there is one:
    /// one strongly consistent read (a callback's outcome, before it is delivered again).
    pub async fn recorded_event(
        &self,
        tenant: &TenantId,
        approval_id: &ApprovalId,
        event_id: &str,
    ) -> Result<Option<EventType>, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.tables.events)
            .key("pk", s(trail_key(tenant, approval_id)))
            .key("id", s(event_id))
            .projection_expression("#type")
            .expression_attribute_names("#type", "type")
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| StoreError::from_sdk("GetItem", e))?;
        output
            .item()
            .map(|item| EventType::parse(get_s(item, "type")?).ok_or(StoreError::corrupt("type")))
            .transpose()
    }

    /// Stores `event` unless its id is stored already (by this event, or another that shares
    /// its id: a callback's two outcomes) — or is stored as `replaces` (a failure a delivery
    /// that came after all outdoes): true when this put stored it. One conditional write.
    pub async fn put_event_once(
        &self,
        event: &TrailEvent,
        replaces: Option<EventType>,
    ) -> Result<bool, StoreError> {
        let put = self
            .client
            .put_item()
            .table_name(&self.tables.events)
            .set_item(Some(event_to_item(event)))
            .expression_attribute_names("#pk", "pk");
        let put = match replaces {
            None => put.condition_expression("attribute_not_exists(#pk)"),
            Some(kind) => put
                .condition_expression("attribute_not_exists(#pk) OR #type = :replaces")
                .expression_attribute_names("#type", "type")
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

    /// One page of the approval's events, oldest first, after `after` (a page's `next`).
    pub async fn list_events(
        &self,
        tenant: &TenantId,
        id: &ApprovalId,
        after: Option<(String, String)>,
        limit: i32,
    ) -> Result<EventPage, StoreError> {
        let key = trail_key(tenant, id);
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
