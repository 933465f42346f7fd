//! Request parsing at the edge: the API key, the content type, the body (size-checked before it
//! is read), JSON, the Idempotency-Key header.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, header};
use serde_json::Value;

use super::ApiError;
use crate::App;
use crate::auth::{self, Role};
use crate::domain::{FieldError, IdempotencyKey, TableKey, TenantId};

/// Who the request's API key belongs to: its tenant, principal and roles.
#[derive(Debug, Clone)]
pub struct Caller(pub crate::auth::Caller);

impl FromRequestParts<Arc<App>> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        app: &Arc<App>,
    ) -> Result<Self, Self::Rejection> {
        Self::from_headers(app, &parts.headers).await
    }
}

impl Caller {
    /// The holder of the request's `Authorization: Bearer` key.
    pub async fn from_headers(app: &App, headers: &HeaderMap) -> Result<Self, ApiError> {
        let header = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .ok_or(ApiError::Unauthorized)?;
        let (scheme, key) = header.split_once(' ').ok_or(ApiError::Unauthorized)?;
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(ApiError::Unauthorized);
        }
        let key = key.trim();
        // The `API_KEYS` forms first (development, tests, break-glass), then the keys table.
        let secrets = app.secrets();
        let configured = secrets
            .api_keys
            .as_ref()
            .and_then(|keys| keys.caller_for(key));
        let caller = match configured {
            Some(caller) => caller,
            None => match table_key_caller(app, key).await? {
                Some(caller) => caller,
                None => {
                    if secrets.api_keys.is_some() && TableKey::parse(key).is_none() {
                        // Perhaps a key added to API_KEYS' secret this function has not read yet.
                        app.secret_failed();
                    }
                    return Err(ApiError::Unauthorized);
                }
            },
        };
        // The request's log lines and metrics are the tenant's from here on.
        tracing::Span::current().record("tenant", caller.tenant.as_str());
        crate::observe::set_tenant(caller.tenant.as_str());
        Ok(Caller(caller))
    }

    pub fn tenant(&self) -> &TenantId {
        &self.0.tenant
    }
}

/// The holder of a table key: refused without any I/O unless it has the table keys' shape and
/// check; then its item from the cache or one `GetItem`, compared in constant time, with
/// revocation and expiry checked on every request. A use an hour after the last one is written
/// as `last_used_at` after the answer, never in the request's path.
async fn table_key_caller(app: &App, presented: &str) -> Result<Option<auth::Caller>, ApiError> {
    let Some(key) = TableKey::parse(presented) else {
        return Ok(None);
    };
    let now = app.clock.now();
    let record = match app.key_cache.get(key.id(), now) {
        Some(record) => record,
        None => match app.store.key(key.id()).await? {
            Some(record) => {
                app.key_cache.put(record.clone(), now);
                record
            }
            None => return Ok(None),
        },
    };
    let caller = auth::caller_for_record(&key, &record, now);
    if caller.is_some() && app.key_cache.take_use(&record, now) {
        let store = app.store.clone();
        let id = record.id.clone();
        tokio::spawn(async move {
            if let Err(error) = store.touch_key(&id, now).await {
                tracing::warn!(key_id = %id, %error, "last_used_at not written");
            }
        });
    }
    Ok(caller)
}

impl Caller {
    /// 403 `forbidden` unless the key has one of `roles`.
    pub fn require(&self, roles: &[Role]) -> Result<(), ApiError> {
        if roles.iter().any(|r| self.0.has(*r)) {
            Ok(())
        } else {
            Err(ApiError::Forbidden)
        }
    }
}

/// The media type, without parameters, lower-cased.
pub fn media_type(headers: &HeaderMap) -> Option<String> {
    let raw = headers.get(header::CONTENT_TYPE)?.to_str().ok()?;
    Some(
        raw.split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase(),
    )
}

pub fn is_json(headers: &HeaderMap) -> bool {
    media_type(headers).is_some_and(|m| {
        m == "application/json" || (m.starts_with("application/") && m.ends_with("+json"))
    })
}

/// Reads at most `limit` bytes: a declared length over the limit is refused before anything is
/// read, and an undeclared one stops being read at the limit.
pub async fn read_body(body: Body, headers: &HeaderMap, limit: usize) -> Result<Bytes, ApiError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > limit as u64) {
        return Err(ApiError::PayloadTooLarge { limit });
    }
    axum::body::to_bytes(body, limit).await.map_err(|err| {
        let too_large = std::error::Error::source(&err)
            .is_some_and(|source| source.is::<http_body_util::LengthLimitError>());
        if too_large {
            ApiError::PayloadTooLarge { limit }
        } else {
            ApiError::InvalidRequest {
                detail: "the request body could not be read".to_owned(),
                errors: Vec::new(),
            }
        }
    })
}

pub fn parse_json(bytes: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(bytes).map_err(|e| ApiError::InvalidRequest {
        detail: format!("the body is not valid JSON: {e}"),
        errors: vec![FieldError::new("", "not valid JSON")],
    })
}

pub fn idempotency_key(headers: &HeaderMap) -> Result<IdempotencyKey, ApiError> {
    let raw = headers
        .get("idempotency-key")
        .ok_or(ApiError::IdempotencyKeyMissing)?;
    let raw = raw
        .to_str()
        .map_err(|_| ApiError::IdempotencyKeyInvalid("Idempotency-Key must be printable ASCII"))?;
    IdempotencyKey::parse(raw).map_err(|e| ApiError::IdempotencyKeyInvalid(e.0))
}
