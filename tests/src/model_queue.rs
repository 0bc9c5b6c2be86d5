//! An interruption queue for the simulation, behind orca's [`NoticeQueue`] seam: SQS's
//! semantics that matter to a consumer — a received message is invisible for a visibility
//! timeout and then comes back unless deleted, a long poll answers as soon as something is
//! visible — in memory, so the simulation can feed it EC2's notices and check afterwards which
//! messages orca deleted.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ::orca::interruption::{NoticeQueue, QueueError, Received};
use async_trait::async_trait;

/// How long a received message stays invisible.
const VISIBILITY: Duration = Duration::from_secs(1);
/// How often a long poll looks again.
const POLL_STEP: Duration = Duration::from_millis(50);

#[derive(Default)]
pub struct ModelQueue {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Message id → its body and when it is visible again.
    messages: BTreeMap<u64, (String, Instant)>,
    next_id: u64,
    deleted: Vec<String>,
}

impl ModelQueue {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn send(&self, body: String) {
        let mut state = self.state();
        state.next_id += 1;
        let id = state.next_id;
        state.messages.insert(id, (body, Instant::now()));
    }

    /// The bodies still in the queue, visible or not.
    pub fn remaining(&self) -> Vec<String> {
        self.state()
            .messages
            .values()
            .map(|(body, _)| body.clone())
            .collect()
    }

    /// The bodies a consumer deleted.
    pub fn deleted(&self) -> Vec<String> {
        self.state().deleted.clone()
    }

    fn take_visible(&self) -> Vec<Received> {
        let now = Instant::now();
        let mut state = self.state();
        let mut taken = Vec::new();
        for (id, (body, visible_at)) in state.messages.iter_mut() {
            if taken.len() == 10 {
                break;
            }
            if *visible_at <= now {
                *visible_at = now + VISIBILITY;
                taken.push(Received {
                    // A receipt per receive, as SQS gives: the id and when.
                    receipt_handle: format!("{id}"),
                    body: body.clone(),
                });
            }
        }
        taken
    }
}

#[async_trait]
impl NoticeQueue for ModelQueue {
    async fn receive(&self, wait: Duration) -> Result<Vec<Received>, QueueError> {
        let deadline = Instant::now() + wait;
        loop {
            let taken = self.take_visible();
            if !taken.is_empty() || Instant::now() >= deadline {
                return Ok(taken);
            }
            tokio::time::sleep(POLL_STEP).await;
        }
    }

    async fn delete(&self, receipt_handles: &[String]) -> Result<(), QueueError> {
        let mut state = self.state();
        for handle in receipt_handles {
            if let Ok(id) = handle.parse::<u64>()
                && let Some((body, _)) = state.messages.remove(&id)
            {
                state.deleted.push(body);
            }
        }
        Ok(())
    }

    async fn hand_on(&self, receipt_handles: &[String], after: Duration) -> Result<(), QueueError> {
        let visible_at = Instant::now() + after;
        let mut state = self.state();
        for handle in receipt_handles {
            if let Ok(id) = handle.parse::<u64>()
                && let Some((_, at)) = state.messages.get_mut(&id)
            {
                *at = visible_at;
            }
        }
        Ok(())
    }
}
