//! The whole policy pipeline with real components: the embedded defaults decide, hostile
//! plugins become clear pod errors (or are passed over under `fallback`), and the plugins
//! directory reloads safely, including during a stream of decisions.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use k8s_openapi::api::core::v1::Pod;
use orca::config::{FailureKind, OnError, OnErrorAction};
use orca::policy::explain::StepOutcome;
use orca::policy::pipeline::{ChainStep, HookChains};
use orca::policy::registry::{PluginRegistry, ReloadEvent};
use orca::policy::shadow::{ShadowField, ShadowOutcome, ShadowSpec};
use orca::policy::{Decision, Pipeline, PlanError, PlanFailure, PlanRetry, Planner};
use serde_json::json;
use support::{bytes, defaults, registry, variant, write_atomically};

const HOSTILE: &str = "orca-test-plugin-hostile";

fn pod(annotations: serde_json::Value, requests: serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {
            "name": "trainer", "namespace": "ml", "uid": "4f1c2b9e-0000-4000-8000-000000000001",
            "annotations": annotations,
        },
        "spec": { "containers": [ { "name": "main", "image": "busybox",
            "resources": { "requests": requests } } ] }
    }))
    .unwrap()
}

fn step(plugin: &str, settings: &str, on_error: OnError) -> ChainStep {
    ChainStep {
        plugin: plugin.to_owned(),
        settings: settings.to_owned(),
        on_error,
    }
}

fn decide(pipeline: &Pipeline, pod: &Pod) -> Result<Decision, PlanError> {
    pipeline.decide(pod)
}

#[test]
fn the_default_plugins_decide_from_annotations_and_requests() {
    let pipeline = defaults(registry(None));
    let gpu = pod(
        json!({
            "orca.research/instance-type": "p5.48xlarge",
            "orca.research/launch-type": "spot",
            "orca.research/max-spot-price": "35.00",
            "orca.research/tags": "{\"team\":\"vision\"}",
        }),
        json!({}),
    );
    let decision = decide(&pipeline, &gpu).unwrap();
    let record = &decision.record;
    assert_eq!(record.instance_type, "p5.48xlarge");
    assert_eq!(record.market.as_str(), "spot");
    assert_eq!(record.max_price, Some(35.0));
    assert_eq!(record.tags["team"], "vision");
    assert_eq!(record.tags["ManagedBy"], "ORCA");
    assert_eq!(record.tags["orca.research/cluster"], "research");
    assert_eq!(
        record.tags["orca.research/pod-uid"],
        "4f1c2b9e-0000-4000-8000-000000000001"
    );
    assert_eq!(record.select_instance.plugin, "orca-default-selector");
    assert_eq!(record.choose_market.plugin, "orca-default-market");
    assert_eq!(record.build_tags.plugin, "orca-default-tagger");
    assert_eq!(record.select_instance.sha256.len(), 64);
    assert_eq!(decision.plan.tags, record.tags);

    // No annotation: the cheapest types with 3 vCPUs and 10 GiB, cheapest first.
    let cpu = pod(json!({}), json!({ "cpu": "3", "memory": "10Gi" }));
    let decision = decide(&pipeline, &cpu).unwrap();
    assert!(decision.plan.candidates.len() > 1);
    assert_eq!(decision.record.market.as_str(), "on-demand");
    let annotation: serde_json::Value = serde_json::from_str(&decision.record.to_json()).unwrap();
    assert_eq!(annotation["instanceType"], decision.record.instance_type);
}

#[test]
fn a_pod_selecting_no_architecture_gets_the_nodes() {
    let registry = registry(None);
    let catalogue = orca::policy::catalogue::InstanceCatalogue::bundled("us-east-1").unwrap();
    let architecture = |name: &str| catalogue.get(name).map(|t| t.architecture);
    let mut arm_pod = pod(json!({}), json!({ "cpu": "4", "memory": "16Gi" }));
    let free = decide(&defaults(registry.clone()), &arm_pod).unwrap();
    // Without the Node's architecture the cheapest fit is a Graviton type: an amd64 image
    // scheduled onto an amd64 Node would not run there.
    assert_eq!(
        architecture(&free.record.instance_type),
        Some(orca::policy::wasm::Architecture::Arm64)
    );

    for (node, expected) in [
        ("amd64", orca::policy::wasm::Architecture::Amd64),
        ("arm64", orca::policy::wasm::Architecture::Arm64),
    ] {
        let pipeline = defaults(registry.clone()).with_node_architecture(node);
        let decision = decide(&pipeline, &arm_pod).unwrap();
        for candidate in &decision.record.candidates {
            assert_eq!(
                architecture(candidate),
                Some(expected),
                "{candidate} on {node}"
            );
        }
    }
    // A pod's own selector wins over the Node's.
    arm_pod.spec.as_mut().unwrap().node_selector =
        Some([("kubernetes.io/arch".to_owned(), "arm64".to_owned())].into());
    let pipeline = defaults(registry).with_node_architecture("amd64");
    let decision = decide(&pipeline, &arm_pod).unwrap();
    assert_eq!(
        architecture(&decision.record.instance_type),
        Some(orca::policy::wasm::Architecture::Arm64)
    );
}

#[test]
fn bad_annotations_fail_the_pod_with_invalid_annotation() {
    let pipeline = defaults(registry(None));
    for (annotation, value) in [
        ("orca.research/instance-type", "m5.huge"),
        ("orca.research/launch-type", "sometimes"),
        ("orca.research/max-spot-price", "cheap"),
        ("orca.research/tags", "{\"aws:owner\":\"me\"}"),
    ] {
        let error = decide(&pipeline, &pod(json!({ annotation: value }), json!({}))).unwrap_err();
        assert_eq!(
            error.reason,
            PlanFailure::InvalidAnnotation,
            "{annotation}: {error}"
        );
        assert!(
            error.message.contains(annotation)
                && error.message.contains(value.split('"').next().unwrap()),
            "{error}"
        );
    }
}

#[test]
fn hostile_plugins_become_clear_pod_errors_or_are_passed_over() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("hostile.wasm"), bytes(HOSTILE)).unwrap();
    let registry = registry(Some(dir.path()));
    let select = |mode: &str, on_error: OnError| HookChains {
        select_instance: vec![
            step("hostile", &format!("\"{mode}\""), on_error),
            step("orca-default-selector", "{}", OnError::FAIL),
        ],
        ..HookChains::single("x", "orca-default-market", "orca-default-tagger")
    };
    let plain = pod(json!({}), json!({ "cpu": "1" }));
    for (mode, expected) in [
        ("loop", "time limit"),
        ("grow", "hostile"),
        ("trap", "hostile"),
        ("output", "hostile"),
        ("bad-type", "z9.imaginary"),
    ] {
        let failing = Pipeline::new(registry.clone(), select(mode, OnError::FAIL), "n", "c");
        let error = decide(&failing, &plain).unwrap_err();
        assert_eq!(error.reason, PlanFailure::PolicyError, "{mode}: {error}");
        assert!(
            error.message.contains("select-instance") && error.message.contains(expected),
            "{mode}: {error}"
        );

        let tolerant = Pipeline::new(registry.clone(), select(mode, OnError::FALLBACK), "n", "c");
        let decision = decide(&tolerant, &plain).unwrap();
        assert_eq!(
            decision.record.select_instance.plugin,
            "orca-default-selector"
        );
        assert_eq!(decision.record.fallbacks.len(), 1, "{mode}");
        assert_eq!(decision.record.fallbacks[0].plugin, "hostile");
    }

    let tags = HookChains {
        build_tags: vec![step("hostile", "\"bad-tags\"", OnError::FAIL)],
        ..HookChains::single("orca-default-selector", "orca-default-market", "x")
    };
    let error = decide(&Pipeline::new(registry.clone(), tags, "n", "c"), &plain).unwrap_err();
    assert!(error.message.contains("aws:"), "{error}");

    // A plugin that is not loaded, or lacks the hook, is a clear error too.
    let missing = HookChains::single("nobody", "orca-default-market", "orca-default-tagger");
    let error = decide(&Pipeline::new(registry.clone(), missing, "n", "c"), &plain).unwrap_err();
    assert!(error.message.contains("nobody is not loaded"), "{error}");
    let wrong_hook = HookChains::single("orca-default-selector", "hostile", "orca-default-tagger");
    let error = decide(&Pipeline::new(registry, wrong_hook, "n", "c"), &plain).unwrap_err();
    assert!(
        error.message.contains("does not implement choose-market"),
        "{error}"
    );
}

#[test]
fn policy_missing_a_plugin_is_not_ready_and_its_pods_wait_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let registry = registry(Some(dir.path()));
    let chains = |on_error: OnError| HookChains {
        select_instance: vec![
            step("hostile", "\"well-behaved\"", on_error),
            step("orca-default-selector", "{}", OnError::FAIL),
        ],
        ..HookChains::single("x", "orca-default-market", "orca-default-tagger")
    };
    let plain = pod(json!({}), json!({ "cpu": "1" }));

    // Not loaded, and the chain cannot go past it: not ready, naming the plugin and the field;
    // a pod waits (retry when loaded) instead of failing.
    let pipeline = Pipeline::new(registry.clone(), chains(OnError::FAIL), "n", "c");
    let why = pipeline.not_ready(&registry.current()).unwrap();
    assert!(
        why.contains("plugin hostile (policy.selectInstance[0]) is not loaded"),
        "{why}"
    );
    let error = decide(&pipeline, &plain).unwrap_err();
    assert_eq!(error.retry, PlanRetry::WhenLoaded, "{error}");

    // Under fallback the next plugin decides: ready.
    let tolerant = Pipeline::new(registry.clone(), chains(OnError::FALLBACK), "n", "c");
    assert_eq!(tolerant.not_ready(&registry.current()), None);
    decide(&tolerant, &plain).unwrap();

    // Once the plugin loads, the same pipeline is ready and decides through it.
    std::fs::write(dir.path().join("hostile.wasm"), bytes(HOSTILE)).unwrap();
    registry.rescan(dir.path());
    assert_eq!(pipeline.not_ready(&registry.current()), None);
    let decision = decide(&pipeline, &plain).unwrap();
    assert_eq!(decision.record.select_instance.plugin, "hostile");

    // A plugin out of time is worth another try; one that refuses the pod is not.
    let select = |mode: &str| HookChains {
        select_instance: vec![step("hostile", &format!("\"{mode}\""), OnError::FAIL)],
        ..HookChains::single("x", "orca-default-market", "orca-default-tagger")
    };
    let looping = Pipeline::new(registry.clone(), select("loop"), "n", "c");
    assert_eq!(
        decide(&looping, &plain).unwrap_err().retry,
        PlanRetry::Transient
    );
    let failing = Pipeline::new(registry, select("long-error"), "n", "c");
    assert_eq!(decide(&failing, &plain).unwrap_err().retry, PlanRetry::No);
}

#[test]
fn a_decline_asks_the_next_plugin_and_on_error_decides_each_failure_kind() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("hostile.wasm"), bytes(HOSTILE)).unwrap();
    let registry = registry(Some(dir.path()));
    let chain = |mode: &str, on_error: OnError| HookChains {
        select_instance: vec![
            step("hostile", &format!("\"{mode}\""), on_error),
            step("orca-default-selector", "{}", OnError::FAIL),
        ],
        ..HookChains::single("x", "orca-default-market", "orca-default-tagger")
    };
    let plain = pod(json!({}), json!({ "cpu": "1" }));

    // A decline is not a failure: even under `onError: fail` the next plugin decides, and the
    // record says who passed and why.
    let pipeline = Pipeline::new(registry.clone(), chain("decline", OnError::FAIL), "n", "c");
    let decision = decide(&pipeline, &plain).unwrap();
    assert_eq!(
        decision.record.select_instance.plugin,
        "orca-default-selector"
    );
    let passed = &decision.record.fallbacks[0];
    assert_eq!(
        (passed.plugin.as_str(), passed.kind.as_str()),
        ("hostile", "declined")
    );
    assert!(
        passed.error.contains("not a hostile pod"),
        "{}",
        passed.error
    );
    assert!(
        decision.record.summary().contains("passed hostile"),
        "{}",
        decision.record.summary()
    );

    // …unless the chain says a decline fails the pod.
    let strict = OnError::FAIL.with(FailureKind::Declined, OnErrorAction::Fail);
    let pipeline = Pipeline::new(registry.clone(), chain("decline", strict), "n", "c");
    let error = decide(&pipeline, &plain).unwrap_err();
    assert!(
        error
            .message
            .contains("hostile 0.0.1 declined: not a hostile pod"),
        "{error}"
    );
    assert_eq!(error.retry, PlanRetry::No);

    // `unsupported` from a hook the plugin lists is a failure (kind unsupported), and the
    // message points the author at declined.
    let pipeline = Pipeline::new(
        registry.clone(),
        chain("unsupported", OnError::FAIL),
        "n",
        "c",
    );
    let error = decide(&pipeline, &plain).unwrap_err();
    assert!(
        error.message.contains("answered unsupported") && error.message.contains("declined"),
        "{error}"
    );

    // A chain whose every plugin declines fails the pod, saying so.
    let alone = HookChains {
        select_instance: vec![step("hostile", "\"decline\"", OnError::FAIL)],
        ..HookChains::single("x", "orca-default-market", "orca-default-tagger")
    };
    let error = decide(&Pipeline::new(registry.clone(), alone, "n", "c"), &plain).unwrap_err();
    assert_eq!(error.reason, PlanFailure::PolicyError);
    assert!(
        error
            .message
            .starts_with("no plugin took the pod: select-instance"),
        "{error}"
    );

    // Per kind: the plugin's own refusal (no-match) fails the pod, so the default selector
    // never replaces it; a crash of the same plugin falls back.
    let per_kind = OnError::FAIL
        .with(FailureKind::Crashed, OnErrorAction::Fallback)
        .with(FailureKind::TimedOut, OnErrorAction::Fallback);
    let refusing = Pipeline::new(registry.clone(), chain("no-match", per_kind), "n", "c");
    let error = decide(&refusing, &plain).unwrap_err();
    assert!(
        error.message.contains("no match: nothing hostile fits"),
        "{error}"
    );
    let crashing = Pipeline::new(registry.clone(), chain("trap", per_kind), "n", "c");
    let decision = decide(&crashing, &plain).unwrap();
    assert_eq!(decision.record.fallbacks[0].kind, "crashed");
    let lenient = per_kind.with(FailureKind::NoMatch, OnErrorAction::Fallback);
    let decision = decide(
        &Pipeline::new(registry.clone(), chain("no-match", lenient), "n", "c"),
        &plain,
    )
    .unwrap();
    assert_eq!(decision.record.fallbacks[0].kind, "noMatch");

    // A plugin that is not loaded keeps the chain from being ready only when its kind fails.
    let absent = |on_error: OnError| HookChains {
        select_instance: vec![
            step("nobody", "{}", on_error),
            step("orca-default-selector", "{}", OnError::FAIL),
        ],
        ..HookChains::single("x", "orca-default-market", "orca-default-tagger")
    };
    let waiting = Pipeline::new(registry.clone(), absent(per_kind), "n", "c");
    assert!(waiting.not_ready(&registry.current()).is_some());
    let ready = per_kind.with(FailureKind::NotLoaded, OnErrorAction::Fallback);
    let ready = Pipeline::new(registry.clone(), absent(ready), "n", "c");
    assert_eq!(ready.not_ready(&registry.current()), None);

    // `explain` lists every plugin asked and what came of it.
    let pipeline = Pipeline::new(registry, chain("decline", OnError::FAIL), "n", "c");
    let (decision, asked) = pipeline.explain(&plain);
    assert_eq!(decision.unwrap(), decide(&pipeline, &plain).unwrap());
    let steps: Vec<(&str, &str, StepOutcome, Option<&str>)> = asked
        .iter()
        .map(|s| {
            (
                s.hook,
                s.plugin.as_str(),
                s.outcome,
                s.failure.as_ref().map(|f| f.kind.as_str()),
            )
        })
        .collect();
    assert_eq!(
        steps,
        [
            (
                "select-instance",
                "hostile",
                StepOutcome::PassedOn,
                Some("declined")
            ),
            (
                "select-instance",
                "orca-default-selector",
                StepOutcome::Answered,
                None
            ),
            (
                "choose-market",
                "orca-default-market",
                StepOutcome::Answered,
                None
            ),
            (
                "build-tags",
                "orca-default-tagger",
                StepOutcome::Answered,
                None
            ),
        ]
    );
    assert_eq!(asked[0].interface, Some("0.3.0"));
}

#[test]
fn embedded_plugins_that_keep_running_out_of_time_leave_orca_starting_but_not_ready() {
    use orca::policy::catalogue::InstanceCatalogue;
    use orca::policy::embedded::DEFAULT_PLUGINS;
    use orca::policy::wasm::{CatalogueQuery, PluginEngine, SandboxLimits};

    // A zero time limit stops every call at its first instruction: a machine too busy to load
    // anything.
    let limits = SandboxLimits {
        timeout: std::time::Duration::ZERO,
        load_timeout: std::time::Duration::ZERO,
        ..SandboxLimits::default()
    };
    let engine = Arc::new(PluginEngine::new(limits).unwrap());
    let catalogue: Arc<dyn CatalogueQuery> =
        Arc::new(InstanceCatalogue::bundled("us-east-1").unwrap());
    let registry = Arc::new(
        PluginRegistry::new(engine, catalogue, DEFAULT_PLUGINS)
            .expect("orca starts (and registers its Node) without them"),
    );
    assert!(registry.has_pending_embedded());
    assert_eq!(registry.current().iter().count(), 0);
    let pipeline = defaults(registry.clone());
    let why = pipeline.not_ready(&registry.current()).unwrap();
    assert!(
        why.contains("plugin orca-default-selector (policy.selectInstance[0]) is not loaded"),
        "{why}"
    );
    let error = decide(&pipeline, &pod(json!({}), json!({ "cpu": "1" }))).unwrap_err();
    assert_eq!(error.retry, PlanRetry::WhenLoaded, "{error}");

    // Each background attempt reports every plugin still out of time, and keeps it pending.
    let events = registry.load_pending_embedded();
    assert_eq!(events.len(), 3, "{events:?}");
    for event in &events {
        assert!(
            matches!(event, ReloadEvent::Rejected { error, .. } if error.contains("time limit")),
            "{event:?}"
        );
    }
    assert!(registry.has_pending_embedded());

    // On a machine with time to spare nothing is pending.
    let healthy = support::registry(None);
    assert!(!healthy.has_pending_embedded());
    assert!(healthy.load_pending_embedded().is_empty());
}

/// Counts log records that name a plugin.
#[derive(Clone, Default)]
struct PluginRecords(Arc<std::sync::atomic::AtomicUsize>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for PluginRecords {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        if event.metadata().fields().field("plugin").is_some() {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }
}

#[test]
fn hostile_plugins_cannot_flood_the_api_or_the_log_nor_forge_an_outcome() {
    use tracing_subscriber::layer::SubscriberExt;

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("hostile.wasm"), bytes(HOSTILE)).unwrap();
    let registry = registry(Some(dir.path()));
    let plain = pod(json!({}), json!({ "cpu": "1" }));
    let selecting = |mode: &str| {
        let chains = HookChains {
            select_instance: vec![step("hostile", &format!("\"{mode}\""), OnError::FAIL)],
            ..HookChains::single("x", "orca-default-market", "orca-default-tagger")
        };
        Pipeline::new(registry.clone(), chains, "n", "c")
    };

    // 2 MiB of error text reaches the pod's status cut to a size a status patch takes.
    let error = decide(&selecting("long-error"), &plain).unwrap_err();
    assert_eq!(error.reason, PlanFailure::PolicyError);
    assert!(error.message.len() < 2048, "{} bytes", error.message.len());
    assert!(
        error
            .message
            .contains("cut: the plugin's text was 2097152 bytes"),
        "{}",
        &error.message[error.message.len() - 80..]
    );

    // 10,000 records of 1 KiB through the `log` import: the call's 64 KiB budget and the
    // plugin's rate let at most a burst through, and the decision still stands.
    let records = PluginRecords::default();
    let subscriber = tracing_subscriber::registry().with(records.clone());
    let decision =
        tracing::subscriber::with_default(subscriber, || decide(&selecting("log-flood"), &plain))
            .unwrap();
    assert_eq!(decision.plan.candidates[0].instance_type, "m7i.large");
    let written = records.0.load(Ordering::Relaxed);
    assert!(
        (1..=100).contains(&written),
        "{written} plugin records logged"
    );

    // The exit-code tag decides Succeeded or Failed: a tag plugin cannot set it.
    let forging = HookChains {
        build_tags: vec![step("hostile", "\"forge-exit-code\"", OnError::FAIL)],
        ..HookChains::single("orca-default-selector", "orca-default-market", "x")
    };
    let error = decide(&Pipeline::new(registry.clone(), forging, "n", "c"), &plain).unwrap_err();
    assert_eq!(error.reason, PlanFailure::PolicyError);
    assert!(
        error.message.contains("plugin hostile")
            && error.message.contains("orca.research/exit-code")
            && error.message.contains("reserves"),
        "{error}"
    );

    // Regression (issue 39): 44 tags and orca's six ownership tags made 50, and the cluster's
    // id the provider adds at launch a 51st, which EC2 refuses for the whole launch.
    let filling = HookChains {
        build_tags: vec![step("hostile", "\"fill-tags\"", OnError::FAIL)],
        ..HookChains::single("orca-default-selector", "orca-default-market", "x")
    };
    let error = decide(&Pipeline::new(registry, filling, "n", "c"), &plain).unwrap_err();
    assert!(
        error.message.contains("plugin hostile") && error.message.contains("51 tags"),
        "{error}"
    );
}

#[test]
fn the_plugins_directory_reloads_and_a_bad_version_never_replaces_a_good_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hostile.wasm");
    let v1 = bytes(HOSTILE);
    let v2 = variant(&v1, "v2");
    let registry = registry(Some(dir.path()));
    let serving = |registry: &PluginRegistry| {
        registry
            .current()
            .get("hostile")
            .map(|p| p.plugin.sha256.clone())
    };
    assert_eq!(serving(&registry), None);

    // New file.
    std::fs::write(&path, &v1).unwrap();
    let events = registry.rescan(dir.path());
    assert!(
        matches!(&events[..], [ReloadEvent::Loaded { name, .. }] if name == "hostile"),
        "{events:?}"
    );
    let sha1 = serving(&registry).unwrap();

    // Written in place with garbage: refused, v1 keeps serving.
    std::fs::write(&path, b"\0asm garbage").unwrap();
    let events = registry.rescan(dir.path());
    assert!(
        matches!(&events[..], [ReloadEvent::Rejected { kept: Some(kept), .. }] if kept.contains(&sha1)),
        "{events:?}"
    );
    assert_eq!(serving(&registry).as_ref(), Some(&sha1));
    // Unchanged bytes are not retried on every rescan.
    assert!(registry.rescan(dir.path()).is_empty());

    // Atomic rename of a new version.
    write_atomically(&path, &v2);
    registry.rescan(dir.path());
    let sha2 = serving(&registry).unwrap();
    assert_ne!(sha1, sha2);

    // A component of another world, and one declaring a newer interface: both refused by name.
    let other_world = wat::parse_str("(component)").unwrap();
    write_atomically(&path, &other_world);
    let events = registry.rescan(dir.path());
    assert!(
        matches!(&events[..], [ReloadEvent::Rejected { error, .. }] if error.contains("orca:policy plugin world (0.1.0, 0.2.0, 0.3.0)")),
        "{events:?}"
    );
    let mut newer = other_world.clone();
    newer.extend_from_slice(&[0, 25, 19]);
    newer.extend_from_slice(b"orca:policy-version0.9.0");
    write_atomically(&path, &newer);
    let events = registry.rescan(dir.path());
    assert!(
        matches!(&events[..], [ReloadEvent::Rejected { error, .. }] if error.contains("built against orca:policy@0.9.0")),
        "{events:?}"
    );
    assert_eq!(serving(&registry).as_ref(), Some(&sha2));

    // Removed.
    std::fs::remove_file(&path).unwrap();
    let events = registry.rescan(dir.path());
    assert!(
        matches!(&events[..], [ReloadEvent::Removed { .. }]),
        "{events:?}"
    );
    assert_eq!(serving(&registry), None);
}

#[cfg(unix)]
#[test]
fn a_configmap_volume_update_is_picked_up() {
    use std::os::unix::fs::symlink;
    // The kubelet's layout: files in a timestamped directory, `..data` → it, and each key a
    // symlink through `..data`. An update writes a new directory and renames a new `..data`
    // symlink over the old one.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let v1 = bytes(HOSTILE);
    let v2 = variant(&v1, "configmap-v2");
    std::fs::create_dir(root.join("..2026_11_22_01")).unwrap();
    std::fs::write(root.join("..2026_11_22_01/hostile.wasm"), &v1).unwrap();
    symlink("..2026_11_22_01", root.join("..data")).unwrap();
    symlink("..data/hostile.wasm", root.join("hostile.wasm")).unwrap();
    let registry = registry(Some(root));
    let first = registry
        .current()
        .get("hostile")
        .unwrap()
        .plugin
        .sha256
        .clone();

    std::fs::create_dir(root.join("..2026_11_22_02")).unwrap();
    std::fs::write(root.join("..2026_11_22_02/hostile.wasm"), &v2).unwrap();
    symlink("..2026_11_22_02", root.join("..data_tmp")).unwrap();
    std::fs::rename(root.join("..data_tmp"), root.join("..data")).unwrap();
    std::fs::remove_dir_all(root.join("..2026_11_22_01")).unwrap();
    let events = registry.rescan(root);
    assert!(
        matches!(&events[..], [ReloadEvent::Loaded { .. }]),
        "{events:?}"
    );
    let second = registry
        .current()
        .get("hostile")
        .unwrap()
        .plugin
        .sha256
        .clone();
    assert_ne!(first, second);
    assert_eq!(
        registry.current().iter().count(),
        4,
        "three embedded plugins and hostile"
    );
}

#[test]
fn reloads_during_a_stream_of_decisions_never_fail_or_mix_versions() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hostile.wasm");
    let v1 = bytes(HOSTILE);
    let v2 = variant(&v1, "stream-v2");
    std::fs::write(&path, &v1).unwrap();
    let registry = registry(Some(dir.path()));
    // hostile answers two hooks: a decision mixing versions would show two sha256s.
    let chains = HookChains {
        select_instance: vec![step("hostile", "{}", OnError::FAIL)],
        build_tags: vec![step("hostile", "{}", OnError::FAIL)],
        ..HookChains::single("x", "orca-default-market", "x")
    };
    let pipeline = Arc::new(Pipeline::new(registry.clone(), chains, "n", "c"));
    let done = Arc::new(AtomicBool::new(false));
    let decider = {
        let pipeline = pipeline.clone();
        let done = done.clone();
        std::thread::spawn(move || {
            let pod = pod(json!({}), json!({ "cpu": "1" }));
            let mut seen = std::collections::BTreeSet::new();
            let mut decisions = 0;
            while !done.load(Ordering::Relaxed) || decisions < 50 {
                let decision = pipeline
                    .decide(&pod)
                    .expect("no decision fails during reloads");
                let record = decision.record;
                assert_eq!(
                    record.select_instance.sha256, record.build_tags.sha256,
                    "one decision used two plugin versions"
                );
                seen.insert(record.select_instance.sha256);
                decisions += 1;
            }
            (decisions, seen)
        })
    };
    for round in 0..20 {
        let next = if round % 2 == 0 { &v2 } else { &v1 };
        write_atomically(&path, next);
        registry.rescan(dir.path());
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    done.store(true, Ordering::Relaxed);
    let (decisions, seen) = decider.join().unwrap();
    assert!(decisions >= 50);
    assert_eq!(seen.len(), 2, "both versions served decisions: {seen:?}");
}

#[test]
fn compiled_plugins_are_cached_and_a_damaged_entry_is_recompiled() {
    use orca::policy::wasm::{
        CachePruning, CatalogueQuery, LoadedPlugin, PluginEngine, SandboxLimits,
    };
    let cache = tempfile::tempdir().unwrap();
    let catalogue: Arc<dyn CatalogueQuery> =
        Arc::new(orca::policy::catalogue::InstanceCatalogue::bundled("us-east-1").unwrap());
    let component = bytes(HOSTILE);
    let engine = PluginEngine::new(SandboxLimits::default())
        .unwrap()
        .with_compile_cache(cache.path(), CachePruning::UnloadedEntries);
    LoadedPlugin::load(&engine, &component, &catalogue).unwrap();
    let entries: Vec<_> = std::fs::read_dir(cache.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    let entry = &entries[0];
    let name = entry.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        name.starts_with(&orca::policy::wasm::sha256_hex(&component)),
        "{name}"
    );
    let size = std::fs::metadata(entry).unwrap().len();

    // A second engine (a restart) loads from the cache; a damaged entry is replaced.
    std::fs::write(entry, b"damaged").unwrap();
    let restarted = PluginEngine::new(SandboxLimits::default())
        .unwrap()
        .with_compile_cache(cache.path(), CachePruning::UnloadedEntries);
    let plugin = LoadedPlugin::load(&restarted, &component, &catalogue).unwrap();
    assert_eq!(plugin.name, "hostile");
    assert_eq!(std::fs::metadata(entry).unwrap().len(), size);
    LoadedPlugin::load(&restarted, &component, &catalogue).unwrap();
}

/// A new user's case: a team tagger before the default one used to replace it, and the pod's
/// own tags (`orca.research/tags`) and `Name` silently disappeared. Every plugin of the
/// build-tags chain that answers now adds its tags; the whole is checked against EC2's limit.
#[test]
fn a_team_tagger_and_the_default_tagger_both_tag_the_pod() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("hostile.wasm"), bytes(HOSTILE)).unwrap();
    let registry = registry(Some(dir.path()));
    let tags_by = |mode: &str, on_error: OnError| HookChains {
        build_tags: vec![
            step("hostile", &format!("\"{mode}\""), on_error),
            step("orca-default-tagger", "{}", OnError::FAIL),
        ],
        ..HookChains::single("orca-default-selector", "orca-default-market", "x")
    };
    let tagged = pod(
        json!({ "orca.research/tags": "{\"team\":\"vision\"}" }),
        json!({ "cpu": "1" }),
    );

    // The team tagger (hostile's plain answer: ManagedBy=ORCA) first, then the default one.
    let pipeline = Pipeline::new(registry.clone(), tags_by("plain", OnError::FAIL), "n", "c");
    let record = decide(&pipeline, &tagged).unwrap().record;
    assert_eq!(record.tags["team"], "vision", "{:?}", record.tags);
    assert_eq!(record.tags["Name"], "ml/trainer");
    assert_eq!(record.tags["ManagedBy"], "ORCA");
    assert_eq!(record.build_tags.plugin, "hostile");
    let merged: Vec<&str> = (record.tags_merged_from.iter())
        .map(|r| r.plugin.as_str())
        .collect();
    assert_eq!(merged, ["orca-default-tagger"]);
    // Both set ManagedBy=ORCA: the same value is agreement, not a conflict.
    assert!(
        record.tag_conflicts.is_empty(),
        "{:?}",
        record.tag_conflicts
    );
    assert!(
        record.build_tags.reason.contains("from 2 plugins"),
        "{}",
        record.build_tags.reason
    );
    let annotation: serde_json::Value = serde_json::from_str(&record.to_json()).unwrap();
    assert_eq!(
        annotation["tagsMergedFrom"][0]["plugin"],
        "orca-default-tagger"
    );

    // Together they may not pass EC2's 50: the team's 43 fit alone, not with the default
    // tagger's; the error names both.
    let pipeline = Pipeline::new(
        registry.clone(),
        tags_by("most-tags", OnError::FAIL),
        "n",
        "c",
    );
    let error = decide(&pipeline, &tagged).unwrap_err();
    assert!(
        error.message.contains("hostile, orca-default-tagger") && error.message.contains("at most"),
        "{error}"
    );

    // A team tagger that fails under fallback leaves the default tagger's tags alone.
    let pipeline = Pipeline::new(registry, tags_by("bad-tags", OnError::FALLBACK), "n", "c");
    let record = decide(&pipeline, &tagged).unwrap().record;
    assert_eq!(record.build_tags.plugin, "orca-default-tagger");
    assert!(record.tags_merged_from.is_empty());
    assert_eq!(record.tags["team"], "vision");
    assert_eq!(record.fallbacks.len(), 1);
    assert_eq!(record.fallbacks[0].plugin, "hostile");
}

/// The new user's case: a team plugin's select-instance crashed, `onError: fallback` let the
/// default selector decide the type, and the same plugin's tags were used. The plan launches,
/// but the record and the Event's summary say it mixes two policies.
#[test]
fn a_plugin_that_broke_on_one_hook_and_answered_another_is_a_mixed_policy_on_record() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("hostile.wasm"), bytes(HOSTILE)).unwrap();
    let chains = HookChains {
        select_instance: vec![
            step("hostile", "\"trap\"", OnError::FALLBACK),
            step("orca-default-selector", "{}", OnError::FAIL),
        ],
        build_tags: vec![
            step("hostile", "{}", OnError::FAIL),
            step("orca-default-tagger", "{}", OnError::FAIL),
        ],
        ..HookChains::single("x", "orca-default-market", "x")
    };
    let pipeline = Pipeline::new(registry(Some(dir.path())), chains, "n", "c");
    let decision = decide(&pipeline, &pod(json!({}), json!({ "cpu": "1" }))).unwrap();
    let mixed = &decision.record.mixed_policies;
    assert_eq!(mixed.len(), 1, "{mixed:?}");
    assert_eq!(mixed[0].plugin, "hostile");
    assert_eq!(mixed[0].answered, ["build-tags"]);
    assert_eq!(mixed[0].fell_back, ["select-instance (crashed)"]);
    let summary = decision.record.summary();
    assert!(
        summary.contains(
            "mixed policy: hostile answered build-tags but fell back on select-instance (crashed)"
        ),
        "{summary}"
    );

    // A decline is the plugin's word, not a fault: one policy decided.
    let declining = HookChains {
        select_instance: vec![
            step("hostile", "\"decline\"", OnError::FAIL),
            step("orca-default-selector", "{}", OnError::FAIL),
        ],
        build_tags: vec![step("hostile", "{}", OnError::FAIL)],
        ..HookChains::single("x", "orca-default-market", "x")
    };
    let pipeline = Pipeline::new(registry(Some(dir.path())), declining, "n", "c");
    let decision = decide(&pipeline, &pod(json!({}), json!({ "cpu": "1" }))).unwrap();
    assert!(decision.record.mixed_policies.is_empty());
}

/// A team selector that ignores the pod's `orca.research/instance-type` may (policy is the
/// team's), but not silently: the record names the annotation, the plugin and its answer.
#[test]
fn an_annotation_a_plugin_ignored_is_on_record_naming_the_plugin() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("hostile.wasm"), bytes(HOSTILE)).unwrap();
    let chains = HookChains {
        select_instance: vec![step("hostile", "{}", OnError::FAIL)],
        ..HookChains::single("x", "orca-default-market", "orca-default-tagger")
    };
    let pipeline = Pipeline::new(registry(Some(dir.path())), chains, "n", "c");
    let asked = pod(
        json!({ "orca.research/instance-type": "m5.large", "orca.research/tags": "{\"team\":\"ml\"}" }),
        json!({ "cpu": "1" }),
    );
    let decision = decide(&pipeline, &asked).unwrap();
    let ignored = &decision.record.not_honoured;
    assert_eq!(ignored.len(), 1, "{ignored:?}");
    assert_eq!(ignored[0].annotation, "orca.research/instance-type");
    assert_eq!(ignored[0].plugin, "hostile");
    assert_eq!(ignored[0].answer, "m7i.large");
    assert!(
        decision.record.summary().contains(
            "annotation orca.research/instance-type=\"m5.large\" not honoured by hostile (answered m7i.large)"
        ),
        "{}",
        decision.record.summary()
    );

    // The default plugins honour it: nothing on record.
    let defaults = Pipeline::new(
        registry(Some(dir.path())),
        HookChains::single(
            "orca-default-selector",
            "orca-default-market",
            "orca-default-tagger",
        ),
        "n",
        "c",
    );
    let decision = decide(&defaults, &asked).unwrap();
    assert!(
        decision.record.not_honoured.is_empty(),
        "{:?}",
        decision.record.not_honoured
    );
}

/// `policy.shadow`'s candidate, `hostile` in `mode`, waited for `budget` past the decision.
fn shadowed(
    registry: Arc<PluginRegistry>,
    plugin: &str,
    mode: &str,
    budget_ms: u64,
) -> Arc<Pipeline> {
    Arc::new(defaults(registry).with_shadow(Some(ShadowSpec {
        plugin: plugin.to_owned(),
        replaces: None,
        settings: format!("\"{mode}\""),
        on_error: OnError::FAIL,
        budget: std::time::Duration::from_millis(budget_ms),
    })))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_is_recorded_beside_the_decision_and_whatever_it_does_the_decision_stands() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("hostile.wasm"), bytes(HOSTILE)).unwrap();
    let registry = registry(Some(dir.path()));
    let plain = pod(json!({}), json!({ "cpu": "1" }));
    let alone = defaults(registry.clone()).decide(&plain).unwrap();
    // (candidate, its mode, budget, the outcome recorded)
    let cases = [
        ("hostile", "well-behaved", 10_000, ShadowOutcome::Differed),
        ("hostile", "trap", 10_000, ShadowOutcome::ShadowFailed),
        ("absent", "well-behaved", 10_000, ShadowOutcome::NotLoaded),
        // Runs to its 100 ms time limit; the launch waits 20 ms past its own decision.
        ("hostile", "loop", 20, ShadowOutcome::TimedOut),
    ];
    for (plugin, mode, budget, outcome) in cases {
        let pipeline = shadowed(registry.clone(), plugin, mode, budget);
        let decision = pipeline.plan(&plain).await.unwrap();
        let shadow = decision.record.shadow.clone().expect("the shadow's record");
        assert_eq!(shadow.outcome, outcome, "{mode}: {shadow:?}");
        assert_eq!(shadow.plugin, plugin);
        // The live plan is the one the chains make without a shadow.
        assert_eq!(decision.plan, alone.plan, "{mode}");
        let summary = decision.record.summary();
        assert!(summary.contains(&format!("shadow {plugin}")), "{summary}");
        match outcome {
            ShadowOutcome::Differed => {
                assert_eq!(shadow.instance_type.as_deref(), Some("m7i.large"));
                assert!(shadow.differences.contains(&ShadowField::InstanceType));
                assert_eq!(shadow.version.as_deref(), Some("0.0.1"));
            }
            ShadowOutcome::ShadowFailed => {
                let error = shadow.error.as_deref().unwrap();
                assert!(error.contains("hostile"), "{error}");
            }
            _ => assert!(shadow.differences.is_empty()),
        }
    }
}
