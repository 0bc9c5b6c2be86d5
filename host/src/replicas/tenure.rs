//! How long a replica may act for a node it serves: until its hold's deadline on the boot
//! clock, whatever its own calls are doing and however long it was stopped.
//!
//! # The rule
//! A write of the Lease sent at boot time `S` lets this replica act for the node until
//! `S + leaseDuration - STOP_BEFORE_EXPIRY` ([`super::Hold::serving_until`]). No other replica
//! can hold the node before `S + leaseDuration`: it takes a Lease only once the record has not
//! changed for a whole `leaseDuration` on its own clock, counted from when it saw the record,
//! which is after the write landed, which is after `S`. [`STOP_BEFORE_EXPIRY`] is left for
//! what the two clocks' rates disagree on and for a request sent just before the deadline to
//! land.
//!
//! # How it is kept
//! - The Lease lock gives every write the time the hold has left at most (see
//!   [`super::LeaseLock::look`]), so a renewal that hangs (an apiserver answering 503 that
//!   kube's client retries for minutes) cannot keep the lock from seeing the hold end.
//! - Every task of a serving turn runs under [`Tenure::guard`], which reads the boot clock
//!   before each poll and, once the deadline has passed, never polls the task again: a replica
//!   that was stopped (SIGSTOP, a frozen VM) past its deadline does not take one more step when
//!   it runs again, whichever of its tasks the runtime wakes first. A task cannot act but in a
//!   poll, so nothing it decides is sent after the deadline, bar a request between the clock's
//!   reading and the socket write (a few microseconds of one poll).
//! - Work a turn hands to tasks outside it checks [`Tenure::holds`] itself: the interruption
//!   queue's consumer asks the node's sink, which answers for the tenure (`pods::notice_sink`).
//!   The helpers a turn's steps hand their requests to (the Events sender, the EC2 batches of
//!   50 ms) send what a guarded step decided before the deadline; what a late request can do
//!   is argued where the decision is made (`pods::sync` for orphans).
//! - The guard also wakes its task at the deadline (in steps of at most [`WAKE_STEP`] on
//!   tokio's clock, which a suspend stops), so a turn whose tasks are idle ends within a step
//!   of it rather than at its next event.

use std::future::Future;
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use tokio::sync::watch;

use super::BootInstant;

/// How long before the Lease's expiry (as another replica counts it) the holder stops acting
/// for the node on its own: a renewal that never got through cannot leave two replicas serving
/// one node.
pub const STOP_BEFORE_EXPIRY: Duration = Duration::from_secs(2);

/// The longest a guarded task sleeps on tokio's clock before it looks at the boot clock again.
const WAKE_STEP: Duration = Duration::from_millis(250);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Until {
    /// No Lease: the only replica serves for as long as it runs.
    Always,
    At(BootInstant),
    Over,
}

/// Why a step was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TenureError {
    #[error(
        "this replica's hold on the node has ended (its Lease was not renewed in time, or was taken or lost)"
    )]
    Lapsed,
}

/// A serving turn's right to act for its node, as the Lease lock last extended it; cloned
/// into each of the turn's tasks.
#[derive(Debug, Clone)]
pub struct Tenure {
    until: watch::Receiver<Until>,
}

/// The Lease lock's side of a [`Tenure`]: extends it after each renewal and ends it. Dropping
/// the grant ends the tenure too (whoever renewed the Lease is gone).
#[derive(Debug)]
pub struct TenureGrant {
    until: watch::Sender<Until>,
}

impl TenureGrant {
    /// A grant ended until [`Self::extend_to`] says otherwise.
    pub fn new() -> TenureGrant {
        TenureGrant {
            until: watch::Sender::new(Until::Over),
        }
    }

    /// The tenure this grant extends.
    pub fn tenure(&self) -> Tenure {
        Tenure {
            until: self.until.subscribe(),
        }
    }

    /// Lets the tenure act until `until` on the boot clock; `None` ends it.
    pub fn extend_to(&self, until: Option<BootInstant>) {
        self.until
            .send_replace(until.map_or(Until::Over, Until::At));
    }
}

impl Default for TenureGrant {
    fn default() -> Self {
        TenureGrant::new()
    }
}

impl Tenure {
    /// For a process that does not share its nodes: it may always act.
    pub fn unlimited() -> Tenure {
        Tenure {
            until: watch::channel(Until::Always).1,
        }
    }

    /// How long this tenure lets its turn act from `now`: `None` once it has ended,
    /// `Duration::MAX` when it does not end.
    pub fn left(&self, now: BootInstant) -> Option<Duration> {
        let until = *self.until.borrow();
        match until {
            Until::Always => Some(Duration::MAX),
            // A closed channel: the grant is gone, and with it whoever renewed the Lease.
            Until::At(until) if now < until && self.until.has_changed().is_ok() => {
                Some(until.saturating_duration_since(now))
            }
            Until::At(_) | Until::Over => None,
        }
    }

    /// Whether the turn may act now (on the boot clock).
    pub fn holds(&self) -> bool {
        self.left(BootInstant::now()).is_some()
    }

    /// Runs `future` while the tenure lasts: before each poll the boot clock is read, and once
    /// the tenure has ended `future` is dropped unpolled.
    ///
    /// # Errors
    /// [`TenureError::Lapsed`] when the tenure ended before `future` completed (or before it
    /// started); `future` did not run past that point.
    ///
    /// # Guarantees
    /// `future` is never polled when [`Self::left`] says the tenure has ended; the returned
    /// future wakes by itself within [`WAKE_STEP`] (on tokio's clock) of the deadline.
    pub async fn guard<F: Future>(&self, future: F) -> Result<F::Output, TenureError> {
        if *self.until.borrow() == Until::Always {
            return Ok(future.await);
        }
        let mut future = pin!(future);
        let mut wake = pin!(tokio::time::sleep(Duration::ZERO));
        std::future::poll_fn(|cx| {
            let Some(left) = self.left(BootInstant::now()) else {
                return Poll::Ready(Err(TenureError::Lapsed));
            };
            if let Poll::Ready(output) = future.as_mut().poll(cx) {
                return Poll::Ready(Ok(output));
            }
            if wake.as_mut().poll(cx).is_ready() {
                // Re-armed only once it fired: at the deadline, or a step from now.
                let step = left.min(WAKE_STEP);
                wake.as_mut().reset(tokio::time::Instant::now() + step);
                // Registers the waker for the new deadline; it cannot have passed yet.
                let _ = wake.as_mut().poll(cx);
            }
            Poll::Pending
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    fn later(by: Duration) -> BootInstant {
        BootInstant::now().saturating_add(by)
    }

    /// A future that counts its polls and completes once `done` is set.
    fn counted(
        polls: Arc<AtomicUsize>,
        done: Arc<std::sync::atomic::AtomicBool>,
    ) -> impl Future<Output = &'static str> {
        std::future::poll_fn(move |cx| {
            polls.fetch_add(1, Ordering::SeqCst);
            if done.load(Ordering::SeqCst) {
                Poll::Ready("done")
            } else {
                cx.waker().wake_by_ref();
                Poll::Pending
            }
        })
    }

    #[tokio::test]
    async fn an_unlimited_tenure_always_holds() {
        let tenure = Tenure::unlimited();
        assert!(tenure.holds());
        assert_eq!(tenure.left(BootInstant::now()), Some(Duration::MAX));
        assert_eq!(tenure.guard(async { 7 }).await, Ok(7));
    }

    #[test]
    fn a_tenure_holds_until_its_deadline_and_ends_with_its_grant() {
        let grant = TenureGrant::new();
        let tenure = grant.tenure();
        let now = BootInstant::now();
        assert_eq!(tenure.left(now), None, "a grant starts ended");
        let until = now.saturating_add(Duration::from_secs(6));
        grant.extend_to(Some(until));
        assert_eq!(tenure.left(now), Some(Duration::from_secs(6)));
        assert_eq!(tenure.left(until), None, "ends at the deadline");
        grant.extend_to(None);
        assert_eq!(tenure.left(now), None);
        grant.extend_to(Some(until));
        drop(grant);
        assert_eq!(tenure.left(now), None, "whoever renewed is gone");
    }

    /// The stalled replica of issue 39: its deadline passed while it was stopped. Whatever
    /// the runtime wakes first, the guarded step is not taken.
    #[tokio::test]
    async fn a_task_whose_deadline_passed_is_not_polled_again() {
        let grant = TenureGrant::new();
        let tenure = grant.tenure();
        grant.extend_to(Some(BootInstant::now()));
        let polls = Arc::new(AtomicUsize::new(0));
        let done = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let outcome = tenure.guard(counted(polls.clone(), done)).await;
        assert_eq!(outcome, Err(TenureError::Lapsed));
        assert_eq!(polls.load(Ordering::SeqCst), 0, "never polled");
    }

    #[tokio::test]
    async fn a_task_stops_being_polled_once_its_tenure_is_ended() {
        let grant = TenureGrant::new();
        let tenure = grant.tenure();
        grant.extend_to(Some(later(Duration::from_secs(600))));
        let polls = Arc::new(AtomicUsize::new(0));
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let guarded = tokio::spawn({
            let (tenure, polls, done) = (tenure.clone(), polls.clone(), done.clone());
            async move { tenure.guard(counted(polls, done)).await }
        });
        while polls.load(Ordering::SeqCst) < 3 {
            tokio::task::yield_now().await;
        }
        grant.extend_to(None);
        let outcome = guarded.await.unwrap();
        assert_eq!(outcome, Err(TenureError::Lapsed));
        let after = polls.load(Ordering::SeqCst);
        done.store(true, Ordering::SeqCst);
        assert_eq!(polls.load(Ordering::SeqCst), after);
    }

    /// An idle task (waiting on I/O that never answers) ends by itself at the deadline,
    /// without anything else waking it.
    #[tokio::test]
    async fn an_idle_task_ends_by_itself_at_its_deadline() {
        let grant = TenureGrant::new();
        let tenure = grant.tenure();
        grant.extend_to(Some(later(Duration::from_millis(50))));
        let outcome = tenure.guard(std::future::pending::<()>()).await;
        assert_eq!(outcome, Err(TenureError::Lapsed));
    }

    #[tokio::test]
    async fn a_task_that_completes_in_time_gives_its_output() {
        let grant = TenureGrant::new();
        let tenure = grant.tenure();
        grant.extend_to(Some(later(Duration::from_secs(600))));
        let outcome = tenure
            .guard(async {
                tokio::time::sleep(Duration::from_millis(5)).await;
                "answered"
            })
            .await;
        assert_eq!(outcome, Ok("answered"));
    }
}
