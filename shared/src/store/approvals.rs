//! Creating, reading and cancelling approvals. Each operation is one DynamoDB round trip; a
//! refused condition returns the item as it was (`ALL_OLD`), which is all the handler needs to
//! answer. (Votes are in `votes.rs`, an operator's retry and resolve in `operator.rs`.)

use std::collections::HashMap;

use aws_sdk_dynamodb::types::{Put, ReturnValuesOnConditionCheckFailure, TransactWriteItem};

use super::attr::{b, epoch, get_b, get_n, get_s, n, s};
use super::client::{DecideOutcome, Store, Transaction, condition_failed_item};
use super::codec::{approval_from_item, approval_to_item, cancellation_to_attr};
use super::conditions::ONLY_IF_NEW;
use super::error::StoreError;
use super::expr::{UpdateExpr, names};
use super::indexes::Indexed;
use super::keys::{approval_key, idempotency_key, resume_binding_key};
use crate::domain::{
    Approval, ApprovalId, Cancellation, EpochSeconds, ExecutionStatus, IdempotencyKey, Status,
    TenantId,
};

/// What the first response to an `Idempotency-Key` was, kept to answer its replays byte for byte.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyRecord {
    pub key: IdempotencyKey,
    /// SHA-256 of the canonical request body.
    pub fingerprint: String,
    pub approval_id: ApprovalId,
    pub response_status: u16,
    pub response_body: Vec<u8>,
    pub created_at: EpochSeconds,
    /// Once this moment has passed the record no longer blocks its key (also the table's TTL
    /// attribute).
    pub expires_at: EpochSeconds,
}

/// A response saved by an earlier request with the same key and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedResponse {
    pub approval_id: String,
    pub status: u16,
    pub body: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CreateOutcome {
    Created,
    /// Same tenant, key and fingerprint: the first response, to be replayed.
    Replayed(SavedResponse),
    /// Same tenant and key, another body.
    KeyReused,
    /// Its workflow's token or callback id is named by another approval (of any tenant).
    ResumeInUse,
}

/// The saved response, deflated (RFC 1951): a create's JSON answer shrinks to about half, so
/// the record, written in a transaction (twice its units), stays within 1 KB in the common case.
fn deflated(body: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut encoder =
        flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
    // Writing to a Vec cannot fail.
    let _ = encoder.write_all(body);
    encoder.finish().unwrap_or_default()
}

/// A saved response as it was answered.
fn inflated(deflated: &[u8]) -> Result<Vec<u8>, StoreError> {
    use std::io::Read;
    let mut body = Vec::new();
    flate2::read::DeflateDecoder::new(deflated)
        .read_to_end(&mut body)
        .map_err(|_| StoreError::corrupt("response_body_z"))?;
    Ok(body)
}

/// only_if_cancellable: pending and not past its expiry — the same bound as a decision's, so a
/// cancel and a decision racing each other cannot both apply.
pub(crate) const ONLY_IF_CANCELLABLE: &str = "#status = :pending AND #expires_at > :now";
/// ... and by the principal that requested it (an approval from before `requested_by` existed
/// is an operator's to cancel).
const ONLY_IF_CANCELLABLE_BY_ITS_REQUESTER: &str =
    "#status = :pending AND #expires_at > :now AND #requested_by = :by";

/// only_if_token_unbound: no approval names the workflow's token (or the one that did is past
/// its bound, which DynamoDB's TTL deletes late).
const ONLY_IF_TOKEN_UNBOUND: &str = "attribute_not_exists(#pk) OR #expires_at < :now";

/// only_if_key_unused_or_expired: a record whose expiry has passed no longer blocks the key,
/// even while DynamoDB's TTL (which deletes late) has not removed it yet.
const ONLY_IF_KEY_UNUSED_OR_EXPIRED: &str = "attribute_not_exists(#pk) OR #expires_at < :now";

impl Store {
    /// Writes the idempotency record and the approval in one transaction, so that a key is never
    /// taken without its approval nor an approval created twice for one key.
    pub async fn create_approval(
        &self,
        approval: &Approval,
        record: &IdempotencyRecord,
        now: EpochSeconds,
    ) -> Result<CreateOutcome, StoreError> {
        let claim_key = Put::builder()
            .table_name(&self.tables.idempotency_keys)
            .item("pk", idempotency_key(&approval.tenant, &record.key))
            .item("fingerprint", s(&record.fingerprint))
            .item("approval_id", s(record.approval_id.as_str()))
            .item("response_status", n(record.response_status))
            .item("response_body_z", b(&deflated(&record.response_body)))
            .item("created_at", epoch(record.created_at))
            .item("expires_at", epoch(record.expires_at))
            .condition_expression(ONLY_IF_KEY_UNUSED_OR_EXPIRED)
            .set_expression_attribute_names(Some(names(&[ONLY_IF_KEY_UNUSED_OR_EXPIRED])))
            .expression_attribute_values(":now", epoch(now))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(|e| StoreError::dynamo("TransactWriteItems", e))?;
        // only_if_new_approval: ids are fresh ULIDs; the condition makes an overwrite impossible.
        let put_approval = Put::builder()
            .table_name(&self.tables.approvals)
            .set_item(Some(approval_to_item(approval)))
            .condition_expression(ONLY_IF_NEW)
            .set_expression_attribute_names(Some(names(&[ONLY_IF_NEW])))
            .build()
            .map_err(|e| StoreError::dynamo("TransactWriteItems", e))?;

        let mut items = vec![
            TransactWriteItem::builder().put(claim_key).build(),
            TransactWriteItem::builder().put(put_approval).build(),
        ];
        if let Some(resume) = &approval.resume {
            items.push(
                TransactWriteItem::builder()
                    .put(self.resume_binding(approval, &resume.token, now)?)
                    .build(),
            );
        }
        let reasons = match self.transact(items, approval.id.as_str()).await? {
            Transaction::Committed => return Ok(CreateOutcome::Created),
            Transaction::Cancelled(reasons) => reasons,
        };
        let Some(old) = condition_failed_item(&reasons, 0) else {
            // The key is free but the token is another approval's (a replay of this create
            // meets its own record first, above, and is answered as it was).
            if reasons
                .get(2)
                .and_then(|r| r.code())
                .is_some_and(|code| code == "ConditionalCheckFailed")
            {
                return Ok(CreateOutcome::ResumeInUse);
            }
            // Only the approval's condition failed: a ULID collided, which a retry would fix.
            return Err(StoreError::Corrupt("approval id already taken"));
        };
        earlier(old, &record.fingerprint)
    }

    /// What an earlier create with `key` answered, if its record is still in force: for a
    /// create refused before any write (by the tenant's approval policy), so that a replay of a
    /// create that went ahead still answers as first, whatever version is in force now. One
    /// strongly consistent `GetItem`, on that refusal's path only.
    pub async fn earlier_create(
        &self,
        tenant: &TenantId,
        key: &IdempotencyKey,
        fingerprint: &str,
        now: EpochSeconds,
    ) -> Result<Option<CreateOutcome>, StoreError> {
        let answer = self
            .client
            .get_item()
            .table_name(&self.tables.idempotency_keys)
            .key("pk", idempotency_key(tenant, key))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| StoreError::from_sdk("GetItem", e))?;
        let Some(old) = answer.item() else {
            return Ok(None);
        };
        // An expired record no longer holds its key (as the create's condition says).
        if get_n::<EpochSeconds>(old, "expires_at").is_ok_and(|at| at <= now) {
            return Ok(None);
        }
        earlier(old, fingerprint).map(Some)
    }

    /// The item that binds a workflow's token to `approval` (see
    /// [`super::keys::resume_binding_key`]). only_if_token_unbound: no other approval of any
    /// tenant names the token — so no create can carry the token of a workflow that waits on
    /// someone else's approval and answer it by its own end. It lasts as long as the approval
    /// may still answer: its expiry plus the retention (no bound when everything is kept).
    fn resume_binding(
        &self,
        approval: &Approval,
        token: &crate::domain::resume::ResumeToken,
        now: EpochSeconds,
    ) -> Result<Put, StoreError> {
        let mut put = Put::builder()
            .table_name(&self.tables.idempotency_keys)
            .item("pk", resume_binding_key(token))
            .item("tenant", s(approval.tenant.as_str()))
            .item("approval_id", s(approval.id.as_str()))
            .item("created_at", epoch(now))
            .condition_expression(ONLY_IF_TOKEN_UNBOUND)
            .set_expression_attribute_names(Some(names(&[ONLY_IF_TOKEN_UNBOUND])))
            .expression_attribute_values(":now", epoch(now));
        if let Some(until) = self.retention.after_expiry(approval.expires_at, now) {
            put = put.item("expires_at", epoch(until));
        }
        put.build()
            .map_err(|e| StoreError::dynamo("TransactWriteItems", e))
    }

    /// The approval, if it exists for this tenant. Strongly consistent: a client reading right
    /// after a write sees it.
    pub async fn get_approval(
        &self,
        tenant: &TenantId,
        id: &ApprovalId,
    ) -> Result<Option<Approval>, StoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.tables.approvals)
            .key("pk", approval_key(tenant, id))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| StoreError::from_sdk("GetItem", e))?;
        output.item().map(approval_from_item).transpose()
    }

    /// Withdraws a pending approval: one conditional update. `by_anyone` (an operator) may
    /// cancel any; otherwise only the approval's requester. A cancelled approval is terminal:
    /// no decision's condition (`#status = :pending`) holds on it any more, and the dispatcher
    /// makes no job of the change.
    pub async fn cancel(
        &self,
        tenant: &TenantId,
        id: &ApprovalId,
        cancellation: &Cancellation,
        by_anyone: bool,
        now: EpochSeconds,
    ) -> Result<DecideOutcome, StoreError> {
        let condition = if by_anyone {
            ONLY_IF_CANCELLABLE
        } else {
            ONLY_IF_CANCELLABLE_BY_ITS_REQUESTER
        };
        let mut values = HashMap::from([
            (":pending".to_owned(), s(Status::Pending.as_str())),
            (":cancelled".to_owned(), s(Status::Cancelled.as_str())),
            (
                ":cancellation".to_owned(),
                cancellation_to_attr(cancellation),
            ),
            (":now".to_owned(), epoch(now)),
        ]);
        if !by_anyone {
            values.insert(":by".to_owned(), s(cancellation.by.as_str()));
        }
        let update = UpdateExpr::default()
            .set("#status = :cancelled")
            .set("#cancellation = :cancellation");
        let cancelled = Indexed::after(
            id,
            Status::Cancelled,
            true,
            ExecutionStatus::NotStarted,
            now,
        );
        let update = cancelled.apply(update, &mut values, self.retention).build();
        let outcome = self
            .update_approval(
                tenant,
                id,
                &update,
                condition,
                names(&[&update, condition]),
                values,
            )
            .await?;
        Ok(match outcome {
            Ok(approval) => DecideOutcome::Won(Box::new(approval)),
            Err(old) => DecideOutcome::Refused(old.map(Box::new)),
        })
    }
}

/// An earlier create's record, as this create with `fingerprint` meets it: the same body
/// replays its first answer; another is the key reused.
fn earlier(old: &super::attr::Item, fingerprint: &str) -> Result<CreateOutcome, StoreError> {
    if get_s(old, "fingerprint")? != fingerprint {
        return Ok(CreateOutcome::KeyReused);
    }
    // Deflated since v5; a record from before keeps the body as it was.
    let body = match get_b(old, "response_body_z") {
        Ok(deflated) => inflated(deflated)?,
        Err(_) => get_b(old, "response_body")?.to_vec(),
    };
    Ok(CreateOutcome::Replayed(SavedResponse {
        approval_id: get_s(old, "approval_id")?.to_owned(),
        status: get_n(old, "response_status")?,
        body,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_saved_response_is_deflated_and_inflated_back_byte_for_byte() {
        let body = serde_json::to_vec(&serde_json::json!({
            "id": "apr_01J0000000000000000000000A",
            "status": "pending",
            "approvers": ["alice@example.com", "bob@example.com", "carol@example.com"],
            "context": {"summary": "Deploy payments-api build 4312 to production"},
        }))
        .unwrap();
        let stored = deflated(&body);
        assert!(
            stored.len() < body.len(),
            "{} of {}",
            stored.len(),
            body.len()
        );
        assert_eq!(inflated(&stored).unwrap(), body);
        assert!(inflated(b"not deflate").is_err());
    }
}
