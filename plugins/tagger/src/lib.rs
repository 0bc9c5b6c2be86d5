//! orca's default tagger: `ManagedBy=ORCA`, the pod's namespace, name and UID, the node and
//! cluster, `Name=<namespace>/<name>`, the settings' fixed tags, and the pod's own tags from
//! `orca.research/tags` (a JSON object), each checked against AWS's tag rules.
//!
//! Settings (JSON, all optional): `{"extraTags": {"CostCenter": "ml-1234"}}`

mod build;

pub use build::{Settings, build};

use orca_plugin_sdk::{Hook, Plugin, Pod, PolicyError, Tag, TagContext};

pub struct Tagger;

impl Plugin for Tagger {
    const NAME: &'static str = "orca-default-tagger";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const HOOKS: &'static [Hook] = &[Hook::BuildTags];

    fn build_tags(
        pod: &Pod,
        settings: &str,
        context: &TagContext,
    ) -> Result<Vec<Tag>, PolicyError> {
        build(pod, &Settings::parse(settings)?, context)
    }
}

orca_plugin_sdk::register_plugin!(Tagger);
