//! Host bindings for `orca:policy@0.2.0` (the frozen `since_v0.2.0` folder), and the
//! conversions between its values and the host's (0.3.0) at the plugin boundary. 0.3.0 added
//! fields only: going down they are dropped (a 0.2.0 plugin never sees zones), coming up they
//! take their documented defaults (the configured allocation strategy, no mark on rebalance,
//! every zone).

use super::v0_3::orca::policy::{host as new_host, types as new};

wasmtime::component::bindgen!({
    path: "../plugin-sdk/wit/since_v0.2.0",
    world: "plugin",
});

use self::orca::policy::{host as old_host, types as old};

super::unchanged_conversions!();

pub fn market_up(
    answer: Result<old::MarketDecision, old::PolicyError>,
) -> Result<new::MarketDecision, new::PolicyError> {
    answer
        .map(|d| new::MarketDecision {
            market: market_up_value(d.market),
            max_price: d.max_price,
            fallback_to_on_demand: d.fallback_to_on_demand,
            reason: d.reason,
            allocation_strategy: None,
            mark_on_rebalance: false,
        })
        .map_err(policy_error)
}

fn policy_error(error: old::PolicyError) -> new::PolicyError {
    match error {
        old::PolicyError::InvalidAnnotation(a) => {
            new::PolicyError::InvalidAnnotation(new::AnnotationError {
                annotation: a.annotation,
                value: a.value,
                expected: a.expected,
            })
        }
        old::PolicyError::NoMatch(m) => new::PolicyError::NoMatch(m),
        old::PolicyError::InvalidSettings(m) => new::PolicyError::InvalidSettings(m),
        old::PolicyError::Unsupported => new::PolicyError::Unsupported,
        old::PolicyError::Failed(m) => new::PolicyError::Failed(m),
        old::PolicyError::Declined(m) => new::PolicyError::Declined(m),
    }
}

pub fn instance_query(q: old_host::InstanceQuery) -> new_host::InstanceQuery {
    new_host::InstanceQuery {
        min_vcpus: q.min_vcpus,
        min_memory_mib: q.min_memory_mib,
        min_gpus: q.min_gpus,
        architecture: q.architecture.map(architecture_up),
        families: q.families,
        exclude_families: q.exclude_families,
        names: q.names,
        limit: q.limit,
        zones: Vec::new(),
    }
}
