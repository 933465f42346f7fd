//! The reader against scripted streams: this is the poller's control logic (which iterator to
//! follow, what one shard's error does to the others), not a DynamoDB guarantee, so a stream
//! that answers as told is the right test double here. The real stream is the integration
//! tests' (moto).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::reader::{EMPTY_READS_FOLLOWED, StreamReader};
use super::sink::{SinkError, StreamSink};
use super::source::{Batch, ShardInfo, SourceError, Start, StreamSource};
use crate::jobs::StreamChange;

/// Records one GetRecords returns at most: small, so that a shard takes several reads.
const BATCH: usize = 2;
/// The time between rounds (the poller's idle pause).
const ROUND: Duration = Duration::from_millis(100);

#[derive(Default)]
struct ScriptedShard {
    id: String,
    parent: Option<String>,
    /// The sequence numbers of its records, in order (the shard id, then a count: `a1`, `a2`).
    records: Vec<String>,
    /// No more records will come: a read reaching the end hands on no iterator.
    closed: bool,
    /// Empty reads a fresh iterator answers before it reaches the records, as DynamoDB Streams
    /// may.
    empty_reads_when_opened: usize,
    /// Records before this index aged out of the stream: an iterator after one of them is
    /// refused (TrimmedDataAccessException), TRIM_HORIZON starts here.
    trimmed: usize,
    /// Every GetRecords of this shard fails so.
    failing_reads: Option<fn() -> SourceError>,
}

struct OpenIterator {
    shard: String,
    at: usize,
    empty_reads_left: usize,
}

#[derive(Default)]
struct Script {
    shards: Vec<ScriptedShard>,
    iterators: HashMap<String, OpenIterator>,
    minted: u64,
    /// Every GetShardIterator: (shard, where).
    opened: Vec<(String, String)>,
    /// GetRecords calls per shard.
    reads: HashMap<String, usize>,
    described: usize,
}

impl Script {
    fn mint(&mut self, shard: &str, at: usize, empty_reads_left: usize) -> String {
        self.minted += 1;
        let id = format!("it-{}", self.minted);
        let iterator = OpenIterator {
            shard: shard.to_owned(),
            at,
            empty_reads_left,
        };
        self.iterators.insert(id.clone(), iterator);
        id
    }

    fn shard(&mut self, id: &str) -> &mut ScriptedShard {
        self.shards.iter_mut().find(|s| s.id == id).expect("shard")
    }
}

/// A stream that answers as scripted.
#[derive(Default)]
struct ScriptedSource(Mutex<Script>);

impl ScriptedSource {
    fn new(shards: Vec<ScriptedShard>) -> Self {
        Self(Mutex::new(Script {
            shards,
            ..Script::default()
        }))
    }

    fn script(&self) -> std::sync::MutexGuard<'_, Script> {
        self.0.lock().expect("script")
    }

    fn opened(&self, shard: &str) -> Vec<String> {
        let script = self.script();
        let opened = script.opened.iter().filter(|(s, _)| s == shard);
        opened.map(|(_, at)| at.clone()).collect()
    }

    fn reads(&self, shard: &str) -> usize {
        self.script().reads.get(shard).copied().unwrap_or(0)
    }

    fn append(&self, shard: &str, sequence: &str) {
        self.script().shard(shard).records.push(sequence.to_owned());
    }

    /// Every iterator handed out so far expires.
    fn expire_iterators(&self) {
        self.script().iterators.clear();
    }
}

impl StreamSource for ScriptedSource {
    async fn stream_arn(&self) -> Result<Option<String>, SourceError> {
        self.script().described += 1;
        Ok(Some("arn:scripted".to_owned()))
    }

    async fn shards(&self, _: &str) -> Result<Vec<ShardInfo>, SourceError> {
        let script = self.script();
        Ok(script
            .shards
            .iter()
            .map(|s| ShardInfo {
                id: s.id.clone(),
                parent: s.parent.clone(),
            })
            .collect())
    }

    async fn open(&self, _: &str, shard: &str, start: Start<'_>) -> Result<String, SourceError> {
        let mut script = self.script();
        let at = match start {
            Start::After(sequence) => format!("after {sequence}"),
            Start::TrimHorizon => "trim horizon".to_owned(),
        };
        script.opened.push((shard.to_owned(), at));
        let scripted = script.shard(shard);
        let at = match start {
            Start::TrimHorizon => scripted.trimmed,
            Start::After(sequence) => {
                let index = scripted
                    .records
                    .iter()
                    .position(|r| r == sequence)
                    .expect("a sequence number of the shard");
                if index < scripted.trimmed {
                    return Err(SourceError::Trimmed(format!("{sequence} was trimmed")));
                }
                index + 1
            }
        };
        let empty_reads = scripted.empty_reads_when_opened;
        Ok(script.mint(shard, at, empty_reads))
    }

    async fn records(&self, iterator: &str) -> Result<Batch, SourceError> {
        let mut script = self.script();
        let Some(OpenIterator {
            shard,
            at,
            empty_reads_left,
        }) = script.iterators.remove(iterator)
        else {
            return Err(SourceError::ExpiredIterator(iterator.to_owned()));
        };
        *script.reads.entry(shard.clone()).or_default() += 1;
        let scripted = script.shard(&shard);
        if let Some(failure) = scripted.failing_reads {
            return Err(failure());
        }
        if empty_reads_left > 0 {
            let next = script.mint(&shard, at, empty_reads_left - 1);
            return Ok(Batch {
                changes: Vec::new(),
                next: Some(next),
            });
        }
        let end = scripted.records.len().min(at + BATCH);
        let changes = scripted.records[at..end]
            .iter()
            .map(|sequence| StreamChange {
                sequence_number: sequence.clone(),
                ..StreamChange::default()
            })
            .collect();
        let closed_and_read = scripted.closed && end == scripted.records.len();
        let next = (!closed_and_read).then(|| script.mint(&shard, end, 0));
        Ok(Batch { changes, next })
    }
}

#[derive(Default)]
struct Ledger {
    /// Saved positions by shard.
    saved: HashMap<String, String>,
    /// Sequence numbers dispatched, in order.
    dispatched: Vec<String>,
    /// Batches holding a record of this shard fail to dispatch.
    failing_shard: Option<String>,
    failed_dispatches: usize,
}

/// A dispatcher and position store that keep what they were given.
#[derive(Default)]
struct ScriptedSink(Mutex<Ledger>);

impl ScriptedSink {
    fn ledger(&self) -> std::sync::MutexGuard<'_, Ledger> {
        self.0.lock().expect("ledger")
    }

    fn dispatched(&self) -> Vec<String> {
        self.ledger().dispatched.clone()
    }

    fn saved(&self, shard: &str) -> Option<String> {
        self.ledger().saved.get(shard).cloned()
    }
}

impl StreamSink for ScriptedSink {
    async fn load_position(&self, _: &str, shard: &str) -> Result<Option<String>, SinkError> {
        Ok(self.saved(shard))
    }

    async fn save_position(&self, _: &str, shard: &str, sequence: &str) -> Result<(), SinkError> {
        let mut ledger = self.ledger();
        ledger.saved.insert(shard.to_owned(), sequence.to_owned());
        Ok(())
    }

    async fn dispatch(&self, changes: Vec<StreamChange>) -> Result<(), SinkError> {
        let mut ledger = self.ledger();
        let failing = ledger.failing_shard.clone();
        if let Some(shard) = failing
            && changes
                .iter()
                .any(|c| c.sequence_number.starts_with(&shard))
        {
            ledger.failed_dispatches += 1;
            return Err(SinkError::Dispatch(format!("scripted failure of {shard}")));
        }
        let sequences = changes.into_iter().map(|c| c.sequence_number);
        ledger.dispatched.extend(sequences);
        Ok(())
    }
}

fn open_shard(id: &str, records: usize) -> ScriptedShard {
    ScriptedShard {
        id: id.to_owned(),
        records: (1..=records).map(|n| format!("{id}{n}")).collect(),
        ..ScriptedShard::default()
    }
}

fn sequences(shard: &str, range: std::ops::RangeInclusive<usize>) -> Vec<String> {
    range.map(|n| format!("{shard}{n}")).collect()
}

/// Runs the reader's rounds one `ROUND` apart, from the reader's own clock.
struct Rounds {
    reader: StreamReader,
    now: Instant,
}

impl Rounds {
    fn new() -> Self {
        Self {
            reader: StreamReader::default(),
            now: Instant::now(),
        }
    }

    async fn run(&mut self, n: usize, source: &ScriptedSource, sink: &ScriptedSink) {
        for _ in 0..n {
            let round = self.reader.poll_once(source, sink, self.now).await;
            round.expect("a round fails only when the stream or its shards are unknown");
            self.now += ROUND;
        }
    }
}

#[tokio::test]
async fn a_shard_is_dispatched_in_order_and_read_on_from_its_saved_position() {
    let source = ScriptedSource::new(vec![open_shard("a", 5)]);
    let sink = ScriptedSink::default();
    Rounds::new().run(5, &source, &sink).await;
    assert_eq!(sink.dispatched(), sequences("a", 1..=5));
    assert_eq!(sink.saved("a").as_deref(), Some("a5"));
    // A runner started again reads on after what was saved.
    Rounds::new().run(2, &source, &sink).await;
    assert_eq!(sink.dispatched(), sequences("a", 1..=5));
    assert_eq!(
        source.opened("a").last().map(String::as_str),
        Some("after a5")
    );
}

#[tokio::test]
async fn records_a_few_empty_reads_into_a_fresh_iterator_are_reached() {
    let source = ScriptedSource::new(vec![ScriptedShard {
        empty_reads_when_opened: 3,
        ..open_shard("a", 3)
    }]);
    let sink = ScriptedSink::default();
    let mut rounds = Rounds::new();
    rounds.run(10, &source, &sink).await;
    assert_eq!(sink.dispatched(), sequences("a", 1..=3));
    assert_eq!(sink.saved("a").as_deref(), Some("a3"));
    assert_eq!(
        source.opened("a"),
        ["trim horizon"],
        "one iterator, followed"
    );
}

#[tokio::test]
async fn a_quiet_shard_is_reopened_after_a_bounded_run_of_empty_reads() {
    let source = ScriptedSource::new(vec![open_shard("a", 0)]);
    let sink = ScriptedSink::default();
    let mut rounds = Rounds::new();
    let followed = EMPTY_READS_FOLLOWED as usize;
    rounds.run(followed, &source, &sink).await;
    source.append("a", "a1");
    rounds.run(1, &source, &sink).await;
    assert_eq!(sink.dispatched(), ["a1"]);
    // Records restart the count: as many empty reads again are followed...
    rounds.run(followed + 1, &source, &sink).await;
    assert_eq!(source.opened("a"), ["trim horizon"]);
    // ...and then the shard is reopened at its saved position.
    rounds.run(1, &source, &sink).await;
    assert_eq!(source.opened("a"), ["trim horizon", "after a1"]);
    assert_eq!(source.reads("a"), 2 * followed + 3);
}

#[tokio::test]
async fn an_expired_iterator_is_replaced_at_the_saved_position() {
    let source = ScriptedSource::new(vec![open_shard("a", 4)]);
    let sink = ScriptedSink::default();
    let mut rounds = Rounds::new();
    rounds.run(1, &source, &sink).await;
    source.expire_iterators();
    rounds.run(10, &source, &sink).await;
    assert_eq!(sink.dispatched(), sequences("a", 1..=4), "each once");
    assert!(
        source
            .opened("a")
            .starts_with(&["trim horizon".into(), "after a2".into()])
    );
}

/// Shard `bad` (listed first, read first) fails every read with `failure`; shard `good` reads
/// on in the same rounds, and `bad` is paused between its attempts.
async fn a_shard_failing_so_leaves_the_other_reading(failure: fn() -> SourceError) {
    let source = ScriptedSource::new(vec![
        ScriptedShard {
            failing_reads: Some(failure),
            ..open_shard("bad", 3)
        },
        open_shard("good", 5),
    ]);
    let sink = ScriptedSink::default();
    let mut rounds = Rounds::new();
    rounds.run(3, &source, &sink).await;
    assert_eq!(sink.dispatched(), sequences("good", 1..=5));
    assert_eq!(sink.saved("good").as_deref(), Some("good5"));
    assert_eq!(sink.saved("bad"), None);
    assert_eq!(source.reads("bad"), 1, "paused after its failure");
    // Tried again after its first pause (five rounds), then after one twice as long.
    rounds.run(2, &source, &sink).await;
    assert_eq!(source.reads("bad"), 1);
    rounds.run(1, &source, &sink).await;
    assert_eq!(source.reads("bad"), 2);
    rounds.run(9, &source, &sink).await;
    assert_eq!(source.reads("bad"), 2);
    rounds.run(1, &source, &sink).await;
    assert_eq!(source.reads("bad"), 3);
    assert!(source.opened("bad").iter().all(|at| at == "trim horizon"));
    source.append("good", "good6");
    rounds.run(1, &source, &sink).await;
    assert_eq!(sink.dispatched().last().map(String::as_str), Some("good6"));
}

#[tokio::test]
async fn a_shard_whose_position_is_trimmed_leaves_the_other_reading() {
    a_shard_failing_so_leaves_the_other_reading(|| SourceError::Trimmed("scripted".into())).await;
}

#[tokio::test]
async fn a_shard_whose_iterators_expire_leaves_the_other_reading() {
    a_shard_failing_so_leaves_the_other_reading(|| SourceError::ExpiredIterator("scripted".into()))
        .await;
}

#[tokio::test]
async fn a_shard_not_found_leaves_the_other_reading_and_the_stream_is_described_again() {
    let not_found = || SourceError::NotFound("scripted".into());
    let source = ScriptedSource::new(vec![ScriptedShard {
        failing_reads: Some(not_found),
        ..open_shard("bad", 1)
    }]);
    let sink = ScriptedSink::default();
    Rounds::new().run(2, &source, &sink).await;
    assert_eq!(source.script().described, 2);
    a_shard_failing_so_leaves_the_other_reading(not_found).await;
}

#[tokio::test]
async fn a_shard_failing_otherwise_leaves_the_other_reading() {
    a_shard_failing_so_leaves_the_other_reading(|| SourceError::Other("throttled".into())).await;
}

#[tokio::test]
async fn a_trimmed_position_is_given_up_for_trim_horizon() {
    // Saved at t1, and t1 to t3 aged out since: t4 and t5 are what the stream still has.
    let source = ScriptedSource::new(vec![ScriptedShard {
        trimmed: 3,
        ..open_shard("t", 5)
    }]);
    let sink = ScriptedSink::default();
    sink.ledger().saved.insert("t".into(), "t1".into());
    let mut rounds = Rounds::new();
    rounds.run(10, &source, &sink).await;
    let opened = source.opened("t");
    assert!(opened.starts_with(&["after t1".into(), "trim horizon".into()]));
    assert_eq!(opened.iter().filter(|at| *at == "after t1").count(), 1);
    assert_eq!(sink.dispatched(), ["t4", "t5"]);
    assert_eq!(sink.saved("t").as_deref(), Some("t5"));
}

#[tokio::test]
async fn a_failed_dispatch_saves_no_position_and_the_other_shard_goes_on() {
    let source = ScriptedSource::new(vec![open_shard("a", 3), open_shard("b", 3)]);
    let sink = ScriptedSink::default();
    sink.ledger().failing_shard = Some("a".into());
    let mut rounds = Rounds::new();
    rounds.run(3, &source, &sink).await;
    assert_eq!(sink.dispatched(), sequences("b", 1..=3));
    assert_eq!(sink.saved("b").as_deref(), Some("b3"));
    assert_eq!(sink.saved("a"), None);
    assert_eq!(sink.ledger().failed_dispatches, 1);
    // The dispatcher recovers: after its pause, `a` is read again from where it was saved
    // (nowhere yet), and its records are dispatched.
    sink.ledger().failing_shard = None;
    rounds.run(8, &source, &sink).await;
    assert!(
        source
            .opened("a")
            .starts_with(&["trim horizon".into(), "trim horizon".into()])
    );
    let dispatched = sink.dispatched();
    assert_eq!(dispatched[3..], sequences("a", 1..=3));
    assert_eq!(sink.saved("a").as_deref(), Some("a3"));
}

#[tokio::test]
async fn a_parent_is_dispatched_whole_before_its_children() {
    let source = ScriptedSource::new(vec![
        ScriptedShard {
            closed: true,
            ..open_shard("p", 3)
        },
        ScriptedShard {
            parent: Some("p".into()),
            ..open_shard("c", 2)
        },
        ScriptedShard {
            parent: Some("p".into()),
            ..open_shard("d", 2)
        },
    ]);
    let sink = ScriptedSink::default();
    Rounds::new().run(10, &source, &sink).await;
    let dispatched = sink.dispatched();
    assert_eq!(dispatched.len(), 7, "{dispatched:?}");
    assert_eq!(dispatched[..3], sequences("p", 1..=3));
}
