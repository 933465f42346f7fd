//! The sweeper's part in approvals that don't stall: each pending approval with a reminder or an
//! escalation step due is moved on by the store's conditional writes (see `store::stall`); the
//! dispatcher makes the notifications from the change, so a write that is not applied sends
//! nothing and one that is sends once, however many sweeps run at once.

use super::report::SweepReport;
use crate::App;
use crate::domain::stall::Next;
use crate::store::StoreError;

/// How many writes one approval may take in one run: a step, then the reminder that falls due
/// after it (a sweep that ran late), and so on. Bounded: the rest waits for the next run.
const MOST_WRITES_PER_APPROVAL: usize = 4;

/// Sends the reminders and applies the steps due now; counted into `report`. Only finding the
/// candidates fails the run; one that fails is logged and counted, the others go on.
pub(super) async fn sweep(app: &App, report: &mut SweepReport) -> Result<(), StoreError> {
    let now = app.clock.now();
    let stalled = app.store.stalled(now).await?;
    report.failures += stalled.unreadable as usize;
    for approval in stalled.approvals {
        // Past its expiry (the sweep ran late): the expirer's, whose partition it is not in.
        if approval.status == crate::domain::Status::Pending && approval.is_past_expiry(now) {
            match app.store.expire(&approval.tenant, &approval.id, now).await {
                Ok(Some(_)) => report.expired += 1,
                Ok(None) => {}
                Err(e) => {
                    tracing::error!(tenant = %approval.tenant, approval_id = %approval.id, error = %e, "approval not expired; the others go on");
                    report.failures += 1;
                }
            }
            continue;
        }
        let mut current = approval;
        for _ in 0..MOST_WRITES_PER_APPROVAL {
            let due = current
                .stall
                .due_at(current.created_at, current.expires_at, now);
            let written = match due {
                Some(Next::Reminder(number)) => app.store.remind(&current, number, now).await,
                Some(Next::Escalation(_)) => app.store.escalate(&current, now).await,
                Some(Next::Expiry) | None => break,
            };
            match (written, due) {
                (Ok(Some(new)), Some(next)) => {
                    // A crash here loses nothing: the write is the record, its change on the
                    // stream makes the notifications.
                    fail::fail_point!("stall::after_write");
                    match next {
                        Next::Reminder(_) => report.reminded += 1,
                        _ => report.escalated += 1,
                    }
                    tracing::debug!(tenant = %new.tenant, approval_id = %new.id, due = ?next, "moved on");
                    current = new;
                }
                // Decided, cancelled or moved on by another sweep meanwhile.
                (Ok(_), _) => break,
                (Err(e), _) => {
                    tracing::error!(tenant = %current.tenant, approval_id = %current.id, error = %e, "reminder or step not written; again next run");
                    report.failures += 1;
                    break;
                }
            }
        }
    }
    Ok(())
}
