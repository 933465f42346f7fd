//! `GET /approvals/{id}?wait=N[&until=executed]`: a read that holds while nothing the caller
//! waits for has happened, so an agent or a pipeline gate waits without a busy loop. It reads
//! the approval (one consistent `GetItem`) at 0, 0.2, 0.6 and 1.4 s, then once a second, and
//! answers as soon as what it waits for holds, or when N seconds have passed: at most N + 4
//! reads per held request, and never longer than API Gateway's 30 s (N ≤ 20).
//!
//! A read that holds takes one of `HELD_READ_CONCURRENCY − HELD_READ_HEADROOM` seats first
//! (two writes: take and give back; a read that answers at once takes none), at most
//! `HELD_READS_PER_TENANT` of them its tenant's, so however many ask, only so many hold, no
//! tenant holds them all, and the rest are answered 429 `too_many_waits` with `Retry-After`
//! at once — on AWS inside the read function's reserved concurrency, which the other routes
//! and the jobs never share.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::ApiError;
use crate::App;
use crate::domain::{Approval, ApprovalId, ExecutionStatus, Status, TenantId};
use crate::store::{HeldReadLease, Seat, Store};

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

/// How long after its end a held read's lease is surely dead: longer than the read function's
/// whole timeout (28 s), so a lease is never taken from a read still holding.
const LEASE_GRACE_SECONDS: i64 = 30;

/// Reads the approval; with `hold`, and unless what it waits for holds already, takes one of
/// the held reads' seats (429 `too_many_waits` when none is free: never queued) and reads again
/// until `until` holds or `wait` has passed; the approval as last read.
pub async fn read(
    app: &App,
    tenant: &TenantId,
    id: &ApprovalId,
    hold: Option<(Duration, Until)>,
) -> Result<Approval, ApiError> {
    let approval = get(app, tenant, id).await?;
    let Some((wait, until)) = hold else {
        return Ok(approval);
    };
    if until.holds(&approval, app.clock.now()) {
        return Ok(approval);
    }
    let deadline = Instant::now() + wait;
    let seat = HeldSeat::take(app, tenant, wait).await?;
    let held = hold_until(app, tenant, id, until, deadline).await;
    seat.leave().await;
    held
}

async fn get(app: &App, tenant: &TenantId, id: &ApprovalId) -> Result<Approval, ApiError> {
    app.store
        .get_approval(tenant, id)
        .await?
        .ok_or(ApiError::NotFound)
}

/// Reads at 0.2, 0.6 and 1.4 s, then once a second, until `until` holds or `deadline` passes.
async fn hold_until(
    app: &App,
    tenant: &TenantId,
    id: &ApprovalId,
    until: Until,
    deadline: Instant,
) -> Result<Approval, ApiError> {
    let mut pause = FIRST_PAUSE;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        tokio::time::sleep(pause.min(left)).await;
        pause = (pause * 2).min(LONGEST_PAUSE);
        let approval = get(app, tenant, id).await?;
        if until.holds(&approval, app.clock.now()) || Instant::now() >= deadline {
            return Ok(approval);
        }
    }
}

/// A seat among the held reads, given back when the read ends — or, if the request is dropped
/// before (its client went away), by a task of its own; a process that dies leaves its lease to
/// end ([`LEASE_GRACE_SECONDS`]).
struct HeldSeat {
    store: Store,
    lease: Option<HeldReadLease>,
}

impl HeldSeat {
    async fn take(app: &App, tenant: &TenantId, wait: Duration) -> Result<Self, ApiError> {
        let now = app.clock.now();
        let wait_seconds = i64::try_from(wait.as_secs()).unwrap_or(MAX_WAIT_SECONDS as i64);
        let lease = HeldReadLease::new(tenant, now + wait_seconds);
        let seat = app
            .store
            .take_held_read_seat(
                tenant,
                &lease,
                app.config.held_read_seats,
                (now, LEASE_GRACE_SECONDS),
            )
            .await?;
        match seat {
            Seat::Taken => Ok(Self {
                store: app.store.clone(),
                lease: Some(lease),
            }),
            Seat::Full { next_free } => Err(ApiError::TooManyWaits {
                retry_after: retry_after(next_free, now),
            }),
        }
    }

    /// Gives the seat back; if this is cut off (the request dropped mid-write), the guard still
    /// holds the lease and gives it back on drop.
    async fn leave(mut self) {
        if let Some(lease) = &self.lease
            && leave(&self.store, lease).await
        {
            self.lease = None;
        }
    }
}

impl Drop for HeldSeat {
    fn drop(&mut self) {
        if let Some(lease) = self.lease.take() {
            let store = self.store.clone();
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move { leave(&store, &lease).await });
            }
        }
    }
}

/// Whether the seat was given back (if not, it comes back when its lease is found dead).
async fn leave(store: &Store, lease: &HeldReadLease) -> bool {
    match store.leave_held_read(lease).await {
        Ok(()) => true,
        Err(err) => {
            tracing::warn!(error = %err, "a held read's seat was not given back");
            false
        }
    }
}

/// Seconds until a seat is likely free, 1 to 20.
fn retry_after(next_free: i64, now: i64) -> u64 {
    u64::try_from(next_free - now)
        .unwrap_or(1)
        .clamp(1, MAX_WAIT_SECONDS)
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
    fn retry_after_is_when_the_soonest_held_read_ends_within_one_to_twenty_seconds() {
        assert_eq!(retry_after(107, 100), 7);
        assert_eq!(retry_after(100, 100), 1, "ending now: ask in a second");
        assert_eq!(retry_after(90, 100), 1, "a lease past its end");
        assert_eq!(retry_after(1_000, 100), 20);
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
