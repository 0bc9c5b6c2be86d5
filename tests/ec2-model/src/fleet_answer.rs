//! What a client is told about an instant fleet: by CreateFleet, and by
//! DescribeFleets.

use std::collections::BTreeMap;

use jiff::Timestamp;

use crate::instance::Instance;

/// An instance the fleet launched.
#[derive(Clone, Debug, PartialEq)]
pub struct FleetInstance {
    /// As CreateFleet answers it: as launched (`pending`, the tags asked
    /// for), or in its current state when a repeated token answers it.
    pub instance: Instance,
    /// The pool it came from: an index into the request's `pools`.
    pub pool: usize,
}

/// A pool the fleet tried and could not launch into.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetError {
    /// An index into the request's `pools`.
    pub pool: usize,
    pub instance_type: String,
    pub subnet_id: Option<String>,
    /// The Availability Zone of the subnet (or the default zone).
    pub zone: String,
    /// The code RunInstances would have answered for this pool, e.g.
    /// `InsufficientInstanceCapacity` or `SpotMaxPriceTooLow`.
    pub code: String,
    pub message: String,
}

/// CreateFleet's answer. An instant fleet answers even when it launched
/// nothing: then `instances` is empty and `errors` says why.
#[derive(Clone, Debug, PartialEq)]
pub struct FleetAnswer {
    pub fleet_id: String,
    /// At most one (the target capacity).
    pub instances: Vec<FleetInstance>,
    pub errors: Vec<FleetError>,
}

/// A fleet as DescribeFleets lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetDescription {
    pub fleet_id: String,
    pub client_token: Option<String>,
    /// The request's tags, visible with the fleet.
    pub tags: BTreeMap<String, String>,
    pub instance_ids: Vec<String>,
    pub errors: Vec<FleetError>,
    pub created_at: Timestamp,
}
