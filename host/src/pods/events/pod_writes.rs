//! orca's own writes of pods, which Events give way to (`pods::events`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::time::Instant;

/// How long pod writes must have paused before Events go out: longer than the gap between two
/// writes of a burst, short enough that a lone pod's Events are not noticeably late.
pub const QUIET: Duration = Duration::from_millis(100);

/// Events sent at once by the whole process.
const EVENTS_IN_FLIGHT: usize = 32;

/// orca's writes of pods (status patches and removals) in flight, when the last one began,
/// and a wake-up for whoever waits for there to be none in flight.
pub struct PodWrites {
    in_flight: AtomicUsize,
    /// When the last write began, in milliseconds since `epoch` plus one; 0 before the first.
    last_began_ms: AtomicU64,
    epoch: Instant,
    none_left: tokio::sync::Notify,
    /// Events being sent, over every node of the process: once the writes pause, Events go
    /// out this many at a time in all, so a write beginning then does not queue at the
    /// apiserver behind dozens of Events per node.
    events_in_flight: tokio::sync::Semaphore,
}

/// A pod write in flight, until dropped.
pub struct PodWriting(Arc<PodWrites>);

impl Drop for PodWriting {
    fn drop(&mut self) {
        if self.0.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.none_left.notify_waiters();
        }
    }
}

impl Default for PodWrites {
    fn default() -> Self {
        PodWrites::new()
    }
}

impl PodWrites {
    pub fn new() -> PodWrites {
        PodWrites {
            in_flight: AtomicUsize::new(0),
            last_began_ms: AtomicU64::new(0),
            epoch: Instant::now(),
            none_left: tokio::sync::Notify::new(),
            events_in_flight: tokio::sync::Semaphore::new(EVENTS_IN_FLIGHT),
        }
    }

    pub fn begin(self: &Arc<Self>) -> PodWriting {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        self.last_began_ms.fetch_max(
            self.millis_since_epoch().saturating_add(1),
            Ordering::AcqRel,
        );
        PodWriting(self.clone())
    }

    fn millis_since_epoch(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// How long since the last write began; `Duration::MAX` before the first.
    fn since_last_began(&self) -> Duration {
        match self.last_began_ms.load(Ordering::Acquire) {
            0 => Duration::MAX,
            last => Duration::from_millis(
                self.millis_since_epoch()
                    .saturating_add(1)
                    .saturating_sub(last),
            ),
        }
    }

    /// Returns once no write is in flight.
    async fn none_in_flight(&self) {
        loop {
            let notified = self.none_left.notified();
            tokio::pin!(notified);
            // Registered before the check, so a write ending in between still wakes us.
            notified.as_mut().enable();
            if self.in_flight.load(Ordering::Acquire) == 0 {
                return;
            }
            notified.await;
        }
    }

    /// Waits for one of the process's [`EVENTS_IN_FLIGHT`] slots, held until the answer is
    /// dropped, then for the writes to pause ([`PodWrites::quiet`]): the pause is checked
    /// right before the Event goes.
    pub async fn event_slot(
        &self,
        backlog: impl Fn() -> bool,
    ) -> Option<tokio::sync::SemaphorePermit<'_>> {
        // The semaphore is never closed; `None` would only mean sending without a slot.
        let slot = self.events_in_flight.acquire().await.ok();
        self.quiet(backlog).await;
        slot
    }

    /// Returns once no write is in flight and none has begun for [`QUIET`], or as soon as
    /// `backlog` says too many Events wait (checked at least every [`QUIET`]).
    pub async fn quiet(&self, backlog: impl Fn() -> bool) {
        loop {
            if backlog() {
                return;
            }
            if self.in_flight.load(Ordering::Acquire) > 0 {
                tokio::select! {
                    () = self.none_in_flight() => {}
                    () = tokio::time::sleep(QUIET) => {}
                }
                continue;
            }
            let since = self.since_last_began();
            if since >= QUIET {
                return;
            }
            tokio::time::sleep(QUIET - since).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn waiter(
        writes: &Arc<PodWrites>,
        backlog: Arc<std::sync::atomic::AtomicBool>,
    ) -> tokio::task::JoinHandle<()> {
        let writes = writes.clone();
        tokio::spawn(async move {
            writes.quiet(move || backlog.load(Ordering::Relaxed)).await;
        })
    }

    async fn settle(time: Duration) {
        tokio::time::sleep(time).await;
        // Let woken tasks run.
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    /// An Event waits while any pod write is in flight, then for a pause after the last one
    /// began; a write beginning within the pause starts it again.
    #[tokio::test(start_paused = true)]
    async fn events_wait_for_writes_in_flight_and_a_pause_after() {
        let writes = Arc::new(PodWrites::new());
        let no_backlog = Arc::new(std::sync::atomic::AtomicBool::new(false));
        // No write yet: nothing to wait for.
        tokio::time::timeout(Duration::from_millis(1), writes.quiet(|| false))
            .await
            .expect("no write has ever begun");

        let first = writes.begin();
        let second = writes.begin();
        let waiting = waiter(&writes, no_backlog.clone());
        settle(QUIET * 5).await;
        assert!(!waiting.is_finished(), "two writes in flight");
        drop(first);
        settle(QUIET * 5).await;
        assert!(!waiting.is_finished(), "one write still in flight");
        drop(second);
        // The last write began long ago: its end is the pause.
        settle(Duration::from_millis(1)).await;
        assert!(
            waiting.is_finished(),
            "no write in flight, none began for a while"
        );

        // A write that begins and ends at once still holds Events for the pause after it.
        drop(writes.begin());
        let waiting = waiter(&writes, no_backlog.clone());
        settle(QUIET / 2).await;
        assert!(
            !waiting.is_finished(),
            "within the pause after a write began"
        );
        drop(writes.begin());
        settle(QUIET * 3 / 4).await;
        assert!(
            !waiting.is_finished(),
            "another write began: the pause starts again"
        );
        settle(QUIET / 2).await;
        assert!(waiting.is_finished(), "the pause has passed");
    }

    /// A backlog of Events goes out without waiting, even with writes in flight.
    #[tokio::test(start_paused = true)]
    async fn a_backlog_goes_out_while_writes_go_on() {
        let writes = Arc::new(PodWrites::new());
        let backlog = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let _writing = writes.begin();
        let waiting = waiter(&writes, backlog.clone());
        settle(QUIET * 10).await;
        assert!(!waiting.is_finished(), "a write in flight, no backlog");
        backlog.store(true, Ordering::Relaxed);
        settle(QUIET).await;
        assert!(
            waiting.is_finished(),
            "the backlog is noticed within the pause"
        );
    }

    /// However many nodes send Events, the process has at most [`EVENTS_IN_FLIGHT`] in flight.
    #[tokio::test(start_paused = true)]
    async fn the_process_sends_a_bounded_number_of_events_at_once() {
        let writes = Arc::new(PodWrites::new());
        let mut slots = Vec::new();
        for _ in 0..EVENTS_IN_FLIGHT {
            slots.push(writes.event_slot(|| false).await.expect("a slot"));
        }
        let next = tokio::spawn({
            let writes = writes.clone();
            async move {
                let _slot = writes.event_slot(|| false).await;
            }
        });
        settle(Duration::from_secs(1)).await;
        assert!(!next.is_finished(), "every slot is taken");
        slots.pop();
        settle(QUIET).await;
        assert!(next.is_finished(), "a slot came free");
    }
}
