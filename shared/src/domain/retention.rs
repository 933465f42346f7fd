//! How long an ended approval is kept (`RETENTION_DAYS`): every item of an approval carries
//! `retain_until`, the epoch second from which DynamoDB's TTL may delete it, so nothing is
//! scanned and no write is added — each bound rides on a write that happens anyway.
//!
//! - The approval's own item: no bound while anything is due on it (pending, or its execution
//!   queued or running); its end + retention in the write that ends it; removed again by a
//!   write that gives it something due (an operator's retry of a failed execution).
//! - An item written for it from the approval's own image (a trail event or an index entry,
//!   by the dispatcher): its expiry or the write's time, whichever is later, + retention. The
//!   expiry bounds when a pending approval ends, so such an item outlives it by at most the
//!   approval's pending window. One that ends after its expiry without changing status (an
//!   execution, a late claim's report, an operator's resolve) has its index entries put again
//!   with the later bound; its trail events from before the expiry keep theirs.
//! - An item written by a job (a ledger record, the event a job's end records): the approval's
//!   expiry or the write's time, whichever is later, + retention — the job carries the expiry
//!   (review of v6, finding 13). A job queued before it did: the write's time + the longest
//!   pending window + retention.

use super::EpochSeconds;
use super::create::CreateRequest;

/// The longest an approval can be pending (a create's or a GitHub environment's
/// `expires_in_seconds`).
const LONGEST_PENDING: EpochSeconds = CreateRequest::MAX_EXPIRES_IN;

/// `RETENTION_DAYS`: how long an ended approval's items are kept, or for ever (0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    seconds: Option<EpochSeconds>,
}

impl Retention {
    /// `RETENTION_DAYS`' default.
    pub const DEFAULT_DAYS: i64 = 400;
    /// The most days accepted (a hundred years: beyond it, keep everything with 0).
    pub const MAX_DAYS: i64 = 36_500;

    /// Items kept for `days` after their approval ended; 0 keeps everything.
    pub fn days(days: i64) -> Self {
        Self {
            seconds: (days > 0).then_some(days * 86_400),
        }
    }

    /// Nothing is ever deleted.
    pub fn keep_everything() -> Self {
        Self { seconds: None }
    }

    /// The retention in seconds (`None`: kept for ever).
    pub fn seconds(self) -> Option<EpochSeconds> {
        self.seconds
    }

    /// The bound of an approval's own item, written at its end (`ended_at`).
    pub fn after_end(self, ended_at: EpochSeconds) -> Option<EpochSeconds> {
        self.seconds.map(|r| ended_at + r)
    }

    /// The bound of an item written at `now` from the image of an approval that expires at
    /// `expires_at` (its expiry bounds its end while it is pending).
    pub fn after_expiry(self, expires_at: EpochSeconds, now: EpochSeconds) -> Option<EpochSeconds> {
        self.seconds.map(|r| expires_at.max(now) + r)
    }

    /// The bound of an item a job writes at `now` for an approval that expires at
    /// `expires_at`: as [`Retention::after_expiry`]. A job that does not carry the expiry
    /// (queued before jobs did) bounds it by the longest pending window after its write.
    pub fn after_job_write(
        self,
        now: EpochSeconds,
        expires_at: Option<EpochSeconds>,
    ) -> Option<EpochSeconds> {
        match expires_at {
            Some(expires_at) => self.after_expiry(expires_at, now),
            None => self.seconds.map(|r| now + LONGEST_PENDING + r),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_days_keeps_everything_and_each_bound_adds_the_retention() {
        assert_eq!(Retention::days(0), Retention::keep_everything());
        assert_eq!(Retention::days(0).after_end(5), None);
        let r = Retention::days(2);
        assert_eq!(r.seconds(), Some(172_800));
        assert_eq!(r.after_end(100), Some(172_900));
        // Written before the expiry: the expiry's bound; after it: the write's.
        assert_eq!(r.after_expiry(1_000, 100), Some(173_800));
        assert_eq!(r.after_expiry(1_000, 5_000), Some(177_800));
        // A job's write is bounded by its approval's expiry, as any earlier item is (review of
        // v6, finding 13); one queued without it outlasts any approval it can belong to.
        assert_eq!(r.after_job_write(100, Some(1_000)), Some(173_800));
        assert_eq!(r.after_job_write(5_000, Some(1_000)), Some(177_800));
        assert_eq!(
            r.after_job_write(100, None),
            Some(100 + CreateRequest::MAX_EXPIRES_IN + 172_800)
        );
    }
}
