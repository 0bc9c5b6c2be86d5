//! The guest SDK for orca policy plugins.
//!
//! A plugin is a WebAssembly component built for `wasm32-wasip2` that implements one or more of
//! three hooks: `select-instance`, `choose-market` and `build-tags`. Authors implement
//! [`Plugin`] (every hook has a default that answers "unsupported") and call
//! [`register_plugin!`] once:
//!
//! ```ignore
//! use orca_plugin_sdk::{Candidate, Hook, Plugin, PolicyError, Pod};
//!
//! struct AlwaysLarge;
//!
//! impl Plugin for AlwaysLarge {
//!     const NAME: &'static str = "always-large";
//!     const VERSION: &'static str = env!("CARGO_PKG_VERSION");
//!     const HOOKS: &'static [Hook] = &[Hook::SelectInstance];
//!
//!     fn select_instance(_pod: &Pod, _settings: &str) -> Result<Vec<Candidate>, PolicyError> {
//!         Ok(vec![Candidate { instance_type: "m7i.large".into(), reason: "always".into() }])
//!     }
//! }
//!
//! orca_plugin_sdk::register_plugin!(AlwaysLarge);
//! ```
//!
//! It also builds for the host target: orca shares [`quantity`] with plugins, so both read pod
//! resources the same way, and plugin logic can be unit-tested natively through [`Catalogue`].

mod architecture;
pub mod catalogue;
pub mod pod;
pub mod quantity;
pub mod tags;
pub mod testing;

pub use catalogue::{Catalogue, HostCatalogue};
pub use pod::PodExt;
pub use quantity::{Quantity, QuantityError};

/// The interface version this SDK implements; stamped into every plugin it builds.
pub const INTERFACE_VERSION: &str = "0.3.0";

/// Generated bindings; authors use the re-exports below instead.
#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        world: "plugin",
        path: "wit/since_v0.3.0",
        default_bindings_module: "orca_plugin_sdk::bindings",
        pub_export_macro: true,
        export_macro_name: "__export_orca_policy",
    });
}

pub use bindings::orca::policy::host::{InstanceQuery, LogLevel};
pub use bindings::orca::policy::types::{
    AllocationStrategy, AnnotationError, Architecture, Candidate, Hook, InstanceType, Market,
    MarketDecision, PluginInfo, Pod, PolicyError, Resources, Tag, TagContext, Toleration,
};

/// Writes a line to orca's log, attributed to this plugin.
pub fn log(level: LogLevel, message: &str) {
    bindings::orca::policy::host::log(level, message);
}

/// A policy plugin. Implement the hooks listed in [`Plugin::HOOKS`]; the others keep their
/// default, which tells the host the hook is not implemented.
pub trait Plugin {
    const NAME: &'static str;
    const VERSION: &'static str;
    const HOOKS: &'static [Hook];

    /// Instance types for the pod, best first.
    ///
    /// # Errors
    /// A [`PolicyError`] whose message reaches the pod's status.
    fn select_instance(pod: &Pod, settings: &str) -> Result<Vec<Candidate>, PolicyError> {
        let _ = (pod, settings);
        Err(PolicyError::Unsupported)
    }

    /// Spot or on-demand, given the selector's candidates.
    ///
    /// # Errors
    /// A [`PolicyError`] whose message reaches the pod's status.
    fn choose_market(
        pod: &Pod,
        settings: &str,
        candidates: &[Candidate],
    ) -> Result<MarketDecision, PolicyError> {
        let _ = (pod, settings, candidates);
        Err(PolicyError::Unsupported)
    }

    /// Tags for the pod's instance.
    ///
    /// # Errors
    /// A [`PolicyError`] whose message reaches the pod's status.
    fn build_tags(
        pod: &Pod,
        settings: &str,
        context: &TagContext,
    ) -> Result<Vec<Tag>, PolicyError> {
        let _ = (pod, settings, context);
        Err(PolicyError::Unsupported)
    }
}

/// Exports a [`Plugin`] implementation as the component's `orca:policy/policy` interface and
/// stamps [`INTERFACE_VERSION`] into its `orca:policy-version` custom section.
#[macro_export]
macro_rules! register_plugin {
    ($plugin:ty) => {
        #[doc(hidden)]
        pub struct __OrcaPolicyExport;

        impl $crate::bindings::exports::orca::policy::policy::Guest for __OrcaPolicyExport {
            fn info() -> $crate::PluginInfo {
                $crate::PluginInfo {
                    name: <$plugin as $crate::Plugin>::NAME.to_string(),
                    version: <$plugin as $crate::Plugin>::VERSION.to_string(),
                    hooks: <$plugin as $crate::Plugin>::HOOKS.to_vec(),
                }
            }

            fn select_instance(
                pod: $crate::Pod,
                settings: String,
            ) -> Result<Vec<$crate::Candidate>, $crate::PolicyError> {
                <$plugin as $crate::Plugin>::select_instance(&pod, &settings)
            }

            fn choose_market(
                pod: $crate::Pod,
                settings: String,
                candidates: Vec<$crate::Candidate>,
            ) -> Result<$crate::MarketDecision, $crate::PolicyError> {
                <$plugin as $crate::Plugin>::choose_market(&pod, &settings, &candidates)
            }

            fn build_tags(
                pod: $crate::Pod,
                settings: String,
                context: $crate::TagContext,
            ) -> Result<Vec<$crate::Tag>, $crate::PolicyError> {
                <$plugin as $crate::Plugin>::build_tags(&pod, &settings, &context)
            }
        }

        // Exported only when building the component: natively (unit tests, clippy) the crate is
        // a plain library, and the component's symbol names would not link as a shared object.
        #[cfg(target_arch = "wasm32")]
        $crate::bindings::__export_orca_policy!(__OrcaPolicyExport);

        // The host reads this before choosing bindings (see wit/README.md).
        #[cfg(target_arch = "wasm32")]
        #[unsafe(link_section = "orca:policy-version")]
        #[used]
        static __ORCA_POLICY_VERSION: [u8; $crate::INTERFACE_VERSION.len()] = {
            let bytes = $crate::INTERFACE_VERSION.as_bytes();
            let mut out = [0u8; $crate::INTERFACE_VERSION.len()];
            let mut i = 0;
            while i < bytes.len() {
                out[i] = bytes[i];
                i += 1;
            }
            out
        };
    };
}
