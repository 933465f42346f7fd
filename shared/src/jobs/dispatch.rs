//! The dispatcher: committed approval changes (the approvals table's stream) → jobs on SQS.
//! Handlers only write DynamoDB; this is the only place jobs are made, so a crash between a
//! commit and an enqueue cannot lose a job (the stream redelivers the change).

use std::collections::HashMap;
use std::sync::Arc;

use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_sqs::types::SendMessageBatchRequestEntry;

use super::dispatch_policy::{
    callback_jobs, github_job, jobs_for_change, slack_job, slack_replies, stall_jobs,
};
use super::job::Job;
use crate::domain::trail::{EventType, events_for_change, stream_position};
use crate::domain::{Approval, Retention, Status};
use crate::observe::{self, Metric};
use crate::slack::MessageState;
use crate::store::{StatusMove, StoreError, items_to_approval, retain_until_of};
use crate::{App, Function};

/// One change of one approval item, from whichever source delivers the stream.
#[derive(Debug, Clone, Default)]
pub struct StreamChange {
    pub old: Option<HashMap<String, AttributeValue>>,
    pub new: Option<HashMap<String, AttributeValue>>,
    /// The record's sequence number: where its events sort in the approval's trail.
    pub sequence_number: String,
}

/// Whether `change` ends its approval (`new`) after the approval's expiry: it sets the
/// approval's TTL beyond the bound its index items were put with (expiry + retention).
fn ends_after_its_expiry(change: &StreamChange, new: &Approval, retention: Retention) -> bool {
    let set = change.new.as_ref().and_then(retain_until_of);
    let before = change.old.as_ref().and_then(retain_until_of);
    match (set, retention.after_expiry(new.expires_at, new.expires_at)) {
        (Some(until), Some(indexed_until)) => set != before && until > indexed_until,
        _ => false,
    }
}

fn non_empty(image: HashMap<String, AttributeValue>) -> Option<HashMap<String, AttributeValue>> {
    (!image.is_empty()).then_some(image)
}

impl StreamChange {
    /// From a Lambda DynamoDB stream event record.
    pub fn from_lambda(record: &aws_lambda_events::event::dynamodb::EventRecord) -> Self {
        Self {
            old: non_empty(record.change.old_image.clone().into()),
            new: non_empty(record.change.new_image.clone().into()),
            sequence_number: record.change.sequence_number.clone().unwrap_or_default(),
        }
    }

    /// From a DynamoDB Streams `GetRecords` record (the local runner).
    pub fn from_streams(record: &aws_sdk_dynamodbstreams::types::Record) -> Self {
        let convert =
            |image: Option<&HashMap<String, aws_sdk_dynamodbstreams::types::AttributeValue>>| {
                image
                    .cloned()
                    .map(|image| {
                        HashMap::<String, AttributeValue>::from(serde_dynamo::Item::from(image))
                    })
                    .and_then(non_empty)
            };
        let change = record.dynamodb();
        Self {
            old: convert(change.and_then(|c| c.old_image.as_ref())),
            new: convert(change.and_then(|c| c.new_image.as_ref())),
            sequence_number: change
                .and_then(|c| c.sequence_number())
                .unwrap_or_default()
                .to_owned(),
        }
    }
}

/// Jobs carry what their call needs, so their size follows the approval's: create bounds what
/// an approval carries (`CreateRequest::MAX_WRITTEN_BYTES`) so that each job fits one message,
/// and batches are cut by bytes as well as by count.
///
/// SQS's limits on one `SendMessageBatch`: ten entries, and 256 KiB of bodies together (the
/// limit queues have had longest; those made since 2025 take 1 MiB).
const BATCH_ENTRIES: usize = 10;
const BATCH_BYTES: usize = 256 * 1024;

/// How many of `bodies`, in order, go in each batch: at most ten, and at most 256 KiB together
/// (a body larger than that alone; create bounds what a job carries well below it).
fn batch_sizes(bodies: &[String]) -> Vec<usize> {
    let mut sizes = Vec::new();
    let (mut count, mut bytes) = (0, 0);
    for body in bodies {
        if count > 0 && (count == BATCH_ENTRIES || bytes + body.len() > BATCH_BYTES) {
            sizes.push(count);
            (count, bytes) = (0, 0);
        }
        count += 1;
        bytes += body.len();
    }
    if count > 0 {
        sizes.push(count);
    }
    sizes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bodies(sizes: &[usize]) -> Vec<String> {
        sizes.iter().map(|n| "x".repeat(*n)).collect()
    }

    #[test]
    fn batches_hold_ten_jobs_and_256_kib_at_most() {
        assert_eq!(batch_sizes(&bodies(&[100; 25])), [10, 10, 5]);
        assert_eq!(batch_sizes(&bodies(&[100 * 1024; 5])), [2, 2, 1]);
        assert_eq!(batch_sizes(&bodies(&[300 * 1024, 10, 10])), [1, 2]);
        assert_eq!(batch_sizes(&bodies(&[128 * 1024, 128 * 1024, 1])), [2, 1]);
        assert!(batch_sizes(&[]).is_empty());
    }

    #[test]
    fn every_job_is_in_exactly_one_batch() {
        let sizes: Vec<usize> = (0..200).map(|i| (i * 7919) % (90 * 1024) + 1).collect();
        let batches = batch_sizes(&bodies(&sizes));
        assert_eq!(batches.iter().sum::<usize>(), sizes.len());
        let mut start = 0;
        for size in batches {
            let bytes: usize = sizes[start..start + size].iter().sum();
            assert!(size <= BATCH_ENTRIES && (size == 1 || bytes <= BATCH_BYTES));
            start += size;
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DispatchError {
    #[error("SQS SendMessageBatch: {0}")]
    Send(String),
    #[error("a stream image is not an approval: {0}")]
    Unreadable(String),
    #[error("events not stored: {0}")]
    Events(#[from] StoreError),
    #[error("certificate not issued: {0}")]
    Certificate(String),
}

/// `ApprovalDecided` by outcome, and `TimeToDecision` for an outcome a vote decided.
fn count_decided(approval: &Approval) {
    let (tenant, outcome) = (approval.tenant.as_str(), approval.status.as_str());
    observe::count_for(tenant, Metric::ApprovalDecided, &[outcome]);
    if let Some(decision) = &approval.decision
        && matches!(approval.status, Status::Approved | Status::Rejected)
    {
        let ms = (decision.decided_at - approval.created_at).saturating_mul(1000);
        observe::milliseconds_for(tenant, Metric::TimeToDecision, &[outcome], ms);
    }
}

/// Turns committed changes into their events (stored) and jobs (sent to the jobs queue).
#[derive(Debug, Clone)]
pub struct Dispatcher {
    app: Arc<App>,
    queue_url: String,
}

impl Dispatcher {
    pub fn new(app: Arc<App>) -> Self {
        let queue_url = app.config.jobs_queue_url.clone().unwrap_or_default();
        Self { app, queue_url }
    }

    /// Stores the events of `changes`, then sends their jobs in batches of ten. Anything that
    /// cannot be stored or sent fails the whole call, so the stream delivers the batch again:
    /// events stored twice are the same items, jobs sent twice are harmless (the executor's
    /// ledger dedupes them); jobs never sent would be lost.
    pub async fn dispatch(&self, changes: &[StreamChange]) -> Result<usize, DispatchError> {
        self.app
            .metrics
            .invocation(Function::Dispatch.as_str(), self.dispatch_changes(changes))
            .await
    }

    async fn dispatch_changes(&self, changes: &[StreamChange]) -> Result<usize, DispatchError> {
        let mut decided = Vec::new();
        let mut jobs = Vec::new();
        let mut events = Vec::new();
        let mut indexed = Vec::new();
        // What the emails of each approval of an emailing tenant show, as its change left it.
        let mut shown = HashMap::new();
        // Each approval's expiry, which its events' TTL counts from.
        let mut expiries = std::collections::HashMap::new();
        for change in changes {
            let old = change.old.as_ref().map(items_to_approval).transpose();
            let new = change.new.as_ref().map(items_to_approval).transpose();
            match (old, new) {
                (Ok(old), Ok(new)) => {
                    // Certified before its jobs are made: the execute job carries it.
                    let new = match new {
                        Some(new) if super::certify::needs_certificate(&new) => {
                            // Boxed: the batch's future stays small (the stream poller's stack).
                            Some(Box::pin(super::certify::certify(&self.app, new)).await?)
                        }
                        new => new,
                    };
                    if let Some(approval) = new.as_ref().or(old.as_ref()) {
                        expiries.insert(
                            (approval.tenant.clone(), approval.id.clone()),
                            approval.expires_at,
                        );
                    }
                    let position = stream_position(&change.sequence_number);
                    let derived = events_for_change(old.as_ref(), new.as_ref(), &position);
                    let created = derived
                        .iter()
                        .find(|e| e.kind == EventType::Created)
                        .map_or("", |e| e.order.as_str());
                    // A notification is made for a notifier or a tenant's email; without either
                    // (a Slack- or GitHub-only deployment) none is made to fail.
                    let notifies = self.app.secrets().notifier_url.is_some();
                    let emails = new
                        .as_ref()
                        .is_some_and(|n| self.app.config.email.contains_key(&n.tenant));
                    if let Some(new) = new.as_ref().filter(|_| emails) {
                        shown.insert((new.tenant.clone(), new.id.clone()), MessageState::of(new));
                    }
                    jobs.extend(
                        jobs_for_change(old.as_ref(), new.as_ref(), created)
                            .into_iter()
                            .chain(stall_jobs(new.as_ref(), &derived))
                            .filter(|job| notifies || emails || !matches!(job, Job::Notify(_))),
                    );
                    jobs.extend(github_job(old.as_ref(), new.as_ref(), &derived));
                    jobs.extend(crate::jobs::ResumeJob::of_change(
                        old.as_ref(),
                        new.as_ref(),
                        &derived,
                    ));
                    if let Some(new) = &new {
                        let secrets = self.app.secrets();
                        let subscription = secrets.event_subscriptions.get(&new.tenant);
                        jobs.extend(callback_jobs(new, &derived, subscription));
                        if secrets.slack.contains_key(&new.tenant) {
                            jobs.extend(slack_job(old.as_ref(), Some(new), &position));
                            jobs.extend(slack_replies(new, &derived));
                        }
                    }
                    events.extend(derived);
                    if let Some(new) = &new
                        && old.as_ref().is_some_and(|o| o.status == Status::Pending)
                        && new.status != Status::Pending
                    {
                        decided.push(new.clone());
                    }
                    // The listing index follows the approval's status; and its TTL, when the
                    // approval ends after its expiry without changing status (an execution, a
                    // claim's report, an operator's resolve): the items are put again, so the
                    // approval is listed for as long as it is kept.
                    // An escalation step's approvers are listed under their own facet too.
                    let from = old.as_ref().map(|o| o.status);
                    let joined = old.as_ref().map_or(0, |o| o.stall.escalated);
                    if let Some(new) = new
                        && (from != Some(new.status)
                            || new.stall.escalated > joined
                            || ends_after_its_expiry(change, &new, self.app.config.retention))
                    {
                        indexed.push((from, new));
                    }
                }
                // Not an approval this version understands (a deploy in progress?). Skipping it
                // could lose an execute job: fail, so the stream retries and, past its retry
                // limit, bisects the batch and sends the record to the on-failure destination.
                (Err(e), _) | (_, Err(e)) => return Err(DispatchError::Unreadable(e.to_string())),
            }
        }
        let now = self.app.clock.now();
        // An optional read: its failure holds back no other job of the batch (review of v6,
        // finding 8). Everything else is stored and sent; then the batch fails, so the stream
        // delivers it again and the copies are made then (the rest, sent twice, is harmless).
        let delegates = super::delegates::copies(&self.app, &jobs, now).await;
        if let Ok(copies) = &delegates {
            jobs.extend(copies.iter().cloned());
        }
        // Each notification's emails, for the tenants of EMAIL; then the notifications
        // themselves only where a notifier takes them.
        let emails = super::email_jobs(&jobs, &shown, &self.app.config.email);
        if self.app.secrets().notifier_url.is_none() {
            jobs.retain(|job| !matches!(job, Job::Notify(_)));
        }
        jobs.extend(emails);
        self.app
            .store
            .put_events(&events, now, |e| {
                expiries
                    .get(&(e.tenant.clone(), e.approval_id.clone()))
                    .copied()
            })
            .await?;
        let moves: Vec<StatusMove> = indexed
            .iter()
            .map(|(from, approval)| StatusMove {
                from: *from,
                approval,
            })
            .collect();
        self.app.store.move_index_items(&moves, now).await?;
        let mut bodies = Vec::with_capacity(jobs.len());
        for job in &jobs {
            bodies.push(
                job.to_body()
                    .map_err(|e| DispatchError::Send(e.to_string()))?,
            );
        }
        let mut start = 0;
        for size in batch_sizes(&bodies) {
            self.send(&jobs[start..start + size], &bodies[start..start + size])
                .await?;
            start += size;
        }
        fail::fail_point!("dispatch::after_send");
        if let Err(e) = delegates {
            tracing::warn!(error = %e, "delegates' copies not made; every other job sent, the batch comes again");
            return Err(DispatchError::Events(e));
        }
        // Counted once the batch is through: a batch that fails comes again.
        for approval in &decided {
            count_decided(approval);
        }
        Ok(jobs.len())
    }

    async fn send(&self, jobs: &[Job], bodies: &[String]) -> Result<(), DispatchError> {
        let mut entries = Vec::with_capacity(jobs.len());
        for (i, body) in bodies.iter().enumerate() {
            let entry = SendMessageBatchRequestEntry::builder()
                .id(format!("job{i}"))
                .message_body(body)
                .build()
                .map_err(|e| DispatchError::Send(e.to_string()))?;
            entries.push(entry);
        }
        let output = self
            .app
            .sqs
            .send_message_batch()
            .queue_url(&self.queue_url)
            .set_entries(Some(entries))
            .send()
            .await
            .map_err(|e| {
                DispatchError::Send(aws_sdk_sqs::error::DisplayErrorContext(&e).to_string())
            })?;
        if let Some(failed) = output.failed().first() {
            return Err(DispatchError::Send(format!(
                "{} of {} jobs not sent, first: {} {}",
                output.failed().len(),
                jobs.len(),
                failed.code(),
                failed.message().unwrap_or_default()
            )));
        }
        for job in jobs {
            tracing::debug!(
                job = job.id(),
                kind = job.kind(),
                approval_id = job.approval_id().as_str(),
                tenant = job.tenant().as_str(),
                trace_id = job.trace().trace_id(),
                "job sent"
            );
        }
        Ok(())
    }
}
