//! One instance's state over time, including transitions already scheduled
//! for the future (e.g. `pending` → `running` once it has booted).
//!
//! The state at any moment is a pure function of the timeline, which is what
//! makes stale reads cheap: a lagging replica just asks about an earlier time.

use jiff::Timestamp;

use crate::state::{State, StateReason};

/// The instance entered `state` at `at`, for `reason`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub at: Timestamp,
    pub state: State,
    pub reason: Option<StateReason>,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct Timeline {
    /// Sorted by `at`; entries at the same instant keep the order they were
    /// added in, and the last one wins.
    entries: Vec<Entry>,
}

impl Timeline {
    /// Adds a transition, keeping the entries in time order.
    pub fn push(&mut self, at: Timestamp, state: State, reason: Option<StateReason>) {
        let position = self.entries.partition_point(|entry| entry.at <= at);
        self.entries.insert(position, Entry { at, state, reason });
    }

    /// The entry in force at `at`; `None` before the instance existed.
    pub fn at(&self, at: Timestamp) -> Option<&Entry> {
        let position = self.entries.partition_point(|entry| entry.at <= at);
        position
            .checked_sub(1)
            .and_then(|last| self.entries.get(last))
    }

    /// Forgets everything scheduled after `at`: an event at `at` (a stop, a
    /// termination, a reclaim) supersedes what was going to happen next.
    pub fn cancel_after(&mut self, at: Timestamp) {
        self.entries.retain(|entry| entry.at <= at);
    }

    /// True if a transition is scheduled after `at`.
    pub fn has_scheduled_after(&self, at: Timestamp) -> bool {
        self.entries.last().is_some_and(|entry| entry.at > at)
    }

    /// The first scheduled shutdown or stop after `at`, if any.
    pub fn next_departure_after(&self, at: Timestamp) -> Option<Timestamp> {
        self.entries
            .iter()
            .find(|entry| {
                entry.at > at && matches!(entry.state, State::ShuttingDown | State::Stopping)
            })
            .map(|entry| entry.at)
    }

    /// When the instance became (or will become) `terminated`.
    pub fn terminated_at(&self) -> Option<Timestamp> {
        self.entries
            .iter()
            .find(|entry| entry.state == State::Terminated)
            .map(|entry| entry.at)
    }

    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::t;

    #[test]
    fn the_state_at_a_moment_is_the_last_transition_before_it() {
        let mut timeline = Timeline::default();
        timeline.push(t(10), State::Pending, None);
        timeline.push(t(12), State::Running, None);
        assert_eq!(timeline.at(t(9)), None);
        assert_eq!(timeline.at(t(10)).map(|e| e.state), Some(State::Pending));
        assert_eq!(timeline.at(t(11)).map(|e| e.state), Some(State::Pending));
        assert_eq!(timeline.at(t(12)).map(|e| e.state), Some(State::Running));
    }

    #[test]
    fn of_two_transitions_at_the_same_instant_the_later_added_wins() {
        let mut timeline = Timeline::default();
        timeline.push(t(10), State::Pending, None);
        timeline.push(t(10), State::Running, None);
        assert_eq!(timeline.at(t(10)).map(|e| e.state), Some(State::Running));
    }

    #[test]
    fn cancelling_forgets_only_what_was_scheduled_later() {
        let mut timeline = Timeline::default();
        timeline.push(t(10), State::Pending, None);
        timeline.push(t(12), State::Running, None);
        timeline.cancel_after(t(11));
        timeline.push(t(11), State::ShuttingDown, None);
        assert_eq!(
            timeline.at(t(20)).map(|e| e.state),
            Some(State::ShuttingDown)
        );
        assert!(!timeline.has_scheduled_after(t(11)));
    }
}
