//! A bounded map whose entries expire, for reusing TokenReview and SubjectAccessReview answers
//! as the apiserver's webhook authenticator and authorizer caches do.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::errors::lock;

/// How many answers a cache keeps; beyond this, expired entries go first, then the oldest.
/// Bounded so that a stream of distinct bogus tokens cannot grow memory without limit.
pub const CAPACITY: usize = 4096;

/// The time source of a cache, so tests can move time without sleeping.
pub trait Clock: Send + Sync {
    fn now(&self) -> Instant;
}

/// The monotonic clock.
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

struct Entry<V> {
    value: V,
    expires: Instant,
    /// Insertion order, to find the oldest entry when the cache is full.
    sequence: u64,
}

struct Entries<K, V> {
    map: HashMap<K, Entry<V>>,
    next_sequence: u64,
}

/// A thread-safe map from `K` to `V` whose entries live for the TTL given at insertion.
pub struct TtlCache<K, V> {
    entries: Mutex<Entries<K, V>>,
    capacity: usize,
    clock: Arc<dyn Clock>,
}

impl<K: Eq + Hash, V: Clone> TtlCache<K, V> {
    pub fn new(capacity: usize, clock: Arc<dyn Clock>) -> Self {
        TtlCache {
            entries: Mutex::new(Entries {
                map: HashMap::new(),
                next_sequence: 0,
            }),
            capacity: capacity.max(1),
            clock,
        }
    }

    /// The value stored under `key`, unless it has expired.
    pub fn get(&self, key: &K) -> Option<V> {
        let now = self.clock.now();
        let mut entries = lock(&self.entries);
        match entries.map.get(key) {
            Some(entry) if now < entry.expires => Some(entry.value.clone()),
            Some(_) => {
                entries.map.remove(key);
                None
            }
            None => None,
        }
    }

    /// Stores `value` for `ttl`. A zero TTL stores nothing (a TTL of 0 turns the kubelet's
    /// caches off), nor does one too long to represent as an instant.
    pub fn insert(&self, key: K, value: V, ttl: Duration) {
        let now = self.clock.now();
        let Some(expires) = now.checked_add(ttl).filter(|_| !ttl.is_zero()) else {
            return;
        };
        let mut entries = lock(&self.entries);
        if !entries.map.contains_key(&key) && entries.map.len() >= self.capacity {
            entries.map.retain(|_, entry| now < entry.expires);
            if entries.map.len() >= self.capacity {
                // Sequences are unique, so this removes exactly the oldest entry.
                let oldest = entries.map.values().map(|entry| entry.sequence).min();
                entries
                    .map
                    .retain(|_, entry| Some(entry.sequence) != oldest);
            }
        }
        let sequence = entries.next_sequence;
        entries.next_sequence += 1;
        entries.map.insert(
            key,
            Entry {
                value,
                expires,
                sequence,
            },
        );
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        lock(&self.entries).map.len()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// A clock that moves only when told to.
    pub struct ManualClock {
        start: Instant,
        elapsed: Mutex<Duration>,
    }

    impl ManualClock {
        pub fn new() -> Arc<ManualClock> {
            Arc::new(ManualClock {
                start: Instant::now(),
                elapsed: Mutex::new(Duration::ZERO),
            })
        }

        pub fn advance(&self, by: Duration) {
            *lock(&self.elapsed) += by;
        }
    }

    impl Clock for ManualClock {
        fn now(&self) -> Instant {
            self.start + *lock(&self.elapsed)
        }
    }

    #[test]
    fn entries_expire_after_their_ttl() {
        let clock = ManualClock::new();
        let cache = TtlCache::new(8, clock.clone());
        cache.insert("a", 1, Duration::from_secs(10));
        clock.advance(Duration::from_secs(9));
        assert_eq!(cache.get(&"a"), Some(1));
        clock.advance(Duration::from_secs(1));
        assert_eq!(cache.get(&"a"), None);
        assert!(cache.is_empty());
    }

    #[test]
    fn zero_ttl_stores_nothing() {
        let cache = TtlCache::new(8, ManualClock::new());
        cache.insert("a", 1, Duration::ZERO);
        assert_eq!(cache.get(&"a"), None);
    }

    #[test]
    fn a_full_cache_drops_expired_entries_first_then_the_oldest() {
        let clock = ManualClock::new();
        let cache = TtlCache::new(3, clock.clone());
        cache.insert("old", 1, Duration::from_secs(100));
        cache.insert("short", 2, Duration::from_secs(1));
        cache.insert("young", 3, Duration::from_secs(100));
        clock.advance(Duration::from_secs(2));
        cache.insert("new", 4, Duration::from_secs(100));
        assert_eq!(cache.len(), 3);
        assert_eq!(
            cache.get(&"old"),
            Some(1),
            "the expired entry goes, not the oldest"
        );
        cache.insert("newer", 5, Duration::from_secs(100));
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.get(&"old"), None, "nothing expired: the oldest goes");
        assert_eq!(cache.get(&"young"), Some(3));
        assert_eq!(cache.get(&"newer"), Some(5));
    }

    #[test]
    fn replacing_a_key_in_a_full_cache_evicts_nothing() {
        let cache = TtlCache::new(2, ManualClock::new());
        cache.insert("a", 1, Duration::from_secs(10));
        cache.insert("b", 2, Duration::from_secs(10));
        cache.insert("a", 3, Duration::from_secs(10));
        assert_eq!(cache.get(&"a"), Some(3));
        assert_eq!(cache.get(&"b"), Some(2));
    }
}
