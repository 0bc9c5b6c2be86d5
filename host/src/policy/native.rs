//! The default policy run natively: the default plugins' own Rust logic (linked as rlibs)
//! with no sandbox. It is the denominator of the sandbox's cost in `orca plugin bench`.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use orca_plugin_sdk as sdk;

use super::catalogue::InstanceCatalogue;
use super::wasm::CatalogueQuery;
use super::{PlanError, convert, pod_view};

/// The catalogue, as the native plugin logic queries it.
struct NativeCatalogue<'a>(&'a InstanceCatalogue);

impl sdk::Catalogue for NativeCatalogue<'_> {
    fn query(&self, query: &sdk::InstanceQuery) -> Vec<sdk::InstanceType> {
        self.0
            .query(&convert::instance_query(query))
            .into_iter()
            .map(convert::instance_type)
            .collect()
    }
}

/// selector → market → tagger with default settings, natively.
pub struct NativePolicy {
    catalogue: Arc<InstanceCatalogue>,
    node_name: String,
    cluster_name: String,
}

/// What the native policy decided: the same three answers the plugins give.
#[derive(Debug)]
pub struct NativeDecision {
    pub candidates: Vec<sdk::Candidate>,
    pub market: sdk::MarketDecision,
    pub tags: Vec<sdk::Tag>,
}

impl NativePolicy {
    pub fn new(catalogue: Arc<InstanceCatalogue>, node_name: &str, cluster_name: &str) -> Self {
        NativePolicy {
            catalogue,
            node_name: node_name.to_owned(),
            cluster_name: cluster_name.to_owned(),
        }
    }

    /// # Errors
    /// [`PlanError`] with the plugin logic's message.
    pub fn decide(&self, pod: &Pod) -> Result<NativeDecision, PlanError> {
        let fail = |error: sdk::PolicyError| PlanError {
            reason: super::PlanFailure::PolicyError,
            message: super::pipeline::policy_error_message(&convert::policy_error_to_wasm(error)),
            retry: super::PlanRetry::No,
            refused: None,
        };
        let view = pod_view(pod).map_err(|error| PlanError {
            reason: super::PlanFailure::PolicyError,
            message: error.to_string(),
            retry: super::PlanRetry::No,
            refused: None,
        })?;
        let catalogue = NativeCatalogue(&self.catalogue);
        let selector = orca_plugin_selector::Settings::parse("{}").map_err(fail)?;
        let candidates =
            orca_plugin_selector::select(&view, &selector, &catalogue).map_err(fail)?;
        let market_settings = orca_plugin_market::Settings::parse("{}").map_err(fail)?;
        let market = orca_plugin_market::choose(&view, &market_settings, &candidates, &catalogue)
            .map_err(fail)?;
        let context = sdk::TagContext {
            node_name: self.node_name.clone(),
            cluster_name: self.cluster_name.clone(),
            instance_type: candidates[0].instance_type.clone(),
            market: market.market,
        };
        let tagger = orca_plugin_tagger::Settings::parse("{}").map_err(fail)?;
        let tags = orca_plugin_tagger::build(&view, &tagger, &context).map_err(fail)?;
        Ok(NativeDecision {
            candidates,
            market,
            tags,
        })
    }
}
