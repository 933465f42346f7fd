//! The run ends the clocks could not place (see `store/run_ends.rs`), settled by the scheduled
//! sweep: for each, GitHub is asked for the run (as for an unknown outcome: query the status before
//! acting on it) — still completed at the attempt that ended closes the round and
//! cancels its pending approval; a newer attempt keeps the round for the re-run. An entry
//! GitHub cannot be asked about now is asked again next period, for a day at most.

use crate::App;
use crate::github::api::GithubApi;
use crate::store::StoreError;

/// What one sweep of unclear run ends did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Settled {
    /// Rounds closed as the ended attempt's (their pending approvals cancelled).
    pub closed: usize,
    /// Rounds kept as a re-run's.
    pub kept: usize,
    /// Entries GitHub could not be asked about (again next period).
    pub failures: usize,
}

pub async fn settle(app: &App, api: &GithubApi) -> Result<Settled, StoreError> {
    let now = app.clock.now();
    let mut done = Settled::default();
    let secrets = app.secrets();
    for (tenant, github) in &secrets.github {
        for entry in app.store.unclear_run_ends(tenant).await? {
            if entry.stale(now) {
                tracing::warn!(
                    tenant = tenant.as_str(),
                    approval_id = entry.approval_id.as_str(),
                    "a run's end GitHub never placed: its round left to its expiry"
                );
                app.store
                    .settle_unclear_run_end(tenant, &entry, false, now)
                    .await?;
                continue;
            }
            let run = api
                .run(
                    github,
                    (entry.installation_id, &entry.repository),
                    entry.run_id,
                )
                .await;
            match run {
                Ok(state) => {
                    let close = state.closes(entry.attempt);
                    app.store
                        .settle_unclear_run_end(tenant, &entry, close, now)
                        .await?;
                    tracing::info!(
                        tenant = tenant.as_str(),
                        approval_id = entry.approval_id.as_str(),
                        run_attempt = state.attempt,
                        ended_attempt = entry.attempt,
                        closed = close,
                        "a run's unclear end placed by GitHub"
                    );
                    if close {
                        done.closed += 1;
                    } else {
                        done.kept += 1;
                    }
                }
                Err(problem) => {
                    tracing::warn!(
                        tenant = tenant.as_str(),
                        approval_id = entry.approval_id.as_str(),
                        problem,
                        "GitHub not asked about a run's end; again next period"
                    );
                    done.failures += 1;
                }
            }
        }
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use crate::github::api::RunState;

    #[test]
    fn a_round_closes_only_while_the_run_is_completed_at_the_attempt_that_ended() {
        let run = |completed, attempt| RunState { completed, attempt };
        assert!(run(true, 1).closes(Some(1)), "the ended attempt's");
        assert!(
            run(true, 1).closes(None),
            "no attempt named: completed is enough"
        );
        assert!(!run(true, 2).closes(Some(1)), "a re-run since: kept");
        assert!(!run(false, 1).closes(Some(1)), "going again: kept");
        assert!(!run(false, 2).closes(None));
    }
}
