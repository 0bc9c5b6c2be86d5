//! What each namespace's live instances cost an hour, against its cap
//! (`policy.guardrails.maxNamespacePricePerHour`, `maxPricePerHourByNamespace`).
//!
//! The truth is a listing of this cluster's live instances, every node's and every replica's
//! ([`census`]); between two listings, a launch this process is about to make is reserved
//! first, under one lock for the whole process, so a burst of pods in one namespace cannot
//! race past the cap. A reservation holds until a listing shows the pod's instance (which then
//! counts instead), or the launch fails with no instance possibly made, or the pod leaves the
//! node. An instance whose termination orca asked for stops counting at once. EC2's listings
//! are eventually consistent: an instance a listing showed live and a later one leaves out
//! (rather than showing it shutting down or terminated) counts on for the visibility grace.
//!
//! # What counts
//! Per live instance (pending, running, stopping, stopped): on demand, its type's catalogue
//! on-demand price; spot, the max price the plan set (tagged `orca.research/spot-max-price`
//! where EC2's tag limit leaves room), else its type's on-demand price (EC2's default max
//! price). A reservation counts the plan's
//! worst case over every offering it may launch. An instance whose type the catalogue has no
//! price for counts nothing (it was launched before a cap applied to it: the guardrails refuse
//! plans they cannot price).
//!
//! # Caveats
//! Replicas serving different nodes reserve apart: until a listing (every `pods.syncInterval`)
//! shows what the other launched, each counts only its own launches, so two replicas launching
//! into one namespace within one sync period can together pass its cap by what the other
//! launched meanwhile.

pub mod census;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;
use tokio::sync::watch;

use crate::policy::guardrails::{Guardrails, Price};
use crate::support::errors::lock;

/// One instance of the cluster as a listing shows it, priced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub instance_id: String,
    pub namespace: String,
    pub pod_uid: String,
    pub price: Price,
    /// Pending, running, stopping or stopped: it counts.
    pub live: bool,
}

/// A live instance, and when a listing last showed it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Counted {
    instance: Listed,
    seen: Timestamp,
}

/// A launch about to be made, counted until a listing shows its instance.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Reservation {
    namespace: String,
    /// The node whose pod it is: its pod controller drops the reservations of pods gone.
    node: String,
    price: Price,
}

/// What a reservation got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reserved {
    /// The namespace has no cap: nothing counted.
    Uncapped,
    /// Counted against the cap until a listing shows the instance.
    Reserved,
    /// A listing shows the pod's instance already: it counts as it is.
    Listed,
}

/// Why a pod may not launch now.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpendError {
    #[error(
        "namespace {namespace}'s live instances cost {spend} of its cap of {cap} \
         ({field}); this pod's instance may cost up to {price}, which would bring it to {after}"
    )]
    OverCap {
        namespace: String,
        field: String,
        cap: Price,
        spend: Price,
        price: Price,
        after: Price,
    },
    #[error(
        "namespace {namespace} has a cap of {cap} ({field}), and this pod's instance has no price \
         in the catalogue to count against it"
    )]
    Unpriced {
        namespace: String,
        field: String,
        cap: Price,
    },
    #[error(
        "namespace {namespace} has a cap of {cap} ({field}), and this cluster's instances have not \
         been listed yet"
    )]
    NotListed {
        namespace: String,
        field: String,
        cap: Price,
    },
}

impl SpendError {
    /// The namespace's cap, and the field that sets it.
    pub fn cap(&self) -> (Price, &str) {
        match self {
            SpendError::OverCap { cap, field, .. }
            | SpendError::Unpriced { cap, field, .. }
            | SpendError::NotListed { cap, field, .. } => (*cap, field),
        }
    }
}

/// The ledger: the last listing, the reservations made since, and the instances ended since.
#[derive(Debug, Default)]
struct Ledger {
    /// Live instances by id: shown live by the last listing, or by an earlier one within the
    /// grace and not shown since (a stale read). `None` until the first listing.
    listed: Option<HashMap<String, Counted>>,
    /// By pod UID.
    reserved: HashMap<String, Reservation>,
    /// Instances whose termination was asked for, and when: not counted, even while a listing
    /// still shows them running (EC2 is eventually consistent).
    ended: HashMap<String, Timestamp>,
}

impl Ledger {
    /// The live instances that count: all but those orca ended.
    fn counting(&self) -> impl Iterator<Item = &Listed> {
        self.listed
            .iter()
            .flat_map(HashMap::values)
            .map(|counted| &counted.instance)
            .filter(|instance| !self.ended.contains_key(&instance.instance_id))
    }

    /// Pods with an instance that counts.
    fn listed_pods(&self) -> HashSet<&str> {
        self.counting()
            .map(|instance| instance.pod_uid.as_str())
            .collect()
    }

    /// Every namespace's spend: its counted instances and its reservations not yet listed.
    fn totals(&self) -> BTreeMap<String, Price> {
        let mut totals: BTreeMap<String, Price> = BTreeMap::new();
        for instance in self.counting() {
            let total = totals.entry(instance.namespace.clone()).or_default();
            *total = total.saturating_add(instance.price);
        }
        let listed = self.listed_pods();
        for (uid, reservation) in &self.reserved {
            if !listed.contains(uid.as_str()) {
                let total = totals.entry(reservation.namespace.clone()).or_default();
                *total = total.saturating_add(reservation.price);
            }
        }
        totals
    }

    fn spend(&self, namespace: &str) -> Price {
        self.totals().get(namespace).copied().unwrap_or_default()
    }
}

/// The process's namespace spend, shared by every node's pod controller.
pub struct NamespaceSpend {
    guardrails: Arc<Guardrails>,
    ledger: Mutex<Ledger>,
    /// Bumped whenever some namespace's spend may have gone down, and at the first listing:
    /// pods waiting for room are looked at again.
    freed: watch::Sender<u64>,
    /// How long an ended instance is kept from counting after listings stop showing it.
    grace: Duration,
}

impl NamespaceSpend {
    /// `grace` is `pods.launchVisibilityGrace`: how long EC2 may show an instance late.
    pub fn new(guardrails: Arc<Guardrails>, grace: Duration) -> NamespaceSpend {
        NamespaceSpend {
            guardrails,
            ledger: Mutex::new(Ledger::default()),
            freed: watch::Sender::new(0),
            grace,
        }
    }

    /// Whether any namespace has a cap (else nothing is listed or counted).
    pub fn caps_namespaces(&self) -> bool {
        self.guardrails.caps_namespaces()
    }

    /// Whether the cluster's instances have been listed once.
    pub fn is_listed(&self) -> bool {
        lock(&self.ledger).listed.is_some()
    }

    /// Told each time room may have freed in some namespace.
    pub fn freed(&self) -> watch::Receiver<u64> {
        self.freed.subscribe()
    }

    fn cap(&self, namespace: &str) -> Option<(Price, String)> {
        let cap = self.guardrails.namespace_cap(namespace)?;
        Some((cap, cap_field(&self.guardrails, namespace)))
    }

    /// Counts a launch of pod `uid` in `namespace` (its plan's worst-case `price`, `None`
    /// when unknown) against the namespace's cap, atomically: of any number of pods reserving
    /// at once, only as many as fit get through. A pod reserving again (a retried launch)
    /// replaces its reservation.
    ///
    /// # Errors
    /// [`SpendError`] when the pod does not fit now, cannot be priced, or the cluster's
    /// instances were never listed.
    pub fn reserve(
        &self,
        namespace: &str,
        uid: &str,
        node: &str,
        price: Option<Price>,
    ) -> Result<Reserved, SpendError> {
        let Some((cap, field)) = self.cap(namespace) else {
            return Ok(Reserved::Uncapped);
        };
        let mut ledger = lock(&self.ledger);
        if ledger.listed.is_none() {
            return Err(SpendError::NotListed {
                namespace: namespace.to_owned(),
                field,
                cap,
            });
        }
        if ledger.listed_pods().contains(uid) {
            ledger.reserved.remove(uid);
            return Ok(Reserved::Listed);
        }
        let Some(price) = price else {
            return Err(SpendError::Unpriced {
                namespace: namespace.to_owned(),
                field,
                cap,
            });
        };
        let own = ledger
            .reserved
            .get(uid)
            .map_or(Price::ZERO, |reservation| reservation.price);
        let spend = ledger.spend(namespace).saturating_sub(own);
        let after = spend.saturating_add(price);
        if after > cap {
            return Err(SpendError::OverCap {
                namespace: namespace.to_owned(),
                field,
                cap,
                spend,
                price,
                after,
            });
        }
        ledger.reserved.insert(
            uid.to_owned(),
            Reservation {
                namespace: namespace.to_owned(),
                node: node.to_owned(),
                price,
            },
        );
        Ok(Reserved::Reserved)
    }

    /// The pod's launch failed with no instance possibly made: its reservation frees.
    pub fn release(&self, uid: &str) {
        let released = lock(&self.ledger).reserved.remove(uid).is_some();
        if released {
            self.bump();
        }
    }

    /// orca asked EC2 to terminate `instance_id`: it counts no more, even while listings
    /// still show it running.
    pub fn ended(&self, instance_id: &str, now: Timestamp) {
        lock(&self.ledger).ended.insert(instance_id.to_owned(), now);
        self.bump();
    }

    /// Drops `node`'s reservations for pods not in `present` (they left the node).
    pub fn retain(&self, node: &str, present: &HashSet<String>) {
        let dropped = {
            let mut ledger = lock(&self.ledger);
            let before = ledger.reserved.len();
            ledger
                .reserved
                .retain(|uid, reservation| reservation.node != node || present.contains(uid));
            before - ledger.reserved.len()
        };
        if dropped > 0 {
            self.bump();
        }
    }

    /// A new listing of the cluster's instances (every state), priced. The live ones count;
    /// one an earlier listing showed live and this one leaves out counts on until `grace` has
    /// passed since it was last shown (a stale read). Reservations of pods it shows, in any
    /// state, end (the instance counts instead, or has ended already); ended instances it no
    /// longer shows live are forgotten once `grace` has passed.
    pub fn observe(&self, listing: Vec<Listed>, now: Timestamp) {
        let grace = jiff::SignedDuration::try_from(self.grace).unwrap_or(jiff::SignedDuration::MAX);
        let freed = {
            let mut ledger = lock(&self.ledger);
            let first = ledger.listed.is_none();
            let before = ledger.totals();
            let shown: HashSet<String> = listing.iter().map(|i| i.instance_id.clone()).collect();
            let shown_pods: HashSet<String> = listing.iter().map(|i| i.pod_uid.clone()).collect();
            let mut listed: HashMap<String, Counted> = listing
                .into_iter()
                .filter(|instance| instance.live)
                .map(|instance| {
                    let id = instance.instance_id.clone();
                    (
                        id,
                        Counted {
                            instance,
                            seen: now,
                        },
                    )
                })
                .collect();
            for (id, counted) in ledger.listed.take().unwrap_or_default() {
                if !shown.contains(&id) && now.duration_since(counted.seen) < grace {
                    listed.insert(id, counted);
                }
            }
            ledger.reserved.retain(|uid, _| !shown_pods.contains(uid));
            ledger.ended.retain(|instance_id, at| {
                listed.contains_key(instance_id) || now.duration_since(*at) < grace
            });
            ledger.listed = Some(listed);
            let after = ledger.totals();
            first
                || before
                    .iter()
                    .any(|(namespace, was)| after.get(namespace).is_none_or(|now| now < was))
        };
        if freed {
            self.bump();
        }
    }

    /// How much more `namespace` may spend an hour now; `None` when it has no cap.
    pub fn room(&self, namespace: &str) -> Option<Price> {
        let (cap, _) = self.cap(namespace)?;
        Some(cap.saturating_sub(lock(&self.ledger).spend(namespace)))
    }

    /// Every namespace's spend now (instances listed, and launches reserved), for metrics.
    pub fn totals(&self) -> BTreeMap<String, Price> {
        lock(&self.ledger).totals()
    }

    fn bump(&self) {
        self.freed
            .send_modify(|generation| *generation = generation.wrapping_add(1));
    }
}

/// The field that sets `namespace`'s cap.
fn cap_field(guardrails: &Guardrails, namespace: &str) -> String {
    if guardrails.has_own_cap(namespace) {
        format!("policy.guardrails.maxPricePerHourByNamespace.{namespace}")
    } else {
        "policy.guardrails.maxNamespacePricePerHour".to_owned()
    }
}

/// A pod waiting for room in its namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiting {
    pub uid: String,
    pub namespace: String,
    pub price: Price,
    /// Since when it waits: the longest waiting go first.
    pub since: Timestamp,
}

/// Which of `waiting` to plan again now: per namespace, longest waiting first, as many as fit
/// the room there (`room`); a pod that does not fit does not hold back a smaller one behind
/// it. Pods woken this way that lose the race to another node's stay waiting.
pub fn to_wake(waiting: &[Waiting], room: impl Fn(&str) -> Option<Price>) -> Vec<String> {
    let mut order: Vec<&Waiting> = waiting.iter().collect();
    order.sort_by(|a, b| a.since.cmp(&b.since).then_with(|| a.uid.cmp(&b.uid)));
    let mut left: HashMap<&str, Option<Price>> = HashMap::new();
    let mut wake = Vec::new();
    for pod in order {
        let left = left
            .entry(pod.namespace.as_str())
            .or_insert_with(|| room(&pod.namespace));
        match left {
            // No cap any more: every waiting pod goes.
            None => wake.push(pod.uid.clone()),
            Some(room) if pod.price <= *room => {
                *room = room.saturating_sub(pod.price);
                wake.push(pod.uid.clone());
            }
            Some(_) => {}
        }
    }
    wake
}

#[cfg(test)]
mod tests;
