//! The loop that reads the interruption queue and hands the notices for this node's instances
//! to a [`NoticeSink`].
//!
//! The queue may be read by more than one consumer (another cluster in the account), so a
//! message is deleted only when this node acted on everything in it; what it cannot read or
//! does not own is left for the visibility timeout to hand to someone else, or handed on at
//! once when another replica of this orca serves a node (see [`NoticeSink::shared_elsewhere`]).

use futures::future::join_all;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::watch;
use tokio::time::Instant;

use super::backoff::Backoff;
use super::notice::{self, Notice, NoticeError};
use super::queue::NoticeQueue;
use super::seen::SeenBodies;
use crate::errors::error_chain;
use crate::metrics::{InterruptionMetrics, MessageOutcome, QueueOperation};

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
    /// on ([`HAND_ON_AFTER`]) rather than hidden from that replica for the whole visibility
    /// timeout, which with SQS's default of 30 s is a quarter of a spot warning's two
    /// minutes. Default: false.
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

/// One long poll's wait: SQS's longest.
const WAIT: Duration = Duration::from_secs(20);
/// An empty answer sooner than this did not long-poll (a test queue, an endpoint that answers
/// at once); the next receive waits [`EMPTY_PAUSE`] so the loop does not spin.
const EARLY: Duration = Duration::from_secs(5);
const EMPTY_PAUSE: Duration = Duration::from_secs(1);
/// A message handed on is visible again this soon, to whichever consumer polls first.
pub const HAND_ON_AFTER: Duration = Duration::from_secs(1);
/// How often one consumer hands on the same message: each time another consumer of the queue
/// (the replica that owns the instance, or this one again) may get it; after that it is left
/// for the visibility timeout, so a message nobody owns is not passed around until it expires.
const HAND_ON_TIMES: u32 = 5;

/// Reads `queue` until `shutdown` completes, delivering to `sink`.
///
/// Each round is one receive, then for each message: delivered then deleted when all its
/// notices are for instances `sink` owns; delivered in part and left when it also names
/// another owner's instances (that owner still needs it); left when it names none of ours or
/// cannot be read (warned once per message). A message left for another owner's instances is
/// handed on (visible again after [`HAND_ON_AFTER`]) while `sink` says another replica may own
/// them, at most [`HAND_ON_TIMES`] times. Failed receives back off from 1 s to 30 s and never
/// end the loop.
///
/// # Caveats
/// Shutdown cancels the round in progress, deliveries included; what was not deleted comes
/// back after the queue's visibility timeout.
pub async fn consume(
    queue: Arc<dyn NoticeQueue>,
    sink: Arc<dyn NoticeSink>,
    metrics: Arc<InterruptionMetrics>,
    shutdown: impl Future<Output = ()>,
) {
    let mut shutdown = std::pin::pin!(shutdown);
    let mut consumer = Consumer {
        queue: queue.as_ref(),
        sink: sink.as_ref(),
        metrics: &metrics,
        backoff: Backoff::new(),
        warned: SeenBodies::default(),
        handed_on: SeenBodies::default(),
    };
    let serving = sink.serving();
    loop {
        if let Some(serving) = &serving
            && !*serving.borrow()
        {
            tracing::info!(
                "serving no node here: not reading the interruption queue until this replica does"
            );
            tokio::select! {
                () = &mut shutdown => return,
                () = until(serving, true) => {}
            }
            tracing::info!("serving a node again: reading the interruption queue");
        }
        let pause = tokio::select! {
            () = &mut shutdown => return,
            // The last node went mid-round: what was received and not deleted comes back
            // after its visibility timeout, as after a shutdown.
            () = until_some(serving.as_ref(), false) => None,
            pause = consumer.round() => pause,
        };
        if let Some(pause) = pause {
            tokio::select! {
                () = &mut shutdown => return,
                () = tokio::time::sleep(pause) => {}
            }
        }
    }
}

/// Until `serving` says `value`; forever once its sender is gone (nothing changes any more).
async fn until(serving: &watch::Receiver<bool>, value: bool) {
    if serving.clone().wait_for(|now| *now == value).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// [`until`], or forever for a sink that is always serving.
async fn until_some(serving: Option<&watch::Receiver<bool>>, value: bool) {
    match serving {
        Some(serving) => until(serving, value).await,
        None => std::future::pending().await,
    }
}

struct Consumer<'a> {
    queue: &'a dyn NoticeQueue,
    sink: &'a dyn NoticeSink,
    metrics: &'a InterruptionMetrics,
    backoff: Backoff,
    warned: SeenBodies,
    handed_on: SeenBodies,
}

/// What is done with a message once its notices were delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Settled {
    Delete,
    /// Left for another replica of this orca, visible to it again at once.
    HandOn,
    /// Left for its visibility timeout.
    Leave,
}

/// What a message's notices say about whose it is.
enum Disposition {
    /// Every notice is for this node's instances: deliver, then delete.
    Ours(Vec<Notice>),
    /// Some are ours, some another owner's: deliver ours, leave the message for the other.
    Shared(Vec<Notice>),
    Foreign,
    Unparsed(NoticeError),
}

impl Consumer<'_> {
    /// One receive and what follows; the pause before the next, if any.
    async fn round(&mut self) -> Option<Duration> {
        let started = Instant::now();
        let messages = match self.queue.receive(WAIT).await {
            Ok(messages) => {
                self.backoff.reset();
                messages
            }
            Err(error) => {
                self.metrics.queue_error(QueueOperation::Receive);
                let delay = self.backoff.next_delay();
                tracing::warn!(
                    error = error_chain(&error),
                    retry_in = ?delay,
                    "receiving interruption notices failed"
                );
                return Some(delay);
            }
        };
        if messages.is_empty() {
            return (started.elapsed() < EARLY).then_some(EMPTY_PAUSE);
        }
        // The messages of one receive are acted on together: a hundred instances warned at
        // once should not wait for each other's status writes.
        let dispositions = join_all(messages.iter().map(|m| self.disposition(&m.body))).await;
        let this = &*self;
        let deliveries = join_all(dispositions.iter().map(|disposition| async move {
            match disposition {
                Disposition::Ours(notices) | Disposition::Shared(notices) => {
                    this.deliver(notices.clone()).await
                }
                Disposition::Foreign | Disposition::Unparsed(_) => Delivery::Done,
            }
        }))
        .await;
        // Asked again right before the delete: a sink whose node stopped being served here
        // meanwhile (a replica that stalled past its hold) no longer owns its instances, and
        // the message goes on to the replica serving the node now.
        let still_ours = join_all(dispositions.iter().map(|d| self.still_owned(d))).await;
        let (mut done, mut handed_on) = (Vec::new(), Vec::new());
        for (((message, disposition), delivery), still_ours) in messages
            .into_iter()
            .zip(dispositions)
            .zip(deliveries)
            .zip(still_ours)
        {
            match self.settle(&message.body, disposition, delivery) {
                Settled::Delete if still_ours => done.push(message.receipt_handle),
                Settled::Delete => handed_on.push(message.receipt_handle),
                Settled::HandOn => handed_on.push(message.receipt_handle),
                Settled::Leave => {}
            }
        }
        if !done.is_empty()
            && let Err(error) = self.queue.delete(&done).await
        {
            self.metrics.queue_error(QueueOperation::Delete);
            tracing::warn!(
                error = error_chain(&error),
                "deleting handled interruption notices failed; they will be delivered again"
            );
        }
        if !handed_on.is_empty()
            && let Err(error) = self.queue.hand_on(&handed_on, HAND_ON_AFTER).await
        {
            self.metrics.queue_error(QueueOperation::HandOn);
            tracing::warn!(
                error = error_chain(&error),
                "handing interruption notices on to the replica that serves their instances \
                 failed; they come back after the visibility timeout"
            );
        }
        None
    }

    /// Counts and logs one message whose notices were delivered; what becomes of it.
    fn settle(&mut self, body: &str, disposition: Disposition, delivery: Delivery) -> Settled {
        match disposition {
            Disposition::Ours(_) | Disposition::Shared(_) if delivery == Delivery::Again => {
                self.metrics.message(MessageOutcome::Retried);
                tracing::info!(
                    "an interruption notice could not be acted on yet; left on the queue to come \
                     back after its visibility timeout"
                );
                Settled::Leave
            }
            Disposition::Ours(_) => {
                self.metrics.message(MessageOutcome::Delivered);
                Settled::Delete
            }
            Disposition::Shared(_) => {
                self.metrics.message(MessageOutcome::Delivered);
                tracing::debug!(
                    "interruption notice also names instances of another owner; left on the queue"
                );
                self.left_for_another(body)
            }
            Disposition::Foreign => {
                self.metrics.message(MessageOutcome::Foreign);
                tracing::debug!("interruption notice for instances of another owner; left");
                self.left_for_another(body)
            }
            Disposition::Unparsed(error) => {
                self.metrics.message(MessageOutcome::Unparsed);
                if self.warned.first_time(body) {
                    tracing::warn!(
                        error = error_chain(&error),
                        "a message on the interruption queue is not a notice orca reads; left on \
                         the queue (it may be another consumer's)"
                    );
                }
                Settled::Leave
            }
        }
    }

    /// A message left for instances this replica does not own: handed on while another
    /// replica may own them, a few times per message.
    fn left_for_another(&mut self, body: &str) -> Settled {
        if self.sink.shared_elsewhere() && self.handed_on.times(body) <= HAND_ON_TIMES {
            Settled::HandOn
        } else {
            Settled::Leave
        }
    }

    async fn disposition(&self, body: &str) -> Disposition {
        let notices = match notice::parse(body) {
            Ok(notices) => notices,
            Err(error) => return Disposition::Unparsed(error),
        };
        let mut ours = Vec::with_capacity(notices.len());
        let mut foreign = false;
        for notice in notices {
            if self.sink.owns(&notice.instance_id).await {
                ours.push(notice);
            } else {
                foreign = true;
            }
        }
        match (ours.is_empty(), foreign) {
            (true, _) => Disposition::Foreign,
            (false, false) => Disposition::Ours(ours),
            (false, true) => Disposition::Shared(ours),
        }
    }

    /// Whether the sink still owns every instance a delivered message names.
    async fn still_owned(&self, disposition: &Disposition) -> bool {
        match disposition {
            Disposition::Ours(notices) | Disposition::Shared(notices) => {
                for notice in notices {
                    if !self.sink.owns(&notice.instance_id).await {
                        return false;
                    }
                }
                true
            }
            Disposition::Foreign | Disposition::Unparsed(_) => true,
        }
    }

    /// Delivers a message's notices; [`Delivery::Again`] if any is to come back.
    async fn deliver(&self, notices: Vec<Notice>) -> Delivery {
        let mut delivery = Delivery::Done;
        for notice in notices {
            tracing::info!(
                kind = %notice.kind,
                instance = notice.instance_id,
                "{}",
                notice.description
            );
            self.metrics.delivered(notice.kind);
            if self.sink.deliver(notice).await == Delivery::Again {
                delivery = Delivery::Again;
            }
        }
        delivery
    }
}

#[cfg(test)]
mod tests;
