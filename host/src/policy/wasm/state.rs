//! The per-call store data: WASI (stdio only), limits, and the host functions plugins import.

use std::sync::Arc;

use wasmtime::StoreLimits;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::bindings::orca::policy::{host, types};
use super::bindings::{InstanceQuery, InstanceType, LogLevel};

/// The host-side catalogue query plugins call through `query-instance-types`.
pub trait CatalogueQuery: Send + Sync + 'static {
    fn query(&self, query: &InstanceQuery) -> Vec<InstanceType>;
}

pub struct CallState {
    pub plugin: String,
    pub wasi: WasiCtx,
    pub table: ResourceTable,
    pub limits: StoreLimits,
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

impl types::Host for CallState {}

impl host::Host for CallState {
    fn log(&mut self, level: LogLevel, message: String) {
        let plugin = self.plugin.as_str();
        match level {
            LogLevel::Trace => tracing::trace!(plugin, "{message}"),
            LogLevel::Debug => tracing::debug!(plugin, "{message}"),
            LogLevel::Info => tracing::info!(plugin, "{message}"),
            LogLevel::Warn => tracing::warn!(plugin, "{message}"),
            LogLevel::Error => tracing::error!(plugin, "{message}"),
        }
    }

    fn query_instance_types(&mut self, query: InstanceQuery) -> Vec<InstanceType> {
        self.catalogue.query(&query)
    }
}
