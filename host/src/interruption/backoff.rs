//! The pause after a failed receive: doubling from 1 s to 30 s, back to 1 s once a receive
//! succeeds. An outage of SQS (or of credentials) costs one request per 30 s, not a busy loop,
//! and notices flow again within 30 s of its end.

use std::time::Duration;

const FIRST: Duration = Duration::from_secs(1);
const LONGEST: Duration = Duration::from_secs(30);

#[derive(Debug)]
pub(super) struct Backoff {
    next: Duration,
}

impl Backoff {
    pub(super) fn new() -> Backoff {
        Backoff { next: FIRST }
    }

    /// The pause before the next try; each call doubles the one after, up to the longest.
    pub(super) fn next_delay(&mut self) -> Duration {
        let delay = self.next;
        self.next = (self.next * 2).min(LONGEST);
        delay
    }

    pub(super) fn reset(&mut self) {
        self.next = FIRST;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_to_thirty_seconds_and_reset() {
        let mut backoff = Backoff::new();
        let delays: Vec<u64> = (0..7).map(|_| backoff.next_delay().as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 30, 30]);
        backoff.reset();
        assert_eq!(backoff.next_delay(), FIRST);
    }
}
