//! Which unreadable messages were already reported. Such a message is left on the queue (it
//! may be another consumer's), so it comes back after every visibility timeout until the queue
//! drops it; one warning per message says everything, the repeats only bury other lines.

use std::collections::{HashSet, VecDeque};
use std::hash::{DefaultHasher, Hash, Hasher};

/// How many bodies are remembered; the oldest is forgotten first. With the queue's five-minute
/// retention far fewer are ever alive at once.
const REMEMBERED: usize = 1024;

#[derive(Debug, Default)]
pub(super) struct SeenBodies {
    hashes: HashSet<u64>,
    order: VecDeque<u64>,
}

impl SeenBodies {
    /// Whether `body` is new, remembering it.
    pub(super) fn first_time(&mut self, body: &str) -> bool {
        let mut hasher = DefaultHasher::new();
        body.hash(&mut hasher);
        let hash = hasher.finish();
        if !self.hashes.insert(hash) {
            return false;
        }
        self.order.push_back(hash);
        if self.order.len() > REMEMBERED
            && let Some(oldest) = self.order.pop_front()
        {
            self.hashes.remove(&oldest);
        }
        true
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
        for index in 0..REMEMBERED {
            seen.first_time(&index.to_string());
        }
        assert!(seen.first_time("garbage"), "the oldest body was forgotten");
        assert!(seen.hashes.len() <= REMEMBERED);
    }
}
