//! An approval's life played the way Lambda runs it, one step at a time, metered: each HTTP
//! request is one invocation of its function; the approvals stream's new records are one
//! invocation of dispatch (as the event source mapping delivers a batch); each receive of up to
//! ten jobs is one invocation of the executor. Nothing polls on its own, so every count is the
//! same on every run. Each step records its AWS requests (the meter), the DynamoDB units they
//! consumed (the tables snapshotted around it, the stream's images of each approval write) and
//! the calls it sent out.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::{Duration, Instant};

use aws_sdk_dynamodbstreams::types::ShardIteratorType;
use aws_sdk_sqs::types::{DeleteMessageBatchRequestEntry, MessageSystemAttributeName};
use countersign::jobs::{Dispatcher, Executor, Expirer, JobMessage, StreamChange};

use crate::TestApp;
use crate::capacity::{Change, Schema, Snapshot, StepImages, Units, item_json};
use crate::meter::AwsCall;

/// One invocation of one function.
#[derive(Debug, Clone)]
pub struct Step {
    pub function: &'static str,
    /// The handler's time on this machine (local AWS, debug build).
    pub duration: Duration,
    /// The function's own AWS requests.
    pub calls: Vec<AwsCall>,
    pub units: Units,
    /// Each DynamoDB request's units, in the order of `calls` (SQS requests: none).
    pub call_units: Vec<Units>,
    /// Write units per table, by the table's name in `infra/tables.json`.
    pub writes_by_table: BTreeMap<String, f64>,
    /// SQS requests as billed (64 KiB chunks), the function's and its event source mapping's
    /// (the receive that delivered its batch, the delete of what it handled).
    pub sqs_billed: f64,
    /// HTTP calls it sent out (targets, notifier, callbacks).
    pub outbound: usize,
    /// An executor's jobs, which a batch runs at once: each one's AWS requests (a range of
    /// `calls`) and how many rounds of calls it sent out (a notify job's calls, made together,
    /// are one). Empty for the other functions.
    pub jobs: Vec<JobLane>,
}

/// One job of an executor's batch: its AWS requests (`calls[range]`) and its rounds of calls
/// out, one after another.
#[derive(Debug, Clone)]
pub struct JobLane {
    pub calls: std::ops::Range<usize>,
    pub rounds: usize,
}

/// Billed SQS requests for one request of `bytes` payload: one per 64 KiB chunk.
pub fn sqs_chunks(bytes: usize) -> f64 {
    bytes.div_ceil(64 * 1024).max(1) as f64
}

pub struct Chain<'a> {
    t: &'a TestApp,
    schema: Schema,
    streams: aws_sdk_dynamodbstreams::Client,
    stream_arn: String,
    /// Per shard, the last sequence number read.
    positions: HashMap<String, String>,
    sqs: aws_sdk_sqs::Client,
    dispatcher: Dispatcher,
    executor: std::sync::Arc<Executor>,
    tables: Snapshot,
    /// Changes committed and not yet dispatched.
    pending: Vec<StreamChange>,
    outbound: std::sync::Arc<dyn Fn() -> usize + Send + Sync + 'a>,
    pub steps: Vec<Step>,
}

impl<'a> Chain<'a> {
    /// `outbound`: how many calls the targets, the notifier and the subscriber have received.
    pub async fn new(t: &'a TestApp, outbound: impl Fn() -> usize + Send + Sync + 'a) -> Self {
        let stream_arn = t
            .app
            .store
            .approvals_stream_arn()
            .await
            .expect("describe the approvals table")
            .expect("the approvals table has a stream");
        let mut chain = Self {
            schema: Schema::of(&t.app.config.tables),
            // Lambda's event source mappings read as the functions' roles.
            streams: aws_sdk_dynamodbstreams::Client::new(
                t.functions.sdk(countersign::Function::Dispatch),
            ),
            stream_arn,
            positions: HashMap::new(),
            sqs: aws_sdk_sqs::Client::new(t.functions.sdk(countersign::Function::Executor)),
            dispatcher: Dispatcher::new(t.function(countersign::Function::Dispatch)),
            executor: std::sync::Arc::new(t.executor()),
            tables: Snapshot::default(),
            pending: Vec::new(),
            outbound: std::sync::Arc::new(outbound),
            steps: Vec::new(),
            t,
        };
        chain.tables = chain.snapshot().await;
        let earlier = chain.read_stream().await;
        assert!(earlier.is_empty(), "the tables start empty");
        t.meter.start();
        t.meter.take();
        chain
    }

    /// Every item of every table, read with the test's own (unmetered) client.
    async fn snapshot(&self) -> Snapshot {
        let mut snapshot = Snapshot::default();
        for table in self.schema.table_names() {
            let items = self.t.scan_items(table).await;
            for item in &items {
                let item = item_json(item);
                let key = self.schema.key_of(table, &item);
                snapshot.0.insert((table.clone(), key), item);
            }
        }
        snapshot
    }

    /// The approvals stream's records since the last read, every shard, in order.
    async fn read_stream(&mut self) -> Vec<StreamChange> {
        let stream = self
            .streams
            .describe_stream()
            .stream_arn(&self.stream_arn)
            .send()
            .await
            .expect("describe the stream");
        let shards: Vec<String> = stream
            .stream_description()
            .map(|d| {
                d.shards()
                    .iter()
                    .filter_map(|s| s.shard_id())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        let mut changes = Vec::new();
        for shard in shards {
            let request = self
                .streams
                .get_shard_iterator()
                .stream_arn(&self.stream_arn)
                .shard_id(&shard);
            let request = match self.positions.get(&shard) {
                Some(seq) => request
                    .shard_iterator_type(ShardIteratorType::AfterSequenceNumber)
                    .sequence_number(seq),
                None => request.shard_iterator_type(ShardIteratorType::TrimHorizon),
            };
            let mut iterator = request
                .send()
                .await
                .expect("a shard iterator")
                .shard_iterator;
            while let Some(current) = iterator {
                let page = self
                    .streams
                    .get_records()
                    .shard_iterator(current)
                    .send()
                    .await
                    .expect("read the stream");
                if page.records().is_empty() {
                    break;
                }
                for record in page.records() {
                    let change = StreamChange::from_streams(record);
                    self.positions
                        .insert(shard.clone(), change.sequence_number.clone());
                    changes.push(change);
                }
                iterator = page.next_shard_iterator;
            }
        }
        changes
    }

    /// Runs `work` as one invocation of `function`, metered. Each step runs a second after the
    /// one before (the test clock moves): on AWS a vote, a stream batch or a queue's delivery
    /// comes at least that much later, and the index entries keyed by time (`due_at`) then
    /// move on every step, as they would there — every run counts the same.
    pub async fn step<T>(&mut self, function: &'static str, work: impl Future<Output = T>) -> T {
        self.t.clock.advance(1);
        self.t.meter.take();
        let sent_before = (self.outbound)();
        let started = Instant::now();
        let output = work.await;
        let duration = started.elapsed();
        let calls = self.t.meter.take();
        let after = self.snapshot().await;
        let changes = self.read_stream().await;
        let approvals = self.t.app.config.tables.approvals.clone();
        let mut per_key: HashMap<String, VecDeque<Change>> = HashMap::new();
        for change in &changes {
            let old = change.old.as_ref().map(item_json);
            let new = change.new.as_ref().map(item_json);
            let image = new.as_ref().or(old.as_ref()).expect("a stream image");
            let key = self.schema.key_of(&approvals, image);
            per_key.entry(key).or_default().push_back((old, new));
        }
        let mut images = StepImages {
            before: &self.tables,
            after: &after,
            approvals_table: &approvals,
            changes: per_key,
            writes_by_table: BTreeMap::new(),
        };
        let mut units = Units::default();
        let mut call_units = Vec::with_capacity(calls.len());
        let mut sqs_billed = 0.0;
        for call in &calls {
            let mut these = Units::default();
            match call.service.as_str() {
                "dynamodb" => these = self.schema.units(call, &mut images),
                "sqs" => sqs_billed += sqs_chunks(call.request_bytes.max(call.response_bytes)),
                other => panic!("a request to {other}"),
            }
            units += these;
            call_units.push(these);
        }
        self.steps.push(Step {
            function,
            duration,
            calls,
            units,
            call_units,
            writes_by_table: images
                .writes_by_table
                .iter()
                .map(|(table, units)| (self.schema.logical(table), *units))
                .collect(),
            sqs_billed,
            outbound: (self.outbound)() - sent_before,
            jobs: Vec::new(),
        });
        self.tables = after;
        self.pending.extend(changes);
        output
    }

    /// Runs the chain until nothing is left to do: what was committed is dispatched, what was
    /// queued is executed, and again, until the stream and the queue are both empty. Every
    /// invocation must succeed (these are the happy lives).
    pub async fn settle(&mut self) {
        let queue_url = self.t.queues().queue_url.clone();
        loop {
            if !self.pending.is_empty() {
                let changes = std::mem::take(&mut self.pending);
                let dispatcher = self.dispatcher.clone();
                let sent = self.step("dispatch", dispatcher.dispatch(&changes)).await;
                sent.expect("dispatch succeeds");
                continue;
            }
            let received = self
                .sqs
                .receive_message()
                .queue_url(&queue_url)
                .max_number_of_messages(10)
                .message_system_attribute_names(MessageSystemAttributeName::ApproximateReceiveCount)
                .send()
                .await
                .expect("receive jobs");
            let messages: Vec<JobMessage> = received
                .messages()
                .iter()
                .map(JobMessage::from_sdk)
                .collect();
            if messages.is_empty() {
                return;
            }
            // As `handle_batch` runs them, each job's requests and calls out told apart: its
            // jobs, one after another here, are independent (each its own items and calls).
            let executor = self.executor.clone();
            let app = self.t.function(countersign::Function::Executor);
            let meter = self.t.meter.clone();
            let outbound = self.outbound.clone();
            let lanes = std::sync::Mutex::new(Vec::new());
            let batch = async {
                for message in &messages {
                    let (first, sent) = (meter.count(), outbound());
                    let done = executor.handle_message(message, None).await;
                    assert!(
                        done,
                        "every job succeeds: {} comes back",
                        message.message_id
                    );
                    let job: countersign::jobs::Job =
                        serde_json::from_str(&message.body).expect("a job");
                    let sent = outbound() - sent;
                    let rounds = match job {
                        countersign::jobs::Job::Notify(_) => sent.min(1),
                        _ => sent,
                    };
                    lanes.lock().expect("lanes").push(JobLane {
                        calls: first..meter.count(),
                        rounds,
                    });
                }
            };
            self.step(
                "executor",
                app.metrics
                    .invocation(countersign::Function::Executor.as_str(), batch),
            )
            .await;
            let step = self.steps.last_mut().expect("the executor's step");
            step.jobs = lanes.into_inner().expect("lanes");
            let entries = messages.iter().enumerate().map(|(i, m)| {
                DeleteMessageBatchRequestEntry::builder()
                    .id(format!("m{i}"))
                    .receipt_handle(&m.receipt_handle)
                    .build()
                    .expect("an entry")
            });
            self.sqs
                .delete_message_batch()
                .queue_url(&queue_url)
                .set_entries(Some(entries.collect()))
                .send()
                .await
                .expect("delete the handled jobs");
            // The event source mapping's receive (billed by its payload) and delete.
            let payload: usize = messages.iter().map(|m| m.body.len()).sum();
            let step = self.steps.last_mut().expect("the executor's step");
            step.sqs_billed += sqs_chunks(payload) + 1.0;
        }
    }

    /// One run of the expiry sweeper.
    pub async fn sweep(&mut self) {
        let expirer = Expirer::new(self.t.function(countersign::Function::Sweeper));
        let report = self.step("sweeper", expirer.run()).await;
        report.expect("the sweep succeeds");
    }

    /// The items the tables keep for good now (not those TTL deletes): (bytes, items).
    pub fn stored(&self) -> (usize, usize) {
        self.schema
            .kept_items(&self.tables)
            .fold((0, 0), |(bytes, items), (_, item)| {
                (bytes + crate::capacity::item_size(item), items + 1)
            })
    }

    /// The bytes billed as stored for what the tables keep for good
    /// ([`Schema::kept_bytes`]).
    pub fn kept_bytes(&self) -> usize {
        self.schema.kept_bytes(&self.tables)
    }
}
