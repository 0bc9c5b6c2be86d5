//! Everything the model knows about one instance: its timeline, tags,
//! console, protection and what ended its workload. Every question about it
//! takes the moment it is asked about.

use std::net::Ipv4Addr;

use jiff::{SignedDuration, Timestamp};

use crate::console::ConsoleLog;
use crate::history::{Ending, InstanceHistory};
use crate::instance::Instance;
use crate::state::{State, StateReason};
use crate::tags::TagLog;
use crate::time::later;
use crate::timeline::Timeline;

#[derive(Clone, Debug)]
pub(crate) struct Record {
    pub id: String,
    pub instance_type: String,
    pub spot: bool,
    pub zone: String,
    pub subnet_id: Option<String>,
    /// The RunInstances client token. `None` for an instance a fleet
    /// launched: that token is the fleet's, and RunInstances (or a
    /// `client-token` filter) must not find the instance by it.
    pub client_token: Option<String>,
    pub private_ip: Ipv4Addr,
    pub launch_time: Timestamp,
    /// Before this, no API call knows the instance exists.
    pub visible_at: Timestamp,
    /// How long the instance stays listed once terminated.
    pub retention: SignedDuration,
    pub timeline: Timeline,
    pub tags: TagLog,
    pub console: ConsoleLog,
    /// Termination protection windows `[from, until)`.
    pub protections: Vec<(Timestamp, Timestamp)>,
    /// Candidate endings with the moment each takes effect; the earliest
    /// wins, so a later event can never overwrite an earlier one.
    pub endings: Vec<Ending>,
    pub termination_requests: Vec<Timestamp>,
}

impl Record {
    /// The state in force at `at`, if the instance existed then.
    pub fn state_at(&self, at: Timestamp) -> Option<State> {
        self.timeline.at(at).map(|entry| entry.state)
    }

    /// True once a terminated instance has dropped out of every listing.
    pub fn purged_at(&self, at: Timestamp) -> bool {
        self.timeline
            .terminated_at()
            .is_some_and(|terminated| at >= later(terminated, self.retention))
    }

    /// True if API calls asking about `at` know of the instance: it has
    /// propagated and has not been purged.
    pub fn known_at(&self, at: Timestamp) -> bool {
        at >= self.visible_at && self.timeline.at(at).is_some() && !self.purged_at(at)
    }

    pub fn protected_at(&self, at: Timestamp) -> bool {
        self.protections
            .iter()
            .any(|&(from, until)| from <= at && at < until)
    }

    /// The instance as an answer about `at` describes it, with the tags
    /// visible then; `None` if no call could see it then.
    pub fn describe_at(&self, at: Timestamp) -> Option<Instance> {
        if !self.known_at(at) {
            return None;
        }
        let tags = self.tags.visible_at(at);
        self.view_at(at, tags)
    }

    /// The instance at `at` with the given tags, whether or not it is visible.
    pub fn view_at(
        &self,
        at: Timestamp,
        tags: std::collections::BTreeMap<String, String>,
    ) -> Option<Instance> {
        let entry = self.timeline.at(at)?;
        Some(self.view(entry.state, entry.reason.clone(), tags))
    }

    /// The instance as the answer to its launch describes it: as it was
    /// made, `pending` whatever its boot time, with the tags that were asked
    /// for (visible yet or not).
    pub fn as_launched(&self, tags: std::collections::BTreeMap<String, String>) -> Instance {
        self.view(State::Pending, None, tags)
    }

    fn view(
        &self,
        state: State,
        state_reason: Option<StateReason>,
        tags: std::collections::BTreeMap<String, String>,
    ) -> Instance {
        Instance {
            instance_id: self.id.clone(),
            instance_type: self.instance_type.clone(),
            state,
            state_reason,
            private_ip: self.private_ip,
            launch_time: self.launch_time,
            spot: self.spot,
            zone: self.zone.clone(),
            subnet_id: self.subnet_id.clone(),
            client_token: self.client_token.clone(),
            tags,
        }
    }

    /// Forgets everything scheduled after `at`: an event at `at` supersedes
    /// the transitions, writes and endings that were still to come.
    pub fn cancel_after(&mut self, at: Timestamp) {
        self.timeline.cancel_after(at);
        self.tags.cancel_after(at);
        self.console.cancel_after(at);
        self.endings.retain(|ending| ending.at() <= at);
    }

    /// Schedules `shutting-down` at `at` and `terminated` after `shutdown`.
    pub fn shut_down(&mut self, at: Timestamp, shutdown: SignedDuration, reason: StateReason) {
        self.timeline
            .push(at, State::ShuttingDown, Some(reason.clone()));
        self.timeline
            .push(later(at, shutdown), State::Terminated, Some(reason));
    }

    /// Schedules `stopping` at `at` and `stopped` after `shutdown`.
    pub fn stop(&mut self, at: Timestamp, shutdown: SignedDuration, reason: StateReason) {
        self.timeline
            .push(at, State::Stopping, Some(reason.clone()));
        self.timeline
            .push(later(at, shutdown), State::Stopped, Some(reason));
    }

    /// What ended the workload first; ties go to the one recorded first.
    pub fn ending(&self) -> Option<&Ending> {
        self.endings.iter().reduce(|first, other| {
            if other.at() < first.at() {
                other
            } else {
                first
            }
        })
    }

    pub fn has_completed(&self) -> bool {
        self.endings
            .iter()
            .any(|ending| matches!(ending, Ending::Completed { .. }))
    }

    pub fn history(&self) -> InstanceHistory {
        InstanceHistory {
            instance_id: self.id.clone(),
            client_token: self.client_token.clone(),
            launch_time: self.launch_time,
            tags: self.tags.final_values(),
            zone: self.zone.clone(),
            subnet_id: self.subnet_id.clone(),
            private_ip: self.private_ip,
            spot: self.spot,
            instance_type: self.instance_type.clone(),
            ending: self.ending().cloned(),
            transitions: self
                .timeline
                .entries()
                .iter()
                .map(|entry| (entry.at, entry.state, entry.reason.clone()))
                .collect(),
            terminated_at: self.timeline.terminated_at(),
            termination_requests: self.termination_requests.clone(),
        }
    }
}
