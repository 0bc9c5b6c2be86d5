//! How one simulated instance behaves: config defaults, overridden per pod by annotations.
//!
//! | annotation (prefix `simulated.orca.research/`) | value |
//! |---|---|
//! | `boot-delay` | duration until `running`, e.g. `3s` |
//! | `run-time` | duration the workload runs before exiting; `forever` to run until deleted |
//! | `exit-code` | the workload's exit code, 0–255 |
//! | `lose-after` | the instance vanishes from the provider after this duration |
//! | `interrupt-after` | a spot interruption terminates the instance after this duration |
//! | `launch-error` | `capacity`, `transient` or `permanent`, optionally `:N` to fail only N times |

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::SimulatedConfig;
use crate::provider::{ErrorClass, ProviderError};

pub const ANNOTATION_PREFIX: &str = "simulated.orca.research/";

/// The resolved behaviour of one instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Behaviour {
    #[serde(with = "millis")]
    pub boot_delay: Duration,
    #[serde(with = "optional_millis")]
    pub run_time: Option<Duration>,
    pub exit_code: i32,
    #[serde(with = "optional_millis")]
    pub lose_after: Option<Duration>,
    #[serde(with = "optional_millis")]
    pub interrupt_after: Option<Duration>,
}

/// An injected launch failure: this class of error for the first `times` attempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchFault {
    pub class: ErrorClass,
    pub times: u32,
}

impl Behaviour {
    /// Resolves the behaviour for a pod from its annotations over the config defaults.
    ///
    /// # Errors
    /// A permanent [`ProviderError`] naming the annotation and the accepted form.
    pub fn resolve(
        defaults: &SimulatedConfig,
        annotations: &BTreeMap<String, String>,
    ) -> Result<(Behaviour, Option<LaunchFault>), ProviderError> {
        let get = |name: &str| annotations.get(&format!("{ANNOTATION_PREFIX}{name}"));
        let mut behaviour = Behaviour {
            boot_delay: defaults.boot_delay.get(),
            run_time: defaults.run_time.map(|t| t.get()),
            exit_code: defaults.exit_code,
            lose_after: None,
            interrupt_after: None,
        };
        if let Some(value) = get("boot-delay") {
            behaviour.boot_delay = parse_duration("boot-delay", value)?;
        }
        if let Some(value) = get("run-time") {
            behaviour.run_time = match value.as_str() {
                "forever" => None,
                _ => Some(parse_duration("run-time", value)?),
            };
        }
        if let Some(value) = get("exit-code") {
            behaviour.exit_code = value
                .parse::<i32>()
                .ok()
                .filter(|code| (0..=255).contains(code))
                .ok_or_else(|| invalid("exit-code", value, "an exit code from 0 to 255"))?;
        }
        if let Some(value) = get("lose-after") {
            behaviour.lose_after = Some(parse_duration("lose-after", value)?);
        }
        if let Some(value) = get("interrupt-after") {
            behaviour.interrupt_after = Some(parse_duration("interrupt-after", value)?);
        }
        let fault = get("launch-error")
            .map(|value| parse_fault(value))
            .transpose()?;
        Ok((behaviour, fault))
    }
}

fn parse_duration(name: &str, value: &str) -> Result<Duration, ProviderError> {
    humantime::parse_duration(value)
        .map_err(|_| invalid(name, value, "a duration like 3s or 500ms"))
}

fn parse_fault(value: &str) -> Result<LaunchFault, ProviderError> {
    let expected = "capacity, transient or permanent, optionally followed by :N (fail N times)";
    let (class, times) = match value.split_once(':') {
        Some((class, times)) => (
            class,
            times
                .parse::<u32>()
                .map_err(|_| invalid("launch-error", value, expected))?,
        ),
        None => (value, u32::MAX),
    };
    let class = match class {
        "capacity" => ErrorClass::Capacity,
        "transient" => ErrorClass::Transient,
        "permanent" => ErrorClass::Permanent,
        _ => return Err(invalid("launch-error", value, expected)),
    };
    Ok(LaunchFault { class, times })
}

fn invalid(name: &str, value: &str, expected: &str) -> ProviderError {
    ProviderError::invalid_annotation(format!(
        "annotation {ANNOTATION_PREFIX}{name}: invalid value {value:?}; expected {expected}"
    ))
}

mod millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(value: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u64(value.as_millis() as u64)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
        Ok(Duration::from_millis(u64::deserialize(deserializer)?))
    }
}

mod optional_millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(
        value: &Option<Duration>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(duration) => serializer.serialize_some(&(duration.as_millis() as u64)),
            None => serializer.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Duration>, D::Error> {
        Ok(Option::<u64>::deserialize(deserializer)?.map(Duration::from_millis))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (format!("{ANNOTATION_PREFIX}{k}"), v.to_string()))
            .collect()
    }

    #[test]
    fn annotations_override_config_defaults() {
        let defaults = SimulatedConfig::default();
        let (behaviour, fault) = Behaviour::resolve(
            &defaults,
            &annotations(&[("run-time", "3s"), ("exit-code", "7")]),
        )
        .unwrap();
        assert_eq!(behaviour.boot_delay, defaults.boot_delay.get());
        assert_eq!(behaviour.run_time, Some(Duration::from_secs(3)));
        assert_eq!(behaviour.exit_code, 7);
        assert_eq!(fault, None);
    }

    #[test]
    fn launch_error_with_count() {
        let (_, fault) = Behaviour::resolve(
            &SimulatedConfig::default(),
            &annotations(&[("launch-error", "transient:2")]),
        )
        .unwrap();
        assert_eq!(
            fault,
            Some(LaunchFault {
                class: ErrorClass::Transient,
                times: 2
            })
        );
    }

    #[test]
    fn an_invalid_annotation_is_an_error_of_its_own_class_naming_it() {
        let error = Behaviour::resolve(
            &SimulatedConfig::default(),
            &annotations(&[("exit-code", "300")]),
        )
        .unwrap_err();
        assert_eq!(error.class, ErrorClass::InvalidAnnotation);
        assert!(
            error.message.contains("simulated.orca.research/exit-code"),
            "{error}"
        );
        assert!(error.message.contains("\"300\""), "{error}");
    }
}
