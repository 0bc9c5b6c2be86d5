//! What one plugin call may use.

use std::time::Duration;

/// Whether a plugin's calls each get a new instance or share one kept warm between them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InstanceReuse {
    /// A new instance per call: nothing a call leaves in memory reaches the next pod's.
    #[default]
    Fresh,
    /// An instance is kept between calls (its globals persist), so an interpreter's start-up
    /// work and first touch of its memory image are paid once, not per decision. It is dropped
    /// after any trap or timeout, once it holds half of `max_memory_bytes`, and after
    /// [`REUSED_CALLS`] calls.
    Reused,
}

/// Calls one reused instance serves before it is replaced by a new one, so what a plugin
/// accumulates (caches, fragmentation) never builds up without bound.
pub const REUSED_CALLS: u32 = 10_000;

/// Sandbox limits applied to a plugin's calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SandboxLimits {
    /// CPU time a call's thread may spend before it is interrupted; its wall time may reach
    /// [`super::clock::wall_ceiling`] of it.
    pub timeout: Duration,
    /// Linear memory one call may hold, in bytes, all its memories together.
    pub max_memory_bytes: usize,
    /// Table elements one call may hold, all its tables together.
    pub max_table_elements: usize,
    /// Calls that may run at once for pods' decisions. With one more for loading plugins, this
    /// times `max_memory_bytes` bounds what plugins can hold at once.
    pub concurrent_calls: usize,
    /// Calls that may run at once for the shadow's decisions (`policy.shadow`: 0 or 1), in
    /// slots of their own beside `concurrent_calls`.
    pub shadow_calls: usize,
    /// Bytes a call may write to stdout and to stderr (each); writes past it fail.
    pub max_output_bytes: usize,
    /// Wall time of a call made while loading a plugin (its `info`); at least `timeout`.
    pub load_timeout: Duration,
    /// A new instance per call, or one kept warm between calls.
    pub instances: InstanceReuse,
}

impl Default for SandboxLimits {
    fn default() -> Self {
        SandboxLimits {
            timeout: Duration::from_millis(100),
            max_memory_bytes: 64 << 20,
            max_table_elements: 20_000,
            max_output_bytes: 64 << 10,
            concurrent_calls: 2,
            shadow_calls: 0,
            load_timeout: LOAD_TIMEOUT,
            instances: InstanceReuse::Fresh,
        }
    }
}

/// The epoch ticks every this often; a call's deadline is its timeout in ticks.
pub const EPOCH_TICK: Duration = Duration::from_millis(1);

/// Calls besides pods' decisions that may run at once: a plugin's `info` when it is loaded
/// (loads run one at a time, on the reload thread or at startup).
pub const LOAD_CALLS: usize = 1;

/// CPU time a plugin's `info` call may take when it is loaded. Loads run on the reload thread
/// (or at startup), not in a pod's path, and on a machine whose cores are busy (a build, a
/// burst) instantiating a plugin the first time can take far longer than a decision's limit.
pub const LOAD_TIMEOUT: Duration = Duration::from_secs(10);

impl SandboxLimits {
    /// The limits of a load-time call: the same, with `load_timeout` unless the decision
    /// timeout is longer.
    pub fn for_load(self) -> SandboxLimits {
        SandboxLimits {
            timeout: self.timeout.max(self.load_timeout),
            ..self
        }
    }

    /// Linear memory all plugin calls together may hold at once.
    pub fn total_memory_bytes(&self) -> usize {
        (self.concurrent_calls + self.shadow_calls + LOAD_CALLS)
            .saturating_mul(self.max_memory_bytes)
    }
}
