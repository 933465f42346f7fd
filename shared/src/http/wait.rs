//! `GET /approvals/{id}?wait=N[&until=executed]`: a read that holds while nothing the caller
//! waits for has happened, so an agent or a pipeline gate waits without a busy loop. It reads
//! the approval (one consistent `GetItem`) at 0, 0.2, 0.6 and 1.4 s, then once a second, and
//! answers as soon as what it waits for holds, or when N seconds have passed: at most N + 4
//! reads per held request, and never longer than API Gateway's 30 s (N ≤ 20).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::ApiError;
use crate::App;
use crate::domain::{Approval, ApprovalId, ExecutionStatus, Status, TenantId};

/// The longest hold: well inside API Gateway's 30 s and the API function's timeout.
pub const MAX_WAIT_SECONDS: u64 = 20;
const FIRST_PAUSE: Duration = Duration::from_millis(200);
const LONGEST_PAUSE: Duration = Duration::from_secs(1);

/// What a held read waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Until {
    /// The approval is no longer pending (decided, cancelled or expired).
    Decided,
    /// ... and, if approved, its execution has ended.
    Executed,
}

impl Until {
    fn holds(self, approval: &Approval, now: i64) -> bool {
        let status = approval.status_at(now);
        match self {
            Self::Decided => status != Status::Pending,
            Self::Executed => match status {
                Status::Pending => false,
                Status::Approved => !matches!(
                    approval.execution.status,
                    ExecutionStatus::NotStarted
                        | ExecutionStatus::Queued
                        | ExecutionStatus::Running
                ),
                Status::Rejected | Status::Expired | Status::Cancelled => true,
            },
        }
    }
}

/// How long to hold, and for what: from `wait` (1–20) and `until` (`decided`, the default, or
/// `executed`). `None`: answer at once.
pub fn parse(params: &HashMap<String, String>) -> Result<Option<(Duration, Until)>, ApiError> {
    let until = match params.get("until").map(String::as_str) {
        None | Some("decided") => Until::Decided,
        Some("executed") => Until::Executed,
        Some(_) => {
            return Err(ApiError::invalid_query(
                "until",
                "must be \"decided\" or \"executed\"",
            ));
        }
    };
    let Some(raw) = params.get("wait") else {
        if params.contains_key("until") {
            return Err(ApiError::invalid_query("until", "is given only with wait"));
        }
        return Ok(None);
    };
    match raw.parse::<u64>() {
        Ok(seconds) if (1..=MAX_WAIT_SECONDS).contains(&seconds) => {
            Ok(Some((Duration::from_secs(seconds), until)))
        }
        _ => Err(ApiError::invalid_query(
            "wait",
            "must be an integer number of seconds from 1 to 20",
        )),
    }
}

/// Reads the approval until `until` holds or `wait` has passed; the approval as last read.
pub async fn read(
    app: &App,
    tenant: &TenantId,
    id: &ApprovalId,
    hold: Option<(Duration, Until)>,
) -> Result<Approval, ApiError> {
    let deadline = hold.map(|(wait, _)| Instant::now() + wait);
    let mut pause = FIRST_PAUSE;
    loop {
        let approval = app
            .store
            .get_approval(tenant, id)
            .await?
            .ok_or(ApiError::NotFound)?;
        let (Some((_, until)), Some(deadline)) = (hold, deadline) else {
            return Ok(approval);
        };
        let left = deadline.saturating_duration_since(Instant::now());
        if until.holds(&approval, app.clock.now()) || left.is_zero() {
            return Ok(approval);
        }
        tokio::time::sleep(pause.min(left)).await;
        pause = (pause * 2).min(LONGEST_PAUSE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::approval::tests::pending;

    fn params(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn wait_is_one_to_twenty_seconds_and_until_needs_it() {
        assert_eq!(parse(&params(&[])).unwrap(), None);
        assert_eq!(
            parse(&params(&[("wait", "20"), ("until", "executed")])).unwrap(),
            Some((Duration::from_secs(20), Until::Executed))
        );
        assert_eq!(
            parse(&params(&[("wait", "1")])).unwrap(),
            Some((Duration::from_secs(1), Until::Decided))
        );
        for bad in [
            params(&[("wait", "0")]),
            params(&[("wait", "21")]),
            params(&[("wait", "1.5")]),
            params(&[("wait", "5"), ("until", "done")]),
            params(&[("until", "executed")]),
        ] {
            assert!(parse(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn executed_waits_for_an_approved_executions_end() {
        let mut approval = pending(100);
        assert!(!Until::Decided.holds(&approval, 0));
        assert!(Until::Decided.holds(&approval, 100), "expired");
        approval.status = Status::Approved;
        approval.execution.status = ExecutionStatus::Queued;
        assert!(Until::Decided.holds(&approval, 0));
        assert!(!Until::Executed.holds(&approval, 0));
        approval.execution.status = ExecutionStatus::NeedsReconciliation;
        assert!(Until::Executed.holds(&approval, 0));
        approval.status = Status::Rejected;
        approval.execution.status = ExecutionStatus::NotStarted;
        assert!(Until::Executed.holds(&approval, 0));
    }
}
