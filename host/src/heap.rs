//! Giving freed heap back to the operating system once a burst of pods has drained.
//!
//! Three things keep a drained burst's memory resident, each measured by `memory-bench`
//! (BENCHMARKS.md, "Memory over time"):
//! - A `HashMap` keeps the capacity of its fullest moment. Maps that hold one entry per pod
//!   or instance give it back through [`shrink_when_sparse`] as they empty.
//! - glibc's allocator keeps what was freed inside its arenas for reuse; only the top of the
//!   main heap is returned on its own. `malloc_trim` walks every arena and releases its free
//!   pages. It costs a few milliseconds for a heap of this size, so [`TrimAfterDrain`] asks
//!   for it only when what orca holds per pod (records and listed instances) has shrunk: once
//!   halfway down a large drain, and once the count has settled after any drop, never per pod.
//! - What a burst leaves alive is scattered over every arena it touched, and a page with one
//!   live allocation cannot be returned. [`configure_allocator`] keeps the arenas few and large
//!   buffers out of them.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};

/// Decides when a trim is worth its cost, from the number of per-pod entries orca holds,
/// noted once per sync pass.
#[derive(Debug, Default)]
pub struct TrimAfterDrain {
    /// The most held since the last trim halfway down a drain.
    peak: usize,
    /// What the last pass held, and for how many passes in a row it has not changed.
    last: usize,
    unchanged_passes: u32,
    /// Whether the count has dropped since the last settled trim.
    dropped: bool,
}

/// Below this many at the peak, trimming halfway down a drain is not worth it.
const WORTHWHILE_PEAK: usize = 64;
/// Passes without change after a drop before the settled trim: a drain frees its memory over
/// a few passes (records, then listed instances, then connections), one trim gets it all.
const SETTLED_PASSES: u32 = 3;

impl TrimAfterDrain {
    /// Notes how many entries are held now; true when the heap should be trimmed now.
    pub fn observe(&mut self, held: usize) -> bool {
        if held == self.last {
            self.unchanged_passes = self.unchanged_passes.saturating_add(1);
        } else {
            self.dropped |= held < self.last;
            self.last = held;
            self.unchanged_passes = 0;
        }
        self.peak = self.peak.max(held);
        if self.peak >= WORTHWHILE_PEAK && held <= self.peak / 2 {
            self.peak = held;
            return true;
        }
        if self.dropped && self.unchanged_passes >= SETTLED_PASSES {
            self.dropped = false;
            return true;
        }
        false
    }
}

/// Gives a map's spare capacity back once it is mostly empty. Shrinking only below a quarter
/// of the capacity keeps a map that fills and empties from reallocating on every pass.
pub fn shrink_when_sparse<K: Eq + Hash, V, S: BuildHasher>(map: &mut HashMap<K, V, S>) {
    if map.capacity() > 16 && map.len() < map.capacity() / 4 {
        map.shrink_to_fit();
    }
}

/// Arenas glibc may create; its default is eight per core.
const ARENA_MAX: i32 = 2;
/// Blocks this large or larger are mapped on their own and unmapped when freed: glibc's
/// starting value, held fixed.
const MMAP_THRESHOLD: i32 = 128 * 1024;

/// Sets glibc's allocator up for a long-lived process whose load comes in bursts. Called once
/// at startup, before the runtime starts its threads. Why (BENCHMARKS.md, "Memory over time",
/// measures it: not enough on its own):
/// - Every thread that allocates while the arenas are contended gets an arena of its own
///   (tokio's workers, the blocking threads that run plugins and trims), and what a burst
///   leaves scattered in each stays resident. Two arenas keep two workers from waiting on one
///   lock and leave two heaps to fragment, not sixteen.
/// - glibc raises its mmap threshold to the size of any mapped block freed (up to 32 MiB), so
///   after the first large listing every later one is carved from an arena and fragments it.
///   A fixed threshold keeps large buffers mapped and gives them back whole.
///
/// `GLIBC_TUNABLES` naming any `glibc.malloc.` setting leaves the allocator as it says.
/// Returns whether the settings were applied (false also where the allocator is not glibc's).
pub fn configure_allocator() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let tuned = std::env::var("GLIBC_TUNABLES")
            .is_ok_and(|tunables| tunables.contains("glibc.malloc."));
        if tuned {
            return false;
        }
        // SAFETY: mallopt only sets the allocator's parameters (an unknown one is refused with
        // 0); it is called before the runtime's threads exist.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, ARENA_MAX) == 1
                && libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    false
}

/// Returns the allocator's free pages to the operating system. A no-op where the allocator is
/// not glibc's.
pub fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists; it takes the arena locks
    // itself and is safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn glibc_takes_the_allocator_settings() {
        if std::env::var("GLIBC_TUNABLES").is_err() {
            assert!(configure_allocator());
        }
    }

    #[test]
    fn trims_halfway_down_a_large_drain() {
        let mut trim = TrimAfterDrain::default();
        assert!(!trim.observe(500));
        assert!(!trim.observe(300));
        assert!(trim.observe(250));
        // The peak starts again from where the trim left it.
        assert!(!trim.observe(200));
        assert!(trim.observe(100));
    }

    #[test]
    fn trims_once_the_count_settles_after_a_drop() {
        let mut trim = TrimAfterDrain::default();
        for held in [10, 10, 10, 10, 10] {
            assert!(!trim.observe(held), "nothing dropped, nothing to give back");
        }
        assert!(!trim.observe(3));
        assert!(!trim.observe(3));
        assert!(!trim.observe(3));
        assert!(trim.observe(3));
        assert!(!trim.observe(3), "one trim per drop");
        assert!(!trim.observe(3));
    }

    #[test]
    fn a_sudden_drain_trims_at_once_and_again_once_settled() {
        // What is freed after the pass that saw the drop (connections, the listing of
        // instances) is only given back by the second trim.
        let mut trim = TrimAfterDrain::default();
        let trims: Vec<bool> = [500, 0, 0, 0, 0, 0, 0]
            .map(|held| trim.observe(held))
            .into();
        assert_eq!(trims, [false, true, false, false, true, false, false]);
    }

    #[test]
    fn a_drain_trims_halfway_and_again_at_its_end() {
        let mut trim = TrimAfterDrain::default();
        let trims: usize = [500, 400, 240, 200, 60, 0, 0, 0, 0, 0, 0, 0]
            .into_iter()
            .filter(|&held| trim.observe(held))
            .count();
        // 240 (halfway from 500), 60 (halfway from 240), 0 (halfway from 60 is below the
        // worthwhile peak: the settled trim, three passes later).
        assert_eq!(trims, 3);
    }

    #[test]
    fn a_steady_count_never_trims() {
        let mut trim = TrimAfterDrain::default();
        for held in [0, 5, 5, 8, 8, 8, 8, 8, 9, 9, 9, 9] {
            assert!(!trim.observe(held));
        }
    }

    #[test]
    fn an_emptied_map_gives_its_capacity_back() {
        let mut map: HashMap<u32, [u8; 64]> = (0..1000).map(|i| (i, [0; 64])).collect();
        map.retain(|&i, _| i < 500);
        shrink_when_sparse(&mut map);
        assert!(map.capacity() >= 1000, "half full: kept for the next burst");
        map.retain(|&i, _| i < 10);
        shrink_when_sparse(&mut map);
        assert!(map.capacity() < 64, "capacity {}", map.capacity());
    }
}
