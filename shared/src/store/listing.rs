//! Listing approvals (`GET /approvals`) through indexes, a page at a time, newest first. Every
//! index holds keys only, so a page is its queries (sent together: one round trip) and one
//! BatchGetItem of the approvals they name:
//!
//! - without `approver` or `requested_by`: the approvals table's `by_status_keys` index (sorted
//!   by status, then id) — the filtered status's range, or every status's, merged by id. Keys
//!   only, the index is written only when an approval's status moves, not on every write;
//! - with `approver` and/or `requested_by`: the `approval_index` table, kept by dispatch from
//!   the approvals stream: per approval, one item per facet (each approver, the requester) under
//!   `{facet}␟{status}`, written at the create and moved at each change of status. Both filters
//!   read the approver's facet and keep the requester's approvals. Items from before v5 (one
//!   per facet, the approver-and-requester facet too, their status in the `by_status` index)
//!   are read beside them, so approvals created before an upgrade stay listed.
//!
//! Approval ids are ULIDs: sorting by id is sorting by creation time. Pages resume after an id:
//! each query from there on.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use aws_sdk_dynamodb::types::{
    AttributeValue, DeleteRequest, KeysAndAttributes, PutRequest, WriteRequest,
};

use super::attr::{Item, epoch, get_s, s};
use super::client::Store;
use super::codec::approval_from_item;
use super::error::StoreError;
use super::indexes::RETAIN_UNTIL;
use super::keys::approval_key;
use crate::domain::{Approval, ApprovalId, EpochSeconds, Status, TenantId};

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

fn approver_facet(tenant: &TenantId, approver: &str) -> String {
    format!("{tenant}{SEP}a{SEP}{approver}")
}

fn requester_facet(tenant: &TenantId, requester: &str) -> String {
    format!("{tenant}{SEP}r{SEP}{requester}")
}

/// A facet's partition for one status: `approval_index`'s key (and, before v5, its
/// `by_status` index's).
fn facet_status(facet: &str, status: Status) -> String {
    format!("{facet}{SEP}{}", status.as_str())
}

impl ListQuery {
    /// The facet whose items hold the listing's approvals: the approver's, else the
    /// requester's. With both filters the approver's, its approvals kept by requester.
    fn facet(&self) -> Option<String> {
        match (&self.approver, &self.requested_by) {
            (Some(a), _) => Some(approver_facet(&self.tenant, a)),
            (None, Some(r)) => Some(requester_facet(&self.tenant, r)),
            (None, None) => None,
        }
    }

    /// The facet that held exactly the listing's approvals before v5 (approver and requester
    /// had one of their own).
    fn facet_before_v5(&self) -> Option<String> {
        match (&self.approver, &self.requested_by) {
            (Some(a), Some(r)) => {
                Some(format!("{}{SEP}r{SEP}{r}", approver_facet(&self.tenant, a)))
            }
            _ => self.facet(),
        }
    }

    /// Whether a listed approval is one the listing asked for: its status now, and with both
    /// filters its requester (the approver's facet holds every requester's).
    fn matches(&self, approval: &Approval) -> bool {
        let status = self.status.is_none_or(|s| s == approval.status);
        let requester = match (&self.approver, &self.requested_by) {
            (Some(_), Some(wanted)) => {
                approval
                    .requested_by
                    .as_ref()
                    .map(|r| r.identity())
                    .as_deref()
                    == Some(wanted.as_str())
            }
            _ => true,
        };
        status && requester
    }

    fn statuses(&self) -> Vec<Status> {
        self.status
            .map_or_else(|| Status::ALL.to_vec(), |s| vec![s])
    }
}

/// Whether DynamoDB refused a query because its index is still being backfilled
/// (`ValidationException` "Cannot read from backfilling global secondary index").
fn backfilling<R>(
    error: &aws_sdk_dynamodb::error::SdkError<aws_sdk_dynamodb::operation::query::QueryError, R>,
) -> bool {
    error.as_service_error().is_some_and(|e| {
        e.meta().code() == Some("ValidationException")
            && e.meta()
                .message()
                .is_some_and(|m| m.contains("backfilling"))
    })
}

/// How many index reads one page may take while its approvals are filtered out (by status, or
/// by requester under an approver's facet) and more remain.
const READS_A_PAGE: usize = 5;

/// What one read of the indexes found.
struct IndexRead {
    /// Newest first.
    ids: Vec<ApprovalId>,
    /// Whether more remain below the last.
    more: bool,
    /// The items from before v5 read, each with the status it was written at.
    before_v5: Vec<OldItem>,
}

/// An index item from before v5: one per facet, its status in `facet_status`.
struct OldItem {
    pk: String,
    id: ApprovalId,
    status: String,
}

/// A page of approvals, newest first, and where the next page starts once all of them are used.
#[derive(Debug, Clone)]
pub struct ListPage {
    pub approvals: Vec<Listed>,
    pub next: Option<HashMap<String, String>>,
}

/// A listed approval, and where its listing resumes right after it.
#[derive(Debug, Clone)]
pub struct Listed {
    pub approval: Approval,
    /// Where the next page starts were this page to end here: after this approval's id.
    pub resume: HashMap<String, String>,
}

fn resume_after(id: &ApprovalId) -> HashMap<String, String> {
    HashMap::from([("after".to_owned(), id.to_string())])
}

/// The id a page's `next` resumes after: `after`, or (a cursor given out before v5, a query's
/// own last key) the key's approval id.
fn after_of(start: &HashMap<String, String>) -> Option<String> {
    if let Some(after) = start.get("after") {
        return Some(after.clone());
    }
    if let Some(status_id) = start.get("status_id") {
        return status_id.split_once('#').map(|(_, id)| id.to_owned());
    }
    start.get("id").cloned()
}

/// The approval's facets: the requester's and each approver's.
fn facets(approval: &Approval) -> Vec<String> {
    let tenant = &approval.tenant;
    let mut approvers: Vec<String> = approval.approvers.iter().map(|a| a.identity()).collect();
    approvers.sort();
    approvers.dedup();
    let requester = approval.requested_by.as_ref().map(|r| r.identity());
    requester
        .iter()
        .map(|r| requester_facet(tenant, r))
        .chain(approvers.iter().map(|a| approver_facet(tenant, a)))
        .collect()
}

/// The approval's index items at `status`: one per facet, with the TTL `retain_until` (only
/// on the items a move puts).
pub(crate) fn index_items(
    approval: &Approval,
    status: Status,
    retain_until: Option<EpochSeconds>,
) -> Vec<Item> {
    facets(approval)
        .iter()
        .map(|facet| {
            let mut item = HashMap::from([
                ("pk".to_owned(), s(facet_status(facet, status))),
                ("id".to_owned(), s(approval.id.as_str())),
            ]);
            if let Some(until) = retain_until {
                item.insert(RETAIN_UNTIL.to_owned(), epoch(until));
            }
            item
        })
        .collect()
}

/// How an approval's status moved in one committed change: from (none when it was created)
/// and to.
pub struct StatusMove<'a> {
    pub from: Option<Status>,
    pub approval: &'a Approval,
}

impl Store {
    /// Moves the index items of approvals whose status changed (or that were created): the
    /// items at the old status deleted, at the new one put. Writing them again writes the same
    /// items, so a redelivered change is harmless; the stream delivers one approval's changes in
    /// order, and a batch's writes to one item are folded into its last. Each item put at
    /// `now` is kept until its approval's expiry or `now`, whichever is later, + the retention.
    pub async fn move_index_items(
        &self,
        moves: &[StatusMove<'_>],
        now: EpochSeconds,
    ) -> Result<(), StoreError> {
        let requests = index_writes(moves, self.retention, now)?;
        self.batch_write(&self.tables.approval_index, requests)
            .await
    }

    /// One page of the tenant's approvals matching `query`, newest first, from `start` (a
    /// page's `next`, or a listed approval's `resume`). The store keeps only approvals whose
    /// status is the one asked for (an index item from before v5 is not moved when its
    /// approval's status moves: it is removed here once seen stale) and, with both filters,
    /// the requester's; and it reads on while a page is short and more remain (up to
    /// [`READS_A_PAGE`] reads), so a page is full whenever more follow.
    pub async fn list_approvals(
        &self,
        query: &ListQuery,
        start: Option<HashMap<String, String>>,
        limit: i32,
    ) -> Result<ListPage, StoreError> {
        let wanted = usize::try_from(limit).unwrap_or(0);
        let mut after = start.as_ref().and_then(after_of);
        let mut approvals: Vec<Listed> = Vec::new();
        let mut stale: Vec<OldItem> = Vec::new();
        let mut next = None;
        for _ in 0..READS_A_PAGE {
            let read = self.read_index(query, after.as_deref(), limit).await?;
            let last_read = read.ids.last().cloned();
            let fetched = self.fetch_listed(&query.tenant, &read.ids).await?;
            for old in read.before_v5 {
                let current = fetched
                    .iter()
                    .find(|l| l.approval.id == old.id)
                    .map(|l| l.approval.status.as_str());
                if current.is_some_and(|current| current != old.status) {
                    stale.push(old);
                }
            }
            let (read_count, kept_before) = (fetched.len(), approvals.len());
            approvals.extend(fetched.into_iter().filter(|l| query.matches(&l.approval)));
            let filtered_out = approvals.len() - kept_before < read_count;
            if approvals.len() > wanted {
                // A read after the first keeps more than the page holds: it ends at its last.
                approvals.truncate(wanted);
                next = approvals.last().map(|l| l.resume.clone());
                break;
            }
            match last_read {
                Some(last) if read.more => {
                    next = Some(resume_after(&last));
                    // Short because approvals were filtered out, and more remain: read on below
                    // the last id read. (A read DynamoDB cut short at 1 MB ends the page as it
                    // did.) Past the last read allowed, the page ends short with its cursor.
                    if approvals.len() >= wanted || !filtered_out {
                        break;
                    }
                    after = Some(last.to_string());
                }
                _ => {
                    next = None;
                    break;
                }
            }
        }
        if !stale.is_empty() {
            // Best effort: a failure leaves them for the next listing, which filters them.
            if let Err(e) = self.remove_stale_index_items(stale).await {
                tracing::warn!(error = %e, "stale index items from before v5 not removed");
            }
        }
        Ok(ListPage { approvals, next })
    }

    /// Deletes index items from before v5 whose approval's status has moved since.
    async fn remove_stale_index_items(&self, stale: Vec<OldItem>) -> Result<(), StoreError> {
        let mut requests = Vec::with_capacity(stale.len());
        for old in stale {
            requests.push(
                WriteRequest::builder()
                    .delete_request(
                        DeleteRequest::builder()
                            .key("pk", s(old.pk))
                            .key("id", s(old.id.as_str()))
                            .build()
                            .map_err(|e| StoreError::dynamo("BatchWriteItem", e))?,
                    )
                    .build(),
            );
        }
        self.batch_write(&self.tables.approval_index, requests)
            .await
    }

    /// One read of the indexes: the ids of up to `limit` approvals matching `query` by their
    /// index items, newest first, below `after` (their queries sent together: one round trip).
    async fn read_index(
        &self,
        query: &ListQuery,
        after: Option<&str>,
        limit: i32,
    ) -> Result<IndexRead, StoreError> {
        let after = after.map(str::to_owned);
        // Each query reads its range newest first, from just below `after`; a bound that is a
        // key's own (BETWEEN takes its ends) costs one item more, skipped below.
        let newest = |query: aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder| {
            query
                .scan_index_forward(false)
                .limit(limit.saturating_add(1))
        };
        let answers = match (query.facet(), query.facet_before_v5()) {
            (Some(facet), Some(before_v5)) => {
                let mut queries = Vec::new();
                let below =
                    |q: aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder,
                     partition: &str,
                     key: &str| {
                        let q = q.expression_attribute_names("#p", partition);
                        match &after {
                            Some(after) => q
                                .key_condition_expression("#p = :p AND #id < :after")
                                .expression_attribute_names("#id", "id")
                                .expression_attribute_values(":after", s(after)),
                            None => q.key_condition_expression("#p = :p"),
                        }
                        .expression_attribute_values(":p", s(key))
                    };
                let table = || newest(self.client.query().table_name(&self.tables.approval_index));
                for status in query.statuses() {
                    queries.push(below(table(), "pk", &facet_status(&facet, status)).send());
                }
                queries.push(
                    match query.status {
                        Some(status) => below(
                            table().index_name("by_status"),
                            "facet_status",
                            &facet_status(&before_v5, status),
                        ),
                        None => below(table(), "pk", &before_v5),
                    }
                    .send(),
                );
                futures::future::try_join_all(queries).await
            }
            _ => {
                let by_status = |index: &str| {
                    let queries = query.statuses().into_iter().map(|status| {
                        let prefix = format!("{}#", status.as_str());
                        let top = match &after {
                            Some(id) => format!("{prefix}{id}"),
                            None => format!("{prefix}\u{10ffff}"),
                        };
                        newest(self.client.query())
                            .table_name(&self.tables.approvals)
                            .index_name(index)
                            .key_condition_expression(
                                "#tenant = :tenant AND #status_id BETWEEN :low AND :top",
                            )
                            .expression_attribute_names("#tenant", "tenant")
                            .expression_attribute_names("#status_id", "status_id")
                            .expression_attribute_values(":tenant", s(query.tenant.as_str()))
                            .expression_attribute_values(":low", s(prefix))
                            .expression_attribute_values(":top", s(top))
                            .send()
                    });
                    futures::future::try_join_all(queries)
                };
                match by_status("by_status_keys").await {
                    // Mid-upgrade (ApprovalsIndexesStep 1): DynamoDB refuses to read an index
                    // it is still backfilling, for minutes or hours after the deploy. The index
                    // it replaces, there until step final, has the same keys.
                    Err(e) if backfilling(&e) => by_status("by_status").await,
                    answers => answers,
                }
            }
        }
        .map_err(|e| StoreError::from_sdk("Query", e))?;
        let mut more = false;
        let mut ids: Vec<ApprovalId> = Vec::new();
        let mut before_v5: Vec<OldItem> = Vec::new();
        // The highest of the last ids read by queries that stopped early: below it, one of them
        // read nothing, so the page ends there.
        let mut floor: Option<ApprovalId> = None;
        for answer in &answers {
            let stopped = answer.last_evaluated_key().is_some();
            more |= stopped;
            let mut lowest: Option<ApprovalId> = None;
            for item in answer.items() {
                // `approval_index` names the approval in `id`; `by_status_keys` after the status.
                let id = match item.get("status_id") {
                    Some(_) => get_s(item, "status_id")?.split_once('#').map(|(_, id)| id),
                    None => Some(get_s(item, "id")?),
                }
                .and_then(|id| ApprovalId::parse(id).ok())
                .ok_or(StoreError::corrupt("id"))?;
                // An item from before v5: its status is its `facet_status`'s last part.
                if let Some(AttributeValue::S(facet_status)) = item.get("facet_status")
                    && let Some(AttributeValue::S(pk)) = item.get("pk")
                {
                    before_v5.push(OldItem {
                        pk: pk.clone(),
                        id: id.clone(),
                        status: facet_status
                            .rsplit(SEP)
                            .next()
                            .unwrap_or_default()
                            .to_owned(),
                    });
                }
                lowest = Some(id.clone());
                if after.as_deref() != Some(id.as_str()) {
                    ids.push(id);
                }
            }
            if stopped
                && let Some(lowest) = lowest
                && floor.as_ref().is_none_or(|f| lowest.as_str() > f.as_str())
            {
                floor = Some(lowest);
            }
        }
        // Newest first; an approval indexed both before and since v5 once. A query stops at
        // its limit (more than the page's worth) or at DynamoDB's 1 MB a page (the index of
        // before v5 holds whole items): the page keeps only what every query read.
        ids.sort_by(|a, b| b.as_str().cmp(a.as_str()));
        ids.dedup();
        if let Some(floor) = &floor {
            ids.retain(|id| id.as_str() >= floor.as_str());
        }
        let limit = usize::try_from(limit).unwrap_or(0);
        more |= ids.len() > limit;
        ids.truncate(limit);
        Ok(IndexRead {
            ids,
            more,
            before_v5,
        })
    }

    /// The approvals `ids` name, in their order: one BatchGetItem.
    async fn fetch_listed(
        &self,
        tenant: &TenantId,
        ids: &[ApprovalId],
    ) -> Result<Vec<Listed>, StoreError> {
        let refs: Vec<&ApprovalId> = ids.iter().collect();
        let mut found = self.approvals_by_id(tenant, &refs).await?;
        // A key whose approval is gone (never: approvals are not deleted) is skipped.
        Ok(ids
            .iter()
            .filter_map(|id| {
                found.remove(id.as_str()).map(|approval| Listed {
                    approval,
                    resume: resume_after(id),
                })
            })
            .collect())
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

/// The approval index's writes for `moves`: each approval's items under its new status put,
/// then those under its old status deleted — every put before every delete, so a batch cut
/// short (a crash, a throttled request given up) leaves an approval listed twice for a moment
/// (a listing drops the stale item it meets), never not at all.
fn index_writes(
    moves: &[StatusMove<'_>],
    retention: crate::domain::Retention,
    now: EpochSeconds,
) -> Result<Vec<WriteRequest>, StoreError> {
    let mut writes: BTreeMap<(String, String), Option<Item>> = BTreeMap::new();
    let key = |item: &Item| -> Result<(String, String), StoreError> {
        Ok((get_s(item, "pk")?.to_owned(), get_s(item, "id")?.to_owned()))
    };
    for m in moves {
        if let Some(from) = m.from.filter(|from| *from != m.approval.status) {
            for item in index_items(m.approval, from, None) {
                writes.insert(key(&item)?, None);
            }
        }
        let until = retention.after_expiry(m.approval.expires_at, now);
        for item in index_items(m.approval, m.approval.status, until) {
            writes.insert(key(&item)?, Some(item));
        }
    }
    let (mut puts, mut deletes) = (Vec::new(), Vec::new());
    for ((pk, id), write) in writes {
        match write {
            Some(item) => puts.push(
                WriteRequest::builder()
                    .put_request(
                        PutRequest::builder()
                            .set_item(Some(item))
                            .build()
                            .map_err(|e| StoreError::dynamo("BatchWriteItem", e))?,
                    )
                    .build(),
            ),
            None => deletes.push(
                WriteRequest::builder()
                    .delete_request(
                        DeleteRequest::builder()
                            .key("pk", s(pk))
                            .key("id", s(id))
                            .build()
                            .map_err(|e| StoreError::dynamo("BatchWriteItem", e))?,
                    )
                    .build(),
            ),
        }
    }
    puts.extend(deletes);
    Ok(puts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Approver;
    use crate::domain::approval::tests::pending;

    #[test]
    fn an_approval_is_indexed_under_each_approver_and_its_requester_at_its_status() {
        let mut approval = pending(1_000);
        approval.requested_by = Some(Approver::parse("CI@acme").unwrap());
        approval.approvers = vec![
            Approver::parse("alice").unwrap(),
            Approver::parse("Bob").unwrap(),
        ];
        let items = index_items(&approval, Status::Approved, None);
        let keys: Vec<String> = items
            .iter()
            .map(|i| get_s(i, "pk").unwrap().replace(SEP, "|"))
            .collect();
        assert_eq!(
            keys,
            [
                "acme|r|ci@acme|approved",
                "acme|a|alice|approved",
                "acme|a|bob|approved",
            ]
        );
        assert!(items.iter().all(|i| i.len() == 2), "keys only");
    }

    /// Review of v6, finding 12 (carried over from v5): every put goes before every delete, so
    /// a move cut short leaves the approval listed under its new status, not under none.
    #[test]
    fn an_index_move_puts_every_new_item_before_it_deletes_an_old_one() {
        let approvals: Vec<crate::domain::Approval> = (0..12)
            .map(|i| {
                let mut approval = pending(1_000);
                approval.status = Status::Approved;
                approval.requested_by = Some(Approver::parse(&format!("ci-{i}@acme")).unwrap());
                approval.approvers = vec![
                    Approver::parse("alice").unwrap(),
                    Approver::parse("zed").unwrap(),
                ];
                approval
            })
            .collect();
        let moves: Vec<StatusMove> = approvals
            .iter()
            .map(|approval| StatusMove {
                from: Some(Status::Pending),
                approval,
            })
            .collect();
        let writes = index_writes(&moves, crate::domain::Retention::days(1), 5).unwrap();
        assert_eq!(writes.len(), 12 * 3 * 2);
        let first_delete = writes
            .iter()
            .position(|w| w.delete_request().is_some())
            .unwrap();
        assert_eq!(first_delete, 36, "36 puts, then the deletes");
        assert!(
            writes[first_delete..]
                .iter()
                .all(|w| w.delete_request().is_some())
        );
    }

    #[test]
    fn a_page_resumes_after_an_id_also_from_a_cursor_given_out_before_v5() {
        let id = "01J0000000000000000000000A";
        let cursor = |pairs: &[(&str, &str)]| -> HashMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        assert_eq!(after_of(&cursor(&[("after", id)])).as_deref(), Some(id));
        let by_status = format!("pending#{id}");
        let before = cursor(&[("pk", "x"), ("tenant", "t"), ("status_id", &by_status)]);
        assert_eq!(after_of(&before).as_deref(), Some(id));
        let by_tenant = cursor(&[("pk", "x"), ("tenant", "t"), ("id", id)]);
        assert_eq!(after_of(&by_tenant).as_deref(), Some(id));
        assert_eq!(after_of(&cursor(&[("pk", "x")])), None);
    }
}
