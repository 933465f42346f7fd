//! Time, injectable: tests move it forward instead of sleeping.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use crate::domain::EpochSeconds;

/// The system clock plus an offset that tests can advance. Production code never advances it.
#[derive(Debug, Clone, Default)]
pub struct Clock {
    offset_seconds: Arc<AtomicI64>,
}

impl Clock {
    pub fn system() -> Self {
        Self::default()
    }

    pub fn now(&self) -> EpochSeconds {
        time::OffsetDateTime::now_utc().unix_timestamp()
            + self.offset_seconds.load(Ordering::Relaxed)
    }

    /// Milliseconds since the Unix epoch, on the same (possibly advanced) clock.
    pub fn now_millis(&self) -> i64 {
        let now = time::OffsetDateTime::now_utc();
        (now.unix_timestamp() + self.offset_seconds.load(Ordering::Relaxed)) * 1000
            + i64::from(now.millisecond())
    }

    /// Moves this clock (and every clone of it) forward.
    pub fn advance(&self, seconds: i64) {
        self.offset_seconds.fetch_add(seconds, Ordering::Relaxed);
    }
}
