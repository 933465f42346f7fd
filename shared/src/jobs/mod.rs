//! Jobs: the dispatcher turns committed approval changes (the table's stream) into jobs on SQS;
//! the executor performs them, with the execution ledger written before and after every
//! downstream call; the expirer and the reconciler, run on a schedule, move on what time has
//! left behind (approvals past their expiry, executions whose job was lost, GitHub deliveries
//! that never arrived).

mod certify;
mod delegates;
mod dispatch;
mod dispatch_policy;
mod email;
mod executor;
mod expiry;
mod github_call;
mod job;
mod job_body;
mod notify_body;
mod reconcile;
mod redelivery;
mod report;
mod resume;
mod run_ends;
mod stall;

pub use dispatch::{DispatchError, Dispatcher, StreamChange};
pub use dispatch_policy::{callback_jobs, execute_job, github_job, jobs_for_change, slack_job};
pub use email::email_jobs;
pub use executor::{Executor, JobMessage};
pub use expiry::Expirer;
pub use job::{
    CallbackJob, EmailJob, ExecuteJob, GithubCall, GithubJob, Job, NotifyJob, NotifyReason,
    ResumeJob, SlackJob,
};
pub use reconcile::{REQUEUE_LIMIT, Reconciler};
pub use redelivery::Redelivered;
pub use report::{SweepFailed, SweepReport};
