//! What one plugin call may use.

use std::time::Duration;

/// Sandbox limits applied to every plugin call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SandboxLimits {
    /// Wall time a call may run before it is interrupted (epoch deadline).
    pub timeout: Duration,
    /// Linear memory a call may grow to, in bytes.
    pub max_memory_bytes: usize,
    /// Elements in any one table.
    pub max_table_elements: usize,
    /// Bytes a call may write to stdout and to stderr (each); writes past it fail.
    pub max_output_bytes: usize,
}

impl Default for SandboxLimits {
    fn default() -> Self {
        SandboxLimits {
            timeout: Duration::from_millis(100),
            max_memory_bytes: 64 << 20,
            max_table_elements: 20_000,
            max_output_bytes: 64 << 10,
        }
    }
}

/// The epoch ticks every this often; a call's deadline is its timeout in ticks.
pub const EPOCH_TICK: Duration = Duration::from_millis(1);

impl SandboxLimits {
    pub fn deadline_ticks(&self) -> u64 {
        let ticks = self.timeout.as_nanos() / EPOCH_TICK.as_nanos();
        u64::try_from(ticks).unwrap_or(u64::MAX).max(1)
    }
}
