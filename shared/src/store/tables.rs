//! The table names: one process's tables (each Lambda's from its variables, the tests' under a
//! prefix of their own).

/// The DynamoDB table names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tables {
    pub approvals: String,
    pub idempotency_keys: String,
    pub webhook_inbox: String,
    pub execution_ledger: String,
    pub events: String,
    pub approval_index: String,
    /// Table API keys (`KEYS_TABLE`).
    pub api_keys: String,
}

impl Tables {
    /// The local defaults (`countersign-approvals` and so on), or every name under one prefix.
    pub fn with_prefix(prefix: &str) -> Self {
        Self {
            approvals: format!("{prefix}-approvals"),
            idempotency_keys: format!("{prefix}-idempotency-keys"),
            webhook_inbox: format!("{prefix}-webhook-inbox"),
            execution_ledger: format!("{prefix}-execution-ledger"),
            events: format!("{prefix}-events"),
            approval_index: format!("{prefix}-approval-index"),
            api_keys: format!("{prefix}-api-keys"),
        }
    }

    /// Each table's variable and name (`APPROVALS_TABLE` and so on), as a function's
    /// environment gives them.
    pub fn variables(&self) -> [(&'static str, &str); 7] {
        [
            ("APPROVALS_TABLE", &self.approvals),
            ("IDEMPOTENCY_TABLE", &self.idempotency_keys),
            ("INBOX_TABLE", &self.webhook_inbox),
            ("LEDGER_TABLE", &self.execution_ledger),
            ("EVENTS_TABLE", &self.events),
            ("APPROVAL_INDEX_TABLE", &self.approval_index),
            ("KEYS_TABLE", &self.api_keys),
        ]
    }
}
