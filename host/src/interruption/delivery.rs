//! What the consumer hands notices to, and what it learns back: the contract between the loop
//! that reads the queue ([`consume`](super::consume)) and whoever acts on a notice.

use async_trait::async_trait;
use tokio::sync::watch;

use super::notice::Notice;

/// Where notices for this node's instances go.
///
/// # Guarantees
/// A message is deleted only after every notice in it was delivered and acted on, so a crash
/// (or shutdown) between the two, or a notice the sink could not act on yet, delivers the same
/// notice again after the queue's visibility timeout: `deliver` must be idempotent (a second
/// interruption warning for an instance already being drained changes nothing).
#[async_trait]
pub trait NoticeSink: Send + Sync + 'static {
    /// Whether `instance_id` is one of this node's instances (the sink decides; it may look it
    /// up).
    async fn owns(&self, instance_id: &str) -> bool;
    /// Acts on a notice for one of this node's instances.
    async fn deliver(&self, notice: Notice) -> Delivery;

    /// For a sink whose instances come and go with the nodes this replica serves: true while
    /// it serves at least one, when it may own an instance at all. The consumer reads the
    /// queue only then: a message received is hidden from every other consumer for the
    /// visibility timeout, so a standby replica reading it would keep a spot warning from the
    /// replica that acts on it. `None` (the default): always serving.
    fn serving(&self) -> Option<watch::Receiver<bool>> {
        None
    }

    /// Whether an instance this sink does not own may be another replica's of this orca (a
    /// node it shares is served elsewhere now). A message left for such an instance is handed
    /// on ([`HAND_ON_AFTER`](super::consumer::HAND_ON_AFTER)) rather than hidden from that
    /// replica for the whole visibility timeout, which with SQS's default of 30 s is a quarter
    /// of a spot warning's two minutes. Default: false.
    fn shared_elsewhere(&self) -> bool {
        false
    }
}

/// What became of a delivered notice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Acted on, or nothing is left to act on (the pod is gone): the message may go.
    Done,
    /// Not acted on yet (the pod is not in the cache yet after a restart, a status write
    /// failed): the message stays on the queue and comes back after its visibility timeout.
    Again,
}
