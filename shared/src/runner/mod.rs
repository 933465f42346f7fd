//! Hosting dispatch and the executor the way Lambda does, for the local runner and the tests:
//! the approvals stream polled into the dispatcher (its position persisted, so nothing
//! committed while the runner was down is lost), and the jobs queue polled into the executor
//! with Lambda's batch semantics (delete what succeeded, leave the rest; a panicking handler
//! leaves its whole batch).

mod certificate_key;
mod email;
mod functions;
mod queue;
mod roles;
mod stream;

use std::sync::Arc;
use std::time::Duration;

pub use certificate_key::create_certificate_key;
pub use email::verify_senders;
pub use functions::{Clients, Functions};
pub use queue::{JobQueues, REDRIVE_HEADROOM, ensure_queues};
pub use roles::{Deployment, LocalRoles};

use crate::jobs::{Dispatcher, Executor, Expirer, Reconciler};
use crate::store::Store;
use crate::{ConfigError, Function};

/// How long a poller waits after finding nothing (moto is served one request at a time, so the
/// pollers never long-poll: a long poll would hold up every other request).
const IDLE: Duration = Duration::from_millis(100);

/// The running pollers; dropping the handle stops them (as a crashed runner would stop).
pub struct Pollers {
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Pollers {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl Pollers {
    /// Starts the stream poller (→ dispatch), the queue poller (→ executor) and the scheduled
    /// functions (the expirer and the reconciler), each as its function (its role, its
    /// variables). `esm` is what Lambda's event source mapping keeps for itself — where the
    /// approvals stream is and how far each shard was read — so it calls as the deployer, not
    /// as a function.
    pub fn start(functions: &Functions, esm: Store) -> Result<Self, ConfigError> {
        let dispatcher = Dispatcher::new(functions.app(Function::Dispatch).clone());
        Self::start_with(functions, esm, dispatcher)
    }

    /// [`Pollers::start`] with the stream dispatched by `dispatcher`.
    pub fn start_with(
        functions: &Functions,
        esm: Store,
        dispatcher: Dispatcher,
    ) -> Result<Self, ConfigError> {
        let executor_app = functions.app(Function::Executor);
        let executor = Arc::new(Executor::new(
            executor_app.clone(),
            functions.sdk(Function::Executor),
        )?);
        let queue_url = executor_app
            .config
            .jobs_queue_url
            .clone()
            .unwrap_or_default();
        let sweeper = functions.app(Function::Sweeper);
        let period = Duration::from_secs(sweeper.config.sweep_interval_seconds.max(1) as u64);
        let streams = aws_sdk_dynamodbstreams::Client::new(functions.sdk(Function::Dispatch));
        let sqs = executor_app.sqs.clone();
        let stream_task = tokio::spawn(stream::poll(esm, streams, dispatcher));
        let queue_task = tokio::spawn(queue::poll(sqs, queue_url, executor));
        let sweep_task = tokio::spawn(sweep(
            Expirer::new(sweeper.clone()),
            Reconciler::new(functions.app(Function::Reconciler).clone()),
            period,
        ));
        Ok(Self {
            tasks: vec![stream_task, queue_task, sweep_task],
        })
    }

    /// Stops both pollers and waits until they have stopped.
    pub async fn stop(mut self) {
        for task in self.tasks.drain(..) {
            task.abort();
            let _ = task.await;
        }
    }
}

/// The scheduled functions, on their period (`SWEEP_INTERVAL_SECONDS`), as the template's
/// schedules run them: each on its own, so that one failing does not hold up the other.
async fn sweep(expirer: Expirer, reconciler: Reconciler, period: Duration) {
    let mut ticks = tokio::time::interval(period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await;
    loop {
        ticks.tick().await;
        for (name, run) in [
            ("expiry", expirer.run().await),
            ("reconcile", reconciler.run().await),
        ] {
            match run {
                Ok(report) if report != Default::default() => {
                    tracing::info!(?report, name, "sweep");
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, name, "sweep failed; next period"),
            }
        }
    }
}
