//! The WebAssembly side of policy: plugins compiled once, instantiated per call in a fresh,
//! bounded sandbox (or, for reused plugins, kept warm between calls within the same bounds).

pub(crate) mod bindings;
mod budget;
pub(crate) mod cache;
mod clock;
mod engine;
mod exception;
mod footprint;
mod limits;
mod log_limit;
mod output;
mod plugin;
mod source_map;
mod state;
mod version;
mod warm;

pub use bindings::{
    AllocationStrategy, AnnotationError, Architecture, Candidate, Hook, InstanceQuery,
    InstanceType, InterfaceVersion, Market, MarketDecision, Pod, PolicyError, Resources, Tag,
    TagContext, Toleration,
};
pub use cache::CachePruning;
pub use engine::{EngineError, PluginEngine};
pub use footprint::{LimitTooSmall, StartFootprint};
pub use limits::{InstanceReuse, LOAD_TIMEOUT, REUSED_CALLS, SandboxLimits};
pub use plugin::{CallError, LoadError, LoadedPlugin, sha256_hex};
pub use state::CatalogueQuery;
pub use version::{HOST_INTERFACE_VERSION, VersionError};
