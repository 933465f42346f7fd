//! People's passkeys, in the keys table: one item per person per tenant
//! (`passkey#{tenant}#{identity}`), a map of their credentials by id, and how many it holds.
//! At most [`MAX_PASSKEYS`] per person, by the write's own condition; a removed credential is
//! gone from the map, so no vote can name it after.

use std::collections::HashMap;

use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValuesOnConditionCheckFailure};

use super::attr::{Item, get_n, get_s, n, s};
use super::client::Store;
use super::error::StoreError;
use crate::domain::passkey::Jwk;
use crate::domain::{Approver, EpochSeconds, TenantId};

/// What every passkey item's key starts with (no key id holds a `#`).
pub(crate) const PASSKEY_PREFIX: &str = "passkey#";

/// The most passkeys one person may register.
pub const MAX_PASSKEYS: u32 = 10;

fn passkey_key(tenant: &TenantId, identity: &Approver) -> AttributeValue {
    s(format!("{PASSKEY_PREFIX}{tenant}#{}", identity.identity()))
}

/// One registered credential.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PasskeyRecord {
    pub tenant: TenantId,
    /// Whose it is, as they signed in when they registered it.
    pub identity: Approver,
    /// The credential id, base64url.
    pub credential_id: String,
    pub public_key: Jwk,
    pub iss: String,
    pub sub: String,
    pub registered_at: EpochSeconds,
}

/// Why a registration was not stored.
#[derive(Debug, thiserror::Error)]
pub enum PasskeyRefusal {
    #[error("at most {MAX_PASSKEYS} passkeys per person: remove one first")]
    Full,
    #[error("that passkey is registered already")]
    Exists,
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn record_attr(record: &PasskeyRecord) -> AttributeValue {
    AttributeValue::M(HashMap::from([
        ("x".to_owned(), s(&record.public_key.x)),
        ("y".to_owned(), s(&record.public_key.y)),
        ("iss".to_owned(), s(&record.iss)),
        ("sub".to_owned(), s(&record.sub)),
        ("registered_at".to_owned(), n(record.registered_at)),
    ]))
}

fn records_from(item: &Item) -> Result<Vec<PasskeyRecord>, StoreError> {
    let tenant =
        TenantId::parse(get_s(item, "tenant")?).map_err(|_| StoreError::corrupt("tenant"))?;
    let identity = Approver::from_stored(get_s(item, "identity")?)
        .map_err(|_| StoreError::corrupt("identity"))?;
    let Some(AttributeValue::M(credentials)) = item.get("credentials") else {
        return Ok(Vec::new());
    };
    let mut records = credentials
        .iter()
        .map(|(id, value)| {
            let AttributeValue::M(map) = value else {
                return Err(StoreError::corrupt("credentials"));
            };
            Ok(PasskeyRecord {
                tenant: tenant.clone(),
                identity: identity.clone(),
                credential_id: id.clone(),
                public_key: Jwk {
                    kty: "EC".to_owned(),
                    crv: "P-256".to_owned(),
                    x: get_s(map, "x")?.to_owned(),
                    y: get_s(map, "y")?.to_owned(),
                    kid: None,
                    alg: None,
                    use_: None,
                },
                iss: get_s(map, "iss")?.to_owned(),
                sub: get_s(map, "sub")?.to_owned(),
                registered_at: get_n(map, "registered_at")?,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    records.sort_by(|a, b| {
        (a.registered_at, &a.credential_id).cmp(&(b.registered_at, &b.credential_id))
    });
    Ok(records)
}

impl Store {
    /// `identity`'s passkeys in `tenant` (one strongly consistent `GetItem`: a passkey removed a
    /// moment ago signs nothing after).
    pub async fn passkeys(
        &self,
        tenant: &TenantId,
        identity: &Approver,
    ) -> Result<Vec<PasskeyRecord>, StoreError> {
        let got = self
            .client
            .get_item()
            .table_name(&self.tables.api_keys)
            .key("pk", passkey_key(tenant, identity))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| StoreError::from_sdk("GetItem", e))?;
        got.item()
            .map(records_from)
            .transpose()
            .map(Option::unwrap_or_default)
    }

    /// Stores a new passkey: one conditional `UpdateItem` (and, for a person's first, a
    /// conditional `PutItem`), refused beyond [`MAX_PASSKEYS`] or for an id registered already.
    pub async fn add_passkey(&self, record: &PasskeyRecord) -> Result<(), PasskeyRefusal> {
        for _ in 0..2 {
            let added = self
                .client
                .update_item()
                .table_name(&self.tables.api_keys)
                .key("pk", passkey_key(&record.tenant, &record.identity))
                .update_expression("SET #credentials.#id = :record ADD #count :one")
                .condition_expression(
                    "attribute_exists(#pk) AND #count < :max AND attribute_not_exists(#credentials.#id)",
                )
                .expression_attribute_names("#pk", "pk")
                .expression_attribute_names("#credentials", "credentials")
                .expression_attribute_names("#id", &record.credential_id)
                .expression_attribute_names("#count", "count")
                .expression_attribute_values(":record", record_attr(record))
                .expression_attribute_values(":one", n(1))
                .expression_attribute_values(":max", n(MAX_PASSKEYS))
                .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
                .send()
                .await;
            let old = match added {
                Ok(_) => return Ok(()),
                Err(e) => match e.into_service_error() {
                    UpdateItemError::ConditionalCheckFailedException(failed) => failed.item,
                    other => return Err(StoreError::dynamo("UpdateItem", other).into()),
                },
            };
            if let Some(old) = old {
                let held = matches!(old.get("credentials"), Some(AttributeValue::M(c)) if c.contains_key(&record.credential_id));
                return Err(match held {
                    true => PasskeyRefusal::Exists,
                    false => PasskeyRefusal::Full,
                });
            }
            // The person's first passkey: their item is made with it (unless a racing first
            // registration made it a moment ago: then the update again).
            let item = HashMap::from([
                (
                    "pk".to_owned(),
                    passkey_key(&record.tenant, &record.identity),
                ),
                ("tenant".to_owned(), s(record.tenant.as_str())),
                ("identity".to_owned(), s(record.identity.as_str())),
                ("count".to_owned(), n(1)),
                (
                    "credentials".to_owned(),
                    AttributeValue::M(HashMap::from([(
                        record.credential_id.clone(),
                        record_attr(record),
                    )])),
                ),
            ]);
            let put = self
                .client
                .put_item()
                .table_name(&self.tables.api_keys)
                .set_item(Some(item))
                .condition_expression("attribute_not_exists(#pk)")
                .expression_attribute_names("#pk", "pk")
                .send()
                .await;
            match put {
                Ok(_) => return Ok(()),
                Err(e) => match e.into_service_error() {
                    PutItemError::ConditionalCheckFailedException(_) => continue,
                    other => return Err(StoreError::dynamo("PutItem", other).into()),
                },
            }
        }
        Err(StoreError::Corrupt("a passkey item appeared and vanished while registering").into())
    }

    /// Removes one of `identity`'s passkeys (one conditional `UpdateItem`). `Ok(false)`: it
    /// had no such passkey.
    pub async fn remove_passkey(
        &self,
        tenant: &TenantId,
        identity: &Approver,
        credential_id: &str,
    ) -> Result<bool, StoreError> {
        let removed = self
            .client
            .update_item()
            .table_name(&self.tables.api_keys)
            .key("pk", passkey_key(tenant, identity))
            .update_expression("REMOVE #credentials.#id ADD #count :minus_one")
            .condition_expression("attribute_exists(#credentials.#id)")
            .expression_attribute_names("#credentials", "credentials")
            .expression_attribute_names("#id", credential_id)
            .expression_attribute_names("#count", "count")
            .expression_attribute_values(":minus_one", n(-1))
            .send()
            .await;
        match removed {
            Ok(_) => Ok(true),
            Err(e) => match e.into_service_error() {
                UpdateItemError::ConditionalCheckFailedException(_) => Ok(false),
                other => Err(StoreError::dynamo("UpdateItem", other)),
            },
        }
    }

    /// Every passkey of `tenant` (a `Scan` of the keys table: an administrator's listing and
    /// export, never in a request's path).
    pub async fn list_passkeys(&self, tenant: &TenantId) -> Result<Vec<PasskeyRecord>, StoreError> {
        let mut records = Vec::new();
        let mut start = None;
        loop {
            let page = self
                .client
                .scan()
                .table_name(&self.tables.api_keys)
                .consistent_read(true)
                .filter_expression("begins_with(#pk, :prefix)")
                .expression_attribute_names("#pk", "pk")
                .expression_attribute_values(":prefix", s(format!("{PASSKEY_PREFIX}{tenant}#")))
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|e| StoreError::from_sdk("Scan", e))?;
            for item in page.items() {
                records.extend(records_from(item)?);
            }
            start = page.last_evaluated_key().cloned();
            if start.is_none() {
                break;
            }
        }
        records.sort_by(|a, b| {
            (a.identity.as_str(), a.registered_at).cmp(&(b.identity.as_str(), b.registered_at))
        });
        Ok(records)
    }
}

impl Store {
    /// Stores the certificate's seal on its approval, once: of two issuers racing (a stream
    /// batch delivered again), the first seal stands and both get it. `None`: no such approval.
    pub async fn seal_certificate(
        &self,
        tenant: &TenantId,
        id: &crate::domain::ApprovalId,
        seal: &crate::domain::CertificateSeal,
    ) -> Result<Option<crate::domain::Approval>, StoreError> {
        let names = HashMap::from([
            ("#certificate".to_owned(), "certificate".to_owned()),
            ("#status".to_owned(), "status".to_owned()),
        ]);
        let values = HashMap::from([(
            ":seal".to_owned(),
            super::codec::passkey::seal_to_attr(seal),
        )]);
        let written = self
            .update_approval(
                tenant,
                id,
                "SET #certificate = :seal",
                "attribute_exists(#status) AND attribute_not_exists(#certificate)",
                names,
                values,
            )
            .await?;
        Ok(match written {
            Ok(approval) => Some(approval),
            Err(old) => old.filter(|a| a.certificate.is_some()),
        })
    }
}
