//! Host bindings for `orca:policy@0.1.0` (the frozen `since_v0.1.0` folder), and the
//! conversions between its values and 0.2.0's at the plugin boundary (0.2.0's own convert on to
//! the host's): the pod and context go down, answers come up. 0.2.0 only added a case
//! (`declined`) that a 0.1.0 plugin cannot return, so every conversion is total.

use super::v0_2::orca::policy::{host as new_host, types as new};

wasmtime::component::bindgen!({
    path: "../plugin-sdk/wit/since_v0.1.0",
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
    }
}
