//! The default plugins, built from `plugins/` by `build.rs` and compiled into the binary.

/// One embedded plugin component.
#[derive(Debug, Clone, Copy)]
pub struct EmbeddedPlugin {
    /// The cargo package it was built from.
    pub package: &'static str,
    pub bytes: &'static [u8],
}

/// selector, market and tagger, in pipeline order.
pub const DEFAULT_PLUGINS: &[EmbeddedPlugin] =
    include!(concat!(env!("OUT_DIR"), "/embedded_plugins.rs"));
