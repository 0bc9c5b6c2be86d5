//! The `config.yaml` schema: parsed strictly (unknown fields are errors), then validated, so a
//! mistake stops startup with a message naming the field and the form it expects.

mod aws;
mod container;
mod duration;
mod endpoint;
mod error;
mod exec;
mod fleet;
mod guardrails;
mod interruption;
mod kubelet_api;
mod logs;
mod node;
mod nodes;
mod on_error;
mod pod_metrics;
mod pods;
mod policy;
mod provider;
mod quantity_field;
pub mod reference;
mod registry;
mod replicas;
pub mod schema;
mod shadow;
mod verify;

use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use aws::{AwsConfig, InstanceStorePolicy, RateLimitConfig, RootVolumeConfig, is_resource_id};
pub use duration::Seconds;
pub use error::ConfigError;
pub use exec::ExecConfig;
pub use fleet::{FleetConfig, LaunchApi};
pub use interruption::InterruptionQueueConfig;
pub use kubelet_api::{KubeletApiConfig, MetricsConfig, ServingTlsConfig, TlsSource};
pub use logs::{LogDelivery, LogsConfig, RETENTION_DAYS};
pub(crate) use node::is_dns_label;
pub use node::{NodeConfig, TaintConfig, TaintEffect};
pub use nodes::{DeclaredNode, NodeEntry, REGION_LABEL};
pub use pod_metrics::PodMetricsConfig;
pub use pods::PodsConfig;
pub use policy::{
    DEFAULT_MARKET, DEFAULT_SELECTOR, DEFAULT_TAGGER, FailureKind, GuardrailsConfig, Instances,
    OnError, OnErrorAction, PluginLimits, PluginLimitsConfig, PluginStep, PolicyConfig,
    SandboxLimitsConfig,
};
pub use provider::{ProviderConfig, ProviderKind, SimulatedConfig};
pub use registry::RegistryConfig;
pub use replicas::ReplicasConfig;
pub use shadow::ShadowConfig;
pub use verify::{KeylessIdentityConfig, SigstoreTrustRootConfig, VerifyRuleConfig};

use crate::process::cli::LogFormat;

/// orca's whole configuration. Every section and field has a default, so an empty file is a
/// valid configuration for a local run on the simulated provider.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct Config {
    /// The Node orca registers: its name, labels, taints, capacity and heartbeat.
    pub node: NodeConfig,
    /// Several nodes served by this process, each starting from `node:`; empty: `node:` alone.
    pub nodes: Vec<NodeEntry>,
    /// Several orca processes sharing the nodes through Leases.
    pub replicas: ReplicasConfig,
    /// How pods bound to the node are reconciled.
    pub pods: PodsConfig,
    /// Who decides each pod's instance type, market and tags: WebAssembly policy plugins,
    /// and the sandbox and guardrails they run under.
    pub policy: PolicyConfig,
    /// What runs the pods: in-process simulated instances, or one EC2 instance per pod.
    pub provider: ProviderConfig,
    /// The kubelet API: HTTPS on `node.daemonPort`, which the Node advertises. The apiserver
    /// calls it for `kubectl logs`, `kubectl exec` and the pods' usage.
    pub kubelet_api: KubeletApiConfig,
    /// Plain HTTP, no credentials: `/metrics` (Prometheus/OpenMetrics text), `/healthz`,
    /// `/readyz`.
    pub metrics: MetricsConfig,
    /// orca's own log: level and format (`--log-level` and `--log-format` override them).
    pub logging: LoggingConfig,
}

/// Log level and format; the CLI flags override both.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct LoggingConfig {
    /// `error`, `warn`, `info`, `debug`, `trace`, or a tracing filter such as
    /// `orca=debug,kube=info`.
    pub level: String,
    /// `text` for people, `json` for log collectors.
    pub format: LogFormat,
}

impl Default for LoggingConfig {
    fn default() -> Self {
        LoggingConfig {
            level: "info".to_owned(),
            format: LogFormat::Text,
        }
    }
}

impl Config {
    /// Reads, parses and validates a configuration file.
    ///
    /// # Errors
    /// [`ConfigError`] naming the file, the field and what would be accepted.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Unreadable {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text).map_err(|error| error.in_file(path))
    }

    /// Parses and validates configuration text.
    ///
    /// # Errors
    /// [`ConfigError::Malformed`] for YAML syntax errors (with the line) or schema errors (with
    /// the field path),
    /// [`ConfigError::Invalid`] for values that parse but are not acceptable.
    pub fn parse(text: &str) -> Result<Config, ConfigError> {
        // YAML → JSON value first, so the typed pass can report the full path of a bad field
        // (`node.taints[0].effect`), which a YAML deserializer alone does not.
        let value: serde_json::Value = serde_saphyr::from_str(text).map_err(ConfigError::syntax)?;
        let config: Config = if value.is_null() {
            Config::default()
        } else {
            serde_path_to_error::deserialize(value).map_err(ConfigError::schema)?
        };
        config.validate()?;
        Ok(config)
    }

    /// Checks the configuration against the container this process runs in: what plugins may
    /// hold at once against its memory limit. Separate from [`Config::load`], whose answer
    /// depends on the file alone.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming the field to change.
    pub fn check_fits_container(&self, path: &Path) -> Result<(), ConfigError> {
        match container::memory_limit() {
            Some(limit) => self.policy.check_fits(limit).map_err(|e| e.in_file(path)),
            None => Ok(()),
        }
    }

    /// Every node this configuration declares, resolved (`nodes:` over `node:`).
    pub fn declared_nodes(&self) -> Vec<DeclaredNode> {
        nodes::declared(
            &self.node,
            &self.nodes,
            &self.provider.aws.subnet_ids,
            &self.provider.region,
        )
    }

    fn validate(&self) -> Result<(), ConfigError> {
        self.node.validate()?;
        nodes::validate(
            &self.node,
            &self.nodes,
            &self.provider.aws.subnet_ids,
            &self.provider.region,
        )?;
        let declared = self.declared_nodes();
        let names: Vec<&str> = declared.iter().map(|d| d.node.name.as_str()).collect();
        self.replicas.validate(&names)?;
        self.pods.validate()?;
        self.policy.validate()?;
        self.provider.validate()?;
        self.kubelet_api.validate()?;
        if self.metrics.port == self.node.daemon_port {
            return Err(ConfigError::invalid(
                "metrics.port",
                self.metrics.port,
                "a port other than node.daemonPort, which serves the kubelet API",
            ));
        }
        if tracing_subscriber::EnvFilter::try_new(&self.logging.level).is_err() {
            return Err(ConfigError::invalid(
                "logging.level",
                &self.logging.level,
                "error, warn, info, debug, trace, or a tracing filter like orca=debug,kube=info",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_file_gives_the_documented_defaults() {
        let config = Config::parse("").unwrap();
        assert_eq!(config.node.name, "orca-aws-node");
        assert_eq!(config.node.taints[0].key, "orca.research/burst-node");
        assert_eq!(config.node.lease_duration.get().as_secs(), 40);
        assert_eq!(config.provider.kind, ProviderKind::Simulated);
    }

    #[test]
    fn listener_settings_are_checked() {
        let config = Config::parse("").unwrap();
        assert_eq!(config.metrics.port, 10255);
        assert_eq!(
            config.kubelet_api.tls.sources,
            [TlsSource::Files, TlsSource::Csr, TlsSource::SelfSigned]
        );
        for (text, field) in [
            ("metrics:\n  port: 10250\n", "metrics.port"),
            (
                "kubeletApi:\n  tls:\n    certFile: /c.pem\n",
                "kubeletApi.tls.keyFile",
            ),
            (
                "kubeletApi:\n  tls:\n    sources: [files]\n",
                "kubeletApi.tls.certFile",
            ),
            (
                "kubeletApi:\n  tls:\n    sources: [csr, csr]\n",
                "kubeletApi.tls.sources[1]",
            ),
            (
                "kubeletApi:\n  tls:\n    renewFraction: 1.5\n",
                "kubeletApi.tls.renewFraction",
            ),
            (
                "kubeletApi:\n  tls:\n    sources: [acme]\n",
                "kubeletApi.tls.sources[0]",
            ),
        ] {
            let error = Config::parse(text).unwrap_err().to_string();
            assert!(error.contains(field), "{text}: {error}");
        }
    }

    #[test]
    fn the_aws_provider_needs_an_ami_and_well_formed_ids() {
        let error = Config::parse("provider:\n  kind: aws\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("provider.aws.defaultAmi"), "{error}");
        let aws = |extra: &str| {
            Config::parse(&format!(
                "provider:\n  kind: aws\n  aws:\n    defaultAmi: ami-0123456789abcdef0\n{extra}"
            ))
        };
        let config = aws("    subnetIds: [subnet-0123abcd]\n").unwrap();
        assert_eq!(config.provider.aws.subnet_ids, ["subnet-0123abcd"]);
        assert_eq!(config.provider.aws.interruption_queue, None);
        let config = aws(
            "    interruptionQueue:\n      url: https://sqs.us-east-1.amazonaws.com/123456789012/orca\n",
        )
        .unwrap();
        assert_eq!(
            config.provider.aws.interruption_queue,
            Some(InterruptionQueueConfig {
                url: "https://sqs.us-east-1.amazonaws.com/123456789012/orca".to_owned(),
                endpoint_url: None,
            })
        );
        for (extra, field) in [
            (
                "    subnetIds: [subnet-0123abcd, sn-1]\n",
                "provider.aws.subnetIds[1]",
            ),
            (
                "    securityGroupIds: [default]\n",
                "provider.aws.securityGroupIds[0]",
            ),
            (
                "    endpointUrl: localhost:5000\n",
                "provider.aws.endpointUrl",
            ),
            (
                "    rootVolume: {volumeType: gp9}\n",
                "provider.aws.rootVolume.volumeType",
            ),
            (
                "    rateLimit: {mutatingPerSecond: 0}\n",
                "provider.aws.rateLimit.mutatingPerSecond",
            ),
            (
                "    interruptionQueue: {url: orca-interruptions}\n",
                "provider.aws.interruptionQueue.url",
            ),
            (
                "    interruptionQueue:\n      url: https://sqs.us-east-1.amazonaws.com/123456789012/q\n      endpointUrl: localhost:4566\n",
                "provider.aws.interruptionQueue.endpointUrl",
            ),
            (
                "    interruptionQueue: {uri: x}\n",
                "provider.aws.interruptionQueue",
            ),
        ] {
            let error = aws(extra).unwrap_err().to_string();
            assert!(error.contains(field), "{extra}: {error}");
        }
    }

    #[test]
    fn the_instance_store_policy_is_spelled_as_karpenter_spells_it_and_defaults_to_raid0() {
        let policy = |aws: &str| {
            Config::parse(&format!("provider:\n  aws:\n{aws}"))
                .map(|config| config.provider.aws.instance_store_policy)
        };
        for (aws, expected) in [
            ("    subnetIds: []\n", InstanceStorePolicy::Raid0),
            (
                "    instanceStorePolicy: RAID0\n",
                InstanceStorePolicy::Raid0,
            ),
            ("    instanceStorePolicy: None\n", InstanceStorePolicy::None),
        ] {
            assert_eq!(policy(aws).unwrap(), expected, "{aws}");
        }
        for aws in [
            "    instanceStorePolicy: raid0\n",
            "    instanceStorePolicy: none\n",
            "    instanceStorePolicy: RAID1\n",
        ] {
            let error = policy(aws).unwrap_err().to_string();
            assert!(
                error.contains("provider.aws.instanceStorePolicy")
                    && error.contains("RAID0")
                    && error.contains("None"),
                "{aws}: {error}"
            );
        }
    }

    #[test]
    fn unknown_field_is_rejected_with_its_path_and_the_accepted_names() {
        let error = Config::parse("node:\n  cpus: \"4\"\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("node"), "{error}");
        assert!(error.contains("unknown field `cpus`"), "{error}");
        assert!(error.contains("cpu"), "{error}");
    }

    #[test]
    fn schema_errors_carry_the_full_path() {
        let yaml = "node:\n  taints:\n  - {key: a, value: b, effect: Sometimes}\n";
        let error = Config::parse(yaml).unwrap_err().to_string();
        assert!(error.starts_with("node.taints[0].effect: "), "{error}");
    }

    #[test]
    fn unquoted_numbers_are_accepted_as_quantities() {
        let config = Config::parse("node:\n  cpu: 64\n  gpu: 8\n").unwrap();
        assert_eq!(
            (config.node.cpu.as_str(), config.node.gpu.as_str()),
            ("64", "8")
        );
    }

    #[test]
    fn yaml_syntax_errors_are_reported_as_such() {
        let error = Config::parse("node: [unclosed\n").unwrap_err().to_string();
        assert!(error.contains("not valid YAML"), "{error}");
    }

    #[test]
    fn policy_chains_default_to_the_embedded_plugins() {
        let config = Config::parse("").unwrap();
        let names: Vec<&str> = config
            .policy
            .chains()
            .iter()
            .map(|(_, chain)| chain[0].plugin.as_str())
            .collect();
        assert_eq!(
            names,
            [
                "orca-default-selector",
                "orca-default-market",
                "orca-default-tagger"
            ]
        );
    }

    #[test]
    fn bad_policy_values_name_the_field() {
        for (yaml, field) in [
            ("policy:\n  selectInstance: []\n", "policy.selectInstance"),
            (
                "policy:\n  chooseMarket:\n    - plugin: \"\"\n",
                "policy.chooseMarket[0].plugin",
            ),
            (
                "policy:\n  buildTags:\n    - plugin: x\n      onError: retry\n",
                "policy.buildTags[0].onError",
            ),
            (
                "policy:\n  limits:\n    maxMemory: lots\n",
                "policy.limits.maxMemory",
            ),
            (
                "policy:\n  limits:\n    timeout: 0s\n",
                "policy.limits.timeout",
            ),
            (
                "policy:\n  limits:\n    concurrentCalls: 0\n",
                "policy.limits.concurrentCalls",
            ),
            (
                "policy:\n  limits:\n    concurrentCalls: 65\n",
                "policy.limits.concurrentCalls",
            ),
            ("policy:\n  pluginsDir: /no/such/dir\n", "policy.pluginsDir"),
            ("node:\n  clusterName: \"\"\n", "node.clusterName"),
            ("node:\n  clusterName: \"a\\u0001b\"\n", "node.clusterName"),
            ("provider:\n  region: Mars\n", "provider.region"),
        ] {
            let error = Config::parse(yaml).unwrap_err().to_string();
            assert!(error.contains(field), "{yaml}: {error}");
        }
    }

    #[test]
    fn plugins_may_hold_at_most_half_the_container_memory() {
        let config = Config::parse("").unwrap();
        // Two decisions and one load at 64 MiB each: 192 MiB, under half of the Deployment's
        // 512 MiB limit.
        assert_eq!(config.policy.total_plugin_memory_bytes(), 192 << 20);
        config.policy.check_fits(512 << 20).unwrap();
        let config = Config::parse("policy:\n  limits:\n    concurrentCalls: 8\n").unwrap();
        let error = config.policy.check_fits(512 << 20).unwrap_err().to_string();
        assert!(error.contains("policy.limits.concurrentCalls"), "{error}");
        assert!(error.contains("576Mi"), "{error}");
        assert!(error.contains("512Mi"), "{error}");
    }

    #[test]
    fn a_plugins_own_limits_are_validated_at_their_path_and_merged_over_the_defaults() {
        for (yaml, field) in [
            (
                "policy:\n  pluginLimits:\n    py: {maxMemory: lots}\n",
                "policy.pluginLimits.py.maxMemory",
            ),
            (
                "policy:\n  pluginLimits:\n    py: {timeout: 0s}\n",
                "policy.pluginLimits.py.timeout",
            ),
            (
                "policy:\n  pluginLimits:\n    py: {maxTableElements: 0}\n",
                "policy.pluginLimits.py.maxTableElements",
            ),
        ] {
            let error = Config::parse(yaml).unwrap_err().to_string();
            assert!(error.contains(field), "{yaml}: {error}");
        }
        let error = Config::parse("policy:\n  pluginLimits:\n    py: {instances: sometimes}\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("instances"), "{error}");

        let config = Config::parse(
            "policy:\n  pluginLimits:\n    py: {maxMemory: 128Mi, instances: reused}\n  selectInstance:\n    - plugin: py\n    - plugin: orca-default-selector\n",
        )
        .unwrap();
        let limits = &config.policy.plugin_limits()["py"];
        assert_eq!(limits.max_memory_bytes, 128 << 20);
        assert_eq!(limits.instances, Instances::Reused);
        assert_eq!(limits.timeout, config.policy.default_limits().timeout);
        // Two decisions, a load and two warm instances of `py`, at the largest maxMemory.
        assert_eq!(config.policy.reused_chain_plugins(), 1);
        assert_eq!(config.policy.total_plugin_memory_bytes(), 5 * (128 << 20));
        let error = config.policy.check_fits(1 << 30).unwrap_err().to_string();
        assert!(error.contains("warm"), "{error}");
        // A reused plugin no chain names keeps no instance warm.
        let config =
            Config::parse("policy:\n  pluginLimits:\n    unused: {instances: reused}\n").unwrap();
        assert_eq!(config.policy.reused_chain_plugins(), 0);
    }

    #[test]
    fn plugin_references_must_be_oci_with_a_registry() {
        for (yaml, field) in [
            (
                "policy:\n  plugins: [\"ghcr.io/team/p:v1\"]\n",
                "policy.plugins[0]",
            ),
            (
                "policy:\n  plugins: [\"oci://ghcr.io/team/p:v1\", \"oci://p:v1\"]\n",
                "policy.plugins[1]",
            ),
            (
                "policy:\n  registry:\n    refreshInterval: 0s\n",
                "policy.registry.refreshInterval",
            ),
            (
                "policy:\n  registry:\n    caFile: /no/such/ca.pem\n",
                "policy.registry.caFile",
            ),
            (
                "policy:\n  registry:\n    stallTimeout: 0s\n",
                "policy.registry.stallTimeout",
            ),
            (
                "policy:\n  registry:\n    pullTimeout: 0s\n",
                "policy.registry.pullTimeout",
            ),
            (
                "policy:\n  registry:\n    maxComponentSize: 100\n",
                "policy.registry.maxComponentSize",
            ),
            (
                "policy:\n  registry:\n    maxComponentSize: 3Gi\n",
                "policy.registry.maxComponentSize",
            ),
            (
                "policy:\n  registry:\n    maxComponentSize: lots\n",
                "policy.registry.maxComponentSize",
            ),
        ] {
            let error = Config::parse(yaml).unwrap_err().to_string();
            assert!(error.contains(field), "{yaml}: {error}");
        }
        let config =
            Config::parse("policy:\n  plugins: [\"oci://127.0.0.1:5000/team/p@sha256:0000000000000000000000000000000000000000000000000000000000000000\"]\n")
                .unwrap();
        assert_eq!(config.policy.plugins.len(), 1);
        assert_eq!(config.policy.registry.max_component_bytes(), 256 << 20);
        let config =
            Config::parse("policy:\n  registry:\n    maxComponentSize: \"3000000\"\n").unwrap();
        assert_eq!(config.policy.registry.max_component_bytes(), 3_000_000);
    }

    #[test]
    fn unknown_section_is_rejected() {
        let error = Config::parse("nodez: {}\n").unwrap_err().to_string();
        assert!(error.contains("unknown field `nodez`"), "{error}");
    }

    #[test]
    fn bad_log_level_names_the_field() {
        let error = Config::parse("logging:\n  level: \"[[\"\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("logging.level"), "{error}");
    }

    #[test]
    fn shipped_config_yaml_is_valid() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../config.yaml");
        let config = Config::load(&path).unwrap();
        assert_eq!(config.node.name, "orca-aws-node");
    }
}
