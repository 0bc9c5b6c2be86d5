//! Real plugins, built from this workspace's source for wasm32-wasip2, through the real
//! wasmtime host: the default plugins answer as designed, and hostile ones are contained.

use std::sync::Arc;
use std::time::Duration;

use orca::policy::wasm::{
    Architecture, CallError, CatalogueQuery, Hook, InstanceQuery, InstanceReuse, InstanceType,
    LimitTooSmall, LoadError, LoadedPlugin, Market, PluginEngine, Pod, PolicyError, Resources,
    SandboxLimits, TagContext, VersionError,
};

mod support;

use support::{bytes, with_extra_memories};

struct TestCatalogue(Vec<InstanceType>);

impl CatalogueQuery for TestCatalogue {
    fn query(&self, query: &InstanceQuery) -> Vec<InstanceType> {
        self.0
            .iter()
            .filter(|t| query.names.is_empty() || query.names.contains(&t.name))
            .filter(|t| {
                t.vcpus >= query.min_vcpus
                    && t.memory_mib >= query.min_memory_mib
                    && t.gpus >= query.min_gpus
            })
            .cloned()
            .collect()
    }
}

fn instance(name: &str, vcpus: u32, gpus: u32, price: f64) -> InstanceType {
    InstanceType {
        name: name.into(),
        family: name.split('.').next().unwrap().into(),
        vcpus,
        memory_mib: u64::from(vcpus) * 4096,
        gpus,
        gpu_model: None,
        architecture: Architecture::Amd64,
        on_demand_price: Some(price),
        spot_price: None,
        zones: Vec::new(),
    }
}

fn catalogue() -> Arc<dyn CatalogueQuery> {
    Arc::new(TestCatalogue(vec![
        instance("m7i.large", 2, 0, 0.1008),
        instance("p5.48xlarge", 192, 8, 98.32),
    ]))
}

fn pod(annotations: &[(&str, &str)]) -> Pod {
    let nothing = Resources {
        cpu_millis: 0,
        memory_bytes: 0,
        ephemeral_storage_bytes: 0,
        gpus: 0,
    };
    Pod {
        namespace: "ml".into(),
        name: "train".into(),
        uid: "uid-1".into(),
        labels: vec![],
        annotations: annotations
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        requests: nothing,
        limits: nothing,
        node_selector: vec![],
        tolerations: vec![],
        priority: None,
        json: "{}".into(),
        zones: Vec::new(),
    }
}

fn engine(limits: SandboxLimits) -> PluginEngine {
    PluginEngine::new(limits).expect("engine")
}

/// The hostile test plugin, loaded into an engine with `limits`.
fn hostile(limits: SandboxLimits) -> (PluginEngine, Arc<dyn CatalogueQuery>, LoadedPlugin) {
    hostile_with(limits)
}

fn hostile_with(limits: SandboxLimits) -> (PluginEngine, Arc<dyn CatalogueQuery>, LoadedPlugin) {
    let engine = engine(limits);
    let catalogue = catalogue();
    let plugin =
        LoadedPlugin::load(&engine, &bytes("orca-test-plugin-hostile"), &catalogue).unwrap();
    (engine, catalogue, plugin)
}

#[test]
fn default_plugins_load_and_describe_themselves() {
    let engine = engine(SandboxLimits::default());
    let selector =
        LoadedPlugin::load(&engine, &bytes("orca-plugin-selector"), &catalogue()).unwrap();
    assert_eq!(selector.name, "orca-default-selector");
    assert_eq!(selector.hooks, vec![Hook::SelectInstance]);
    assert_eq!(selector.sha256.len(), 64);
    let market = LoadedPlugin::load(&engine, &bytes("orca-plugin-market"), &catalogue()).unwrap();
    assert_eq!(market.hooks, vec![Hook::ChooseMarket]);
}

#[test]
fn the_default_policy_answers_through_the_sandbox() {
    let engine = engine(SandboxLimits::default());
    let catalogue = catalogue();
    let selector = LoadedPlugin::load(&engine, &bytes("orca-plugin-selector"), &catalogue).unwrap();
    let market = LoadedPlugin::load(&engine, &bytes("orca-plugin-market"), &catalogue).unwrap();
    let tagger = LoadedPlugin::load(&engine, &bytes("orca-plugin-tagger"), &catalogue).unwrap();

    let gpu_pod = pod(&[
        ("orca.research/instance-type", "p5.48xlarge"),
        ("orca.research/launch-type", "spot"),
        ("orca.research/max-spot-price", "500"),
    ]);
    let candidates = selector
        .select_instance(&engine, &catalogue, &gpu_pod, "{}")
        .unwrap()
        .unwrap();
    assert_eq!(candidates[0].instance_type, "p5.48xlarge");
    let decision = market
        .choose_market(&engine, &catalogue, &gpu_pod, "{}", &candidates)
        .unwrap()
        .unwrap();
    assert_eq!(
        (decision.market, decision.max_price),
        (Market::Spot, Some(98.32)),
        "capped at on-demand"
    );
    let context = TagContext {
        node_name: "orca-aws-node".into(),
        cluster_name: "lab".into(),
        instance_type: "p5.48xlarge".into(),
        market: Market::Spot,
    };
    let tags = tagger
        .build_tags(&engine, &catalogue, &gpu_pod, "{}", &context)
        .unwrap()
        .unwrap();
    assert!(
        tags.iter()
            .any(|t| t.key == "ManagedBy" && t.value == "ORCA")
    );
    assert!(
        tags.iter()
            .any(|t| t.key == "orca.research/pod-uid" && t.value == "uid-1")
    );
}

#[test]
fn a_policy_error_comes_back_typed() {
    let engine = engine(SandboxLimits::default());
    let catalogue = catalogue();
    let selector = LoadedPlugin::load(&engine, &bytes("orca-plugin-selector"), &catalogue).unwrap();
    let answer = selector
        .select_instance(
            &engine,
            &catalogue,
            &pod(&[("orca.research/instance-type", "m9z.huge")]),
            "{}",
        )
        .unwrap();
    match answer {
        Err(PolicyError::InvalidAnnotation(error)) => assert_eq!(error.value, "m9z.huge"),
        other => panic!("expected invalid-annotation, got {other:?}"),
    }
    let unsupported = selector
        .build_tags(
            &engine,
            &catalogue,
            &pod(&[]),
            "{}",
            &TagContext {
                node_name: "n".into(),
                cluster_name: "c".into(),
                instance_type: "m7i.large".into(),
                market: Market::OnDemand,
            },
        )
        .unwrap();
    assert!(matches!(unsupported, Err(PolicyError::Unsupported)));
}

/// The time limit a call was stopped by, whichever side of it: its CPU time (`Timeout`), or its
/// wall time's ceiling (`Stalled`), which a looping call reaches first when the machine is so
/// busy that its thread gets less than a tenth of a core (as when every test binary runs at once
/// on 2 cores). Either discards the instance and counts as a timeout.
fn stopped_by_time_limit(error: &CallError) -> Option<Duration> {
    match error {
        CallError::Timeout { timeout, .. } | CallError::Stalled { timeout, .. } => Some(*timeout),
        _ => None,
    }
}

#[test]
fn an_endless_loop_is_stopped_at_the_deadline() {
    let limits = SandboxLimits {
        timeout: Duration::from_millis(50),
        ..SandboxLimits::default()
    };
    let (engine, catalogue, hostile) = hostile(limits);
    let error = hostile
        .select_instance(&engine, &catalogue, &pod(&[]), "loop")
        .unwrap_err();
    assert_eq!(
        stopped_by_time_limit(&error),
        Some(Duration::from_millis(50)),
        "{error}"
    );
    assert!(error.to_string().contains("time limit"), "{error}");
    // The engine keeps serving after a runaway call.
    assert!(
        hostile
            .select_instance(&engine, &catalogue, &pod(&[]), "fine")
            .unwrap()
            .is_ok()
    );
}

#[test]
fn the_time_limit_counts_cpu_time_and_wall_time_only_past_its_ceiling() {
    let limits = SandboxLimits {
        timeout: Duration::from_millis(50),
        ..SandboxLimits::default()
    };
    let (engine, catalogue, hostile) = hostile(limits);
    // 150 ms asleep is three times the limit in wall time but almost no CPU: the thread of a
    // call on a busy machine waits the same way, and the call is not the plugin's to lose.
    let answer = hostile
        .select_instance(&engine, &catalogue, &pod(&[]), "nap:15")
        .unwrap()
        .unwrap();
    assert_eq!(answer[0].reason, "after its naps");
    // Past the ceiling (ten times the limit) in wall time, the call is stopped all the same.
    let error = hostile
        .select_instance(&engine, &catalogue, &pod(&[]), "nap:1000")
        .unwrap_err();
    assert!(
        matches!(error, CallError::Stalled { wall, .. } if wall == Duration::from_millis(500)),
        "{error}"
    );
    assert!(error.to_string().contains("50ms of CPU"), "{error}");
}

#[test]
fn a_memory_bomb_hits_the_cap_and_fails_cleanly() {
    let limits = SandboxLimits {
        max_memory_bytes: 16 << 20,
        ..SandboxLimits::default()
    };
    let (engine, catalogue, hostile) = hostile(limits);
    let error = hostile
        .select_instance(&engine, &catalogue, &pod(&[]), "grow")
        .unwrap_err();
    assert!(matches!(error, CallError::Trapped { .. }), "{error}");
    // The host's limit, not an exception of the plugin's, is what ended it.
    assert!(
        error.to_string().contains("memory budget is spent"),
        "{error}"
    );
}

/// 40 MiB: under `maxMemory` (64 Mi) for one memory, past it for two.
const FORTY_MIB_PAGES: u32 = 640;

#[test]
fn a_component_with_several_memories_gets_one_budget_for_all_of_them() {
    // Memory is what is measured here: a loaded CI machine took the grow past the default
    // 100 ms deadline, so the call gets time enough (the deadline has tests of its own).
    let engine = engine(SandboxLimits {
        timeout: Duration::from_secs(5),
        load_timeout: Duration::from_secs(10),
        ..SandboxLimits::default()
    });
    let catalogue = catalogue();
    let hostile = bytes("orca-test-plugin-hostile");

    // Two more memories of 40 MiB: each fits under maxMemory, together they do not. (With a cap
    // per memory only, this loaded, and 16 such instances per call held 640 MiB.) The load is
    // refused before the compile, naming the least maxMemory that would do.
    let two = with_extra_memories(&hostile, 2, FORTY_MIB_PAGES);
    let Err(error) = LoadedPlugin::load(&engine, &two, &catalogue) else {
        panic!("a component holding 80 MiB in two memories loaded under a 64 MiB budget");
    };
    let needed = needed_mib(&error);
    assert!(needed > 80, "{error}");

    // One more memory of 40 MiB fits, and the plugin answers; but what it may still allocate
    // is what that memory left of the budget, not a fresh 64 MiB.
    let one = with_extra_memories(&hostile, 1, FORTY_MIB_PAGES);
    let plugin = LoadedPlugin::load(&engine, &one, &catalogue).expect("40 MiB fits");
    let answer = plugin
        .select_instance(&engine, &catalogue, &pod(&[]), "well-behaved")
        .unwrap();
    assert_eq!(answer.unwrap()[0].instance_type, "m7i.large");
    let error = plugin
        .select_instance(&engine, &catalogue, &pod(&[]), "grow")
        .unwrap_err();
    let text = error.to_string();
    assert!(text.contains("over all its memories"), "{text}");
    // The grow was refused with at most 24 MiB left, so the first number in the message (the
    // plugin's own memory when refused) is below that.
    let grown: usize = text
        .split("from ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("the message gives the memory's size");
    assert!(grown < 24 << 20, "{text}");

    // More instances than a call may create are refused too, however small each is.
    let many = with_extra_memories(&hostile, 20, 1);
    let error = LoadedPlugin::load(&engine, &many, &catalogue)
        .err()
        .expect("refused");
    assert!(matches!(error, LoadError::InfoFailed(_)), "{error}");
}

/// The MiB a `StartPastLimits` refusal names.
fn needed_mib(error: &LoadError) -> usize {
    let text = error.to_string();
    assert!(
        matches!(
            error,
            LoadError::StartPastLimits(LimitTooSmall::Memory { .. })
        ),
        "{text}"
    );
    text.split("at least ")
        .nth(1)
        .and_then(|rest| rest.split(" MiB").next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no minimum in MiB: {text}"))
}

/// Issue 46: a `maxMemory` too small for a plugin said "memory has a minimum byte size of …
/// which exceeds the limit of … bytes" after compiling it, and nothing about what would do.
#[test]
fn a_max_memory_too_small_names_the_least_that_loads_in_mib() {
    let limits = |mib: usize| SandboxLimits {
        max_memory_bytes: mib << 20,
        timeout: Duration::from_secs(5),
        load_timeout: Duration::from_secs(10),
        ..SandboxLimits::default()
    };
    let catalogue = catalogue();
    let big = with_extra_memories(&bytes("orca-test-plugin-hostile"), 1, FORTY_MIB_PAGES);
    let refusal = LoadedPlugin::load(&engine(limits(8)), &big, &catalogue)
        .err()
        .expect("40 MiB loaded under 8 Mi");
    let needed = needed_mib(&refusal);
    assert!(
        refusal.to_string().contains("maxMemory (8 MiB)"),
        "{refusal}"
    );
    assert!(
        refusal
            .to_string()
            .contains(&format!("maxMemory: {needed}Mi or more")),
        "{refusal}"
    );
    // The number named is the least that loads: one MiB less is refused the same way.
    let enough = engine(limits(needed));
    let plugin = LoadedPlugin::load(&enough, &big, &catalogue)
        .unwrap_or_else(|error| panic!("{needed} MiB named, but refused: {error}"));
    let answer = plugin
        .select_instance(&enough, &catalogue, &pod(&[]), "well-behaved")
        .unwrap();
    assert_eq!(answer.unwrap()[0].instance_type, "m7i.large");
    let below = LoadedPlugin::load(&engine(limits(needed - 1)), &big, &catalogue)
        .err()
        .expect("refused one MiB below the minimum");
    assert_eq!(needed_mib(&below), needed);
}

/// The plugin's own `pluginLimits` are checked once it has named itself: a load under the
/// largest limits that its own could never call is refused, not loaded to fail every pod.
#[test]
fn a_plugin_whose_own_max_memory_is_too_small_is_refused_at_load() {
    use std::collections::BTreeMap;
    let catalogue = catalogue();
    let big = with_extra_memories(&bytes("orca-test-plugin-hostile"), 1, FORTY_MIB_PAGES);
    let defaults = SandboxLimits {
        max_memory_bytes: 128 << 20,
        load_timeout: Duration::from_secs(10),
        ..SandboxLimits::default()
    };
    let own = SandboxLimits {
        max_memory_bytes: 16 << 20,
        ..defaults
    };
    let engine = PluginEngine::with_plugin_limits(
        defaults,
        BTreeMap::from([("hostile".to_owned(), own)]),
        0,
    )
    .unwrap();
    let error = LoadedPlugin::load(&engine, &big, &catalogue)
        .err()
        .expect("loaded with its own maxMemory of 16 Mi");
    assert!(needed_mib(&error) > 40, "{error}");
    assert!(error.to_string().contains("maxMemory (16 MiB)"), "{error}");
}

#[test]
fn a_panic_is_a_plugin_error_not_a_crash() {
    let (engine, catalogue, hostile) = hostile(SandboxLimits::default());
    let error = hostile
        .select_instance(&engine, &catalogue, &pod(&[]), "trap")
        .unwrap_err();
    assert!(
        matches!(error, CallError::Trapped { ref plugin, .. } if plugin == "hostile"),
        "{error}"
    );
    // Issue 46: told by the panic's message and line (std's panic message on the plugin's
    // stderr), not by the wasm backtrace of the abort.
    let CallError::Trapped { message, .. } = &error else {
        panic!("{error}")
    };
    assert!(
        message.starts_with("panic: hostile plugin panics on purpose (")
            && message.ends_with("src/lib.rs:46)"),
        "{message}"
    );
    assert!(!message.contains("wasm backtrace"), "{message}");
}

#[test]
fn flooding_stdout_past_the_cap_fails_the_call() {
    let limits = SandboxLimits {
        max_output_bytes: 4096,
        ..SandboxLimits::default()
    };
    let (engine, catalogue, hostile) = hostile(limits);
    assert!(
        hostile
            .select_instance(&engine, &catalogue, &pod(&[]), "output")
            .is_err()
    );
}

#[test]
fn bytes_that_are_not_a_plugin_are_refused_at_load() {
    let engine = engine(SandboxLimits::default());
    let catalogue = catalogue();
    let garbage = LoadedPlugin::load(&engine, b"not wasm at all", &catalogue);
    assert!(matches!(
        garbage,
        Err(LoadError::Version(VersionError::Unparsable(_)))
    ));
    // A valid component of another world: an empty component exports nothing orca needs.
    let component = wat::parse_str("(component)").unwrap();
    let other_world = LoadedPlugin::load(&engine, &component, &catalogue);
    assert!(
        matches!(other_world, Err(LoadError::WrongWorld(_))),
        "{:?}",
        other_world.err().map(|e| e.to_string())
    );
}

#[test]
fn lies_from_a_plugin_are_caught_by_host_validation() {
    let (engine, catalogue, hostile) = hostile(SandboxLimits::default());
    let candidates = hostile
        .select_instance(&engine, &catalogue, &pod(&[]), "bad-type")
        .unwrap()
        .unwrap();
    let error = orca::policy::validate::candidates(&hostile.name, &candidates, catalogue.as_ref())
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "plugin hostile chose instance type \"z9.imaginary\", which the catalogue does not have"
    );
    let context = TagContext {
        node_name: "n".into(),
        cluster_name: "c".into(),
        instance_type: "m7i.large".into(),
        market: Market::OnDemand,
    };
    let tags = hostile
        .build_tags(&engine, &catalogue, &pod(&[]), "bad-tags", &context)
        .unwrap()
        .unwrap();
    let error = orca::policy::validate::tags(&hostile.name, &tags)
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with("plugin hostile returned a tag EC2 would refuse")
            && error.contains("aws:"),
        "{error}"
    );
}

fn reused(limits: SandboxLimits) -> SandboxLimits {
    SandboxLimits {
        instances: InstanceReuse::Reused,
        ..limits
    }
}

/// The reason of a `count` or `hoard` answer.
fn reason(
    plugin: &LoadedPlugin,
    engine: &PluginEngine,
    catalogue: &Arc<dyn CatalogueQuery>,
    mode: &str,
) -> String {
    let answer = plugin
        .select_instance(engine, catalogue, &pod(&[]), mode)
        .expect("the call returns")
        .expect("the plugin answers");
    answer[0].reason.clone()
}

#[test]
fn a_fresh_plugin_starts_every_call_from_its_initial_state() {
    let (engine, catalogue, hostile) = hostile(SandboxLimits::default());
    for _ in 0..3 {
        assert_eq!(reason(&hostile, &engine, &catalogue, "count"), "call 1");
    }
    assert_eq!(engine.warm_instances(), 0);
}

#[test]
fn a_reused_plugin_keeps_its_instance_between_calls_and_a_failure_discards_it() {
    let (engine, catalogue, hostile) = hostile(reused(SandboxLimits::default()));
    assert_eq!(reason(&hostile, &engine, &catalogue, "count"), "call 1");
    assert_eq!(reason(&hostile, &engine, &catalogue, "count"), "call 2");
    assert_eq!(engine.warm_instances(), 1);
    // A trap leaves the instance in an unknown state: it is dropped, and the next call starts
    // over in a new one.
    assert!(
        hostile
            .select_instance(&engine, &catalogue, &pod(&[]), "trap")
            .is_err()
    );
    assert_eq!(engine.warm_instances(), 0);
    assert_eq!(reason(&hostile, &engine, &catalogue, "count"), "call 1");
    // So does a call stopped at its deadline.
    let limits = SandboxLimits {
        timeout: Duration::from_millis(50),
        ..reused(SandboxLimits::default())
    };
    let (engine, catalogue, hostile) = hostile_with(limits);
    assert_eq!(reason(&hostile, &engine, &catalogue, "count"), "call 1");
    let error = hostile
        .select_instance(&engine, &catalogue, &pod(&[]), "loop")
        .unwrap_err();
    assert_eq!(
        stopped_by_time_limit(&error),
        Some(Duration::from_millis(50)),
        "{error}"
    );
    assert_eq!(reason(&hostile, &engine, &catalogue, "count"), "call 1");
    // Unloading the plugin frees its warm instance.
    drop(hostile);
    assert_eq!(engine.warm_instances(), 0);
}

#[test]
fn a_reused_instance_holding_half_its_memory_is_replaced_before_it_runs_out() {
    // 64 MiB a call: the instance is kept while it holds at most 32 MiB, so the hoard grows
    // 8 MiB a call until the instance passes that, and the next call starts over. No call
    // fails for what earlier calls left behind.
    let (engine, catalogue, hostile) = hostile(reused(SandboxLimits::default()));
    let mut held = Vec::new();
    for _ in 0..8 {
        held.push(reason(&hostile, &engine, &catalogue, "hoard"));
    }
    assert_eq!(held[0], "holding 8 MiB");
    assert_eq!(held[1], "holding 16 MiB");
    let restarted = held.iter().skip(1).position(|r| r == "holding 8 MiB");
    assert!(restarted.is_some(), "never replaced: {held:?}");
}

#[test]
fn a_reused_instance_gives_every_call_its_whole_output_budget() {
    let limits = reused(SandboxLimits {
        max_output_bytes: 1 << 20,
        ..SandboxLimits::default()
    });
    let (engine, catalogue, hostile) = hostile(limits);
    // Each `log-flood` call logs 10 MiB through `log`, cut to the call's 1 MiB; the budget is
    // the call's, so the third call on the same instance still answers.
    for _ in 0..3 {
        let answer = hostile
            .select_instance(&engine, &catalogue, &pod(&[]), "log-flood")
            .unwrap()
            .unwrap();
        assert_eq!(answer[0].reason, "logged a lot first");
    }
    assert_eq!(engine.warm_instances(), 1);
}

#[test]
fn a_plugin_with_its_own_limits_gets_them_and_the_others_keep_the_defaults() {
    let own = SandboxLimits {
        timeout: Duration::from_millis(30),
        max_memory_bytes: 128 << 20,
        instances: InstanceReuse::Reused,
        ..SandboxLimits::default()
    };
    let engine = PluginEngine::with_plugin_limits(
        SandboxLimits::default(),
        [("hostile".to_owned(), own)].into_iter().collect(),
        1,
    )
    .unwrap();
    let catalogue = catalogue();
    let hostile =
        LoadedPlugin::load(&engine, &bytes("orca-test-plugin-hostile"), &catalogue).unwrap();
    assert_eq!(hostile.limits, own);
    let selector = LoadedPlugin::load(&engine, &bytes("orca-plugin-selector"), &catalogue).unwrap();
    assert_eq!(selector.limits, SandboxLimits::default());
    let error = hostile
        .select_instance(&engine, &catalogue, &pod(&[]), "loop")
        .unwrap_err();
    assert_eq!(
        stopped_by_time_limit(&error),
        Some(Duration::from_millis(30)),
        "{error}"
    );
    // An extra memory of 80 MiB: past the default 64 MiB, within its own 128 MiB.
    let big = with_extra_memories(&bytes("orca-test-plugin-hostile"), 1, 2 * FORTY_MIB_PAGES);
    let hostile = LoadedPlugin::load(&engine, &big, &catalogue).unwrap();
    assert_eq!(reason(&hostile, &engine, &catalogue, "count"), "call 1");
    let defaults = PluginEngine::new(SandboxLimits::default()).unwrap();
    let Err(error) = LoadedPlugin::load(&defaults, &big, &catalogue) else {
        panic!("80 MiB loaded under the default 64 MiB");
    };
    // Refused before the compile, naming the least that would do (80 MiB and its own).
    assert!(needed_mib(&error) > 80, "{error}");
    assert!(error.to_string().contains("maxMemory (64 MiB)"), "{error}");
}
