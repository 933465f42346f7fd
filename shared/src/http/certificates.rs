//! A passkey-only approval's certificate (`GET /approvals/{id}/certificate`, any key of its
//! tenant) and the public key that verifies Countersign's signature of it (`GET
//! /.well-known/countersign/jwks.json`, public). See docs/VERIFY.md.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::ApiError;
use super::approvals::approval_id;
use super::extract::Caller;
use crate::App;
use crate::domain::passkey::sealed_certificate;

/// 404 `no_certificate` unless the approval is passkey-only, approved, and certified.
pub async fn certificate(
    State(app): State<Arc<App>>,
    caller: Caller,
    id: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let id = approval_id(id)?;
    let approval = app
        .store
        .get_approval(caller.tenant(), &id)
        .await?
        .ok_or(ApiError::NotFound)?;
    let certificate = sealed_certificate(&approval).ok_or(ApiError::NoCertificate)?;
    Ok(Json(certificate).into_response())
}

/// `{"keys": [the certificate key as a JWK]}`; cached by clients for 5 minutes.
pub async fn jwks(State(app): State<Arc<App>>) -> Result<Response, ApiError> {
    let keys = match app.certificate_key() {
        Some(key) => vec![key.jwk().await.map_err(|e| {
            tracing::error!(error = %e, "jwks: the certificate key");
            ApiError::Unavailable
        })?],
        None => Vec::new(),
    };
    let mut response = Json(json!({"keys": keys})).into_response();
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=300"),
    );
    Ok(response)
}
