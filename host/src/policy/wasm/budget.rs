//! One plugin call's budget: everything the call's instances hold at once, across every memory
//! and every table the call creates. A component may instantiate several core modules, each
//! with its own memory, so a per-memory cap alone would let one call hold many times it.

use wasmtime::ResourceLimiter;

/// Core instances one call may create (a component built by cargo-component or componentize-py
/// has a handful: the plugin, the WASI adapter, shims).
pub const INSTANCES_PER_CALL: usize = 16;

/// What one call may still take; wasmtime asks before creating or growing a memory or table.
#[derive(Debug)]
pub struct CallBudget {
    memory_bytes: usize,
    memory_left: usize,
    table_elements: usize,
    table_elements_left: usize,
}

impl CallBudget {
    pub fn new(memory_bytes: usize, table_elements: usize) -> CallBudget {
        CallBudget {
            memory_bytes,
            memory_left: memory_bytes,
            table_elements,
            table_elements_left: table_elements,
        }
    }

    /// Bytes of linear memory the call holds, all memories together.
    pub fn memory_used(&self) -> usize {
        self.memory_bytes - self.memory_left
    }
}

/// Takes the growth from `current` to `desired` out of `left`, if it fits there and under the
/// item's own `maximum`.
fn take(left: &mut usize, current: usize, desired: usize, maximum: Option<usize>) -> bool {
    let growth = desired.saturating_sub(current);
    if maximum.is_some_and(|max| desired > max) || growth > *left {
        return false;
    }
    *left -= growth;
    true
}

impl ResourceLimiter for CallBudget {
    // Called with `current` 0 when a memory is created, so the sum covers initial sizes too.
    // Past the budget is a trap, not a refused grow: a plugin that ignores a failed
    // `memory.grow` would otherwise go on and fail in a way that names something else.
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if !take(&mut self.memory_left, current, desired, maximum) {
            wasmtime::bail!(
                "the call's memory budget is spent: growing a memory from {current} to {desired} \
                 bytes would take the call past {} bytes over all its memories \
                 (maxMemory: policy.limits, or the plugin's policy.pluginLimits entry)",
                self.memory_bytes
            );
        }
        Ok(true)
    }

    fn memory_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        Err(error.context("growing a plugin memory failed"))
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if !take(&mut self.table_elements_left, current, desired, maximum) {
            wasmtime::bail!(
                "the call's table budget is spent: growing a table from {current} to {desired} \
                 elements would take the call past {} elements over all its tables \
                 (policy.limits.maxTableElements)",
                self.table_elements
            );
        }
        Ok(true)
    }

    fn table_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        Err(error.context("growing a plugin table failed"))
    }

    fn instances(&self) -> usize {
        INSTANCES_PER_CALL
    }

    fn memories(&self) -> usize {
        INSTANCES_PER_CALL
    }

    fn tables(&self) -> usize {
        INSTANCES_PER_CALL
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1 << 20;

    #[test]
    fn memories_of_one_call_share_one_budget() {
        let mut budget = CallBudget::new(64 * MIB, 100);
        // Two memories created at 40 MiB each: the second no longer fits.
        assert!(budget.memory_growing(0, 40 * MIB, None).unwrap());
        let refused = budget.memory_growing(0, 40 * MIB, None).unwrap_err();
        assert!(refused.to_string().contains("memory budget"), "{refused}");
        assert_eq!(budget.memory_used(), 40 * MIB);
        // Growing the first by what is left still fits, and then nothing does.
        assert!(budget.memory_growing(40 * MIB, 64 * MIB, None).unwrap());
        assert!(budget.memory_growing(0, 1, None).is_err());
    }

    #[test]
    fn a_memory_past_its_own_maximum_is_refused_whatever_the_budget() {
        let mut budget = CallBudget::new(64 * MIB, 100);
        assert!(budget.memory_growing(0, 2 * MIB, Some(MIB)).is_err());
        assert_eq!(budget.memory_used(), 0);
    }

    #[test]
    fn tables_of_one_call_share_one_budget() {
        let mut budget = CallBudget::new(MIB, 100);
        assert!(budget.table_growing(0, 60, None).unwrap());
        assert!(budget.table_growing(0, 60, None).is_err());
        assert!(budget.table_growing(0, 40, None).unwrap());
        assert!(budget.table_growing(40, 41, None).is_err());
    }

    #[test]
    fn a_failed_grow_is_a_trap() {
        let mut budget = CallBudget::new(MIB, 100);
        assert!(
            budget
                .memory_grow_failed(wasmtime::format_err!("no"))
                .is_err()
        );
        assert!(
            budget
                .table_grow_failed(wasmtime::format_err!("no"))
                .is_err()
        );
    }
}
