//! The poller's control logic, apart from the SDK: which shards to read, which iterator to
//! follow and when to reopen one, and what an error in one shard does (to that shard only).

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use super::sink::{SinkError, StreamSink};
use super::source::{ShardInfo, SourceError, Start, StreamSource};
use crate::jobs::StreamChange;

/// How often the list of shards is read again while no shard has ended (shards end, and their
/// children appear, every few hours on AWS).
const SHARD_LIST_REFRESH: Duration = Duration::from_secs(10);

/// Empty reads in a row an iterator is followed through before the shard is reopened at its
/// saved position. DynamoDB Streams may answer a GetRecords with no records and a next iterator
/// although the shard has records further on ("it might take multiple calls to get to a portion
/// of the shard that contains stream records", says the API reference), so reopening after
/// every empty read could keep a shard from ever reaching its records. Reopening at all: an
/// iterator is only good for 15 minutes (AWS, and the local stack), and moto 5.2.5 unpatched
/// left iterators reading a dead copy of the shard after a cancelled transaction; a shard gone
/// quiet is thus read from a fresh iterator every nine rounds (about a second).
pub(super) const EMPTY_READS_FOLLOWED: u32 = 8;

/// The pause before a failed shard is read again: doubled by each failure in a row, up to
/// [`RETRY_MAX`]. The first is what the whole poller used to pause after any error.
const RETRY_FIRST: Duration = Duration::from_millis(500);
/// Long enough not to hammer a shard that keeps failing (a throttled or broken one), short
/// enough that a shard whose trouble passed is read again within seconds.
const RETRY_MAX: Duration = Duration::from_secs(5);

fn retry_delay(failures: u32) -> Duration {
    RETRY_FIRST
        .saturating_mul(1 << failures.saturating_sub(1).min(16))
        .min(RETRY_MAX)
}

/// The shards to read now, in the order given: every shard not read to its end yet whose parent
/// is read to its end, or is no longer listed (trimmed after 24 h, so long read).
pub(crate) fn readable_shards<'a>(
    shards: &'a [ShardInfo],
    ended: &HashSet<String>,
) -> Vec<&'a ShardInfo> {
    let listed: HashSet<&str> = shards.iter().map(|s| s.id.as_str()).collect();
    shards
        .iter()
        .filter(|s| !ended.contains(&s.id))
        .filter(|s| {
            s.parent
                .as_deref()
                .is_none_or(|parent| ended.contains(parent) || !listed.contains(parent))
        })
        .collect()
}

/// What went wrong in one shard.
#[derive(Debug, thiserror::Error)]
pub(super) enum ShardError {
    #[error(transparent)]
    Read(#[from] SourceError),
    #[error(transparent)]
    Sink(#[from] SinkError),
    #[error("a stream record without a sequence number")]
    NoSequenceNumber,
}

/// What the poller knows of one shard between rounds.
#[derive(Debug, Default)]
struct ShardState {
    /// The iterator the last read handed on, if it is worth following.
    iterator: Option<String>,
    /// Empty reads in a row along the current iterator's chain.
    empty_reads: u32,
    /// Failures in a row, and the time before which the shard is left alone.
    failures: u32,
    retry_at: Option<Instant>,
}

/// What the poller knows between rounds.
#[derive(Debug, Default)]
pub(super) struct StreamReader {
    stream_arn: Option<String>,
    shards: Vec<ShardInfo>,
    shards_read_at: Option<Instant>,
    /// Shards read to their end (closed, and nothing left after the saved position).
    ended: HashSet<String>,
    /// The saved position of each shard seen (`None`: read it from TRIM_HORIZON, the oldest
    /// record it keeps; nothing was dispatched from it yet, or its position was trimmed).
    positions: HashMap<String, Option<String>>,
    states: HashMap<String, ShardState>,
}

impl StreamReader {
    /// One round: one read of each readable shard not pausing after a failure; returns how
    /// many records were dispatched. An error in one shard is that shard's (logged, and the
    /// shard paused); only an error finding the stream or its shards fails the round.
    pub(super) async fn poll_once(
        &mut self,
        source: &impl StreamSource,
        sink: &impl StreamSink,
        now: Instant,
    ) -> Result<usize, SourceError> {
        if self.stream_arn.is_none() {
            self.stream_arn = source.stream_arn().await?;
            self.shards_read_at = None;
        }
        let Some(stream_arn) = self.stream_arn.clone() else {
            return Ok(0);
        };
        if self
            .shards_read_at
            .is_none_or(|at| now.duration_since(at) >= SHARD_LIST_REFRESH)
        {
            self.shards = source.shards(&stream_arn).await?;
            self.shards_read_at = Some(now);
            // What is known of shards no longer listed (aged out, or of a replaced stream).
            let listed: HashSet<&str> = self.shards.iter().map(|s| s.id.as_str()).collect();
            self.ended.retain(|id| listed.contains(id.as_str()));
            self.positions.retain(|id, _| listed.contains(id.as_str()));
            self.states.retain(|id, _| listed.contains(id.as_str()));
        }
        let readable: Vec<String> = readable_shards(&self.shards, &self.ended)
            .into_iter()
            .map(|s| s.id.clone())
            .collect();
        let mut dispatched = 0;
        for shard in readable {
            let state = self.states.entry(shard.clone()).or_default();
            if state.retry_at.is_some_and(|at| now < at) {
                continue;
            }
            match self.read_shard(source, sink, &stream_arn, &shard).await {
                Ok(n) => dispatched += n,
                Err(e) => self.shard_failed(&shard, e, now),
            }
        }
        Ok(dispatched)
    }

    /// Forgets the stream and its shard list (not the shards' positions): the next round
    /// describes them again.
    pub(super) fn refresh_stream(&mut self) {
        self.stream_arn = None;
        self.shards_read_at = None;
    }

    fn state(&mut self, shard: &str) -> &mut ShardState {
        self.states.entry(shard.to_owned()).or_default()
    }

    /// Reads one batch of a shard, dispatches it, and saves the position after it. On any
    /// error the shard's iterator is gone (taken, and not put back).
    async fn read_shard(
        &mut self,
        source: &impl StreamSource,
        sink: &impl StreamSink,
        stream_arn: &str,
        shard: &str,
    ) -> Result<usize, ShardError> {
        let iterator = match self.state(shard).iterator.take() {
            Some(iterator) => iterator,
            None => {
                let saved = match self.positions.get(shard) {
                    Some(saved) => saved.clone(),
                    None => {
                        let saved = sink.load_position(stream_arn, shard).await?;
                        self.positions.insert(shard.to_owned(), saved.clone());
                        saved
                    }
                };
                let start = saved.as_deref().map_or(Start::TrimHorizon, Start::After);
                let iterator = source.open(stream_arn, shard, start).await?;
                self.state(shard).empty_reads = 0;
                iterator
            }
        };
        let batch = source.records(&iterator).await?;
        let dispatched = batch.changes.len();
        if dispatched > 0 {
            self.dispatch(sink, stream_arn, shard, batch.changes)
                .await?;
        }
        let state = self.state(shard);
        state.failures = 0;
        state.retry_at = None;
        match batch.next {
            // Closed, and read to its end: its children may start.
            None if dispatched == 0 => {
                self.ended.insert(shard.to_owned());
                self.shards_read_at = None;
            }
            // The last records of a closed shard: the next round reopens after them and finds
            // the end.
            None => {}
            Some(next) if dispatched > 0 => {
                state.empty_reads = 0;
                state.iterator = Some(next);
            }
            // Nothing yet: not the end of the shard, which may have records a few reads on.
            Some(next) => {
                state.empty_reads += 1;
                if state.empty_reads <= EMPTY_READS_FOLLOWED {
                    state.iterator = Some(next);
                }
            }
        }
        Ok(dispatched)
    }

    async fn dispatch(
        &mut self,
        sink: &impl StreamSink,
        stream_arn: &str,
        shard: &str,
        changes: Vec<StreamChange>,
    ) -> Result<(), ShardError> {
        let last_sequence = changes
            .last()
            .map(|c| c.sequence_number.clone())
            .filter(|s| !s.is_empty())
            .ok_or(ShardError::NoSequenceNumber)?;
        // Not dispatched, or not saved: the position stays, and the batch comes again.
        sink.dispatch(changes).await?;
        sink.save_position(stream_arn, shard, &last_sequence)
            .await?;
        self.positions.insert(shard.to_owned(), Some(last_sequence));
        Ok(())
    }

    /// The shard is reopened after a pause (its iterator is gone already); the other shards
    /// read on.
    fn shard_failed(&mut self, shard: &str, error: ShardError, now: Instant) {
        let state = self.state(shard);
        state.empty_reads = 0;
        state.failures += 1;
        let retry_in = retry_delay(state.failures);
        state.retry_at = Some(now + retry_in);
        match &error {
            ShardError::Read(SourceError::Trimmed(_)) => {
                // The records between the saved position and the oldest one the stream still
                // keeps aged out (24-hour retention) before they were dispatched: they are
                // lost. Lambda's event source mapping does the same in effect: it goes on from
                // the oldest record there is.
                let saved = self.positions.insert(shard.to_owned(), None).flatten();
                tracing::error!(
                    shard,
                    saved_position = ?saved,
                    error = %error,
                    "stream records LOST: records of this shard aged out of the stream (24-hour \
                     retention) before they were dispatched; reading on from TRIM_HORIZON, the \
                     oldest record it keeps"
                );
            }
            ShardError::Read(SourceError::ExpiredIterator(_)) => {
                tracing::warn!(
                    shard,
                    error = %error,
                    ?retry_in,
                    "stream shard iterator expired; reopening at the saved position"
                );
            }
            ShardError::Read(SourceError::NotFound(_)) => {
                tracing::warn!(
                    shard,
                    error = %error,
                    ?retry_in,
                    "stream or shard not found; describing the stream again"
                );
                self.refresh_stream();
            }
            _ => {
                tracing::warn!(
                    shard,
                    error = %error,
                    ?retry_in,
                    "stream shard failed; reopening it at its saved position after a pause"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shard(id: &str, parent: Option<&str>) -> ShardInfo {
        ShardInfo {
            id: id.to_owned(),
            parent: parent.map(str::to_owned),
        }
    }

    fn ids(shards: Vec<&ShardInfo>) -> Vec<&str> {
        shards.into_iter().map(|s| s.id.as_str()).collect()
    }

    #[test]
    fn a_child_waits_until_its_parent_is_read_to_its_end() {
        let shards = [
            shard("p", None),
            shard("c1", Some("p")),
            shard("c2", Some("p")),
        ];
        assert_eq!(ids(readable_shards(&shards, &HashSet::new())), ["p"]);
        let ended = HashSet::from(["p".to_owned()]);
        assert_eq!(ids(readable_shards(&shards, &ended)), ["c1", "c2"]);
    }

    #[test]
    fn a_child_whose_parent_was_trimmed_is_readable() {
        let shards = [shard("c", Some("gone")), shard("g", Some("c"))];
        assert_eq!(ids(readable_shards(&shards, &HashSet::new())), ["c"]);
    }

    #[test]
    fn generations_are_read_one_after_the_other() {
        let shards = [
            shard("a", None),
            shard("b", Some("a")),
            shard("c", Some("b")),
        ];
        let mut ended = HashSet::new();
        let mut order = Vec::new();
        while let Some(next) = readable_shards(&shards, &ended)
            .first()
            .map(|s| s.id.clone())
        {
            order.push(next.clone());
            ended.insert(next);
        }
        assert_eq!(order, ["a", "b", "c"]);
    }

    #[test]
    fn a_failing_shard_pauses_longer_each_time_up_to_a_bound() {
        let delays: Vec<Duration> = (1..=8).map(retry_delay).collect();
        assert_eq!(delays[0], RETRY_FIRST);
        assert_eq!(delays[1], RETRY_FIRST * 2);
        assert!(delays.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(delays[7], RETRY_MAX);
        assert_eq!(retry_delay(u32::MAX), RETRY_MAX);
    }
}
