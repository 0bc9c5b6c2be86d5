//! orca's default instance-type selector.
//!
//! - `orca.research/instance-type` set: that type, if the catalogue knows it and settings allow
//!   its family; otherwise a precise `invalid-annotation` error.
//! - otherwise: the cheapest catalogue types with at least the pod's CPU, memory and GPUs
//!   (requests, or limits where no request is set), on the architecture the pod selects with
//!   `kubernetes.io/arch` (else the settings' default), best first.
//!
//! Settings (JSON, all optional):
//! `{"allowFamilies": ["m7i", "c7i"], "denyFamilies": ["t2"], "architecture": "amd64", "maxCandidates": 5}`

mod select;
mod settings;

pub use select::select;
pub use settings::Settings;

use orca_plugin_sdk::{Candidate, Hook, HostCatalogue, Plugin, Pod, PolicyError};

pub struct Selector;

impl Plugin for Selector {
    const NAME: &'static str = "orca-default-selector";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const HOOKS: &'static [Hook] = &[Hook::SelectInstance];

    fn select_instance(pod: &Pod, settings: &str) -> Result<Vec<Candidate>, PolicyError> {
        select(pod, &Settings::parse(settings)?, &HostCatalogue)
    }
}

orca_plugin_sdk::register_plugin!(Selector);
