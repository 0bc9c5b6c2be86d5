//! A call's time limit is the CPU time its thread spends, not the wall time that passes: on a
//! machine whose cores are busy (a build beside orca, a burst of pods, a noisy neighbour) a
//! plugin that needs 5 ms of CPU may take 200 ms of wall time, and that is the host's load, not
//! the plugin's fault. Wall time still has a ceiling, [`WALL_TIMES`] the limit (at most
//! [`WALL_SLACK`] more), so a call whose thread gets almost no CPU ends too.
//!
//! The epoch ticker wakes the call's deadline callback; [`check`] decides from what was spent.

use std::time::{Duration, Instant};

use wasmtime::{Store, UpdateDeadline};

use super::limits::{EPOCH_TICK, SandboxLimits};

/// Wall time a call may take, as a multiple of its CPU time limit.
pub const WALL_TIMES: u32 = 10;

/// The most wall time a call may take beyond its CPU time limit, whatever the multiple says
/// (a 10 s load limit allows 20 s of wall time, not 100 s).
pub const WALL_SLACK: Duration = Duration::from_secs(10);

/// Which of a call's time limits stopped it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeLimit {
    /// Its thread spent the limit's CPU time.
    Cpu,
    /// The wall-time ceiling passed first (the thread got little CPU).
    Wall(Duration),
}

/// Whether a call at its deadline goes on, and for how long at least before the next check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeCheck {
    /// Within both limits: check again after this much wall time (CPU time cannot grow faster
    /// than wall time on one thread, so no limit can pass before then).
    Continue(Duration),
    Stop(TimeLimit),
}

/// The wall-time ceiling of a call whose CPU time limit is `limit`.
pub fn wall_ceiling(limit: Duration) -> Duration {
    limit
        .saturating_mul(WALL_TIMES)
        .min(limit.saturating_add(WALL_SLACK))
}

/// The decision at a deadline: `cpu` and `wall` spent since the call began, against `limit`.
pub fn check(cpu: Duration, wall: Duration, limit: Duration) -> TimeCheck {
    let ceiling = wall_ceiling(limit);
    if cpu >= limit {
        return TimeCheck::Stop(TimeLimit::Cpu);
    }
    if wall >= ceiling {
        return TimeCheck::Stop(TimeLimit::Wall(ceiling));
    }
    TimeCheck::Continue((limit - cpu).min(ceiling - wall))
}

/// The error a call stopped by its time limit ends with, told apart from traps by its type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the call ran out of time ({0:?})")]
pub struct OutOfTime(pub TimeLimit);

/// Arms `store` for one call (or one instantiation) within `limits.timeout`: the first check is
/// at the limit in wall time, and each check sets the next.
pub fn arm<T>(store: &mut Store<T>, limits: &SandboxLimits) {
    let limit = limits.timeout;
    store.set_epoch_deadline(first_deadline(limit));
    let start = Spent::now();
    store.epoch_deadline_callback(move |_| {
        let (cpu, wall) = start.since();
        match check(cpu, wall, limit) {
            TimeCheck::Continue(next) => Ok(UpdateDeadline::Continue(ticks(next))),
            TimeCheck::Stop(over) => Err(OutOfTime(over).into()),
        }
    });
}

/// The ticks to a call's first check: its whole limit, since CPU time cannot pass wall time. A
/// zero limit (never configured: `policy.limits.timeout` must be above 0) is checked, and stops
/// the call, at its first instruction: how tests make a load run out of time deterministically.
fn first_deadline(limit: Duration) -> u64 {
    if limit.is_zero() { 0 } else { ticks(limit) }
}

/// Epoch ticks in `wait`, at least one.
fn ticks(wait: Duration) -> u64 {
    let ticks = wait.as_nanos().div_ceil(EPOCH_TICK.as_nanos());
    u64::try_from(ticks).unwrap_or(u64::MAX).max(1)
}

/// When a call began, in its thread's CPU time and in wall time.
#[derive(Debug, Clone, Copy)]
struct Spent {
    cpu: Duration,
    wall: Instant,
}

impl Spent {
    fn now() -> Spent {
        Spent {
            cpu: thread_cpu_time(),
            wall: Instant::now(),
        }
    }

    /// CPU and wall time since `self`. The deadline callback runs on the thread running the
    /// call, the thread `self` was taken on: a call never moves between threads.
    fn since(&self) -> (Duration, Duration) {
        (
            thread_cpu_time().saturating_sub(self.cpu),
            self.wall.elapsed(),
        )
    }
}

/// The CPU time the calling thread has spent, user and system.
fn thread_cpu_time() -> Duration {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid, writable timespec; CLOCK_THREAD_CPUTIME_ID is supported by
    // every Linux kernel orca runs on, and on failure `now` stays zero (no time spent).
    #[allow(unsafe_code)]
    let status = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    if status != 0 {
        return Duration::ZERO;
    }
    let seconds = u64::try_from(now.tv_sec).unwrap_or(0);
    let nanos = u32::try_from(now.tv_nsec).unwrap_or(0);
    Duration::new(seconds, nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_call_is_stopped_by_cpu_time_and_by_wall_time_only_at_its_ceiling() {
        let limit = 100 * MS;
        let cases = [
            // (cpu, wall, expected)
            (Duration::ZERO, 100 * MS, TimeCheck::Continue(100 * MS)),
            (99 * MS, 100 * MS, TimeCheck::Continue(MS)),
            (100 * MS, 100 * MS, TimeCheck::Stop(TimeLimit::Cpu)),
            (150 * MS, 160 * MS, TimeCheck::Stop(TimeLimit::Cpu)),
            // A busy machine: 10 ms of CPU in 400 ms goes on until the ceiling.
            (10 * MS, 400 * MS, TimeCheck::Continue(90 * MS)),
            (10 * MS, 950 * MS, TimeCheck::Continue(50 * MS)),
            (
                10 * MS,
                1000 * MS,
                TimeCheck::Stop(TimeLimit::Wall(1000 * MS)),
            ),
            // CPU past the limit is named first, whatever the wall time.
            (100 * MS, 1000 * MS, TimeCheck::Stop(TimeLimit::Cpu)),
        ];
        for (cpu, wall, expected) in cases {
            assert_eq!(
                check(cpu, wall, limit),
                expected,
                "cpu {cpu:?} wall {wall:?}"
            );
        }
    }

    #[test]
    fn a_zero_limit_stops_at_the_first_check() {
        assert_eq!(
            check(Duration::ZERO, Duration::ZERO, Duration::ZERO),
            TimeCheck::Stop(TimeLimit::Cpu)
        );
    }

    #[test]
    fn the_wall_ceiling_is_ten_times_the_limit_and_at_most_ten_seconds_more() {
        assert_eq!(wall_ceiling(100 * MS), Duration::from_secs(1));
        assert_eq!(
            wall_ceiling(Duration::from_secs(1)),
            Duration::from_secs(10)
        );
        assert_eq!(
            wall_ceiling(Duration::from_secs(10)),
            Duration::from_secs(20)
        );
        assert_eq!(wall_ceiling(Duration::MAX), Duration::MAX);
    }

    #[test]
    fn checks_are_whole_ticks_and_never_none() {
        assert_eq!(ticks(Duration::ZERO), 1);
        assert_eq!(ticks(Duration::from_micros(1500)), 2);
        assert_eq!(ticks(90 * MS), 90);
    }

    #[test]
    fn the_first_check_is_at_the_whole_limit_rounded_up_and_a_zero_limit_checks_at_once() {
        let cases = [
            // (limit, ticks to the first check)
            (Duration::ZERO, 0),
            (Duration::from_nanos(1), 1),
            (Duration::from_micros(1500), 2),
            (100 * MS, 100),
            (Duration::from_secs(10), 10_000),
            (Duration::MAX, u64::MAX),
        ];
        for (limit, expected) in cases {
            assert_eq!(first_deadline(limit), expected, "limit {limit:?}");
        }
    }

    #[test]
    fn a_thread_that_sleeps_spends_no_cpu_time_and_one_that_spins_does() {
        let start = Spent::now();
        std::thread::sleep(30 * MS);
        let (cpu, wall) = start.since();
        assert!(wall >= 30 * MS);
        assert!(cpu < 20 * MS, "sleeping spent {cpu:?} of CPU");
        let start = Spent::now();
        while start.since().0 < 5 * MS {
            std::hint::spin_loop();
        }
        assert!(
            start.since().1 >= 5 * MS,
            "CPU time ran faster than the wall"
        );
    }
}
