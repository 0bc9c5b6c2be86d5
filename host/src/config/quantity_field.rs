//! Quantity fields accept what people write in YAML: `cpu: 1000` as well as `cpu: "1000"`.

use orca_plugin_sdk::Quantity;
use serde::{Deserialize, Deserializer};

#[derive(Deserialize)]
#[serde(untagged)]
enum StringOrNumber {
    String(String),
    Integer(i64),
    Float(f64),
}

pub(super) fn string_or_number<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<String, D::Error> {
    Ok(match StringOrNumber::deserialize(deserializer)? {
        StringOrNumber::String(text) => text,
        StringOrNumber::Integer(number) => number.to_string(),
        StringOrNumber::Float(number) => number.to_string(),
    })
}

/// [`string_or_number`] for a field that may be absent.
pub(super) fn optional_string_or_number<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<String>, D::Error> {
    string_or_number(deserializer).map(Some)
}

/// A Kubernetes quantity (`256Mi`) in bytes, rounded up; `None` if it is not one or does not
/// fit.
pub(super) fn quantity_bytes(value: &str) -> Option<usize> {
    let quantity: Quantity = value.parse().ok()?;
    usize::try_from(quantity.to_units_ceil().ok()?).ok()
}
