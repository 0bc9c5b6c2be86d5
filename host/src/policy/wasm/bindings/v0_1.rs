//! Host bindings for `orca:policy@0.1.0` (the frozen `since_v0.1.0` folder), and the
//! conversions between its values and the host's (0.2.0) at the plugin boundary: the pod and
//! context go down, answers come up. 0.2.0 only added a case (`declined`) that a 0.1.0 plugin
//! cannot return, so every conversion is total.

use super::v0_2::orca::policy::{host as new_host, types as new};

wasmtime::component::bindgen!({
    path: "../plugin-sdk/wit/since_v0.1.0",
    world: "plugin",
});

use self::orca::policy::{host as old_host, types as old};

pub fn pod(pod: &new::Pod) -> old::Pod {
    old::Pod {
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
            .map(|t| old::Toleration {
                key: t.key.clone(),
                operator: t.operator.clone(),
                value: t.value.clone(),
                effect: t.effect.clone(),
            })
            .collect(),
        priority: pod.priority,
        json: pod.json.clone(),
    }
}

fn resources(r: &new::Resources) -> old::Resources {
    old::Resources {
        cpu_millis: r.cpu_millis,
        memory_bytes: r.memory_bytes,
        ephemeral_storage_bytes: r.ephemeral_storage_bytes,
        gpus: r.gpus,
    }
}

pub fn candidates_down(candidates: &[new::Candidate]) -> Vec<old::Candidate> {
    candidates
        .iter()
        .map(|c| old::Candidate {
            instance_type: c.instance_type.clone(),
            reason: c.reason.clone(),
        })
        .collect()
}

pub fn tag_context(context: &new::TagContext) -> old::TagContext {
    old::TagContext {
        node_name: context.node_name.clone(),
        cluster_name: context.cluster_name.clone(),
        instance_type: context.instance_type.clone(),
        market: match context.market {
            new::Market::Spot => old::Market::Spot,
            new::Market::OnDemand => old::Market::OnDemand,
        },
    }
}

pub fn candidates_up(
    answer: Result<Vec<old::Candidate>, old::PolicyError>,
) -> Result<Vec<new::Candidate>, new::PolicyError> {
    answer
        .map(|candidates| {
            candidates
                .into_iter()
                .map(|c| new::Candidate {
                    instance_type: c.instance_type,
                    reason: c.reason,
                })
                .collect()
        })
        .map_err(policy_error)
}

pub fn market_up(
    answer: Result<old::MarketDecision, old::PolicyError>,
) -> Result<new::MarketDecision, new::PolicyError> {
    answer
        .map(|d| new::MarketDecision {
            market: match d.market {
                old::Market::Spot => new::Market::Spot,
                old::Market::OnDemand => new::Market::OnDemand,
            },
            max_price: d.max_price,
            fallback_to_on_demand: d.fallback_to_on_demand,
            reason: d.reason,
        })
        .map_err(policy_error)
}

pub fn tags_up(
    answer: Result<Vec<old::Tag>, old::PolicyError>,
) -> Result<Vec<new::Tag>, new::PolicyError> {
    answer
        .map(|tags| {
            tags.into_iter()
                .map(|t| new::Tag {
                    key: t.key,
                    value: t.value,
                })
                .collect()
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

/// `info`'s answer: (name, version, hooks).
pub fn info_up(info: old::PluginInfo) -> new::PluginInfo {
    new::PluginInfo {
        name: info.name,
        version: info.version,
        hooks: info
            .hooks
            .into_iter()
            .map(|hook| match hook {
                old::Hook::SelectInstance => new::Hook::SelectInstance,
                old::Hook::ChooseMarket => new::Hook::ChooseMarket,
                old::Hook::BuildTags => new::Hook::BuildTags,
            })
            .collect(),
    }
}

pub fn log_level(level: old_host::LogLevel) -> new_host::LogLevel {
    match level {
        old_host::LogLevel::Trace => new_host::LogLevel::Trace,
        old_host::LogLevel::Debug => new_host::LogLevel::Debug,
        old_host::LogLevel::Info => new_host::LogLevel::Info,
        old_host::LogLevel::Warn => new_host::LogLevel::Warn,
        old_host::LogLevel::Error => new_host::LogLevel::Error,
    }
}

pub fn instance_query(q: old_host::InstanceQuery) -> new_host::InstanceQuery {
    new_host::InstanceQuery {
        min_vcpus: q.min_vcpus,
        min_memory_mib: q.min_memory_mib,
        min_gpus: q.min_gpus,
        architecture: q.architecture.map(|a| match a {
            old::Architecture::Amd64 => new::Architecture::Amd64,
            old::Architecture::Arm64 => new::Architecture::Arm64,
        }),
        families: q.families,
        exclude_families: q.exclude_families,
        names: q.names,
        limit: q.limit,
    }
}

pub fn instance_type(t: new::InstanceType) -> old::InstanceType {
    old::InstanceType {
        name: t.name,
        family: t.family,
        vcpus: t.vcpus,
        memory_mib: t.memory_mib,
        gpus: t.gpus,
        gpu_model: t.gpu_model,
        architecture: match t.architecture {
            new::Architecture::Amd64 => old::Architecture::Amd64,
            new::Architecture::Arm64 => old::Architecture::Arm64,
        },
        on_demand_price: t.on_demand_price,
        spot_price: t.spot_price,
    }
}
