//! The table names (`APPROVALS_TABLE`, `IDEMPOTENCY_TABLE`, `INBOX_TABLE`, `LEDGER_TABLE`,
//! `EVENTS_TABLE`, `APPROVAL_INDEX_TABLE`, `KEYS_TABLE`): each defaults to the `countersign`
//! prefix's, so a local run needs none of them.

use crate::store::Tables;

/// Each table's name: the variable's, or the default prefix's.
pub(super) fn tables(get: &impl Fn(&str) -> Option<String>) -> Tables {
    let defaults = Tables::with_prefix("countersign");
    Tables {
        approvals: get("APPROVALS_TABLE").unwrap_or(defaults.approvals),
        idempotency_keys: get("IDEMPOTENCY_TABLE").unwrap_or(defaults.idempotency_keys),
        webhook_inbox: get("INBOX_TABLE").unwrap_or(defaults.webhook_inbox),
        execution_ledger: get("LEDGER_TABLE").unwrap_or(defaults.execution_ledger),
        events: get("EVENTS_TABLE").unwrap_or(defaults.events),
        approval_index: get("APPROVAL_INDEX_TABLE").unwrap_or(defaults.approval_index),
        api_keys: get("KEYS_TABLE").unwrap_or(defaults.api_keys),
    }
}
