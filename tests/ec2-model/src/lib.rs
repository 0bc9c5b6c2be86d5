//! A seeded, reproducible model of Amazon EC2 for testing a controller that
//! must launch exactly one instance per pod and never leak one.
//!
//! The model behaves the way EC2's documentation says EC2 behaves, and is
//! hostile wherever EC2 is allowed to be: new instances and tags appear late,
//! reads are stale, calls are throttled in bursts, answers get lost after EC2
//! acted, capacity runs out, an instant fleet answers errors beside (or
//! instead of) its instance, a new launch template is not found at first, termination protection turns a batch terminate
//! into a hidden partial success, and the world (spot reclaims, other people,
//! the workload itself) acts on instances by itself.
//!
//! Every operation takes the time it happens at (`now`) explicitly: the model
//! never reads a clock, and everything random comes from one RNG seeded with
//! the seed given to [`Ec2Model::new`], so a test that fails can be replayed
//! exactly. [`Ec2Model::history`] tells the truth (never stale, never faulty)
//! for invariant checks.

mod allocation;
mod api;
mod availability;
mod behaviour;
mod capacity;
mod checks;
mod console;
mod error;
mod filter;
mod fleet;
mod fleet_answer;
mod fleet_record;
mod history;
mod ids;
mod instance;
mod launch;
mod model;
mod random;
mod record;
mod spawn;
mod state;
mod tags;
mod template;
mod throttle;
mod time;
mod timeline;
mod token;
mod workload;
mod world;

#[cfg(test)]
mod tests;

pub use behaviour::{Behaviour, Span};
pub use error::{Ec2Error, ErrorKind, code};
pub use filter::Filter;
pub use fleet::{AllocationStrategy, CreateFleet, FleetPool};
pub use fleet_answer::{FleetAnswer, FleetDescription, FleetError, FleetInstance};
pub use history::{Ending, InstanceHistory, RefusedReplay};
pub use instance::{Instance, StateChange};
pub use launch::RunInstances;
pub use model::Ec2Model;
pub use state::{State, StateReason};
pub use template::{CreateLaunchTemplate, LaunchTemplateRef, LaunchTemplateVersion};
pub use workload::{EXIT_CODE_TAG, FINISHED_AT_TAG, InterruptionNotice, WorkloadEnd};
