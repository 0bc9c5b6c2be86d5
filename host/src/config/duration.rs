//! Durations in config.yaml are written as humans write them: `10s`, `500ms`, `1m 30s`.

use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A duration parsed from a humantime string.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Seconds(Duration);

impl Seconds {
    pub const fn from_secs(secs: u64) -> Seconds {
        Seconds(Duration::from_secs(secs))
    }

    pub const fn from_millis(millis: u64) -> Seconds {
        Seconds(Duration::from_millis(millis))
    }

    pub const fn get(self) -> Duration {
        self.0
    }
}

impl fmt::Debug for Seconds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", humantime::format_duration(self.0))
    }
}

impl fmt::Display for Seconds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

impl<'de> Deserialize<'de> for Seconds {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        humantime::parse_duration(&text)
            .map(Seconds)
            .map_err(|error| {
                serde::de::Error::custom(format!(
                    "invalid duration {text:?} ({error}); expected a duration like 10s, 500ms or 1m"
                ))
            })
    }
}

impl Serialize for Seconds {
    /// As humantime writes it (`1m 30s`), which [`Seconds`] parses back.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// humantime's units (`humantime::parse_duration`) a fraction may be given in.
const UNITS: &str = "usec|us|µs|millis|msec|ms|seconds|second|secs|sec|s|minutes|minute|mins|\
                     min|m|hours|hour|hrs|hr|h|days|day|d|weeks|week|wks|wk|w|months|month|M|\
                     years|year|yrs|yr|y";
/// The units only whole numbers may be given in (humantime keeps whole nanoseconds).
const WHOLE_UNITS: &str = "nanos|nsec|ns";

/// The grammar `humantime::parse_duration` accepts: `0`, or numbers each followed by a unit
/// (spaces allowed around and inside them: `1m 30s`, `1m30s`, `1.5h`, `10 s`). What the
/// pattern cannot say, a value that overflows or a fraction finer than a nanosecond, is
/// refused at load.
fn duration_pattern() -> String {
    let number = r"[0-9][0-9\s]*";
    let fraction = r"\.\s*[0-9][0-9\s]*";
    let item = format!("{number}(?:(?:{fraction})?(?:{UNITS})|(?:{WHOLE_UNITS}))");
    format!(r"^(?:0|\s*{item}(?:\s*{item})*\s*)$")
}

impl JsonSchema for Seconds {
    fn schema_name() -> Cow<'static, str> {
        "Duration".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "description": "A duration as people write it: a number and a unit, several of \
                them summed (`10s`, `500ms`, `1m 30s`, `1.5h`). Units: ns, us, ms, s (sec, \
                seconds), m (min, minutes), h (hr, hours), d (days), w (weeks), M (months), \
                y (years). A bare number is refused, except `0`.",
            "pattern": duration_pattern(),
            "examples": ["10s", "500ms", "1m 30s"],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_durations_parse() {
        let parsed: Seconds = serde_json::from_str("\"1m 30s\"").unwrap();
        assert_eq!(parsed.get(), Duration::from_secs(90));
        let parsed: Seconds = serde_json::from_str("\"250ms\"").unwrap();
        assert_eq!(parsed.get(), Duration::from_millis(250));
    }

    #[test]
    fn bare_numbers_are_rejected_with_an_example() {
        let error = serde_json::from_str::<Seconds>("\"10\"")
            .unwrap_err()
            .to_string();
        assert!(error.contains("like 10s"), "{error}");
    }

    #[test]
    fn the_schema_pattern_accepts_exactly_what_humantime_parses() {
        super::super::schema::assert_schema_agrees_with::<Seconds>(
            "humantime",
            |text| humantime::parse_duration(text).is_ok(),
            &[
                ("0", true),
                ("10s", true),
                ("500ms", true),
                ("1m 30s", true),
                ("1m30s", true),
                ("1.5h", true),
                ("10 s", true),
                (" 2m ", true),
                ("1 0s", true),
                ("2 hours", true),
                ("3 weeks 2d", true),
                ("5µs", true),
                ("1M", true),
                ("0s", true),
                ("0.25s", true),
                ("10", false),
                ("", false),
                ("   ", false),
                ("1.5ns", false),
                ("1.s", false),
                (".5s", false),
                ("-1s", false),
                ("1x", false),
                ("1mss", false),
                ("s", false),
                ("1m,30s", false),
                ("1h.5m", false),
                (" 0", false),
                ("1.5", false),
            ],
        );
    }

    #[test]
    fn a_duration_serializes_as_it_parses() {
        for secs in [0, 1, 59, 60, 90, 3600, 86_400] {
            let value = serde_json::to_value(Seconds::from_secs(secs)).unwrap();
            let back: Seconds = serde_json::from_value(value).unwrap();
            assert_eq!(back, Seconds::from_secs(secs));
        }
        let value = serde_json::to_value(Seconds::from_millis(1500)).unwrap();
        assert_eq!(value, "1s 500ms");
    }
}
