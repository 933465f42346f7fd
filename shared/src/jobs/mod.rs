//! Jobs: the dispatcher turns committed approval changes (the table's stream) into jobs on SQS;
//! the executor performs them, with the execution ledger written before and after every
//! downstream call.

mod dispatch;
mod executor;
mod job;
mod sweep;

pub use dispatch::{DispatchError, Dispatcher, StreamChange};
pub use executor::{Executor, JobMessage};
pub use job::{CallbackJob, ExecuteJob, Job, NotifyJob, execute_job, jobs_for_change};
pub use sweep::{REQUEUE_LIMIT, SweepFailed, SweepReport, Sweeper};
