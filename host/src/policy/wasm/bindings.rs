//! Host bindings for `orca:policy@0.1.0` (the frozen `since_v0.1.0` folder).

wasmtime::component::bindgen!({
    path: "../plugin-sdk/wit/since_v0.1.0",
    world: "plugin",
});

pub use self::orca::policy::host::{InstanceQuery, LogLevel};
pub use self::orca::policy::types::{
    AnnotationError, Architecture, Candidate, Hook, InstanceType, Market, MarketDecision, Pod,
    PolicyError, Resources, Tag, TagContext, Toleration,
};
