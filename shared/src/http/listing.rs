//! The listing (`GET /approvals`), newest first, in pages with signed cursors, each page cut to
//! what a Lambda response carries.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::{RawQuery, State};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::ApiError;
use super::extract::Caller;
use super::pages::{cursor_key, page_limit, query_params};
use crate::App;
use crate::domain::{Approval, Approver, Status};
use crate::store::{ListQuery, Listed};

/// `GET /approvals`: the caller's tenant's approvals, newest first, filtered by status,
/// approver and requester (an approver's inbox: `status=pending&approver=me`). Every role
/// lists.
pub async fn list(
    State(app): State<Arc<App>>,
    caller: Caller,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let params = query_params(
        query.as_deref(),
        &["status", "approver", "requested_by", "limit", "cursor"],
    )?;
    let limit = page_limit(&params)?;
    let status = params
        .get("status")
        .map(|raw| {
            Status::parse(raw).ok_or_else(|| {
                ApiError::invalid_query(
                    "status",
                    "must be pending, approved, rejected, expired or cancelled",
                )
            })
        })
        .transpose()?;
    // `me`: the caller's own principal (an approver's inbox without knowing its own name).
    let identity = |name: &str| {
        params
            .get(name)
            .map(|raw| match raw.as_str() {
                "me" => Ok(caller.0.principal.identity()),
                _ => Approver::parse(raw)
                    .map(|a| a.identity())
                    .map_err(|e| ApiError::invalid_query(name, &e.to_string())),
            })
            .transpose()
    };
    let list = ListQuery {
        tenant: caller.tenant().clone(),
        status,
        approver: identity("approver")?,
        requested_by: identity("requested_by")?,
    };
    let key = cursor_key(&app)?;
    // The cursor is bound to the tenant and every filter (not to the page size).
    let scope = format!(
        "list\n{}\n{}\n{}\n{}",
        list.tenant,
        list.status.map_or("", |s| s.as_str()),
        list.approver.as_deref().unwrap_or_default(),
        list.requested_by.as_deref().unwrap_or_default(),
    );
    let start = match params.get("cursor") {
        None => None,
        Some(cursor) => {
            // A cursor signed with a rotated key this function has not read yet: refresh early.
            let position = key.open(&scope, cursor).ok_or_else(|| {
                app.secret_failed();
                ApiError::InvalidCursor
            })?;
            let position: HashMap<String, String> =
                serde_json::from_value(position).map_err(|_| ApiError::InvalidCursor)?;
            Some(position)
        }
    };
    let page = app.store.list_approvals(&list, start, limit).await?;
    let now = app.clock.now();
    let (approvals, cut_after) = fill_page(&page.approvals, LIST_BODY_BUDGET, |a| {
        // A pending approval past its expiry reads as expired until the sweeper stores it so.
        let shown = list
            .status
            .is_none_or(|s| s != Status::Pending || a.status_at(now) == s);
        shown.then(|| json!(a.view(now)))
    });
    // A page cut short resumes right after its last approval; a whole one where the query stopped.
    let next = match cut_after {
        Some(resume) => Some(resume.clone()),
        None => page.next,
    };
    let next_cursor = next.map(|position| key.seal(&scope, &json!(position)));
    Ok(Json(json!({ "approvals": approvals, "next_cursor": next_cursor })).into_response())
}

/// The most bytes a list page's approvals take in the response as the API's Lambda returns it.
/// A synchronous Lambda returns at most 6 MB (beyond it API Gateway answers 500), and the body
/// travels inside that JSON response as a string (lambda_http's API Gateway response), where
/// every `"` and `\` takes a byte more: pages are measured as carried, and 4 MiB leaves room for
/// the rest of the page (its cursor), the headers and the response's envelope. One approval,
/// always shown however large, fits on its own: an item is at most 400 KB stored (DynamoDB's
/// limit), some 2.8 MB carried (7 times: a control character stored in 1 byte is carried as
/// `\\u0001`).
pub(super) const LIST_BODY_BUDGET: usize = 4 * 1024 * 1024;

/// The views of the listed approvals `view` shows (`None`: filtered out), newest first, as
/// many as fit `budget` carried bytes, and at least one. When it stops before the end, also the
/// key that resumes right after the last approval it went past (shown or filtered out), so the
/// next page neither skips nor repeats one.
fn fill_page(
    listed: &[Listed],
    budget: usize,
    view: impl Fn(&Approval) -> Option<Value>,
) -> (Vec<Value>, Option<&HashMap<String, String>>) {
    let mut views = Vec::new();
    let mut taken = 0;
    let mut passed: Option<&HashMap<String, String>> = None;
    for entry in listed {
        if let Some(view) = view(&entry.approval) {
            // With the comma that separates it from the previous one.
            let size = carried_len(&view) + 1;
            if !views.is_empty() && taken + size > budget {
                return (views, passed);
            }
            taken += size;
            views.push(view);
        }
        passed = Some(&entry.resume);
    }
    (views, None)
}

/// Counts a JSON text's bytes as API Gateway's Lambda integration carries it: inside a JSON
/// string, where each `"` and `\` is escaped. (A rendered JSON text holds no raw control
/// character, the only other bytes a JSON string escapes.)
#[derive(Default)]
struct CarriedBytes(usize);

impl std::io::Write for CarriedBytes {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let escaped = buf.iter().filter(|b| matches!(b, b'"' | b'\\')).count();
        self.0 += buf.len() + escaped;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The bytes `value` takes rendered (as `Json` renders it, compact) and carried.
fn carried_len(value: &Value) -> usize {
    let mut count = CarriedBytes::default();
    // Rendering a `Value` into a counter cannot fail.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::approval::tests::pending;

    #[test]
    fn carried_bytes_count_a_rendered_text_escaped_once_more() {
        assert_eq!(carried_len(&json!({"a": 1})), 7 + 2);
        // U+0001 renders as `\u0001` (6 bytes) and is carried as `\\u0001` (7).
        assert_eq!(carried_len(&json!("\u{1}")), 2 + 6 + 2 + 1);
        assert_eq!(carried_len(&json!("a\"b\\c")), 9 + 6);
        let value = json!({"text": "quote \" backslash \\ control \u{1f} é"});
        let rendered = serde_json::to_string(&value).unwrap();
        let carried = serde_json::to_string(&rendered).unwrap();
        // What the counter counts, but the carried string's own quotes.
        assert_eq!(carried_len(&value), carried.len() - 2);
    }

    /// Listed approvals 0, 1, … (newest first), each resuming at its own number.
    fn listed(n: usize) -> Vec<Listed> {
        (0..n)
            .map(|i| Listed {
                approval: pending(1_000 + i as i64),
                resume: HashMap::from([("at".to_owned(), i.to_string())]),
            })
            .collect()
    }

    /// Views of `size` carried bytes (a string of `size - 4` letters: its quotes count twice), and
    /// the number of the first approval of the next page (`None`: the page is not cut).
    fn fill(
        listed: &[Listed],
        budget: usize,
        size: impl Fn(usize) -> Option<usize>,
    ) -> (usize, Option<String>) {
        let number = |a: &Approval| (a.expires_at - 1_000) as usize;
        let (views, cut) = fill_page(listed, budget, |a| {
            size(number(a)).map(|s| json!("x".repeat(s - 4)))
        });
        (views.len(), cut.map(|r| r["at"].clone()))
    }

    #[test]
    fn a_page_stops_before_the_approval_that_would_pass_the_budget() {
        let listed = listed(5);
        // 100 bytes and a comma each: three fit in 303 bytes, not in 302.
        assert_eq!(fill(&listed, 303, |_| Some(100)), (3, Some("2".to_owned())));
        assert_eq!(fill(&listed, 302, |_| Some(100)), (2, Some("1".to_owned())));
        assert_eq!(fill(&listed, 505, |_| Some(100)), (5, None));
    }

    #[test]
    fn a_page_shows_one_approval_larger_than_the_budget() {
        let listed = listed(3);
        assert_eq!(fill(&listed, 10, |_| Some(100)), (1, Some("0".to_owned())));
        assert_eq!(fill(&listed[2..], 10, |_| Some(100)), (1, None));
    }

    #[test]
    fn a_cut_page_resumes_after_the_approvals_it_filtered_out() {
        let listed = listed(5);
        // 1 and 2 are filtered out (expired): the next page starts at 3, which did not fit.
        let size = |i: usize| (i != 1 && i != 2).then_some(100);
        assert_eq!(fill(&listed, 150, size), (1, Some("2".to_owned())));
        // Everything left filtered out: the page is not cut, whatever the budget.
        assert_eq!(fill(&listed, 150, |i| (i == 0).then_some(100)), (1, None));
    }
}
