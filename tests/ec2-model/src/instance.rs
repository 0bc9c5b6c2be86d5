//! What a client is told about an instance.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use jiff::Timestamp;

use crate::state::{State, StateReason};

/// An instance as one answer describes it: its state and tags as of the
/// moment that answer speaks for (which may be stale).
#[derive(Clone, Debug, PartialEq)]
pub struct Instance {
    pub instance_id: String,
    pub instance_type: String,
    pub state: State,
    /// Set once the instance is shutting down or stopping; `None` before.
    pub state_reason: Option<StateReason>,
    pub private_ip: Ipv4Addr,
    pub launch_time: Timestamp,
    pub spot: bool,
    /// The Availability Zone.
    pub zone: String,
    pub subnet_id: Option<String>,
    pub client_token: Option<String>,
    /// The tags visible at the moment the answer describes.
    pub tags: BTreeMap<String, String>,
}

/// One entry of a TerminateInstances or StopInstances answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateChange {
    pub instance_id: String,
    pub previous: State,
    pub current: State,
}
