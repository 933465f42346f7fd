//! Jobs: the dispatcher turns committed approval changes (the table's stream) into jobs on SQS;
//! the executor performs them, with the execution ledger written before and after every
//! downstream call.

mod dispatch;
mod executor;
mod job;

pub use dispatch::{DispatchError, Dispatcher, StreamChange};
pub use executor::{Executor, JobMessage};
pub use job::{ExecuteJob, Job, NotifyJob, jobs_for_change};
