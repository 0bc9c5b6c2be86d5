//! A plugin's log, bounded twice: per call, what it logs through the host's `log` import counts
//! against a byte budget the size of `policy.limits.maxOutput` (as stdout and stderr do); per
//! plugin, a token bucket bounds how many records per second reach orca's log, however many
//! calls are made. Records past either bound are dropped and counted, and the count is said on
//! the next record that gets through, so the log shows that something was dropped.

use std::sync::Mutex;
use std::time::Instant;

use crate::support::errors::lock;

/// Records per second one plugin may write to orca's log, sustained.
pub const RECORDS_PER_SECOND: f64 = 20.0;
/// Records one plugin may write at once after a quiet spell.
pub const BURST: f64 = 100.0;

/// One plugin's share of orca's log (shared by all its calls).
#[derive(Debug)]
pub struct LogRate {
    bucket: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    refilled: Instant,
    dropped: u64,
}

/// Whether a record may be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Write it, and say that this many were dropped before it.
    Write {
        dropped_before: u64,
    },
    Drop,
}

impl LogRate {
    pub fn new(now: Instant) -> LogRate {
        LogRate {
            bucket: Mutex::new(Bucket {
                tokens: BURST,
                refilled: now,
                dropped: 0,
            }),
        }
    }

    /// Takes a token for one record at `now`, if there is one.
    pub fn admit(&self, now: Instant) -> Admission {
        let mut bucket = lock(&self.bucket);
        let elapsed = now.saturating_duration_since(bucket.refilled).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * RECORDS_PER_SECOND).min(BURST);
        bucket.refilled = now;
        if bucket.tokens < 1.0 {
            bucket.dropped += 1;
            return Admission::Drop;
        }
        bucket.tokens -= 1.0;
        Admission::Write {
            dropped_before: std::mem::take(&mut bucket.dropped),
        }
    }

    /// Counts records dropped for another reason (a call's byte budget), to be said with the
    /// next record written.
    pub fn count_dropped(&self, records: u64) {
        lock(&self.bucket).dropped += records;
    }
}

/// What one call may still log, in bytes.
#[derive(Debug)]
pub struct CallLog {
    bytes_left: usize,
}

impl CallLog {
    pub fn new(bytes: usize) -> CallLog {
        CallLog { bytes_left: bytes }
    }

    /// The part of `message` the call's budget still allows (cut at a character boundary),
    /// or `None` once the budget is spent.
    pub fn take<'m>(&mut self, message: &'m str) -> Option<&'m str> {
        if self.bytes_left == 0 {
            return None;
        }
        let mut end = message.len().min(self.bytes_left);
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        // A record cut to nothing still spends the budget: the next one would not fit either.
        self.bytes_left = self.bytes_left.saturating_sub(message.len());
        (end > 0).then(|| &message[..end])
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_burst_passes_then_the_rate_holds_and_drops_are_counted() {
        let start = Instant::now();
        let rate = LogRate::new(start);
        for _ in 0..BURST as usize {
            assert!(matches!(rate.admit(start), Admission::Write { .. }));
        }
        assert_eq!(rate.admit(start), Admission::Drop);
        assert_eq!(rate.admit(start), Admission::Drop);
        // A second later, twenty more; the first says two were dropped.
        let later = start + Duration::from_secs(1);
        assert_eq!(rate.admit(later), Admission::Write { dropped_before: 2 });
        for _ in 1..RECORDS_PER_SECOND as usize {
            assert_eq!(rate.admit(later), Admission::Write { dropped_before: 0 });
        }
        assert_eq!(rate.admit(later), Admission::Drop);
    }

    #[test]
    fn drops_for_a_spent_call_budget_are_said_with_the_next_record() {
        let now = Instant::now();
        let rate = LogRate::new(now);
        rate.count_dropped(7);
        assert_eq!(rate.admit(now), Admission::Write { dropped_before: 7 });
    }

    #[test]
    fn a_call_logs_up_to_its_byte_budget_cut_at_a_character() {
        let mut log = CallLog::new(5);
        assert_eq!(log.take("abc"), Some("abc"));
        // Two bytes left: "é" is two bytes, so "dé" does not fit whole and is cut before "é".
        assert_eq!(log.take("dé"), Some("d"));
        assert_eq!(log.take("x"), None);
        let mut log = CallLog::new(1);
        assert_eq!(log.take("é"), None);
        assert_eq!(log.take("x"), None);
    }
}
