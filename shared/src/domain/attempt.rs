//! An execution attempt's states, as the execution ledger records them (pure): what the ledger
//! item says of the attempt, and how an attempt ends.

use super::ExecutionStatus;

/// A ledger item's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LedgerStatus {
    /// A worker holds the attempt until its lease ends (and may have called downstream).
    InProgress,
    /// The last attempt failed in a way worth retrying; the message comes back after a backoff.
    RetryWait,
    /// Whether the last attempt acted is not known yet, and the target has a status URL: the
    /// next receive asks it before anything else (never calls again blindly).
    Unknown,
    Succeeded,
    Failed,
    NeedsReconciliation,
}

impl LedgerStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InProgress => "in_progress",
            Self::RetryWait => "retry_wait",
            Self::Unknown => "unknown",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::NeedsReconciliation => "needs_reconciliation",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        [
            Self::InProgress,
            Self::RetryWait,
            Self::Unknown,
            Self::Succeeded,
            Self::Failed,
            Self::NeedsReconciliation,
        ]
        .into_iter()
        .find(|s| s.as_str() == raw)
    }

    /// What the approval's `execution.status` reads while the ledger is in this status.
    pub fn execution_status(self) -> ExecutionStatus {
        match self {
            Self::InProgress => ExecutionStatus::Running,
            Self::RetryWait => ExecutionStatus::Queued,
            // The attempt is not over until the target says what became of it.
            Self::Unknown => ExecutionStatus::Running,
            Self::Succeeded => ExecutionStatus::Succeeded,
            Self::Failed => ExecutionStatus::Failed,
            Self::NeedsReconciliation => ExecutionStatus::NeedsReconciliation,
        }
    }
}

/// The end of an attempt, as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Completion {
    Succeeded,
    Failed(String),
    RetryWait(String),
    /// The outcome is unknown for now; the target's status URL is asked again later.
    Unknown(String),
    NeedsReconciliation(String),
}

impl Completion {
    /// Whether the attempt ended before its request could reach the target: a wait for a
    /// retry whose reason says `not sent` (no token, no connection).
    pub fn never_sent(&self) -> bool {
        matches!(self, Self::RetryWait(why) if why.starts_with("not sent"))
    }

    /// In words, for a report: the status and the error, if any.
    pub fn describe(&self) -> String {
        match self.error() {
            Some(error) => format!("{} ({error})", self.status().as_str()),
            None => self.status().as_str().to_owned(),
        }
    }

    pub fn status(&self) -> LedgerStatus {
        match self {
            Self::Succeeded => LedgerStatus::Succeeded,
            Self::Failed(_) => LedgerStatus::Failed,
            Self::RetryWait(_) => LedgerStatus::RetryWait,
            Self::Unknown(_) => LedgerStatus::Unknown,
            Self::NeedsReconciliation(_) => LedgerStatus::NeedsReconciliation,
        }
    }

    /// The same completion with its error replaced by `error` (where it has one).
    pub fn with_error(&self, error: Option<String>) -> Self {
        let error = error.unwrap_or_default();
        match self {
            Self::Succeeded => Self::Succeeded,
            Self::Failed(_) => Self::Failed(error),
            Self::RetryWait(_) => Self::RetryWait(error),
            Self::Unknown(_) => Self::Unknown(error),
            Self::NeedsReconciliation(_) => Self::NeedsReconciliation(error),
        }
    }

    pub fn error(&self) -> Option<&str> {
        match self {
            Self::Succeeded => None,
            Self::Failed(e)
            | Self::RetryWait(e)
            | Self::Unknown(e)
            | Self::NeedsReconciliation(e) => Some(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ledger_status_reads_back_as_written() {
        for status in [
            LedgerStatus::InProgress,
            LedgerStatus::RetryWait,
            LedgerStatus::Unknown,
            LedgerStatus::Succeeded,
            LedgerStatus::Failed,
            LedgerStatus::NeedsReconciliation,
        ] {
            assert_eq!(LedgerStatus::parse(status.as_str()), Some(status));
        }
        assert_eq!(LedgerStatus::parse("done"), None);
    }
}
