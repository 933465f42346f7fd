//! Listing approvals (`GET /approvals`) through indexes, a page at a time, newest first:
//!
//! - no filter, or only `status`: the approvals table's own indexes (`by_tenant`; `by_status`,
//!   sorted by status then id), which project whole items — one Query per page;
//! - `approver` and/or `requested_by` (with or without `status`): the `approval_index` table,
//!   one item per approval and facet (the approver, the requester, or both), kept by dispatch
//!   from the approvals stream; it holds keys only, so a page is one Query and one
//!   BatchGetItem.
//!
//! Approval ids are ULIDs: sorting by id is sorting by creation time.
//!
//! Each listed approval comes with the key that resumes its query right after it, so a page can
//! end before the last approval read (the HTTP layer cuts pages by size) without skipping or
//! repeating one.

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes, PutRequest, WriteRequest};

use super::attr::{Item, get_s, s};
use super::client::Store;
use super::codec::approval_from_item;
use super::error::StoreError;
use super::keys::approval_key;
use super::schema::start_key_attributes;
use crate::domain::{Approval, ApprovalId, Status, TenantId};

/// Separates a facet's parts: identities and tenant ids never hold a control character.
const SEP: char = '\u{1f}';

/// What a listing asks for (identities trimmed and lower-cased).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListQuery {
    pub tenant: TenantId,
    pub status: Option<Status>,
    pub approver: Option<String>,
    pub requested_by: Option<String>,
}

impl ListQuery {
    /// The index partition that holds exactly the approvals of the approver / requester filter.
    fn facet(&self) -> Option<String> {
        let t = self.tenant.as_str();
        match (&self.approver, &self.requested_by) {
            (None, None) => None,
            (Some(a), None) => Some(format!("{t}{SEP}a{SEP}{a}")),
            (None, Some(r)) => Some(format!("{t}{SEP}r{SEP}{r}")),
            (Some(a), Some(r)) => Some(format!("{t}{SEP}a{SEP}{a}{SEP}r{SEP}{r}")),
        }
    }
}

/// A page of approvals, newest first, and where the next page starts once all of them are used
/// (the last key the query read).
#[derive(Debug, Clone)]
pub struct ListPage {
    pub approvals: Vec<Listed>,
    pub next: Option<HashMap<String, String>>,
}

/// A listed approval, and where its query resumes right after it.
#[derive(Debug, Clone)]
pub struct Listed {
    pub approval: Approval,
    /// The exclusive start key of the next page were this page to end here: the key DynamoDB
    /// would return as LastEvaluatedKey (the table's key and the index's), taken from the item
    /// the query read.
    pub resume: HashMap<String, String>,
}

fn facet_status(facet: &str, status: Status) -> String {
    format!("{facet}{SEP}{}", status.as_str())
}

/// The approval's index items: one per facet it belongs to, each with its status.
pub(crate) fn index_items(approval: &Approval) -> Vec<Item> {
    let tenant = approval.tenant.clone();
    let requester = approval.requested_by.as_ref().map(|r| r.identity());
    let mut approvers: Vec<String> = approval.approvers.iter().map(|a| a.identity()).collect();
    approvers.sort();
    approvers.dedup();
    let mut queries: Vec<ListQuery> = Vec::new();
    let query = |approver: Option<String>, requested_by: Option<String>| ListQuery {
        tenant: tenant.clone(),
        status: None,
        approver,
        requested_by,
    };
    if let Some(r) = &requester {
        queries.push(query(None, Some(r.clone())));
    }
    for a in &approvers {
        queries.push(query(Some(a.clone()), None));
        if let Some(r) = &requester {
            queries.push(query(Some(a.clone()), Some(r.clone())));
        }
    }
    queries
        .iter()
        .filter_map(ListQuery::facet)
        .map(|facet| {
            HashMap::from([
                (
                    "facet_status".to_owned(),
                    s(facet_status(&facet, approval.status)),
                ),
                ("pk".to_owned(), s(facet)),
                ("id".to_owned(), s(approval.id.as_str())),
            ])
        })
        .collect()
}

fn strings(key: &HashMap<String, AttributeValue>) -> HashMap<String, String> {
    key.iter()
        .filter_map(|(k, v)| v.as_s().ok().map(|v| (k.clone(), v.clone())))
        .collect()
}

fn attributes(key: HashMap<String, String>) -> HashMap<String, AttributeValue> {
    key.into_iter().map(|(k, v)| (k, s(v))).collect()
}

impl Store {
    /// Writes the index items of approvals whose status (or existence) changed. Writing one
    /// again writes the same item, so a redelivered change is harmless; the stream delivers one
    /// approval's changes in order, so the last write is its latest status.
    pub async fn put_index_items(&self, approvals: &[&Approval]) -> Result<(), StoreError> {
        let mut requests = Vec::new();
        for approval in approvals {
            for item in index_items(approval) {
                let put = PutRequest::builder()
                    .set_item(Some(item))
                    .build()
                    .map_err(|e| StoreError::dynamo("BatchWriteItem", e))?;
                requests.push(WriteRequest::builder().put_request(put).build());
            }
        }
        self.batch_write(&self.tables.approval_index, requests)
            .await
    }

    /// One page of the tenant's approvals matching `query`, newest first, from `start` (a
    /// page's `next`).
    pub async fn list_approvals(
        &self,
        query: &ListQuery,
        start: Option<HashMap<String, String>>,
        limit: i32,
    ) -> Result<ListPage, StoreError> {
        let tenant = query.tenant.as_str();
        let request = self
            .client
            .query()
            .scan_index_forward(false)
            .limit(limit)
            .set_exclusive_start_key(start.map(attributes));
        // The table (logical name) and index each query reads: their keys resume it.
        let (table, index, request) = match (query.facet(), query.status) {
            (None, None) => (
                "approvals",
                Some("by_tenant"),
                request
                    .table_name(&self.tables.approvals)
                    .key_condition_expression("#tenant = :tenant")
                    .expression_attribute_names("#tenant", "tenant")
                    .expression_attribute_values(":tenant", s(tenant)),
            ),
            (None, Some(status)) => (
                "approvals",
                Some("by_status"),
                request
                    .table_name(&self.tables.approvals)
                    .key_condition_expression(
                        "#tenant = :tenant AND begins_with(#status_id, :status)",
                    )
                    .expression_attribute_names("#tenant", "tenant")
                    .expression_attribute_names("#status_id", "status_id")
                    .expression_attribute_values(":tenant", s(tenant))
                    .expression_attribute_values(":status", s(format!("{}#", status.as_str()))),
            ),
            (Some(facet), None) => (
                "approval_index",
                None,
                request
                    .table_name(&self.tables.approval_index)
                    .key_condition_expression("#pk = :facet")
                    .expression_attribute_names("#pk", "pk")
                    .expression_attribute_values(":facet", s(facet)),
            ),
            (Some(facet), Some(status)) => (
                "approval_index",
                Some("by_status"),
                request
                    .table_name(&self.tables.approval_index)
                    .key_condition_expression("#facet_status = :facet_status")
                    .expression_attribute_names("#facet_status", "facet_status")
                    .expression_attribute_values(":facet_status", s(facet_status(&facet, status))),
            ),
        };
        let output = request
            .set_index_name(index.map(str::to_owned))
            .send()
            .await
            .map_err(|e| StoreError::from_sdk("Query", e))?;
        let next = output.last_evaluated_key().map(strings);
        let resume_attributes =
            start_key_attributes(table, index).ok_or(StoreError::Corrupt("infra/tables.json"))?;
        let resume = |item: &Item| -> Result<HashMap<String, String>, StoreError> {
            resume_attributes
                .iter()
                .map(|&name| Ok((name.to_owned(), get_s(item, name)?.to_owned())))
                .collect()
        };
        let approvals = if query.facet().is_some() {
            let keys = output
                .items()
                .iter()
                .map(|item| {
                    let id = ApprovalId::parse(get_s(item, "id")?)
                        .map_err(|_| StoreError::corrupt("id"))?;
                    Ok((id, resume(item)?))
                })
                .collect::<Result<Vec<_>, StoreError>>()?;
            let ids: Vec<&ApprovalId> = keys.iter().map(|(id, _)| id).collect();
            let mut found = self.approvals_by_id(&query.tenant, &ids).await?;
            // An index item whose approval is gone (never: approvals are not deleted) is skipped.
            keys.into_iter()
                .filter_map(|(id, resume)| {
                    found
                        .remove(id.as_str())
                        .map(|approval| Listed { approval, resume })
                })
                .collect()
        } else {
            output
                .items()
                .iter()
                .map(|item| {
                    Ok(Listed {
                        approval: approval_from_item(item)?,
                        resume: resume(item)?,
                    })
                })
                .collect::<Result<_, StoreError>>()?
        };
        Ok(ListPage { approvals, next })
    }

    /// The tenant's approvals `ids`, by id (one BatchGetItem; what the store leaves
    /// unprocessed, throttled, is asked for again).
    async fn approvals_by_id(
        &self,
        tenant: &TenantId,
        ids: &[&ApprovalId],
    ) -> Result<HashMap<String, Approval>, StoreError> {
        let mut found: HashMap<String, Approval> = HashMap::new();
        if ids.is_empty() {
            return Ok(found);
        }
        let keys: Vec<HashMap<String, AttributeValue>> = ids
            .iter()
            .map(|id| HashMap::from([("pk".to_owned(), approval_key(tenant, id))]))
            .collect();
        let mut pending = Some(
            KeysAndAttributes::builder()
                .set_keys(Some(keys))
                .consistent_read(true)
                .build()
                .map_err(|e| StoreError::dynamo("BatchGetItem", e))?,
        );
        let mut pause = Duration::from_millis(25);
        for _ in 0..8 {
            let Some(request) = pending.take() else { break };
            let output = self
                .client
                .batch_get_item()
                .request_items(&self.tables.approvals, request)
                .send()
                .await
                .map_err(|e| StoreError::from_sdk("BatchGetItem", e))?;
            for item in output
                .responses()
                .and_then(|r| r.get(&self.tables.approvals))
                .into_iter()
                .flatten()
            {
                let approval = approval_from_item(item)?;
                found.insert(approval.id.to_string(), approval);
            }
            pending = output
                .unprocessed_keys()
                .and_then(|u| u.get(&self.tables.approvals))
                .cloned();
            if pending.is_some() {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(1));
            }
        }
        if pending.is_some() {
            return Err(StoreError::Unavailable {
                operation: "BatchGetItem",
                message: "keys still unprocessed".to_owned(),
            });
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Approver;
    use crate::domain::approval::tests::pending;

    #[test]
    fn an_approval_is_indexed_under_each_approver_its_requester_and_both() {
        let mut approval = pending(1_000);
        approval.requested_by = Some(Approver::parse("CI@acme").unwrap());
        approval.approvers = vec![
            Approver::parse("alice").unwrap(),
            Approver::parse("Bob").unwrap(),
        ];
        let items = index_items(&approval);
        let facets: Vec<String> = items
            .iter()
            .map(|i| get_s(i, "pk").unwrap().replace(SEP, "|"))
            .collect();
        assert_eq!(
            facets,
            [
                "acme|r|ci@acme",
                "acme|a|alice",
                "acme|a|alice|r|ci@acme",
                "acme|a|bob",
                "acme|a|bob|r|ci@acme",
            ]
        );
        assert!(
            items
                .iter()
                .all(|i| get_s(i, "facet_status").unwrap().ends_with("pending"))
        );
    }
}
