//! Which messages (or origins) were already seen, and how often. What should not be on this
//! orca's queue at all (a body orca cannot read, another account's notices) is deleted and
//! warned about once per body or origin: a flood of them, or a delete that failed and brought
//! one back, repeats no warning. A message for another replica's instances is handed on a few
//! times, not forever.

use std::collections::{HashMap, VecDeque};
use std::hash::{DefaultHasher, Hash, Hasher};

/// How many bodies are remembered; the oldest is forgotten first.
const REMEMBERED: usize = 1024;

#[derive(Debug, Default)]
pub(super) struct SeenBodies {
    /// Each body's hash, and how often it was seen.
    hashes: HashMap<u64, u32>,
    order: VecDeque<u64>,
}

impl SeenBodies {
    /// Whether `body` is new, remembering it.
    pub(super) fn first_time(&mut self, body: &str) -> bool {
        self.times(body) == 1
    }

    /// How often `body` was seen, this time included.
    pub(super) fn times(&mut self, body: &str) -> u32 {
        let mut hasher = DefaultHasher::new();
        body.hash(&mut hasher);
        let hash = hasher.finish();
        if let Some(times) = self.hashes.get_mut(&hash) {
            *times = times.saturating_add(1);
            return *times;
        }
        self.hashes.insert(hash, 1);
        self.order.push_back(hash);
        if self.order.len() > REMEMBERED
            && let Some(oldest) = self.order.pop_front()
        {
            self.hashes.remove(&oldest);
        }
        1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_is_new_once_until_it_is_forgotten() {
        let mut seen = SeenBodies::default();
        assert!(seen.first_time("garbage"));
        assert!(!seen.first_time("garbage"));
        assert!(seen.first_time("other garbage"));
        assert_eq!(seen.times("other garbage"), 2);
        assert_eq!(seen.times("other garbage"), 3);
        for index in 0..REMEMBERED {
            seen.first_time(&index.to_string());
        }
        assert!(seen.first_time("garbage"), "the oldest body was forgotten");
        assert!(seen.hashes.len() <= REMEMBERED);
    }
}
