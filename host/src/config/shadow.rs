//! `policy.shadow`: a candidate plugin asked beside the live chains for every pod, within its
//! own sandbox slot and a budget, its answer recorded and counted but never launched.
//!
//! ```yaml
//! policy:
//!   pluginsDir: /etc/orca/plugins        # the candidate's file, or
//!   plugins: [oci://registry.example/team/selector:v2]   # its OCI reference
//!   shadow:
//!     plugin: team-selector              # the name it reports
//!     replaces: orca-default-selector    # optional: the live plugin it would take the place of
//!     settings: {preferArm: true}
//!     budget: 500ms
//! ```

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::duration::Seconds;
use super::error::ConfigError;
use super::on_error::OnError;

/// The longest `policy.shadow.budget`: a pod's launch never waits longer on a candidate.
const MAX_BUDGET: Seconds = Seconds::from_secs(10);

/// A candidate plugin run beside the live chains, never acted on.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ShadowConfig {
    /// The candidate's name, as it reports it (`orca plugin check FILE.wasm`). Its bytes come
    /// from where every plugin's come from: a file in `policy.pluginsDir` or an `oci://`
    /// reference in `policy.plugins` (verified under `policy.registry.verify`), and a new
    /// version is picked up without a restart.
    pub plugin: String,
    /// The live plugin the candidate would take the place of, in every chain that names it.
    /// Without it, the candidate is asked first in the chain of every hook it implements, the
    /// live plugins after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<String>,
    /// Passed to the candidate as JSON text.
    #[serde(default = "empty_settings")]
    pub settings: serde_json::Value,
    /// What each kind of failed answer from the candidate does in its chains, as for a live
    /// step.
    #[serde(default)]
    pub on_error: OnError,
    /// How long a pod's launch waits for the candidate's decision once its own is made. Past
    /// it, the decision record says `timedOut` and the launch goes on (the candidate's call
    /// still ends within its time limit, `policy.pluginLimits` or `policy.limits`).
    #[serde(default = "default_budget")]
    pub budget: Seconds,
}

fn empty_settings() -> serde_json::Value {
    serde_json::Value::Object(Default::default())
}

fn default_budget() -> Seconds {
    Seconds::from_millis(500)
}

impl ShadowConfig {
    /// # Errors
    /// [`ConfigError`] naming the field: an empty name, a `replaces` no chain names (`named`
    /// says whether a chain names a plugin), a budget past 10s.
    pub(super) fn validate(&self, named: impl Fn(&str) -> bool) -> Result<(), ConfigError> {
        if self.plugin.trim().is_empty() {
            return Err(ConfigError::invalid(
                "policy.shadow.plugin",
                &self.plugin,
                "the name the candidate plugin reports (see `orca plugin check FILE.wasm`)",
            ));
        }
        if let Some(replaced) = &self.replaces
            && !named(replaced)
        {
            return Err(ConfigError::invalid(
                "policy.shadow.replaces",
                replaced,
                "a plugin one of policy.selectInstance, chooseMarket or buildTags names",
            ));
        }
        if self.budget > MAX_BUDGET {
            return Err(ConfigError::invalid(
                "policy.shadow.budget",
                self.budget,
                "at most 10s: a pod's launch waits this long for the candidate",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shadow(yaml: &str) -> ShadowConfig {
        serde_saphyr::from_str(yaml).expect("a shadow section")
    }

    #[test]
    fn a_shadow_names_its_candidate_replaces_a_named_plugin_and_waits_at_most_ten_seconds() {
        let named = |name: &str| name == "orca-default-selector";
        // (policy.shadow, the field refused, if any)
        let cases = [
            ("plugin: team-selector", None),
            (
                "{plugin: team-selector, replaces: orca-default-selector, budget: 10s}",
                None,
            ),
            ("plugin: ' '", Some("policy.shadow.plugin")),
            (
                "{plugin: t, replaces: orca-default-market}",
                Some("policy.shadow.replaces"),
            ),
            ("{plugin: t, budget: 11s}", Some("policy.shadow.budget")),
        ];
        for (yaml, refused) in cases {
            let result = shadow(yaml).validate(named);
            match (refused, result) {
                (None, Ok(())) => {}
                (Some(field), Err(ConfigError::Invalid { field: got, .. })) => {
                    assert_eq!(got, field, "{yaml}");
                }
                (expected, got) => panic!("{yaml}: expected {expected:?}, got {got:?}"),
            }
        }
        let defaults = shadow("plugin: team-selector");
        assert_eq!(defaults.budget, Seconds::from_millis(500));
        assert_eq!(defaults.settings, serde_json::json!({}));
        assert_eq!(defaults.on_error, OnError::default());
        // Unknown fields are refused, as everywhere in the config.
        assert!(serde_saphyr::from_str::<ShadowConfig>("{plugin: t, replace: x}").is_err());
    }
}
