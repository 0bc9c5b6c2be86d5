//! Giving freed heap back to the operating system once a burst of pods has drained.
//!
//! Three things keep a drained burst's memory resident, each measured by `memory-bench`
//! (BENCHMARKS.md, "Memory over time"):
//! - A `HashMap` keeps the capacity of its fullest moment. Maps that hold one entry per pod
//!   or instance give it back through [`shrink_when_sparse`] as they empty.
//! - The allocator keeps freed pages for reuse and returns them as they age, and only while
//!   the process keeps allocating. [`release_freed_memory`] purges them at once. It costs a
//!   few milliseconds for a heap of this size, so [`TrimAfterDrain`] asks for it only when
//!   what orca holds per pod (records and listed instances) has shrunk: once halfway down a
//!   large drain, and once the count has settled after any drop, never per pod.
//! - What a burst leaves alive is scattered over the pages it touched, and a page with one
//!   live allocation cannot be returned. The [`Allocator`] and its [`ALLOCATOR_SETTINGS`] are
//!   chosen to leave it few such pages.

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

/// orca's allocator: jemalloc, with [`ALLOCATOR_SETTINGS`]. Set as the global allocator by the
/// binary (`main.rs`), which also exports the settings where jemalloc reads them.
///
/// Why not glibc's (BENCHMARKS.md, "Memory over time", has the rounds): after a burst drained,
/// glibc's heap kept what the burst left alive scattered over its pages, and neither two
/// arenas, a fixed mmap threshold nor `malloc_trim` at the right moment brought it below
/// +15 % of the idle baseline. jemalloc keeps each size class in its own slabs, fills the
/// lowest ones first, and purges whole free pages, so the same burst leaves less behind.
pub type Allocator = tikv_jemallocator::Jemalloc;

/// What jemalloc reads before its first allocation (a `malloc_conf` string). Measured by
/// `memory-bench` and `peers-bench`:
/// - `narenas:1`: one arena, so a burst's survivors share one set of slabs instead of one per
///   thread (jemalloc's default is four arenas per core).
/// - `tcache:false`: no per-thread caches, which keep freed objects of threads that have gone
///   idle and so keep their slabs. On two cores with two workers the arena's locks are rarely
///   contended: CPU to Running for 1,000 pods was the same (1.08 s against 1.05 s).
/// - `dirty_decay_ms:1000,muzzy_decay_ms:0`: pages freed in steady state go back within
///   seconds; [`release_freed_memory`] gives back the rest at once after a drain.
///
/// `_RJEM_MALLOC_CONF` in the environment is read after this and overrides it.
pub const ALLOCATOR_SETTINGS: AllocatorSettings =
    AllocatorSettings(c"narenas:1,tcache:false,dirty_decay_ms:1000,muzzy_decay_ms:0".as_ptr());

/// A C string jemalloc reads as its `malloc_conf`: a pointer, as jemalloc declares it.
#[repr(transparent)]
pub struct AllocatorSettings(*const std::ffi::c_char);

// Allowed here: jemalloc reads its settings through a static raw pointer, which Rust shares
// between threads only with this promise.
// SAFETY: the pointer is to a string literal: immutable and alive for the whole program.
#[allow(unsafe_code)]
unsafe impl Sync for AllocatorSettings {}

impl AllocatorSettings {
    /// The settings as text.
    pub fn as_str(&self) -> &'static str {
        // Allowed here: the settings are kept as the raw pointer jemalloc reads.
        // SAFETY: built only from a C string literal (a private field), so the pointer is to a
        // NUL-terminated string that lives for the whole program.
        #[allow(unsafe_code)]
        let settings = unsafe { std::ffi::CStr::from_ptr(self.0) };
        settings.to_str().unwrap_or_default()
    }
}

/// Returns every free page jemalloc holds to the operating system now, rather than as its
/// decay would; false if jemalloc refused. Where jemalloc is not the process's allocator its
/// arenas hold nothing and this does nothing.
pub fn release_freed_memory() -> bool {
    /// `arena.<i>.purge` with `MALLCTL_ARENAS_ALL` for `i`: every arena.
    const PURGE_ALL_ARENAS: &std::ffi::CStr = c"arena.4096.purge";
    // Allowed here: `mallctl` is jemalloc's C interface, the only way to ask it for a purge.
    // SAFETY: a purge reads and writes no values (null old/new pointers, zero length);
    // jemalloc takes its own locks and allows it from any thread at any time.
    #[allow(unsafe_code)]
    let status = unsafe {
        tikv_jemalloc_sys::mallctl(
            PURGE_ALL_ARENAS.as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        )
    };
    status == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jemalloc_knows_the_purge() {
        // An unknown name would make every trim a silent no-op.
        assert!(release_freed_memory());
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
