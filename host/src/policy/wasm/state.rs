//! The per-call store data: WASI (stdio only), limits, and the host functions plugins import.

use std::sync::Arc;
use std::time::Instant;

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::bindings::v0_3::orca::policy::{host, types};
use super::bindings::{InstanceQuery, InstanceType, LogLevel, v0_1, v0_2};
use super::budget::CallBudget;
use super::log_limit::{Admission, CallLog, LogRate};
use crate::policy::plugin_text::prefix;

/// The host-side catalogue query plugins call through `query-instance-types`.
pub trait CatalogueQuery: Send + Sync + 'static {
    /// The types matching `query`, cheapest on-demand price first.
    fn query(&self, query: &InstanceQuery) -> Vec<InstanceType>;

    /// The same, ordered by the price in `market` (a catalogue without spot prices answers
    /// the on-demand order).
    fn query_in(
        &self,
        query: &InstanceQuery,
        _market: crate::provider::plan::Market,
    ) -> Vec<InstanceType> {
        self.query(query)
    }
}

pub struct CallState {
    pub plugin: String,
    pub wasi: WasiCtx,
    pub table: ResourceTable,
    pub budget: CallBudget,
    /// What this call may still log through the `log` import.
    pub log: CallLog,
    /// The plugin's share of orca's log, across its calls.
    pub log_rate: Arc<LogRate>,
    /// Records this call could not log for its byte budget.
    pub log_dropped: u64,
    /// The last message this call logged at level error (bounded), whether or not the log
    /// took it: the TypeScript SDK's record of an uncaught exception, read if the call traps.
    pub error_logged: Option<String>,
    pub catalogue: Arc<dyn CatalogueQuery>,
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// The most of an error message a call keeps for [`CallState::error_logged`]: an exception and
/// its stack.
pub const MAX_ERROR_LOGGED_BYTES: usize = 8 << 10;

impl types::Host for CallState {}

impl host::Host for CallState {
    fn log(&mut self, level: LogLevel, message: String) {
        if matches!(level, LogLevel::Error) {
            self.error_logged = Some(prefix(&message, MAX_ERROR_LOGGED_BYTES).to_owned());
        }
        let Some(kept) = self.log.take(&message) else {
            self.log_dropped += 1;
            return;
        };
        let Admission::Write { dropped_before } = self.log_rate.admit(Instant::now()) else {
            return;
        };
        let plugin = self.plugin.as_str();
        let cut = kept.len() < message.len();
        match level {
            LogLevel::Trace => tracing::trace!(plugin, cut, dropped_before, "{kept}"),
            LogLevel::Debug => tracing::debug!(plugin, cut, dropped_before, "{kept}"),
            LogLevel::Info => tracing::info!(plugin, cut, dropped_before, "{kept}"),
            LogLevel::Warn => tracing::warn!(plugin, cut, dropped_before, "{kept}"),
            LogLevel::Error => tracing::error!(plugin, cut, dropped_before, "{kept}"),
        }
    }

    fn query_instance_types(&mut self, query: InstanceQuery) -> Vec<InstanceType> {
        self.catalogue.query(&query)
    }
}

// An older plugin imports its own version's host interface: the same functions over its own
// types, each converted one step up to the version after it.
impl v0_2::orca::policy::types::Host for CallState {}

impl v0_2::orca::policy::host::Host for CallState {
    fn log(&mut self, level: v0_2::orca::policy::host::LogLevel, message: String) {
        host::Host::log(self, v0_2::log_level(level), message);
    }

    fn query_instance_types(
        &mut self,
        query: v0_2::orca::policy::host::InstanceQuery,
    ) -> Vec<v0_2::orca::policy::types::InstanceType> {
        host::Host::query_instance_types(self, v0_2::instance_query(query))
            .into_iter()
            .map(v0_2::instance_type)
            .collect()
    }
}

impl v0_1::orca::policy::types::Host for CallState {}

impl v0_1::orca::policy::host::Host for CallState {
    fn log(&mut self, level: v0_1::orca::policy::host::LogLevel, message: String) {
        v0_2::orca::policy::host::Host::log(self, v0_1::log_level(level), message);
    }

    fn query_instance_types(
        &mut self,
        query: v0_1::orca::policy::host::InstanceQuery,
    ) -> Vec<v0_1::orca::policy::types::InstanceType> {
        v0_2::orca::policy::host::Host::query_instance_types(self, v0_1::instance_query(query))
            .into_iter()
            .map(v0_1::instance_type)
            .collect()
    }
}
