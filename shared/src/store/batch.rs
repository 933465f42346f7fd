//! BatchWriteItem, as every batch of puts is sent: at most 25 items a request, each key once,
//! and what the store leaves unprocessed (throttled) sent again; and BatchGetItem of items by
//! key, likewise.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes, WriteRequest};

use super::attr::{Item, opt_s, s};

use super::client::Store;
use super::error::StoreError;

/// BatchWriteItem's limit.
const BATCH_ITEMS: usize = 25;
/// Tries of a batch whose items the store left unprocessed (throttled), with backoff between.
const BATCH_TRIES: u32 = 8;

/// The writes of `requests` with the last of each `pk`/`id` key kept, in the order of their
/// first write (a later put or delete of a key replaces the earlier one: the stream delivers an
/// approval's changes in order, so the last is its latest state).
fn last_write_per_key(requests: Vec<WriteRequest>) -> Vec<WriteRequest> {
    let key = |request: &WriteRequest| {
        let item = request
            .put_request()
            .map(|p| p.item())
            .or(request.delete_request().map(|d| d.key()));
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

impl Store {
    /// Items by key (`pk`), read consistently in batches of 100 (each key once: DynamoDB
    /// refuses a batch naming one twice); those missing are not in the map.
    pub(crate) async fn get_many(
        &self,
        table: &str,
        keys: Vec<String>,
    ) -> Result<HashMap<String, Item>, StoreError> {
        self.get_many_read(table, keys, true).await
    }

    /// [`Store::get_many`], eventually consistent (half the read units) when `consistent` is
    /// false: for reads whose answer a moment old serves as well.
    pub(crate) async fn get_many_read(
        &self,
        table: &str,
        keys: Vec<String>,
        consistent: bool,
    ) -> Result<HashMap<String, Item>, StoreError> {
        let mut found = HashMap::new();
        let mut pending: Vec<HashMap<String, AttributeValue>> = keys
            .into_iter()
            .collect::<HashSet<_>>()
            .into_iter()
            .map(|k| HashMap::from([("pk".to_owned(), s(k))]))
            .collect();
        // What DynamoDB leaves unprocessed (throttled) is asked for again after a pause that
        // doubles, a bounded number of times.
        let mut pause = std::time::Duration::from_millis(25);
        let mut throttled = 0;
        while !pending.is_empty() {
            let batch: Vec<_> = pending.drain(..pending.len().min(100)).collect();
            let request = KeysAndAttributes::builder()
                .set_keys(Some(batch))
                .consistent_read(consistent)
                .build()
                .map_err(|e| StoreError::dynamo("BatchGetItem", e))?;
            let answer = self
                .client
                .batch_get_item()
                .request_items(table, request)
                .send()
                .await
                .map_err(|e| StoreError::from_sdk("BatchGetItem", e))?;
            for item in answer
                .responses()
                .and_then(|r| r.get(table))
                .into_iter()
                .flatten()
            {
                if let Some(pk) = opt_s(item, "pk") {
                    found.insert(pk, item.clone());
                }
            }
            if let Some(left) = answer.unprocessed_keys().and_then(|u| u.get(table))
                && !left.keys().is_empty()
            {
                throttled += 1;
                if throttled > 8 {
                    return Err(StoreError::Unavailable {
                        operation: "BatchGetItem",
                        message: "keys still unprocessed".to_owned(),
                    });
                }
                pending.extend(left.keys().iter().cloned());
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(std::time::Duration::from_secs(1));
            }
        }
        Ok(found)
    }

    /// BatchWriteItem in batches of 25, sending again what the store left unprocessed. The
    /// writes are keyed by `pk` and `id` (events, index items); of several writes of one key,
    /// only the last is sent: DynamoDB refuses a whole batch that names one key twice
    /// ("Provided list of item keys contains duplicates"), and a stream batch routinely holds
    /// two changes of one approval (its insert and its decision), each making the same key.
    pub(crate) async fn batch_write(
        &self,
        table: &str,
        requests: Vec<WriteRequest>,
    ) -> Result<(), StoreError> {
        let requests = last_write_per_key(requests);
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
}

#[cfg(test)]
mod tests {
    use aws_sdk_dynamodb::types::PutRequest;

    use super::*;
    use crate::store::attr::{get_s, s};

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
        let kept = last_write_per_key(vec![
            put("a", "1", "pending"),
            put("b", "1", "pending"),
            put("a", "2", "pending"),
            put("a", "1", "approved"),
            put("b", "1", "rejected"),
        ]);
        let got: Vec<String> = kept.iter().map(status).collect();
        assert_eq!(got, ["approved", "rejected", "pending"]);
        let delete = |pk: &str| {
            WriteRequest::builder()
                .delete_request(
                    aws_sdk_dynamodb::types::DeleteRequest::builder()
                        .key("pk", s(pk))
                        .key("id", s("1"))
                        .build()
                        .unwrap(),
                )
                .build()
        };
        let kept = last_write_per_key(vec![delete("a"), delete("b"), put("a", "1", "x")]);
        assert_eq!(kept.len(), 2, "deletes of two keys are two writes");
        assert!(kept[0].put_request().is_some() && kept[1].delete_request().is_some());
    }
}
