//! The model itself: shared state behind one lock, and the few things every
//! operation needs (the clock rule, id resolution).

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::sync::{Mutex, MutexGuard};

use jiff::Timestamp;

use crate::behaviour::Behaviour;
use crate::error::Ec2Error;
use crate::fleet::CreateFleet;
use crate::fleet_record::FleetRecord;
use crate::history::InstanceHistory;
use crate::history::RefusedReplay;
use crate::ids;
use crate::launch::RunInstances;
use crate::record::Record;
use crate::template::TemplateRecord;
use crate::throttle::Throttle;
use crate::token::TokenBook;
use crate::workload::InterruptionNotice;

/// A seeded model of one EC2 region for one account.
///
/// # Guarantees
/// - The same seed, behaviour and sequence of calls (with the same `now`s)
///   give the same answers: everything random comes from one RNG seeded
///   with `seed`.
/// - The model never reads a clock. Reads answer about the `now` they are
///   given, earlier or not. Changes never rewrite the past: a call that
///   changes the world with a `now` earlier than the latest change is taken
///   as happening at the time of that change.
/// - No input makes it panic.
/// - `Send + Sync`: calls from many tasks are serialised by one lock.
pub struct Ec2Model {
    seed: u64,
    world: Mutex<World>,
}

/// The state behind the lock.
pub(crate) struct World {
    pub seed: u64,
    pub rng: fastrand::Rng,
    pub behaviour: Behaviour,
    /// In launch order, which is the order describes list them in.
    pub records: Vec<Record>,
    pub index: BTreeMap<String, usize>,
    pub ips: BTreeSet<Ipv4Addr>,
    /// RunInstances tokens.
    pub tokens: TokenBook<RunInstances>,
    /// Instant fleets, in creation order, which is the order DescribeFleets
    /// lists them in.
    pub fleets: Vec<FleetRecord>,
    pub fleet_index: BTreeMap<String, usize>,
    /// CreateFleet tokens, a book of their own.
    pub fleet_tokens: TokenBook<CreateFleet>,
    /// Launch templates, in creation order.
    pub templates: Vec<TemplateRecord>,
    pub throttle: Throttle,
    pub notices: Vec<InterruptionNotice>,
    /// Every request refused `IdempotentParameterMismatch`, in order.
    pub refused_replays: Vec<RefusedReplay>,
    /// When the world last changed.
    last_change: Option<Timestamp>,
}

impl Ec2Model {
    pub fn new(seed: u64, behaviour: Behaviour) -> Ec2Model {
        Ec2Model {
            seed,
            world: Mutex::new(World {
                seed,
                rng: fastrand::Rng::with_seed(seed),
                behaviour,
                records: Vec::new(),
                index: BTreeMap::new(),
                ips: BTreeSet::new(),
                tokens: TokenBook::default(),
                fleets: Vec::new(),
                fleet_index: BTreeMap::new(),
                fleet_tokens: TokenBook::default(),
                templates: Vec::new(),
                throttle: Throttle::default(),
                notices: Vec::new(),
                refused_replays: Vec::new(),
                last_change: None,
            }),
        }
    }

    /// The seed, to print when a test fails so it can be replayed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The fault profile in force.
    pub fn behaviour(&self) -> Behaviour {
        self.world().behaviour.clone()
    }

    /// Every instance ever launched, in launch order: the truth, including
    /// transitions already scheduled.
    pub fn history(&self) -> Vec<InstanceHistory> {
        self.world().records.iter().map(Record::history).collect()
    }

    /// Every request EC2 refused because its client token was used before by a request with
    /// other parameters, oldest first: the truth, for invariant checks (a client that replays
    /// what it sent never meets one).
    pub fn refused_replays(&self) -> Vec<RefusedReplay> {
        self.world().refused_replays.clone()
    }

    /// Interruption notices issued since the last call, oldest first.
    pub fn take_notices(&self) -> Vec<InterruptionNotice> {
        std::mem::take(&mut self.world().notices)
    }

    pub(crate) fn world(&self) -> MutexGuard<'_, World> {
        // A panic in another thread while holding the lock cannot leave the
        // world half-updated in a way that matters more than a test failing,
        // so carry on rather than propagate the poison.
        self.world
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl World {
    /// The time a call that may change the world happens at: `now`, or the
    /// time of the latest change if that is later, so that a change never
    /// lands before one already made (timelines stay in order).
    pub fn effective(&self, now: Timestamp) -> Timestamp {
        self.last_change.map_or(now, |last| last.max(now))
    }

    /// Records that the world changed at `at`.
    pub fn changed_at(&mut self, at: Timestamp) {
        self.last_change = Some(self.effective(at));
    }

    /// Lets the call through or refuses it as part of a throttling burst.
    pub fn admit(&mut self) -> Result<(), Ec2Error> {
        self.throttle.admit(&mut self.rng, &self.behaviour)
    }

    pub fn record(&self, id: &str) -> Option<&Record> {
        self.index.get(id).and_then(|&i| self.records.get(i))
    }

    pub fn record_mut(&mut self, id: &str) -> Option<&mut Record> {
        let i = *self.index.get(id)?;
        self.records.get_mut(i)
    }

    /// Resolves the ids of a by-id call the way EC2 does, all or nothing.
    ///
    /// # Errors
    /// `MissingParameter` for no ids; `InvalidInstanceID.Malformed` for the
    /// first malformed id; `InvalidInstanceID.NotFound` naming every id no
    /// call can see at `now` (never launched, not yet propagated, or purged).
    pub fn resolve(&self, now: Timestamp, ids: &[String]) -> Result<Vec<usize>, Ec2Error> {
        if ids.is_empty() {
            return Err(Ec2Error::missing_parameter("InstanceId"));
        }
        if let Some(bad) = ids.iter().find(|id| !ids::is_well_formed(id)) {
            return Err(Ec2Error::malformed(bad));
        }
        let mut found = Vec::new();
        let mut missing = Vec::new();
        for id in ids {
            match self.index.get(id.as_str()) {
                Some(&i) if self.records.get(i).is_some_and(|r| r.known_at(now)) => {
                    // EC2 answers a repeated id once.
                    if !found.contains(&i) {
                        found.push(i);
                    }
                }
                _ => {
                    if !missing.contains(&id.as_str()) {
                        missing.push(id.as_str());
                    }
                }
            }
        }
        if missing.is_empty() {
            Ok(found)
        } else {
            Err(Ec2Error::not_found(&missing))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_can_be_shared_between_threads() {
        fn shareable<T: Send + Sync>() {}
        shareable::<Ec2Model>();
    }
}
