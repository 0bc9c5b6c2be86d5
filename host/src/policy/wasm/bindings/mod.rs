//! Host bindings, one module per `orca:policy` version this host serves (each generated from
//! its frozen folder in `plugin-sdk/wit/`). The newest version's types are the host's own;
//! a plugin built for an older version is called through its own bindings and its values are
//! converted at that boundary, so nothing past `LoadedPlugin` knows which version answered.
//! Each older module converts only to the version after it; a chain of steps reaches the host's.

/// The conversions from an older interface (`old`, with `old_host`) to the one after it
/// (`new`, `new_host`), written once and expanded in each older version's module. A record
/// that gained fields converts down by naming the old ones (the new are dropped); conversions
/// up fill the new fields with their documented defaults (`new_market_fields`,
/// `new_query_fields`), and error cases the older version cannot return are the only new
/// match arms (`old_error_cases`: the cases the older version shares with the newer beyond the
/// first interface's).
macro_rules! step_conversions {
    (
        new_market_fields: { $($market_field:ident: $market_default:expr),* $(,)? },
        new_query_fields: { $($query_field:ident: $query_default:expr),* $(,)? },
        old_error_cases: { $($case:ident),* $(,)? } $(,)?
    ) => {
        pub fn market_up(
            answer: Result<old::MarketDecision, old::PolicyError>,
        ) -> Result<new::MarketDecision, new::PolicyError> {
            answer
                .map(|d| new::MarketDecision {
                    market: market_up_value(d.market),
                    max_price: d.max_price,
                    fallback_to_on_demand: d.fallback_to_on_demand,
                    reason: d.reason,
                    $($market_field: $market_default,)*
                })
                .map_err(policy_error)
        }

        fn policy_error(error: old::PolicyError) -> new::PolicyError {
            match error {
                old::PolicyError::InvalidAnnotation(a) => {
                    new::PolicyError::InvalidAnnotation(new::AnnotationError {
                        annotation: a.annotation,
                        value: a.value,
                        expected: a.expected,
                    })
                }
                old::PolicyError::NoMatch(m) => new::PolicyError::NoMatch(m),
                old::PolicyError::InvalidSettings(m) => new::PolicyError::InvalidSettings(m),
                old::PolicyError::Unsupported => new::PolicyError::Unsupported,
                old::PolicyError::Failed(m) => new::PolicyError::Failed(m),
                $(old::PolicyError::$case(m) => new::PolicyError::$case(m),)*
            }
        }

        pub fn instance_query(q: old_host::InstanceQuery) -> new_host::InstanceQuery {
            new_host::InstanceQuery {
                min_vcpus: q.min_vcpus,
                min_memory_mib: q.min_memory_mib,
                min_gpus: q.min_gpus,
                architecture: q.architecture.map(architecture_up),
                families: q.families,
                exclude_families: q.exclude_families,
                names: q.names,
                limit: q.limit,
                $($query_field: $query_default,)*
            }
        }

        pub fn pod(pod: &new::Pod) -> old::Pod {
            old::Pod {
                namespace: pod.namespace.clone(),
                name: pod.name.clone(),
                uid: pod.uid.clone(),
                labels: pod.labels.clone(),
                annotations: pod.annotations.clone(),
                requests: resources(&pod.requests),
                limits: resources(&pod.limits),
                node_selector: pod.node_selector.clone(),
                tolerations: pod
                    .tolerations
                    .iter()
                    .map(|t| old::Toleration {
                        key: t.key.clone(),
                        operator: t.operator.clone(),
                        value: t.value.clone(),
                        effect: t.effect.clone(),
                    })
                    .collect(),
                priority: pod.priority,
                json: pod.json.clone(),
            }
        }

        fn resources(r: &new::Resources) -> old::Resources {
            old::Resources {
                cpu_millis: r.cpu_millis,
                memory_bytes: r.memory_bytes,
                ephemeral_storage_bytes: r.ephemeral_storage_bytes,
                gpus: r.gpus,
            }
        }

        pub fn candidates_down(candidates: &[new::Candidate]) -> Vec<old::Candidate> {
            candidates
                .iter()
                .map(|c| old::Candidate {
                    instance_type: c.instance_type.clone(),
                    reason: c.reason.clone(),
                })
                .collect()
        }

        pub fn tag_context(context: &new::TagContext) -> old::TagContext {
            old::TagContext {
                node_name: context.node_name.clone(),
                cluster_name: context.cluster_name.clone(),
                instance_type: context.instance_type.clone(),
                market: match context.market {
                    new::Market::Spot => old::Market::Spot,
                    new::Market::OnDemand => old::Market::OnDemand,
                },
            }
        }

        pub fn candidates_up(
            answer: Result<Vec<old::Candidate>, old::PolicyError>,
        ) -> Result<Vec<new::Candidate>, new::PolicyError> {
            answer
                .map(|candidates| {
                    candidates
                        .into_iter()
                        .map(|c| new::Candidate {
                            instance_type: c.instance_type,
                            reason: c.reason,
                        })
                        .collect()
                })
                .map_err(policy_error)
        }

        pub fn tags_up(
            answer: Result<Vec<old::Tag>, old::PolicyError>,
        ) -> Result<Vec<new::Tag>, new::PolicyError> {
            answer
                .map(|tags| {
                    tags.into_iter()
                        .map(|t| new::Tag {
                            key: t.key,
                            value: t.value,
                        })
                        .collect()
                })
                .map_err(policy_error)
        }

        /// `info`'s answer: (name, version, hooks).
        pub fn info_up(info: old::PluginInfo) -> new::PluginInfo {
            new::PluginInfo {
                name: info.name,
                version: info.version,
                hooks: info
                    .hooks
                    .into_iter()
                    .map(|hook| match hook {
                        old::Hook::SelectInstance => new::Hook::SelectInstance,
                        old::Hook::ChooseMarket => new::Hook::ChooseMarket,
                        old::Hook::BuildTags => new::Hook::BuildTags,
                    })
                    .collect(),
            }
        }

        pub fn log_level(level: old_host::LogLevel) -> new_host::LogLevel {
            match level {
                old_host::LogLevel::Trace => new_host::LogLevel::Trace,
                old_host::LogLevel::Debug => new_host::LogLevel::Debug,
                old_host::LogLevel::Info => new_host::LogLevel::Info,
                old_host::LogLevel::Warn => new_host::LogLevel::Warn,
                old_host::LogLevel::Error => new_host::LogLevel::Error,
            }
        }

        pub fn instance_type(t: new::InstanceType) -> old::InstanceType {
            old::InstanceType {
                name: t.name,
                family: t.family,
                vcpus: t.vcpus,
                memory_mib: t.memory_mib,
                gpus: t.gpus,
                gpu_model: t.gpu_model,
                architecture: match t.architecture {
                    new::Architecture::Amd64 => old::Architecture::Amd64,
                    new::Architecture::Arm64 => old::Architecture::Arm64,
                },
                on_demand_price: t.on_demand_price,
                spot_price: t.spot_price,
            }
        }

        fn market_up_value(market: old::Market) -> new::Market {
            match market {
                old::Market::Spot => new::Market::Spot,
                old::Market::OnDemand => new::Market::OnDemand,
            }
        }

        fn architecture_up(architecture: old::Architecture) -> new::Architecture {
            match architecture {
                old::Architecture::Amd64 => new::Architecture::Amd64,
                old::Architecture::Arm64 => new::Architecture::Arm64,
            }
        }
    };
}
pub(crate) use step_conversions;

pub mod v0_1;
pub mod v0_2;
pub mod v0_3;

pub use v0_3::orca::policy::host::{InstanceQuery, LogLevel};
pub use v0_3::orca::policy::types::{
    AllocationStrategy, AnnotationError, Architecture, Candidate, Hook, InstanceType, Market,
    MarketDecision, Pod, PolicyError, Resources, Tag, TagContext, Toleration,
};

/// An `orca:policy` version this host serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum InterfaceVersion {
    /// The first interface.
    V0_1,
    /// `policy-error` gains `declined`.
    V0_2,
    /// `market-decision` gains `allocation-strategy` and `mark-on-rebalance`; the pod, instance
    /// types and catalogue queries gain `zones`.
    V0_3,
}

impl InterfaceVersion {
    /// Oldest first.
    pub const ALL: [InterfaceVersion; 3] = [
        InterfaceVersion::V0_1,
        InterfaceVersion::V0_2,
        InterfaceVersion::V0_3,
    ];
    /// What the SDK in this tree builds against.
    pub const NEWEST: InterfaceVersion = InterfaceVersion::V0_3;

    pub fn as_str(self) -> &'static str {
        match self {
            InterfaceVersion::V0_1 => "0.1.0",
            InterfaceVersion::V0_2 => "0.2.0",
            InterfaceVersion::V0_3 => "0.3.0",
        }
    }

    /// The version whose bindings serve a plugin declaring `declared`, by cargo's semver rule
    /// (below 1.0 the minor must match: 0.1.3 is served by 0.1.0, 0.4.0 by nothing here).
    pub fn serving(declared: &str) -> Option<InterfaceVersion> {
        let mut parts = declared.trim().split('.');
        let major: u64 = parts.next()?.parse().ok()?;
        let minor: u64 = parts.next()?.parse().ok()?;
        // A patch is optional but must be a number when present.
        if let Some(patch) = parts.next() {
            patch.split(['-', '+']).next()?.parse::<u64>().ok()?;
        }
        match (major, minor) {
            (0, 1) => Some(InterfaceVersion::V0_1),
            (0, 2) => Some(InterfaceVersion::V0_2),
            (0, 3) => Some(InterfaceVersion::V0_3),
            _ => None,
        }
    }

    /// `0.1.0, 0.2.0, 0.3.0`, for messages.
    pub fn supported_list() -> String {
        InterfaceVersion::ALL
            .map(InterfaceVersion::as_str)
            .join(", ")
    }
}

impl std::fmt::Display for InterfaceVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use sha2::{Digest, Sha256};

    use super::*;

    #[test]
    fn declared_versions_are_served_by_cargo_semver() {
        assert_eq!(
            InterfaceVersion::serving("0.1.0"),
            Some(InterfaceVersion::V0_1)
        );
        assert_eq!(
            InterfaceVersion::serving("0.1.3"),
            Some(InterfaceVersion::V0_1)
        );
        assert_eq!(
            InterfaceVersion::serving("0.2.0"),
            Some(InterfaceVersion::V0_2)
        );
        assert_eq!(
            InterfaceVersion::serving("0.2.1-rc.1"),
            Some(InterfaceVersion::V0_2)
        );
        assert_eq!(
            InterfaceVersion::serving("0.3.2"),
            Some(InterfaceVersion::V0_3)
        );
        for refused in ["0.4.0", "0.0.9", "1.0.0", "garbage", "0.x", "", "0.2.z"] {
            assert_eq!(InterfaceVersion::serving(refused), None, "{refused:?}");
        }
        assert_eq!(
            InterfaceVersion::NEWEST.as_str(),
            orca_plugin_sdk::INTERFACE_VERSION,
            "the SDK builds against the newest version the host serves"
        );
    }

    /// A released folder never changes (plugin-sdk/wit/README.md): plugins built against it
    /// are in users' hands. A new interface is a new folder, and a new line here.
    #[test]
    fn released_interface_folders_are_frozen() {
        let wit = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugin-sdk/wit");
        for (folder, expected) in FROZEN {
            let mut digest = Sha256::new();
            for file in ["host.wit", "policy.wit", "types.wit"] {
                let text = std::fs::read(wit.join(folder).join(file))
                    .unwrap_or_else(|error| panic!("reading {folder}/{file}: {error}"));
                digest.update(file.as_bytes());
                digest.update(&text);
            }
            let found: String = digest
                .finalize()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            assert_eq!(
                &found, expected,
                "plugin-sdk/wit/{folder} changed: a released interface is frozen; put the change \
                 in a new version's folder"
            );
        }
    }

    const FROZEN: &[(&str, &str)] = &[
        (
            "since_v0.1.0",
            "4d76b52653ae2c7ecf3a52469814690fbc2528b64eb42a508e015ae5dc3f5e5c",
        ),
        (
            "since_v0.2.0",
            "ffcdc70121aa032b945092d47a16423d7fbdb83ea8ae5662e72db40f1c4dce87",
        ),
        (
            "since_v0.3.0",
            "8652d08c96d337d7786065c680cbc6dd86a034957463eb35b784482a3b2a56b5",
        ),
    ];
}
