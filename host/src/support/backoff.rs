//! Exponential backoff: how every retry loop in orca waits longer after each failure in a row.
//!
//! [`Backoff`] is the rule, a pure function of the number of failures; [`Delays`] counts the
//! failures for a loop that retries in place. A caller that keeps its count elsewhere (the pod
//! records, which keep a due time per pod) asks [`Backoff::delay`] directly.

use std::time::Duration;

/// Waits that start at `initial` and double with each failure in a row, never above `max`.
///
/// The callers differ only in their bounds: node registration 200 ms to 10 s, the cluster's
/// identity at startup 200 ms to 5 s, interruption-queue receives 1 s to 30 s, a CSR's polls
/// 1 s to 30 s and its retries 60 s to an hour, the pods' first listing and their steps
/// `pods.retryInitialBackoff` (200 ms for the first listing) to `pods.retryMaxBackoff`.
/// None adds jitter.
///
/// # Guarantees
/// - [`Backoff::delay`] is `initial × 2^(failures − 1)`, capped at `max`; no failure yet
///   counts as one, so the first wait is `initial` (or `max`, if that is shorter).
/// - It never decreases as `failures` grows, and never overflows or panics, for any
///   `failures` up to `u32::MAX`: `initial` is doubled exactly up to 31 times, and stays at
///   `max` (or at `initial × (2³² − 1)`, for a `max` longer than that) beyond.
///
/// ```
/// use std::time::Duration;
/// use orca::support::Backoff;
///
/// let backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(30));
/// assert_eq!(backoff.delay(3), Duration::from_secs(4));
/// assert_eq!(backoff.delay(9), Duration::from_secs(30));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The wait after the first failure.
    pub initial: Duration,
    /// The longest wait.
    pub max: Duration,
}

impl Backoff {
    pub const fn new(initial: Duration, max: Duration) -> Backoff {
        Backoff { initial, max }
    }

    /// The wait after the `failures`th failure in a row.
    pub fn delay(self, failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1);
        // Exact up to 2³¹; from 32 doublings on it stays at u32::MAX, still not decreasing.
        let factor = 2u32.saturating_pow(doublings);
        self.initial.saturating_mul(factor).min(self.max)
    }

    /// A fresh run of failures (none yet) under this rule.
    pub fn delays(self) -> Delays {
        Delays {
            backoff: self,
            failures: 0,
        }
    }
}

/// The failures in a row of a loop that retries in place, and the wait after each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delays {
    backoff: Backoff,
    failures: u32,
}

impl Delays {
    /// Counts one more failure and answers the wait before the next try:
    /// [`Backoff::delay`] of the failures so far.
    pub fn next_delay(&mut self) -> Duration {
        self.failures = self.failures.saturating_add(1);
        self.backoff.delay(self.failures)
    }

    /// After a success: the next failure waits `initial` again.
    pub fn reset(&mut self) {
        self.failures = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);
    const S: Duration = Duration::from_secs(1);

    /// A case: its name, the rule, and (failures, the wait after them).
    type Case<'a> = (&'a str, Backoff, &'a [(u32, Duration)]);

    /// Each caller's bounds, with the waits it had before they shared this type.
    #[test]
    fn delays_double_from_the_initial_wait_up_to_the_cap() {
        #[rustfmt::skip]
        let cases: &[Case<'_>] = &[
            ("pods.retry*Backoff at 1 s and 10 s (pods::record)", Backoff::new(S, S * 10),
             &[(1, S), (2, S * 2), (3, S * 4), (4, S * 8), (5, S * 10), (6, S * 10),
               (u32::MAX, S * 10)]),
            ("CSR retries (kubelet_api::tls::csr)", Backoff::new(S * 60, S * 3600),
             &[(1, S * 60), (2, S * 120), (6, S * 1920), (7, S * 3600), (u32::MAX, S * 3600)]),
            ("interruption-queue receives", Backoff::new(S, S * 30),
             &[(1, S), (2, S * 2), (3, S * 4), (4, S * 8), (5, S * 16), (6, S * 30),
               (7, S * 30)]),
            ("node registration", Backoff::new(MS * 200, S * 10),
             &[(1, MS * 200), (2, MS * 400), (6, MS * 6400), (7, S * 10)]),
            ("the cluster's identity", Backoff::new(MS * 200, S * 5),
             &[(4, MS * 1600), (5, MS * 3200), (6, S * 5)]),
            ("no failure yet waits as the first", Backoff::new(S, S * 30),
             &[(0, S)]),
            ("a cap below the initial wait caps the first wait too", Backoff::new(S * 2, S),
             &[(0, S), (1, S), (2, S)]),
            ("past 31 doublings: no overflow, the cap", Backoff::new(S, Duration::MAX),
             &[(31, S * (1 << 30)), (32, S * (1 << 31)), (33, S * u32::MAX),
               (u32::MAX, S * u32::MAX)]),
            ("a huge initial wait saturates", Backoff::new(Duration::MAX, Duration::MAX),
             &[(1, Duration::MAX), (40, Duration::MAX)]),
        ];
        for (case, backoff, expected) in cases {
            for &(failures, delay) in *expected {
                assert_eq!(backoff.delay(failures), delay, "{case}: failure {failures}");
            }
        }
    }

    #[test]
    fn delays_never_shrink_as_failures_grow() {
        let backoff = Backoff::new(MS * 3, Duration::MAX);
        let mut last = Duration::ZERO;
        for failures in (0..70).chain([u32::MAX - 1, u32::MAX]) {
            let delay = backoff.delay(failures);
            assert!(delay >= last, "failure {failures}: {delay:?} < {last:?}");
            last = delay;
        }
    }

    /// What the interruption consumer's own backoff did: 1 s to 30 s, back to 1 s after a
    /// successful receive.
    #[test]
    fn a_run_of_failures_doubles_and_a_success_starts_over() {
        let mut delays = Backoff::new(S, S * 30).delays();
        let run: Vec<u64> = (0..7).map(|_| delays.next_delay().as_secs()).collect();
        assert_eq!(run, [1, 2, 4, 8, 16, 30, 30]);
        delays.reset();
        assert_eq!(delays.next_delay(), S);
        assert_eq!(delays.next_delay(), S * 2);
    }
}
