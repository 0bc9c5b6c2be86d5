//! The catalogue shipped in the binary: `host/catalogue/instance-types.json`, generated from
//! moto's DescribeInstanceTypes data and Karpenter's on-demand price table (both Apache-2.0;
//! see `host/catalogue/README.md`).

use std::collections::BTreeMap;

use serde::Deserialize;

const BUNDLED: &str = include_str!("../../../catalogue/instance-types.json");

/// The region whose prices stand in where the configured region has none bundled: relative
/// prices, which is what "cheapest" needs, differ little between commercial regions.
pub const FALLBACK_PRICE_REGION: &str = "us-east-1";

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BundledData {
    pub sources: Sources,
    pub types: Vec<BundledType>,
    pub on_demand_prices: BTreeMap<String, BTreeMap<String, f64>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Sources {
    pub instance_types: String,
    pub on_demand_prices: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BundledType {
    pub name: String,
    pub vcpus: u32,
    pub memory_mib: u64,
    pub gpus: u32,
    pub gpu_model: Option<String>,
    pub architectures: Vec<String>,
}

/// # Errors
/// Only if the generated file is malformed, which a unit test rules out.
pub fn load() -> Result<BundledData, serde_json::Error> {
    serde_json::from_str(BUNDLED)
}
