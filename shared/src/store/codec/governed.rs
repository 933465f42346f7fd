//! What an approval keeps of the deployment's policy that governed it: `ps` (the source: the
//! version, the set's SHA-256 and the policies that decided), `pe` (under `log_only`, what
//! enforcement would have done, as JSON text), `assurance`, and `comment_cap`.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

use crate::domain::Approval;
use crate::domain::approval_policy::{Assurance, PolicySource};
use crate::store::attr::{Item, get_n, get_s, n, opt_s, s};
use crate::store::error::StoreError;

const SOURCE: &str = "ps";
const EVALUATED: &str = "pe";
const ASSURANCE: &str = "assurance";
/// Also read by the votes' condition (`store/votes.rs`).
pub(crate) const COMMENT_CAP: &str = "comment_cap";

pub(super) fn governed_attributes(approval: &Approval) -> Vec<(String, AttributeValue)> {
    let mut attributes = Vec::new();
    if let Some(source) = &approval.policy_source {
        attributes.push((
            SOURCE.to_owned(),
            AttributeValue::M(HashMap::from([
                ("v".to_owned(), n(source.version)),
                ("sha".to_owned(), s(&source.sha256)),
                (
                    "ids".to_owned(),
                    AttributeValue::L(source.policies.iter().map(s).collect()),
                ),
            ])),
        ));
    }
    if let Some(evaluated) = &approval.policy_evaluated {
        attributes.push((EVALUATED.to_owned(), s(evaluated.to_string())));
    }
    if let Some(assurance) = approval.assurance {
        attributes.push((ASSURANCE.to_owned(), s(assurance.as_str())));
    }
    if let Some(cap) = approval.comment_cap {
        attributes.push((COMMENT_CAP.to_owned(), n(cap)));
    }
    attributes
}

pub(super) fn source_from(item: &Item) -> Result<Option<PolicySource>, StoreError> {
    let Some(value) = item.get(SOURCE) else {
        return Ok(None);
    };
    let map = value.as_m().map_err(|_| StoreError::corrupt(SOURCE))?;
    let policies = match map.get("ids") {
        Some(AttributeValue::L(ids)) => ids
            .iter()
            .map(|id| id.as_s().cloned().map_err(|_| StoreError::corrupt(SOURCE)))
            .collect::<Result<_, _>>()?,
        _ => Vec::new(),
    };
    Ok(Some(PolicySource {
        version: get_n(map, "v")?,
        sha256: get_s(map, "sha")?.to_owned(),
        policies,
    }))
}

pub(super) fn evaluated_from(item: &Item) -> Result<Option<serde_json::Value>, StoreError> {
    opt_s(item, EVALUATED)
        .map(|text| serde_json::from_str(&text).map_err(|_| StoreError::corrupt(EVALUATED)))
        .transpose()
}

pub(super) fn assurance_from(item: &Item) -> Result<Option<Assurance>, StoreError> {
    opt_s(item, ASSURANCE)
        .map(|raw| Assurance::parse(&raw).map_err(|_| StoreError::corrupt(ASSURANCE)))
        .transpose()
}

pub(super) fn comment_cap_from(item: &Item) -> Option<u32> {
    get_n(item, COMMENT_CAP).ok()
}
