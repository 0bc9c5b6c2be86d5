//! The instance-type catalogue as plugins see it: a query answered by the host.
//!
//! Plugin logic takes `&impl Catalogue` rather than calling the host import directly, so the
//! same logic runs in native unit tests against a fixed list.

use crate::bindings::orca::policy::host;
use crate::{InstanceQuery, InstanceType};

/// Answers instance-type queries.
pub trait Catalogue {
    /// Matching types, cheapest on-demand first (unknown prices last, then by name).
    fn query(&self, query: &InstanceQuery) -> Vec<InstanceType>;

    /// One type by exact name.
    fn get(&self, name: &str) -> Option<InstanceType> {
        self.query(&InstanceQuery {
            names: vec![name.to_owned()],
            limit: 1,
            ..any()
        })
        .into_iter()
        .next()
    }
}

/// The catalogue of the orca host the plugin runs in.
pub struct HostCatalogue;

impl Catalogue for HostCatalogue {
    fn query(&self, query: &InstanceQuery) -> Vec<InstanceType> {
        host::query_instance_types(query)
    }
}

/// A query that matches every type; set the fields that matter.
pub fn any() -> InstanceQuery {
    InstanceQuery {
        min_vcpus: 0,
        min_memory_mib: 0,
        min_gpus: 0,
        architecture: None,
        families: Vec::new(),
        exclude_families: Vec::new(),
        names: Vec::new(),
        limit: 0,
        zones: Vec::new(),
    }
}
