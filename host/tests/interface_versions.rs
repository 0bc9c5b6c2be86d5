//! Plugins built against older `orca:policy` versions keep loading and deciding exactly as
//! before, next to plugins for the newest: the default plugins as the last 0.1.0 and 0.2.0 SDKs
//! built them (`tests/fixtures/plugins-v0.1.0/`, `plugins-v0.2.0/`) against the embedded
//! builds of the same source.

mod support;

use std::path::PathBuf;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use orca::config::{Config, OnError};
use orca::policy::pipeline::{ChainStep, HookChains};
use orca::policy::registry::{PluginRegistry, ReloadEvent};
use orca::policy::wasm::InterfaceVersion;
use orca::policy::{Decision, Pipeline, PlanFailure};
use serde_json::json;
use support::{bytes, defaults};

fn registry() -> Arc<PluginRegistry> {
    support::registry(None)
}

fn fixtures_of(version: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../tests/fixtures/plugins-v{version}"))
}

fn pod(name: &str, annotations: serde_json::Value, resources: serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {
            "name": name, "namespace": "ml", "uid": format!("4f1c2b9e-0000-4000-8000-{name:0>12}"),
            "labels": {"team": "ml"},
            "annotations": annotations,
        },
        "spec": {
            "containers": [ { "name": "main", "image": "busybox", "resources": resources } ],
            "tolerations": [ { "key": "orca.research/burst-node", "operator": "Exists" } ],
        }
    }))
    .unwrap()
}

/// Pods that exercise every path of the default plugins: requests, annotations, GPUs, spot with
/// a price, extra tags, and annotations the plugins refuse.
fn pods() -> Vec<Pod> {
    vec![
        pod(
            "plain",
            json!({}),
            json!({"requests": {"cpu": "2", "memory": "8Gi"}}),
        ),
        pod(
            "gpu",
            json!({}),
            json!({"limits": {"nvidia.com/gpu": "8"}, "requests": {"nvidia.com/gpu": "8"}}),
        ),
        pod(
            "named",
            json!({"orca.research/instance-type": "c7i.2xlarge", "orca.research/launch-type": "spot",
                   "orca.research/max-spot-price": "0.5"}),
            json!({}),
        ),
        pod(
            "arm",
            json!({"orca.research/instance-type": "m7g.large"}),
            json!({}),
        ),
        pod(
            "bad-type",
            json!({"orca.research/instance-type": "z9.imaginary"}),
            json!({}),
        ),
        pod(
            "bad-market",
            json!({"orca.research/launch-type": "sometimes"}),
            json!({}),
        ),
        pod(
            "bad-price",
            json!({"orca.research/launch-type": "spot", "orca.research/max-spot-price": "-1"}),
            json!({}),
        ),
    ]
}

/// A decision without who made it (plugin sha256 and versions differ between the builds).
fn outcome(decision: &Result<Decision, orca::policy::PlanError>) -> String {
    match decision {
        Ok(decision) => {
            let mut record = decision.record.clone();
            for hook in [
                &mut record.select_instance,
                &mut record.choose_market,
                &mut record.build_tags,
            ] {
                hook.sha256.clear();
                hook.version.clear();
            }
            format!("{:?} {}", decision.plan, record.to_json())
        }
        Err(error) => format!("{}: {}", error.reason, error.message),
    }
}

/// Loads the default plugins built for `version` and checks each pod is decided exactly as
/// the embedded (newest) builds decide it; answers how many pods both refused.
fn decide_as_the_newest(version: &str, interface: InterfaceVersion) -> usize {
    let old = registry();
    let events = old.rescan(&fixtures_of(version));
    assert_eq!(events.len(), 3, "{events:?}");
    for event in &events {
        assert!(matches!(event, ReloadEvent::Loaded { .. }), "{event:?}");
    }
    for plugin in old.current().iter() {
        assert_eq!(plugin.plugin.interface, interface, "{}", plugin.plugin.name);
        assert_eq!(plugin.plugin.interface_version.as_deref(), Some(version));
    }
    let new = registry();
    for plugin in new.current().iter() {
        assert_eq!(
            plugin.plugin.interface,
            InterfaceVersion::NEWEST,
            "{}",
            plugin.plugin.name
        );
    }

    let (old, new) = (
        defaults(old).with_node_architecture("amd64"),
        defaults(new).with_node_architecture("amd64"),
    );
    let mut refused = 0;
    for pod in pods() {
        let (was, is) = (old.decide(&pod), new.decide(&pod));
        refused += usize::from(was.is_err());
        assert_eq!(
            outcome(&was),
            outcome(&is),
            "{version}: {:?}",
            pod.metadata.name
        );
    }
    // The refusals came up through the older error conversions, reasons intact.
    let error = old.decide(&pods()[5]).unwrap_err();
    assert_eq!(error.reason, PlanFailure::InvalidAnnotation, "{error}");
    refused
}

#[test]
fn plugins_built_for_0_1_0_load_and_decide_exactly_as_the_newest_builds() {
    assert_eq!(decide_as_the_newest("0.1.0", InterfaceVersion::V0_1), 3);
}

#[test]
fn plugins_built_for_0_2_0_load_and_decide_exactly_as_the_newest_builds() {
    assert_eq!(decide_as_the_newest("0.2.0", InterfaceVersion::V0_2), 3);
}

#[test]
fn a_chain_mixes_interface_versions() {
    // A 0.3.0 plugin that declines, then the 0.1.0 selector; the 0.2.0 market and the 0.1.0
    // tagger.
    let registry = registry();
    let dir = tempfile::tempdir().unwrap();
    for (version, file) in [
        ("0.1.0", "orca_plugin_selector.wasm"),
        ("0.2.0", "orca_plugin_market.wasm"),
        ("0.1.0", "orca_plugin_tagger.wasm"),
    ] {
        std::fs::copy(fixtures_of(version).join(file), dir.path().join(file)).unwrap();
    }
    std::fs::write(
        dir.path().join("hostile.wasm"),
        bytes("orca-test-plugin-hostile"),
    )
    .unwrap();
    registry.rescan(dir.path());
    let mut chains = HookChains::from_config(&Config::default().policy);
    chains.select_instance.insert(
        0,
        ChainStep {
            plugin: "hostile".to_owned(),
            settings: "\"decline\"".to_owned(),
            on_error: OnError::FAIL,
        },
    );
    let pipeline = Pipeline::new(registry, chains, "orca-aws-node", "research")
        .with_node_architecture("amd64");
    let (decision, asked) = pipeline.explain(&pods()[0]);
    let decision = decision.unwrap();
    assert_eq!(decision.record.fallbacks[0].kind, "declined");
    let interfaces: Vec<(&str, Option<&str>)> = asked
        .iter()
        .map(|s| (s.plugin.as_str(), s.interface))
        .collect();
    assert_eq!(
        interfaces,
        [
            ("hostile", Some("0.3.0")),
            ("orca-default-selector", Some("0.1.0")),
            ("orca-default-market", Some("0.2.0")),
            ("orca-default-tagger", Some("0.1.0")),
        ]
    );
    let expected = defaults(self::registry())
        .with_node_architecture("amd64")
        .decide(&pods()[0])
        .unwrap();
    assert_eq!(decision.plan.candidates, expected.plan.candidates);
}
