//! Progress while a blocking call waits (a client without the tasks extension): a
//! `notifications/progress` for the request's `progressToken` at least every configured
//! interval (`COUNTERSIGN_AGENT_PROGRESS_SECONDS`, 15 s by default), so that a client which
//! resets its timeout on progress keeps the call, and a person watching sees it is alive.

use std::future::Future;
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::Peer;
use tokio::time::{Instant, MissedTickBehavior};

/// Where progress goes: the client, for the token its request carried (none: no progress).
pub struct Heartbeat {
    pub peer: Peer<RoleServer>,
    pub token: Option<ProgressToken>,
    pub every: Duration,
}

impl Heartbeat {
    /// Runs `work` (a wait of at most `total`), notifying `message` every `every` meanwhile:
    /// `progress` is the seconds waited (always increasing), `total` the most it will wait.
    pub async fn beat<F: Future>(&self, total: Duration, message: &str, work: F) -> F::Output {
        let Some(token) = &self.token else {
            return work.await;
        };
        // Never a zero period (tokio's interval refuses one).
        let every = self.every.max(Duration::from_millis(100));
        let started = Instant::now();
        let mut ticks = tokio::time::interval_at(started + every, every);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        tokio::pin!(work);
        loop {
            tokio::select! {
                done = &mut work => return done,
                _ = ticks.tick() => {
                    let waited = started.elapsed().as_secs_f64();
                    let progress = ProgressNotificationParam::new(token.clone(), waited)
                        .with_total(total.as_secs_f64())
                        .with_message(message);
                    // A client gone away ends the call anyway; a lost notification is harmless.
                    let _ = self.peer.notify_progress(progress).await;
                }
            }
        }
    }
}
