//! The WebAssembly side of policy: plugins compiled once, instantiated per call in a fresh,
//! bounded sandbox.

pub(crate) mod bindings;
mod engine;
mod limits;
mod plugin;
mod state;

pub use bindings::{
    Architecture, Candidate, Hook, InstanceQuery, InstanceType, Market, MarketDecision, Pod,
    PolicyError, Resources, Tag, TagContext,
};
pub use engine::{EngineError, PluginEngine};
pub use limits::SandboxLimits;
pub use plugin::{CallError, LoadError, LoadedPlugin};
pub use state::CatalogueQuery;
