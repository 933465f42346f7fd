//! An approval's waiting workflow ⇄ its item's `resume` map: `type` and `token` (written once at
//! create; the token removed once an answer succeeded), and `status`, `attempts`, `last_error`,
//! which the resume job's ends move on in the transaction that ends each attempt
//! (`store/ledger/end.rs`), and `generation`, `retried_by`, which an operator's retry of a
//! failed answer moves (`store/operator.rs`).

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

use crate::domain::resume::{Resume, ResumeKind, ResumeStatus, ResumeToken};
use crate::store::attr::{Item, get_n, get_s, n, opt_s, s};
use crate::store::error::StoreError;

/// The map's attribute, and its members as the ledger's end names them.
pub(super) const RESUME: &str = "resume";

pub(crate) fn resume_to_attr(resume: &Resume) -> AttributeValue {
    let mut map = HashMap::from([
        ("type".to_owned(), s(resume.kind.as_str())),
        ("token".to_owned(), s(resume.token.expose())),
        ("status".to_owned(), s(resume.status.as_str())),
        ("attempts".to_owned(), n(resume.attempts)),
    ]);
    if let Some(error) = &resume.last_error {
        map.insert("last_error".to_owned(), s(error));
    }
    if resume.generation > 0 {
        map.insert("generation".to_owned(), n(resume.generation));
    }
    if let Some(by) = &resume.retried_by {
        map.insert("retried_by".to_owned(), s(by.as_str()));
    }
    if let Some(at) = resume.retried_at {
        map.insert("retried_at".to_owned(), n(at));
    }
    AttributeValue::M(map)
}

pub(crate) fn resume_from(item: &Item) -> Result<Option<Resume>, StoreError> {
    let map = match item.get(RESUME) {
        None => return Ok(None),
        Some(AttributeValue::M(map)) => map,
        Some(_) => return Err(StoreError::corrupt("resume")),
    };
    Ok(Some(Resume {
        kind: ResumeKind::parse(get_s(map, "type")?).ok_or(StoreError::corrupt("resume.type"))?,
        // Removed once the answer ended (see `store/ledger/end.rs`).
        token: ResumeToken::new(opt_s(map, "token").unwrap_or_default()),
        status: ResumeStatus::parse(get_s(map, "status")?)
            .ok_or(StoreError::corrupt("resume.status"))?,
        attempts: get_n(map, "attempts").unwrap_or(0),
        last_error: opt_s(map, "last_error"),
        // An operator's retries (absent until the first).
        generation: get_n(map, "generation").unwrap_or(0),
        retried_by: opt_s(map, "retried_by")
            .map(|by| crate::domain::Approver::from_stored(&by))
            .transpose()
            .map_err(|_| StoreError::corrupt("resume.retried_by"))?,
        retried_at: get_n(map, "retried_at").ok(),
    }))
}
