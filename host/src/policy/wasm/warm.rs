//! Instances of reused plugins (`instances: reused`) kept between their calls.
//!
//! The pool is the engine's, not each plugin's: every idle instance holds a pooling-allocator
//! slot and its memory, so their number is bounded (one per concurrent decision) whatever
//! plugins come and go. The least recently used one makes room for a newer one, and a plugin
//! that is unloaded takes its instances with it.

use std::collections::VecDeque;
use std::sync::Mutex;

use wasmtime::Store;

use super::bindings::{v0_1, v0_2, v0_3};
use super::limits::{REUSED_CALLS, SandboxLimits};
use super::output::CallOutput;
use super::state::CallState;
use crate::support::errors::lock;

/// A plugin's instantiated exports, typed by the interface version that calls it.
pub(super) enum Exports {
    V0_1(v0_1::Plugin),
    V0_2(v0_2::Plugin),
    V0_3(v0_3::Plugin),
}

/// A store with the plugin instantiated in it, and the call's output streams.
pub(super) struct CallInstance {
    pub store: Store<CallState>,
    pub exports: Exports,
    pub stdout: CallOutput,
    pub stderr: CallOutput,
    /// Calls this instance has served.
    pub calls: u32,
}

impl CallInstance {
    /// Whether the instance may serve another call after a successful one: not once it holds
    /// half of what a call may hold (the next call could run out mid-decision), nor after
    /// [`REUSED_CALLS`] calls.
    pub fn may_serve_again(&self, limits: &SandboxLimits) -> bool {
        self.calls < REUSED_CALLS
            && self.store.data().budget.memory_used() <= limits.max_memory_bytes / 2
    }
}

/// Idle instances of every reused plugin, most recently used first.
pub(super) struct WarmPool {
    capacity: usize,
    idle: Mutex<VecDeque<(u64, CallInstance)>>,
}

impl WarmPool {
    pub fn new(capacity: usize) -> WarmPool {
        WarmPool {
            capacity,
            idle: Mutex::new(VecDeque::with_capacity(capacity)),
        }
    }

    /// An idle instance of the plugin loaded as `plugin`, if one is warm.
    pub fn take(&self, plugin: u64) -> Option<CallInstance> {
        let mut idle = lock(&self.idle);
        let index = idle.iter().position(|(owner, _)| *owner == plugin)?;
        idle.remove(index).map(|(_, instance)| instance)
    }

    /// Keeps `instance` for the plugin's next call; the least recently used beyond the
    /// capacity is dropped.
    pub fn put(&self, plugin: u64, instance: CallInstance) {
        if self.capacity == 0 {
            return;
        }
        let evicted = {
            let mut idle = lock(&self.idle);
            idle.push_front((plugin, instance));
            let kept = self.capacity.min(idle.len());
            idle.split_off(kept)
        };
        // Stores are dropped outside the lock: freeing a slot's memory takes a while.
        drop(evicted);
    }

    /// Drops the plugin's idle instances (it was unloaded).
    pub fn forget(&self, plugin: u64) {
        let forgotten = {
            let mut idle = lock(&self.idle);
            let (gone, kept): (VecDeque<_>, VecDeque<_>) =
                idle.drain(..).partition(|(owner, _)| *owner == plugin);
            *idle = kept;
            gone
        };
        drop(forgotten);
    }

    /// Idle instances, for tests and metrics.
    pub fn idle(&self) -> usize {
        lock(&self.idle).len()
    }
}
