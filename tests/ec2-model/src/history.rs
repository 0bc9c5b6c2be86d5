//! The truth about each instance, for invariant checks: never stale, never
//! faulty.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use jiff::Timestamp;

use crate::state::{State, StateReason};

/// What ended an instance's workload first. Never overwritten by anything
/// that happens later.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ending {
    /// The workload finished by itself.
    Completed {
        pod_exit_code: i32,
        containers: Vec<(String, i32)>,
        at: Timestamp,
    },
    /// EC2 reclaimed the spot instance. `workload_exit` is `Some(143)` if the
    /// bootstrap's SIGTERM trap recorded an exit code as it went down.
    Interrupted {
        at: Timestamp,
        workload_exit: Option<i32>,
    },
    /// Someone (the client or anyone else) stopped the instance.
    Stopped { at: Timestamp },
    /// The client terminated the instance.
    TerminatedByClient { at: Timestamp },
}

impl Ending {
    /// When the workload ended.
    pub fn at(&self) -> Timestamp {
        match self {
            Ending::Completed { at, .. }
            | Ending::Interrupted { at, .. }
            | Ending::Stopped { at }
            | Ending::TerminatedByClient { at } => *at,
        }
    }
}

/// Everything that happened to one instance, including what is already
/// scheduled (a `terminated` transition a second from now is listed).
#[derive(Clone, Debug, PartialEq)]
pub struct InstanceHistory {
    pub instance_id: String,
    pub client_token: Option<String>,
    pub launch_time: Timestamp,
    /// Every tag at its final value, visible yet or not.
    pub tags: BTreeMap<String, String>,
    pub zone: String,
    pub subnet_id: Option<String>,
    pub private_ip: Ipv4Addr,
    pub spot: bool,
    pub instance_type: String,
    /// What ended the workload first, if anything has (or is scheduled to).
    pub ending: Option<Ending>,
    /// Every state transition, in time order, scheduled ones included.
    pub transitions: Vec<(Timestamp, State, Option<StateReason>)>,
    /// When the instance is (or will be) `terminated`.
    pub terminated_at: Option<Timestamp>,
    /// Each TerminateInstances call that named this instance and got past
    /// throttling and id validation, whether or not it terminated it.
    pub termination_requests: Vec<Timestamp>,
}

/// A request refused `IdempotentParameterMismatch`: its client token was used before by a
/// request with other parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefusedReplay {
    /// `RunInstances` or `CreateFleet`.
    pub operation: &'static str,
    pub client_token: String,
    pub at: Timestamp,
}
