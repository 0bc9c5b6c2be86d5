//! The selection itself, independent of the host so it is unit-tested natively.

use orca_plugin_sdk::{
    AnnotationError, Candidate, Catalogue, InstanceQuery, InstanceType, Pod, PodExt, PolicyError,
    Resources,
};

use crate::settings::{Settings, parse_architecture};

pub const INSTANCE_TYPE_ANNOTATION: &str = "orca.research/instance-type";
const ARCH_SELECTOR: &str = "kubernetes.io/arch";

/// # Errors
/// `invalid-annotation` for an unknown or disallowed requested type or architecture,
/// `no-match` when nothing in the catalogue fits.
pub fn select(
    pod: &Pod,
    settings: &Settings,
    catalogue: &impl Catalogue,
) -> Result<Vec<Candidate>, PolicyError> {
    if let Some(requested) = pod.annotation(INSTANCE_TYPE_ANNOTATION) {
        return requested_type(requested.trim(), &pod.zones, settings, catalogue);
    }
    let architecture = match pod.node_selector(ARCH_SELECTOR) {
        Some(name) => Some(parse_architecture(name).ok_or_else(|| {
            PolicyError::NoMatch(format!(
                "the pod selects {ARCH_SELECTOR}={name}; instance types are amd64 or arm64"
            ))
        })?),
        None => settings.default_architecture()?,
    };
    let needed = effective(&pod.requests, &pod.limits);
    let query = InstanceQuery {
        min_vcpus: u32::try_from(needed.cpu_millis.div_ceil(1000)).unwrap_or(u32::MAX),
        min_memory_mib: needed.memory_bytes.div_ceil(1024 * 1024),
        min_gpus: needed.gpus,
        architecture,
        families: settings.allow_families.clone(),
        exclude_families: settings.deny_families.clone(),
        names: Vec::new(),
        limit: settings.max_candidates,
        // A type not offered in any zone the pod names could never launch for it.
        zones: pod.zones.clone(),
    };
    let found = catalogue.query(&query);
    if found.is_empty() {
        return Err(PolicyError::NoMatch(format!(
            "no instance type in the catalogue has {}",
            describe(&query)
        )));
    }
    Ok(found
        .iter()
        .map(|t| Candidate {
            instance_type: t.name.clone(),
            reason: fit_reason(t, &query),
        })
        .collect())
}

fn requested_type(
    name: &str,
    zones: &[String],
    settings: &Settings,
    catalogue: &impl Catalogue,
) -> Result<Vec<Candidate>, PolicyError> {
    let invalid = |expected: String| {
        PolicyError::InvalidAnnotation(AnnotationError {
            annotation: INSTANCE_TYPE_ANNOTATION.to_owned(),
            value: name.to_owned(),
            expected,
        })
    };
    let Some(instance) = catalogue.get(name) else {
        return Err(invalid(
            "an EC2 instance type this region offers, such as m7i.large or p5.48xlarge".to_owned(),
        ));
    };
    let family = &instance.family;
    let allowed = settings.allow_families.is_empty() || settings.allow_families.contains(family);
    if !allowed || settings.deny_families.contains(family) {
        return Err(invalid(format!(
            "a type whose family the selector allows (family {family} is not allowed by its settings)"
        )));
    }
    // Unknown zones (empty) are not held against the type: the launch will tell.
    let offered_there = zones.is_empty()
        || instance.zones.is_empty()
        || instance.zones.iter().any(|zone| zones.contains(zone));
    if !offered_there {
        return Err(invalid(format!(
            "a type offered in the pod's zones {} ({name} is offered in {})",
            zones.join(", "),
            instance.zones.join(", ")
        )));
    }
    Ok(vec![Candidate {
        instance_type: instance.name,
        reason: format!("requested by {INSTANCE_TYPE_ANNOTATION}"),
    }])
}

/// Requests where set, else limits (Kubernetes defaults a missing request to the limit).
fn effective(requests: &Resources, limits: &Resources) -> Resources {
    let pick = |request: u64, limit: u64| if request == 0 { limit } else { request };
    Resources {
        cpu_millis: pick(requests.cpu_millis, limits.cpu_millis),
        memory_bytes: pick(requests.memory_bytes, limits.memory_bytes),
        ephemeral_storage_bytes: pick(
            requests.ephemeral_storage_bytes,
            limits.ephemeral_storage_bytes,
        ),
        gpus: if requests.gpus == 0 {
            limits.gpus
        } else {
            requests.gpus
        },
    }
}

fn describe(query: &InstanceQuery) -> String {
    let mut text = format!(
        "at least {} vCPUs, {} MiB memory and {} GPUs",
        query.min_vcpus, query.min_memory_mib, query.min_gpus
    );
    if let Some(architecture) = query.architecture {
        text.push_str(&format!(" on {architecture}"));
    }
    if !query.families.is_empty() {
        text.push_str(&format!(" in families {}", query.families.join(", ")));
    }
    if !query.exclude_families.is_empty() {
        text.push_str(&format!(
            " outside families {}",
            query.exclude_families.join(", ")
        ));
    }
    if !query.zones.is_empty() {
        text.push_str(&format!(" offered in {}", query.zones.join(" or ")));
    }
    text
}

fn fit_reason(instance: &InstanceType, query: &InstanceQuery) -> String {
    let price = instance
        .on_demand_price
        .map_or("price unknown".to_owned(), |p| {
            format!("${p:.4}/h on-demand")
        });
    format!(
        "fits {} vCPU / {} MiB / {} GPU with {} vCPU / {} MiB / {} GPU, {price}",
        query.min_vcpus,
        query.min_memory_mib,
        query.min_gpus,
        instance.vcpus,
        instance.memory_mib,
        instance.gpus
    )
}

#[cfg(test)]
mod tests;
