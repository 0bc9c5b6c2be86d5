//! Test doubles for plugin logic run natively: a fixed catalogue that applies queries the way
//! the host does, and a pod builder.

use crate::{Architecture, Catalogue, InstanceQuery, InstanceType, Pod, Resources};

/// A fixed list of instance types, queried like the host's catalogue.
pub struct FixedCatalogue(pub Vec<InstanceType>);

impl Catalogue for FixedCatalogue {
    fn query(&self, q: &InstanceQuery) -> Vec<InstanceType> {
        let mut found: Vec<InstanceType> = self
            .0
            .iter()
            .filter(|t| {
                t.vcpus >= q.min_vcpus && t.memory_mib >= q.min_memory_mib && t.gpus >= q.min_gpus
            })
            .filter(|t| q.architecture.is_none_or(|a| a == t.architecture))
            .filter(|t| q.families.is_empty() || q.families.contains(&t.family))
            .filter(|t| !q.exclude_families.contains(&t.family))
            .filter(|t| q.names.is_empty() || q.names.contains(&t.name))
            // A type whose zones are unknown is kept, as the host keeps it.
            .filter(|t| {
                q.zones.is_empty()
                    || t.zones.is_empty()
                    || t.zones.iter().any(|z| q.zones.contains(z))
            })
            .cloned()
            .collect();
        found.sort_by(|a, b| {
            let price = |t: &InstanceType| t.on_demand_price.unwrap_or(f64::MAX);
            price(a)
                .total_cmp(&price(b))
                .then_with(|| a.name.cmp(&b.name))
        });
        if q.limit > 0 {
            found.truncate(q.limit as usize);
        }
        found
    }
}

/// An instance type; the family is the name's part before the dot.
pub fn instance_type(
    name: &str,
    vcpus: u32,
    memory_gib: u64,
    gpus: u32,
    architecture: Architecture,
    price: f64,
) -> InstanceType {
    InstanceType {
        name: name.to_owned(),
        family: name.split('.').next().unwrap_or(name).to_owned(),
        vcpus,
        memory_mib: memory_gib * 1024,
        gpus,
        gpu_model: None,
        architecture,
        on_demand_price: Some(price),
        spot_price: None,
        zones: Vec::new(),
    }
}

/// A pod `ns/p` (uid `u`) with no resources, labels or annotations.
pub fn pod() -> Pod {
    let nothing = Resources {
        cpu_millis: 0,
        memory_bytes: 0,
        ephemeral_storage_bytes: 0,
        gpus: 0,
    };
    Pod {
        namespace: "ns".to_owned(),
        name: "p".to_owned(),
        uid: "u".to_owned(),
        labels: Vec::new(),
        annotations: Vec::new(),
        requests: nothing,
        limits: nothing,
        node_selector: Vec::new(),
        tolerations: Vec::new(),
        priority: None,
        json: "{}".to_owned(),
        zones: Vec::new(),
    }
}

/// `pod()` with these annotations.
pub fn pod_with_annotations(annotations: &[(&str, &str)]) -> Pod {
    Pod {
        annotations: annotations
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        ..pod()
    }
}
