//! Giving freed heap back to the operating system once a burst of pods has drained.
//!
//! glibc's allocator keeps memory that was freed inside its arenas (one per busy thread, and
//! tokio runs several) for reuse; only the top of the main heap is returned on its own. A node
//! that held a wave of 500 pods therefore keeps the wave's high-water mark resident long after
//! the pods are gone: measured by `memory-bench`, 73 MiB after 10,000 pods against a 32 MiB
//! idle baseline, the same after 1,000 pods as after 10,000 (no growth, just no return).
//! `malloc_trim` walks every arena and releases its free pages; it costs a few milliseconds
//! for a heap of this size, so it is asked only when the number of pods has dropped to half of
//! its peak since the last trim, never per pod.

/// Decides when a trim is worth its cost: after the pod count has fallen to half of its peak
/// since the last trim (and the peak was not tiny).
#[derive(Debug, Default)]
pub struct TrimAfterDrain {
    peak: usize,
}

/// Below this many pods at the peak, what their departure frees is not worth a trim.
const WORTHWHILE_PEAK: usize = 64;

impl TrimAfterDrain {
    /// Notes the current number of pods; true when the heap should be trimmed now.
    pub fn observe(&mut self, pods: usize) -> bool {
        self.peak = self.peak.max(pods);
        if self.peak >= WORTHWHILE_PEAK && pods <= self.peak / 2 {
            self.peak = pods;
            return true;
        }
        false
    }
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

    #[test]
    fn trims_once_the_pods_have_halved_from_their_peak() {
        let mut trim = TrimAfterDrain::default();
        assert!(!trim.observe(500));
        assert!(!trim.observe(300));
        assert!(trim.observe(250));
        // The peak starts again from where the trim left it.
        assert!(!trim.observe(200));
        assert!(trim.observe(100));
    }

    #[test]
    fn a_few_pods_coming_and_going_never_trim() {
        let mut trim = TrimAfterDrain::default();
        for pods in [10, 0, 40, 0, 63, 0] {
            assert!(!trim.observe(pods));
        }
    }

    #[test]
    fn every_drained_wave_trims_once() {
        let mut trim = TrimAfterDrain::default();
        for _ in 0..3 {
            assert!(!trim.observe(500));
            assert!(trim.observe(0));
            assert!(!trim.observe(0));
        }
    }
}
