//! The pause after a failed receive: doubling from 1 s to 30 s, back to 1 s once a receive
//! succeeds. An outage of SQS (or of credentials) costs one request per 30 s, not a busy loop,
//! and notices flow again within 30 s of its end.

use std::time::Duration;

use crate::support::backoff::{Backoff as Doubling, Delays};

const RECEIVE_BACKOFF: Doubling = Doubling::new(Duration::from_secs(1), Duration::from_secs(30));

/// The receive loop's run of failures, under [`RECEIVE_BACKOFF`]. The rule and the counting
/// are [`crate::support::backoff`]'s; this only fixes the bounds where the consumer asks for
/// them (`Backoff::new()`), so the consumer is unchanged.
#[derive(Debug)]
pub(super) struct Backoff(Delays);

impl Backoff {
    pub(super) fn new() -> Backoff {
        Backoff(RECEIVE_BACKOFF.delays())
    }

    /// The pause before the next try; each call doubles the one after, up to the longest.
    pub(super) fn next_delay(&mut self) -> Duration {
        self.0.next_delay()
    }

    pub(super) fn reset(&mut self) {
        self.0.reset();
    }
}
