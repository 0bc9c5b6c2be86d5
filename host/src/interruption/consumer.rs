//! The loop that reads the interruption queue and hands the notices for this node's instances
//! to a [`NoticeSink`].
//!
//! The queue belongs to one orca deployment (see [`triage`](super::triage)): a message is
//! deleted once nothing in it is left for this orca to act on, and kept only for a notice
//! another replica of this orca may act on, or one the sink could not act on yet.

use futures::future::join_all;
use std::collections::HashSet;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::delivery::{Delivery, NoticeSink};
use super::notice::{Notice, Origin};
use super::owners::{Asked, InstanceOwners};
use super::queue::NoticeQueue;
use super::seen::SeenBodies;
use super::triage::{self, Fate, Reading, Wrong};
use crate::metrics::{InterruptionMetrics, MessageOutcome, QueueOperation};
use crate::support::Backoff;
use crate::support::backoff::Delays;
use crate::support::errors::error_chain;

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
/// The pause after a failed receive: doubling from 1 s to 30 s, back to 1 s once a receive
/// succeeds. An outage of SQS (or of credentials) costs one request per 30 s, not a busy loop,
/// and notices flow again within 30 s of its end.
const RECEIVE_BACKOFF: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(30));

/// What the consumer reads, where it hands notices, and what it checks them against.
pub struct ConsumerParts {
    pub queue: Arc<dyn NoticeQueue>,
    pub sink: Arc<dyn NoticeSink>,
    /// Whose the instances are that notices name and no node served here lists.
    pub owners: Arc<dyn InstanceOwners>,
    /// The account and region this orca's instances live in: a notice from any other is not
    /// acted on.
    pub origin: Origin,
    pub metrics: Arc<InterruptionMetrics>,
}

/// Reads the queue until `shutdown` completes, delivering to the sink.
///
/// Each round is one receive, then for each message: read, and checked against this orca's
/// account and region; its notices for instances the sink owns delivered, while EC2 is asked
/// (once per receive) whose the other instances are; then the message is deleted unless it
/// names an instance of this orca that no node served here lists, or a notice could not be
/// acted on yet. Messages from another account or region, bodies orca cannot read and notices
/// about instances that are not this orca's are deleted without acting on them (warned once
/// per origin or body). A kept message is handed on (visible again after [`HAND_ON_AFTER`])
/// while the sink says another replica may own its instances, at most [`HAND_ON_TIMES`] times;
/// otherwise it comes back after the queue's visibility timeout. Failed receives back off from
/// 1 s to 30 s and never end the loop.
///
/// # Caveats
/// Shutdown cancels the round in progress, deliveries included; what was not deleted comes
/// back after the queue's visibility timeout.
pub async fn consume(parts: ConsumerParts, shutdown: impl Future<Output = ()>) {
    let mut shutdown = std::pin::pin!(shutdown);
    let mut consumer = Consumer {
        queue: parts.queue.as_ref(),
        sink: parts.sink.as_ref(),
        owners: parts.owners.as_ref(),
        origin: &parts.origin,
        metrics: &parts.metrics,
        backoff: RECEIVE_BACKOFF.delays(),
        warned: SeenBodies::default(),
        handed_on: SeenBodies::default(),
    };
    let serving = parts.sink.serving();
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
    owners: &'a dyn InstanceOwners,
    origin: &'a Origin,
    metrics: &'a InterruptionMetrics,
    /// The receive loop's run of failures, under [`RECEIVE_BACKOFF`].
    backoff: Delays,
    /// Bodies and origins already warned about.
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
        let readings = join_all(messages.iter().map(|m| self.read(&m.body))).await;
        let asked: Vec<Asked> = readings.iter().flat_map(triage::to_ask).collect();
        // The messages of one receive are acted on together (a hundred instances warned at
        // once should not wait for each other's status writes), and while EC2 is asked whose
        // the other instances are.
        let this = &*self;
        let deliveries = join_all(readings.iter().map(|reading| async move {
            match reading {
                Reading::Notices { here, .. } if !here.is_empty() => {
                    this.deliver(here.clone()).await
                }
                _ => Delivery::Done,
            }
        }));
        let (deliveries, kept) = tokio::join!(deliveries, this.ask(&asked));
        // Asked again right before the delete: a sink whose node stopped being served here
        // meanwhile (a replica that stalled past its hold) no longer owns its instances, and
        // the message goes on to the replica serving the node now.
        let still_ours = join_all(readings.iter().map(|r| self.still_owned(r))).await;
        let (mut done, mut handed_on) = (Vec::new(), Vec::new());
        for (((message, reading), delivery), still_ours) in messages
            .into_iter()
            .zip(readings)
            .zip(deliveries)
            .zip(still_ours)
        {
            match self.settle(&message.body, &reading, kept.as_ref(), delivery) {
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
                "deleting interruption messages failed; they come back after their visibility \
                 timeout and are handled again"
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

    /// Reads one message: checked against this orca's origin, its notices split by whether
    /// the sink owns their instance.
    async fn read(&self, body: &str) -> Reading {
        let notices = match triage::read(body, self.origin) {
            Ok(notices) => notices,
            Err(reading) => return reading,
        };
        let (mut here, mut unlisted) = (Vec::new(), Vec::new());
        for notice in notices {
            if self.sink.owns(&notice.instance_id).await {
                here.push(notice);
            } else {
                unlisted.push(notice);
            }
        }
        Reading::Notices { here, unlisted }
    }

    /// Whether the sink still owns every instance of a message it delivered notices for.
    async fn still_owned(&self, reading: &Reading) -> bool {
        let Reading::Notices { here, .. } = reading else {
            return true;
        };
        for notice in here {
            if !self.sink.owns(&notice.instance_id).await {
                return false;
            }
        }
        true
    }

    /// Which of the instances asked about may be this orca's; `None` when EC2 could not say.
    async fn ask(&self, asked: &[Asked]) -> Option<HashSet<String>> {
        if asked.is_empty() {
            return Some(HashSet::new());
        }
        match self.owners.ours(asked).await {
            Ok(kept) => Some(kept),
            Err(error) => {
                tracing::warn!(
                    error = error_chain(&error),
                    "could not tell whose the instances of interruption notices are; their \
                     messages are kept as if this orca's"
                );
                None
            }
        }
    }

    /// Counts and logs one message whose notices were delivered; what becomes of it.
    fn settle(
        &mut self,
        body: &str,
        reading: &Reading,
        kept: Option<&HashSet<String>>,
        delivery: Delivery,
    ) -> Settled {
        match triage::fate(reading, kept, delivery) {
            Fate::Retry => {
                self.metrics.message(MessageOutcome::Retried);
                tracing::info!(
                    "an interruption notice could not be acted on yet; left on the queue to come \
                     back after its visibility timeout"
                );
                Settled::Leave
            }
            Fate::Keep(outcome) => {
                self.metrics.message(outcome);
                tracing::debug!(
                    "interruption notice names instances of this orca that no node served here \
                     lists; kept for whoever acts on them"
                );
                if self.sink.shared_elsewhere() && self.handed_on.times(body) <= HAND_ON_TIMES {
                    Settled::HandOn
                } else {
                    Settled::Leave
                }
            }
            Fate::Delete(outcome) => {
                self.metrics.message(outcome);
                self.deleted(body, reading);
                Settled::Delete
            }
        }
    }

    /// The log line of a message deleted: once per body or origin for what should not be on
    /// this orca's queue at all.
    fn deleted(&mut self, body: &str, reading: &Reading) {
        match reading {
            Reading::Unparsed(error) => {
                if self.warned.first_time(body) {
                    tracing::warn!(
                        error = error_chain(error),
                        "a message on the interruption queue is not a notice orca reads; \
                         deleted (does a rule send other events to this queue?)"
                    );
                }
            }
            Reading::Misdirected { origin, wrong } => {
                if self.warned.first_time(&origin.to_string()) {
                    let which = match wrong {
                        Wrong::Account => "account",
                        Wrong::Region => "region",
                    };
                    tracing::warn!(
                        from = %origin,
                        expected = %self.origin,
                        "interruption notices from another {which} than this orca's instances \
                         live in; deleted without acting on them (the queue's policy should let \
                         only this account's rules send)"
                    );
                }
            }
            Reading::Notices { here, .. } if here.is_empty() => {
                tracing::debug!(
                    "interruption notice for instances that are not this orca's; deleted"
                );
            }
            Reading::Notices { .. } => {}
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
