//! Conversions between the guest SDK's generated types (what `pod_view` builds and what the
//! default plugins' logic uses natively) and the host's generated types (what wasmtime passes
//! into a component). Same WIT records, two code generators: the shapes match field by field.
//! Also the host's WIT values that become the plan's own types.

use orca_plugin_sdk as sdk;

use super::wasm;
use crate::provider::plan;

pub fn market(market: wasm::Market) -> plan::Market {
    match market {
        wasm::Market::Spot => plan::Market::Spot,
        wasm::Market::OnDemand => plan::Market::OnDemand,
    }
}

pub fn market_to_wasm(market: plan::Market) -> wasm::Market {
    match market {
        plan::Market::Spot => wasm::Market::Spot,
        plan::Market::OnDemand => wasm::Market::OnDemand,
    }
}

pub fn allocation_strategy(strategy: wasm::AllocationStrategy) -> plan::AllocationStrategy {
    match strategy {
        wasm::AllocationStrategy::PriceCapacityOptimized => {
            plan::AllocationStrategy::PriceCapacityOptimized
        }
        wasm::AllocationStrategy::CapacityOptimized => plan::AllocationStrategy::CapacityOptimized,
        wasm::AllocationStrategy::LowestPrice => plan::AllocationStrategy::LowestPrice,
        wasm::AllocationStrategy::Prioritized => plan::AllocationStrategy::Prioritized,
    }
}

pub fn pod(pod: &sdk::Pod) -> wasm::Pod {
    wasm::Pod {
        namespace: pod.namespace.clone(),
        name: pod.name.clone(),
        uid: pod.uid.clone(),
        labels: pod.labels.clone(),
        annotations: pod.annotations.clone(),
        requests: resources(&pod.requests),
        limits: resources(&pod.limits),
        node_selector: pod.node_selector.clone(),
        tolerations: pod
            .tolerations
            .iter()
            .map(|t| wasm::Toleration {
                key: t.key.clone(),
                operator: t.operator.clone(),
                value: t.value.clone(),
                effect: t.effect.clone(),
            })
            .collect(),
        priority: pod.priority,
        json: pod.json.clone(),
        zones: pod.zones.clone(),
    }
}

fn resources(r: &sdk::Resources) -> wasm::Resources {
    wasm::Resources {
        cpu_millis: r.cpu_millis,
        memory_bytes: r.memory_bytes,
        ephemeral_storage_bytes: r.ephemeral_storage_bytes,
        gpus: r.gpus,
    }
}

pub fn architecture_to_wasm(a: sdk::Architecture) -> wasm::Architecture {
    match a {
        sdk::Architecture::Amd64 => wasm::Architecture::Amd64,
        sdk::Architecture::Arm64 => wasm::Architecture::Arm64,
    }
}

fn architecture_to_sdk(a: wasm::Architecture) -> sdk::Architecture {
    match a {
        wasm::Architecture::Amd64 => sdk::Architecture::Amd64,
        wasm::Architecture::Arm64 => sdk::Architecture::Arm64,
    }
}

pub fn instance_query(q: &sdk::InstanceQuery) -> wasm::InstanceQuery {
    wasm::InstanceQuery {
        min_vcpus: q.min_vcpus,
        min_memory_mib: q.min_memory_mib,
        min_gpus: q.min_gpus,
        architecture: q.architecture.map(architecture_to_wasm),
        families: q.families.clone(),
        exclude_families: q.exclude_families.clone(),
        names: q.names.clone(),
        limit: q.limit,
        zones: q.zones.clone(),
    }
}

pub fn instance_type(t: wasm::InstanceType) -> sdk::InstanceType {
    sdk::InstanceType {
        name: t.name,
        family: t.family,
        vcpus: t.vcpus,
        memory_mib: t.memory_mib,
        gpus: t.gpus,
        gpu_model: t.gpu_model,
        architecture: architecture_to_sdk(t.architecture),
        on_demand_price: t.on_demand_price,
        spot_price: t.spot_price,
        zones: t.zones,
    }
}

pub fn policy_error_to_wasm(e: sdk::PolicyError) -> wasm::PolicyError {
    match e {
        sdk::PolicyError::InvalidAnnotation(a) => {
            wasm::PolicyError::InvalidAnnotation(wasm::AnnotationError {
                annotation: a.annotation,
                value: a.value,
                expected: a.expected,
            })
        }
        sdk::PolicyError::NoMatch(m) => wasm::PolicyError::NoMatch(m),
        sdk::PolicyError::InvalidSettings(m) => wasm::PolicyError::InvalidSettings(m),
        sdk::PolicyError::Unsupported => wasm::PolicyError::Unsupported,
        sdk::PolicyError::Failed(m) => wasm::PolicyError::Failed(m),
        sdk::PolicyError::Declined(m) => wasm::PolicyError::Declined(m),
    }
}
