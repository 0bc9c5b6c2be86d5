//! Quantity fields accept what people write in YAML: `cpu: 1000` as well as `cpu: "1000"`.

use std::borrow::Cow;

use orca_plugin_sdk::Quantity;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer};

/// The schema of a quantity field (`#[schemars(with = "QuantityValue")]`): what
/// [`string_or_number`] takes, its strings in the grammar [`Quantity`] parses.
pub(super) struct QuantityValue;

/// The schema of a quantity field written as a string only (`maxMemory: 64Mi`).
pub(super) struct QuantityString;

/// A decimal number (an optional sign, digits with an optional fraction) and an optional
/// suffix: a decimal SI one (`n u m k M G T P E`), a binary one (`Ki Mi Gi Ti Pi Ei`) or an
/// exponent up to ±40 (`e3`, `E-6`); surrounding spaces are trimmed.
const QUANTITY_PATTERN: &str = r"^\s*[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([numkMGTPE]|[KMGTPE]i|[eE][+-]?0*([0-9]|[1-3][0-9]|40))?\s*$";

const QUANTITY_DESCRIPTION: &str = "A Kubernetes quantity: a number with an optional suffix, \
    decimal (`500m`, `2k`, `1G`) or binary (`4Ki`, `256Mi`, `4Ti`), or an exponent (`1e3`).";

impl JsonSchema for QuantityString {
    fn schema_name() -> Cow<'static, str> {
        "QuantityString".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "description": QUANTITY_DESCRIPTION,
            "pattern": QUANTITY_PATTERN,
            "examples": ["64Mi", "256Mi"],
        })
    }
}

impl JsonSchema for QuantityValue {
    fn schema_name() -> Cow<'static, str> {
        "Quantity".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": ["string", "number"],
            "description": format!(
                "{QUANTITY_DESCRIPTION} A plain YAML number (`1000`) is taken as written."
            ),
            "pattern": QUANTITY_PATTERN,
            "examples": ["1000", "500m", "4Ti"],
        })
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_accepts_exactly_the_quantities_orca_parses() {
        super::super::schema::assert_schema_agrees_with::<QuantityValue>(
            "Quantity",
            |text| text.parse::<Quantity>().is_ok(),
            &[
                ("1000", true),
                ("500m", true),
                ("4Ti", true),
                ("256Mi", true),
                ("1.5", true),
                ("1.", true),
                (".5", true),
                ("+2k", true),
                ("-3", true),
                ("1e3", true),
                ("1E-6", true),
                ("1e+040", true),
                (" 4Gi ", true),
                ("7E", true),
                ("4TB", false),
                ("4ti", false),
                ("1ki", false),
                ("", false),
                (".", false),
                ("1e41", false),
                ("1-", false),
                ("1+2", false),
                ("lots", false),
                ("1 Gi", false),
                ("Mi", false),
            ],
        );
        let schema = serde_json::to_value(schemars::schema_for!(QuantityValue)).unwrap();
        let validator = jsonschema::validator_for(&schema).unwrap();
        for number in [serde_json::json!(64), serde_json::json!(0.5)] {
            assert!(validator.is_valid(&number), "{number}");
        }
        assert!(!validator.is_valid(&serde_json::json!(null)));
        assert!(!validator.is_valid(&serde_json::json!(true)));
    }

    #[test]
    fn a_quantity_written_as_text_only_refuses_numbers_as_its_string_field_does() {
        let schema = serde_json::to_value(schemars::schema_for!(QuantityString)).unwrap();
        let validator = jsonschema::validator_for(&schema).unwrap();
        for (value, accepted) in [
            (serde_json::json!("64Mi"), true),
            (serde_json::json!("4TB"), false),
            (serde_json::json!(64), false),
        ] {
            assert_eq!(validator.is_valid(&value), accepted, "{value}");
            let as_string = serde_json::from_value::<String>(value.clone())
                .is_ok_and(|text| text.parse::<Quantity>().is_ok());
            assert_eq!(as_string, accepted, "{value}");
        }
    }
}
