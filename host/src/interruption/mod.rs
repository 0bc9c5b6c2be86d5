//! EC2's advance warnings about this node's instances (spot interruptions, rebalance
//! recommendations, scheduled maintenance, state changes), read from an SQS queue that
//! EventBridge rules feed, as Karpenter does (GitHub issue 19).
//!
//! [`notice`] reads one message, [`queue`] is the seam over SQS ([`SqsQueue`] the real one),
//! [`consume`] the loop that hands this node's notices to a [`NoticeSink`]. What a sink does
//! with them (drain, fail or replace the pod) lives with the pods.

mod backoff;
mod consumer;
pub mod notice;
pub mod queue;
#[cfg(test)]
mod samples;
mod seen;
mod sinks;
mod sqs;

pub use consumer::{Delivery, NoticeSink, consume};
pub use notice::{Notice, NoticeError, NoticeKind};
pub use queue::{NoticeQueue, QueueError, Received, RefusedEntry};
pub use sinks::NodeSinks;
pub use sqs::SqsQueue;
