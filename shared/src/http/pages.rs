//! What the paged reads share: their query string, page size and signed cursors.

use std::collections::HashMap;

use super::ApiError;
use crate::App;
use crate::cursor::CursorKey;

/// Pages hold 1–100 items, 50 unless asked.
pub(super) const DEFAULT_LIMIT: i32 = 50;
pub(super) const MAX_LIMIT: i32 = 100;

/// The query string's parameters; a parameter named twice, or one not in `allowed`, is refused.
pub(super) fn query_params(
    raw: Option<&str>,
    allowed: &[&str],
) -> Result<HashMap<String, String>, ApiError> {
    let mut params = HashMap::new();
    for (name, value) in url::form_urlencoded::parse(raw.unwrap_or_default().as_bytes()) {
        if !allowed.contains(&name.as_ref()) {
            return Err(ApiError::invalid_query(
                &name,
                "is not a parameter of this route",
            ));
        }
        if params.insert(name.to_string(), value.to_string()).is_some() {
            return Err(ApiError::invalid_query(&name, "is given more than once"));
        }
    }
    Ok(params)
}

pub(super) fn page_limit(params: &HashMap<String, String>) -> Result<i32, ApiError> {
    match params.get("limit") {
        None => Ok(DEFAULT_LIMIT),
        Some(raw) => match raw.parse::<i32>() {
            Ok(n) if (1..=MAX_LIMIT).contains(&n) => Ok(n),
            _ => Err(ApiError::invalid_query(
                "limit",
                "must be an integer from 1 to 100",
            )),
        },
    }
}

pub(super) fn cursor_key(app: &App) -> Result<CursorKey, ApiError> {
    // Required at start by every function that serves a list (`Config::check_for`).
    app.secrets()
        .decision_token_secret
        .as_ref()
        .map(CursorKey::new)
        .ok_or(ApiError::Unavailable)
}
