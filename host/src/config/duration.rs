//! Durations in config.yaml are written as humans write them: `10s`, `500ms`, `1m 30s`.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Deserializer};

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
}
