//! The clock a replica's hold on a node is measured on: Linux's `CLOCK_BOOTTIME`, the time
//! since the machine booted.
//!
//! A hold must end on time however long the process was not running: another replica takes
//! the node once the Lease has not changed for its duration on *its* clock, and that clock
//! kept counting while this process was stopped (SIGSTOP, a frozen VM, a long pause) or its
//! machine suspended. The wall clock does not do: NTP or an operator steps it, backwards too.
//! `std::time::Instant` and tokio's `Instant` (`CLOCK_MONOTONIC`) stop while the machine is
//! suspended, so a deadline on them comes late by the length of the suspend.
//! `CLOCK_BOOTTIME` counts through both and never steps.
//!
//! Tokio's timers run on `CLOCK_MONOTONIC`: a sleep towards a boot-clock deadline may wake
//! late after a suspend. What must not be late reads the boot clock itself when it decides
//! ([`super::Tenure`] does at every step of a serving turn).

use std::time::Duration;

/// `CLOCK_BOOTTIME` where the kernel has it; elsewhere (a developer's macOS) the monotonic
/// clock, which stops during a suspend.
#[cfg(any(target_os = "linux", target_os = "android"))]
const CLOCK: rustix::time::ClockId = rustix::time::ClockId::Boottime;
#[cfg(not(any(target_os = "linux", target_os = "android")))]
const CLOCK: rustix::time::ClockId = rustix::time::ClockId::Monotonic;

/// A moment on the boot clock: how long after the machine booted.
///
/// # Guarantees
/// Two readings in one process are ordered as they were taken: the clock never steps back,
/// and it counts while the process is stopped or the machine suspended.
///
/// ```
/// use std::time::Duration;
/// use orca::replicas::BootInstant;
///
/// let taken = BootInstant::now();
/// let deadline = taken.saturating_add(Duration::from_secs(6));
/// assert!(BootInstant::now() < deadline);
/// assert_eq!(deadline.saturating_duration_since(taken), Duration::from_secs(6));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BootInstant(Duration);

impl BootInstant {
    /// The boot clock now (a vDSO call on Linux: no system call).
    pub fn now() -> BootInstant {
        let now = rustix::time::clock_gettime(CLOCK);
        // The kernel answers non-negative seconds and nanoseconds below a second.
        let seconds = u64::try_from(now.tv_sec).unwrap_or(0);
        let nanos = u64::try_from(now.tv_nsec).unwrap_or(0);
        BootInstant(Duration::from_secs(seconds).saturating_add(Duration::from_nanos(nanos)))
    }

    /// The moment `since_boot` after boot: for tests, which drive the hold's decisions on
    /// made-up clocks.
    pub const fn since_boot(since_boot: Duration) -> BootInstant {
        BootInstant(since_boot)
    }

    /// `duration` later (the end of time, rather than a panic, past `Duration::MAX`).
    #[must_use]
    pub fn saturating_add(self, duration: Duration) -> BootInstant {
        BootInstant(self.0.saturating_add(duration))
    }

    /// How long after `earlier` this is; zero when it is not after.
    pub fn saturating_duration_since(self, earlier: BootInstant) -> Duration {
        self.0.saturating_sub(earlier.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readings_never_go_back_and_arithmetic_saturates() {
        let first = BootInstant::now();
        let second = BootInstant::now();
        assert!(second >= first);
        assert!(
            first > BootInstant::since_boot(Duration::ZERO),
            "the machine has been up"
        );
        let end = BootInstant::since_boot(Duration::MAX).saturating_add(Duration::from_secs(1));
        assert_eq!(end, BootInstant::since_boot(Duration::MAX));
        assert_eq!(first.saturating_duration_since(second), Duration::ZERO);
    }

    /// The boot clock counts at least what the monotonic clock counts (more across a
    /// suspend): a sleep of 20 ms moves it on by 20 ms or more.
    #[test]
    fn the_boot_clock_counts_what_a_sleep_waits() {
        let before = BootInstant::now();
        std::thread::sleep(Duration::from_millis(20));
        assert!(BootInstant::now().saturating_duration_since(before) >= Duration::from_millis(20));
    }
}
