//! EC2's advance warnings about this node's instances (spot interruptions, rebalance
//! recommendations, scheduled maintenance, state changes), read from an SQS queue that
//! EventBridge rules feed, as Karpenter does (GitHub issue 19).
//!
//! [`notice`] reads one message, [`queue`] is the seam over SQS ([`SqsQueue`] the real one),
//! [`consume`] the loop that hands this node's notices to a [`NoticeSink`]; [`triage`] decides
//! what becomes of each message, [`owners`] asks EC2 whose an instance is, and
//! [`caller_account`] finds the account whose notices count. What a sink does with them
//! (drain, fail or replace the pod) lives with the pods.

mod account;
mod consumer;
mod delivery;
pub mod notice;
pub mod owners;
pub mod queue;
#[cfg(test)]
mod samples;
mod seen;
mod sinks;
mod sqs;
mod triage;

pub use account::{AccountError, caller_account};
pub use consumer::{ConsumerParts, consume};
pub use delivery::{Delivery, NoticeSink};
pub use notice::{Notice, NoticeError, NoticeKind, Origin};
pub use owners::{Ec2Owners, InstanceOwners, ThisOrca};
pub use queue::{NoticeQueue, QueueError, Received, RefusedEntry};
pub use sinks::NodeSinks;
pub use sqs::SqsQueue;
