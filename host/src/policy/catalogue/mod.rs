//! The instance-type catalogue: every EC2 type with its vCPUs, memory, GPUs, architecture and
//! prices in the node's region. Plugins query it through the host (`query-instance-types`),
//! and the host checks every chosen type against it.

mod bundled;
pub mod market_order;

use std::collections::HashMap;
use std::sync::Arc;

use arc_swap::ArcSwap;

use super::wasm::{Architecture, CatalogueQuery, InstanceQuery, InstanceType};
use crate::provider::plan::Market;

/// Why the catalogue could not be built.
#[derive(Debug, thiserror::Error)]
#[error("the bundled instance-type catalogue is unreadable: {0}")]
pub struct CatalogueError(#[from] serde_json::Error);

/// Instance types ordered cheapest on-demand first (unknown prices last, then by name), the
/// order `query-instance-types` promises. Swappable as a whole, so a runtime price refresh
/// never shows a query half-updated data.
pub struct InstanceCatalogue {
    region: String,
    price_region: String,
    sources: String,
    snapshot: ArcSwap<Snapshot>,
}

/// What EC2 reports about one instance type.
#[derive(Debug, Clone, PartialEq)]
pub struct TypeSpec {
    pub name: String,
    pub vcpus: u32,
    pub memory_mib: u64,
    pub gpus: u32,
    pub gpu_model: Option<String>,
    pub architecture: Architecture,
}

/// One consistent version of the data: the types in query order and an index by name, so
/// membership checks and `names` queries do not scan 1,400 types per candidate.
struct Snapshot {
    types: Vec<InstanceType>,
    by_name: HashMap<String, usize>,
    /// The types' indices cheapest spot price first (see [`spot_order`]).
    spot_order: Vec<usize>,
    /// Each type's place in `spot_order`, by index.
    spot_rank: Vec<usize>,
}

impl Snapshot {
    fn new(types: Vec<InstanceType>) -> Snapshot {
        let types = sorted(types);
        let by_name = types
            .iter()
            .enumerate()
            .map(|(index, t)| (t.name.clone(), index))
            .collect();
        let spot_order = spot_order(&types);
        let mut spot_rank = vec![0; types.len()];
        for (rank, &index) in spot_order.iter().enumerate() {
            spot_rank[index] = rank;
        }
        Snapshot {
            types,
            by_name,
            spot_order,
            spot_rank,
        }
    }

    fn get(&self, name: &str) -> Option<&InstanceType> {
        self.by_name.get(name).map(|&index| &self.types[index])
    }
}

impl InstanceCatalogue {
    /// The bundled data with on-demand prices for `region`; regions without bundled prices get
    /// those of [`bundled::FALLBACK_PRICE_REGION`] as estimates (logged).
    ///
    /// # Errors
    /// [`CatalogueError`] if the bundled data is malformed.
    pub fn bundled(region: &str) -> Result<InstanceCatalogue, CatalogueError> {
        let data = bundled::load()?;
        let price_region = if data.on_demand_prices.contains_key(region) {
            region.to_owned()
        } else {
            tracing::info!(
                region,
                estimate_from = bundled::FALLBACK_PRICE_REGION,
                "no bundled on-demand prices for this region; using another region's as estimates"
            );
            bundled::FALLBACK_PRICE_REGION.to_owned()
        };
        let empty = Default::default();
        let prices = data.on_demand_prices.get(&price_region).unwrap_or(&empty);
        let types = data
            .types
            .into_iter()
            .filter_map(|entry| {
                let architecture = entry.architectures.iter().find_map(|a| match a.as_str() {
                    "amd64" => Some(Architecture::Amd64),
                    "arm64" => Some(Architecture::Arm64),
                    _ => None,
                })?;
                Some(InstanceType {
                    family: family_of(&entry.name).to_owned(),
                    on_demand_price: prices.get(&entry.name).copied(),
                    spot_price: None,
                    name: entry.name,
                    vcpus: entry.vcpus,
                    memory_mib: entry.memory_mib,
                    gpus: entry.gpus,
                    gpu_model: entry.gpu_model,
                    architecture,
                    // The bundled data has no offerings; EC2's answer fills them in.
                    zones: Vec::new(),
                })
            })
            .collect();
        Ok(InstanceCatalogue {
            region: region.to_owned(),
            price_region,
            sources: format!(
                "{}; {}",
                data.sources.instance_types, data.sources.on_demand_prices
            ),
            snapshot: ArcSwap::from_pointee(Snapshot::new(types)),
        })
    }

    pub fn region(&self) -> &str {
        &self.region
    }

    /// The region the on-demand prices are from (the node's, or the stand-in).
    pub fn price_region(&self) -> &str {
        &self.price_region
    }

    /// Where the data came from, for `orca plugin check` and logs.
    pub fn sources(&self) -> &str {
        &self.sources
    }

    pub fn len(&self) -> usize {
        self.snapshot.load().types.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn get(&self, name: &str) -> Option<InstanceType> {
        self.snapshot.load().get(name).cloned()
    }

    /// Replaces the specs with those EC2 reports for the region (`DescribeInstanceTypes`):
    /// known types keep their prices, new types join without an on-demand price (so they
    /// sort last), and types the region no longer offers leave. An empty report changes
    /// nothing. Answers how many types are new.
    pub fn update_specs(&self, specs: &[TypeSpec]) -> usize {
        if specs.is_empty() {
            return 0;
        }
        let current = self.snapshot.load();
        let mut added = 0;
        let types = specs
            .iter()
            .map(|spec| {
                let known = current.get(&spec.name);
                added += usize::from(known.is_none());
                InstanceType {
                    name: spec.name.clone(),
                    family: family_of(&spec.name).to_owned(),
                    vcpus: spec.vcpus,
                    memory_mib: spec.memory_mib,
                    gpus: spec.gpus,
                    gpu_model: spec.gpu_model.clone(),
                    architecture: spec.architecture,
                    on_demand_price: known.and_then(|t| t.on_demand_price),
                    spot_price: known.and_then(|t| t.spot_price),
                    zones: known.map(|t| t.zones.clone()).unwrap_or_default(),
                }
            })
            .collect();
        self.snapshot.store(Arc::new(Snapshot::new(types)));
        added
    }

    /// Replaces spot prices (USD/hour by type name) with fresh ones, e.g. from
    /// `DescribeSpotPriceHistory`; types not in `prices` keep no spot price.
    pub fn set_spot_prices(&self, prices: &HashMap<String, f64>) {
        self.revise(|t| {
            t.spot_price = prices
                .get(&t.name)
                .copied()
                .filter(|p| p.is_finite() && *p > 0.0);
        });
    }

    /// A new snapshot of the same types, each changed by `change`.
    fn revise(&self, mut change: impl FnMut(&mut InstanceType)) {
        let types: Vec<InstanceType> = self
            .snapshot
            .load()
            .types
            .iter()
            .cloned()
            .map(|mut t| {
                change(&mut t);
                t
            })
            .collect();
        self.snapshot.store(Arc::new(Snapshot::new(types)));
    }

    /// Replaces the zones each type is offered in with EC2's answer
    /// (`DescribeInstanceTypeOfferings` by availability zone). A type the answer leaves out
    /// gets no zones, which queries read as "unknown" and keep. An empty answer says nothing
    /// and changes nothing. Answers how many types have zones.
    pub fn set_zones(&self, offerings: &HashMap<String, Vec<String>>) -> usize {
        if offerings.is_empty() {
            return 0;
        }
        let mut zoned = 0;
        self.revise(|t| {
            let mut zones = offerings.get(&t.name).cloned().unwrap_or_default();
            zones.sort();
            zones.dedup();
            zoned += usize::from(!zones.is_empty());
            t.zones = zones;
        });
        zoned
    }
}

impl CatalogueQuery for InstanceCatalogue {
    fn query(&self, query: &InstanceQuery) -> Vec<InstanceType> {
        self.query_in(query, Market::OnDemand)
    }

    /// Ordered by `market`'s price: on demand as [`CatalogueQuery::query`]; spot, cheapest
    /// spot price first, the types without one after, in on-demand order. A `limit` takes the
    /// first types of that order.
    fn query_in(&self, query: &InstanceQuery, market: Market) -> Vec<InstanceType> {
        let limit = if query.limit == 0 {
            usize::MAX
        } else {
            usize::try_from(query.limit).unwrap_or(usize::MAX)
        };
        let snapshot = self.snapshot.load();
        let rank = |index: usize| match market {
            Market::OnDemand => index,
            Market::Spot => snapshot.spot_rank[index],
        };
        if query.names.is_empty() {
            let order: Box<dyn Iterator<Item = usize>> = match market {
                Market::OnDemand => Box::new(0..snapshot.types.len()),
                Market::Spot => Box::new(snapshot.spot_order.iter().copied()),
            };
            return order
                .map(|index| &snapshot.types[index])
                .filter(|t| matches(t, query))
                .take(limit)
                .cloned()
                .collect();
        }
        // Named lookups go through the index; the answer keeps the market's order.
        let mut indices: Vec<usize> = query
            .names
            .iter()
            .filter_map(|name| snapshot.by_name.get(name).copied())
            .collect();
        indices.sort_unstable_by_key(|&index| rank(index));
        indices.dedup();
        indices
            .into_iter()
            .map(|index| &snapshot.types[index])
            .filter(|t| matches(t, query))
            .take(limit)
            .cloned()
            .collect()
    }
}

/// The indices of `types` (in on-demand order) cheapest spot price first; types without a
/// spot price after them, in on-demand order.
fn spot_order(types: &[InstanceType]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..types.len()).collect();
    // Stable: equal spot prices, and the types without one, keep the on-demand order.
    order.sort_by(|&a, &b| match (types[a].spot_price, types[b].spot_price) {
        (Some(x), Some(y)) => x.total_cmp(&y),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => std::cmp::Ordering::Equal,
    });
    order
}

/// A query matching every type; set the fields that matter.
pub fn any_query() -> InstanceQuery {
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

fn matches(t: &InstanceType, query: &InstanceQuery) -> bool {
    t.vcpus >= query.min_vcpus
        && t.memory_mib >= query.min_memory_mib
        && t.gpus >= query.min_gpus
        && query.architecture.is_none_or(|a| a == t.architecture)
        && (query.families.is_empty() || query.families.contains(&t.family))
        && !query.exclude_families.contains(&t.family)
        && (query.names.is_empty() || query.names.contains(&t.name))
        && offered_in_any(t, &query.zones)
}

/// Whether the type is offered in one of `zones` (every type is, for no zones); a type whose
/// zones the catalogue does not know is kept, for the launch to find out.
fn offered_in_any(t: &InstanceType, zones: &[String]) -> bool {
    zones.is_empty() || t.zones.is_empty() || t.zones.iter().any(|zone| zones.contains(zone))
}

/// `p5` of `p5.48xlarge`.
fn family_of(name: &str) -> &str {
    name.split_once('.').map_or(name, |(family, _)| family)
}

fn sorted(mut types: Vec<InstanceType>) -> Vec<InstanceType> {
    types.sort_by(|a, b| match (a.on_demand_price, b.on_demand_price) {
        (Some(x), Some(y)) => x.total_cmp(&y).then_with(|| a.name.cmp(&b.name)),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.name.cmp(&b.name),
    });
    types
}

#[cfg(test)]
mod tests;
