//! orca's default market chooser: spot or on-demand, and the spot price cap.
//!
//! - `orca.research/launch-type`: `spot` or `on-demand`; otherwise the settings' default.
//! - `orca.research/max-spot-price`: USD per hour above zero; implies spot, contradicts
//!   on-demand. A cap above the first candidate's on-demand price is lowered to it: paying
//!   more for spot than on-demand is never right.
//!
//! - The EC2 Fleet allocation strategy per market, and whether a rebalance recommendation marks
//!   a spot pod `DisruptionTarget` at once, come from the settings.
//!
//! Settings (JSON, all optional): `{"defaultMarket": "on-demand", "fallbackToOnDemand": true,
//! "spotAllocationStrategy": null, "onDemandAllocationStrategy": null, "markOnRebalance": false}`
//! (a null strategy leaves it to the node's `provider.aws.fleet`).

mod choose;

pub use choose::{Settings, choose};

use orca_plugin_sdk::{Candidate, Hook, HostCatalogue, MarketDecision, Plugin, Pod, PolicyError};

pub struct MarketChooser;

impl Plugin for MarketChooser {
    const NAME: &'static str = "orca-default-market";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const HOOKS: &'static [Hook] = &[Hook::ChooseMarket];

    fn choose_market(
        pod: &Pod,
        settings: &str,
        candidates: &[Candidate],
    ) -> Result<MarketDecision, PolicyError> {
        choose(pod, &Settings::parse(settings)?, candidates, &HostCatalogue)
    }
}

orca_plugin_sdk::register_plugin!(MarketChooser);
