//! An example custom selector: each team (the pod's `team` label) gets the instance types its
//! budget allows, listed in the plugin's settings.
//!
//! ```yaml
//! selectInstance:
//!   - plugin: team-selector
//!     settings: {"teams": {"vision": ["g6.xlarge", "g5.xlarge"], "batch": ["c7i.large"]}}
//!   - plugin: orca-default-selector
//! ```
//!
//! It answers only for pods it has an opinion on. A pod with an explicit
//! `orca.research/instance-type`, without a `team` label, or of a team not in the settings is
//! `declined`: not its pod, so orca asks the next plugin. A team pod that none of the team's
//! types fits is `no-match`, which fails the pod (the default `onError: fail`): the team's
//! budget is the point, and the default selector must not replace it with a bigger type.

use std::collections::BTreeMap;

use orca_plugin_sdk::catalogue::any;
use orca_plugin_sdk::{
    Candidate, Catalogue, Hook, HostCatalogue, InstanceQuery, Plugin, Pod, PodExt, PolicyError,
};
use serde::Deserialize;

pub const TEAM_LABEL: &str = "team";
const INSTANCE_TYPE_ANNOTATION: &str = "orca.research/instance-type";

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// Team name → instance types, best first.
    pub teams: BTreeMap<String, Vec<String>>,
}

impl Settings {
    /// # Errors
    /// `invalid-settings` naming what is wrong.
    pub fn parse(json: &str) -> Result<Settings, PolicyError> {
        let json = if json.trim().is_empty() { "{}" } else { json };
        serde_json::from_str(json).map_err(|error| {
            PolicyError::InvalidSettings(format!("team-selector settings: {error}"))
        })
    }
}

/// The team's types that exist in the catalogue and fit the pod's requests, in the team's
/// order of preference.
///
/// # Errors
/// `declined` when this plugin has no opinion on the pod; `no-match` when none of the team's
/// types fits it.
pub fn select(
    pod: &Pod,
    settings: &Settings,
    catalogue: &impl Catalogue,
) -> Result<Vec<Candidate>, PolicyError> {
    if pod.annotation(INSTANCE_TYPE_ANNOTATION).is_some() {
        return Err(PolicyError::Declined(format!(
            "the pod names its type with {INSTANCE_TYPE_ANNOTATION}"
        )));
    }
    let team = pod
        .label(TEAM_LABEL)
        .ok_or_else(|| PolicyError::Declined(format!("the pod has no {TEAM_LABEL} label")))?;
    let allowed = settings
        .teams
        .get(team)
        .ok_or_else(|| PolicyError::Declined(format!("team {team:?} has no instance types")))?;
    let fitting = catalogue.query(&InstanceQuery {
        min_vcpus: pod.requests.cpu_millis.div_ceil(1000) as u32,
        min_memory_mib: pod.requests.memory_bytes.div_ceil(1 << 20),
        min_gpus: pod.requests.gpus,
        names: allowed.clone(),
        ..any()
    });
    let candidates: Vec<Candidate> = allowed
        .iter()
        .filter(|name| fitting.iter().any(|t| &t.name == *name))
        .map(|name| Candidate {
            instance_type: name.clone(),
            reason: format!("team {team}'s types"),
        })
        .collect();
    if candidates.is_empty() {
        return Err(PolicyError::NoMatch(format!(
            "none of team {team}'s types ({}) fits the pod's requests",
            allowed.join(", ")
        )));
    }
    Ok(candidates)
}

pub struct TeamSelector;

impl Plugin for TeamSelector {
    const NAME: &'static str = "team-selector";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const HOOKS: &'static [Hook] = &[Hook::SelectInstance];

    fn select_instance(pod: &Pod, settings: &str) -> Result<Vec<Candidate>, PolicyError> {
        select(pod, &Settings::parse(settings)?, &HostCatalogue)
    }
}

orca_plugin_sdk::register_plugin!(TeamSelector);

#[cfg(test)]
mod tests {
    use orca_plugin_sdk::Architecture;
    use orca_plugin_sdk::testing::{FixedCatalogue, instance_type, pod_with_annotations};

    use super::*;

    fn catalogue() -> FixedCatalogue {
        FixedCatalogue(vec![
            instance_type("g6.xlarge", 4, 16, 1, Architecture::Amd64, 0.805),
            instance_type("g5.xlarge", 4, 16, 1, Architecture::Amd64, 1.006),
            instance_type("c7i.large", 2, 4, 0, Architecture::Amd64, 0.0893),
        ])
    }

    fn settings() -> Settings {
        Settings::parse(r#"{"teams": {"vision": ["g5.xlarge", "g6.xlarge", "z9.nothing"]}}"#)
            .expect("valid settings")
    }

    fn team_pod(team: Option<&str>, annotations: &[(&str, &str)]) -> Pod {
        let mut pod = pod_with_annotations(annotations);
        pod.labels = team
            .map(|t| vec![(TEAM_LABEL.to_owned(), t.to_owned())])
            .unwrap_or_default();
        pod
    }

    #[test]
    fn a_teams_pod_gets_its_types_in_the_teams_order_and_unknown_types_are_dropped() {
        let candidates =
            select(&team_pod(Some("vision"), &[]), &settings(), &catalogue()).expect("candidates");
        let names: Vec<&str> = candidates
            .iter()
            .map(|c| c.instance_type.as_str())
            .collect();
        assert_eq!(names, ["g5.xlarge", "g6.xlarge"]);
    }

    #[test]
    fn pods_it_has_no_opinion_on_are_declined() {
        for (pod, expected) in [
            (team_pod(None, &[]), "no team label"),
            (team_pod(Some("finance"), &[]), "team \"finance\""),
            (
                team_pod(Some("vision"), &[(INSTANCE_TYPE_ANNOTATION, "m7i.large")]),
                "names its type",
            ),
        ] {
            match select(&pod, &settings(), &catalogue()) {
                Err(PolicyError::Declined(message)) => {
                    assert!(message.contains(expected), "{message}")
                }
                other => panic!("expected declined with {expected:?}, got {other:?}"),
            }
        }
    }

    #[test]
    fn a_pod_bigger_than_every_team_type_gets_no_match_listing_them() {
        let mut pod = team_pod(Some("vision"), &[]);
        pod.requests.gpus = 8;
        match select(&pod, &settings(), &catalogue()) {
            Err(PolicyError::NoMatch(message)) => {
                assert!(message.contains("g5.xlarge"), "{message}")
            }
            other => panic!("expected no-match, got {other:?}"),
        }
    }

    #[test]
    fn settings_with_an_unknown_field_are_refused() {
        assert!(matches!(
            Settings::parse(r#"{"team": {}}"#),
            Err(PolicyError::InvalidSettings(_))
        ));
    }
}
