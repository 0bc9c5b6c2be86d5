//! Policy plugins written in Python and TypeScript, built from the SDKs' example sources with
//! their `build` scripts (`plugin-sdk/python`, `plugin-sdk/js`), run by the real orca: in a
//! chain deciding real pods of the local cluster, and through `orca plugin eval`.
//!
//! Each SDK's test plugin that calls every helper the SDK exports is built the same way and
//! asked through `orca plugin eval`: its checks pass inside the component, and orca accepts its
//! tag of letters and digits beyond ASCII.
//!
//! Each SDK's test plugin that raises a `TypeError` is built the same way: the pod's status and
//! `orca plugin eval` tell the exception as its language does, at the line of the plugin's source
//! that raised it (`app.py:15`; `src/plugin.ts:9`, through the source map `build` embeds), not as
//! a wasm backtrace of the interpreter.
//!
//! Both examples are the Rust team selector (`deploy/examples/custom-plugin`) in another
//! language: a team listed in the settings gets its types in its order, a pod of another team
//! is declined (the next plugin, the default selector, decides it), and a team pod none of the
//! team's types fits is `no-match`, which fails it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::{Pod, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::Api;
use orca_e2e::guest_plugins::{
    Language, every_helper_wasm, raises_type_error_wasm, raising_line, team_selector_wasm,
};
use orca_e2e::pods::{self, burst_pod, decision, phase, wait_decided};
use orca_e2e::{OrcaProcess, TestCluster, TestNamespace, test_config, unique_node_name};
use serde_json::Value;

/// The team selectors' settings in every test: team vision's types, best first.
const SETTINGS: &str = r#"{"teams": {"vision": ["g6.xlarge", "g5.xlarge"]}}"#;
const VISION_TYPES: [&str; 2] = ["g6.xlarge", "g5.xlarge"];
/// How long orca may take to decide a pod, and a decided pod to run or fail.
const DECIDED: Duration = Duration::from_secs(90);
/// How long orca may take to load the plugins: from the compile cache the build warmed in
/// milliseconds, but compiling a component again takes a debug orca minutes.
const LOADED: Duration = Duration::from_secs(420);

/// orca with `wasm` in its plugins directory, the chain
/// `selectInstance: [NAME with SETTINGS, orca-default-selector]`, and the
/// limits the docs recommend for an interpreter's plugin: its own memory, its instance reused.
fn start_with_plugin(node: &str, name: &str, wasm: &Path) -> Result<OrcaProcess> {
    let bytes = std::fs::read(wasm).with_context(|| format!("reading {}", wasm.display()))?;
    OrcaProcess::start(node, |dir| {
        let plugins = dir.join("plugins");
        std::fs::create_dir(&plugins).expect("plugins dir");
        std::fs::write(plugins.join(format!("{name}.wasm")), &bytes).expect("plugin file");
        format!(
            "{}policy:\n  pluginsDir: {}\n  pluginLimits:\n    {name}: {{instances: reused, maxMemory: 96Mi}}\n  selectInstance:\n    - plugin: {name}\n      settings: {SETTINGS}\n    - plugin: orca-default-selector\n",
            test_config(node, dir, ""),
            plugins.display()
        )
    })
}

/// A pod for `node` of `team`, asking for `gpus` GPUs when not 0.
fn team_pod(name: &str, node: &str, team: &str, gpus: u32) -> Pod {
    let mut pod = burst_pod(name, node, &[]);
    pod.metadata.labels = Some([("team".to_owned(), team.to_owned())].into());
    if gpus > 0 {
        pod.spec.as_mut().expect("spec").containers[0].resources = Some(ResourceRequirements {
            limits: Some([("nvidia.com/gpu".to_owned(), Quantity(gpus.to_string()))].into()),
            ..ResourceRequirements::default()
        });
    }
    pod
}

/// The team selector of `language`, built from source, deciding three real pods in a chain
/// before the default selector: its team's pod, another team's, and one nothing fits.
async fn team_selector_decides_real_pods(language: Language) -> Result<()> {
    let wasm = team_selector_wasm(language)?;
    let plugin = language.team_selector_name();
    let client = TestCluster::shared().kube_client().await?;
    let node = unique_node_name(plugin);
    let orca = start_with_plugin(&node, plugin, &wasm)?;
    orca.wait_ready(Duration::from_secs(30)).await?;
    // /readyz says 200 once every plugin the chains name is loaded.
    orca.wait_serving(LOADED).await?;
    let namespace = TestNamespace::create(&client, plugin).await?;
    let api: Api<Pod> = Api::namespaced(client.clone(), &namespace.name);

    pods::create(&api, &team_pod("vision", &node, "vision", 0)).await?;
    pods::create(&api, &team_pod("finance", &node, "finance", 0)).await?;
    // Every type of team vision has one GPU: none fits eight.
    pods::create(&api, &team_pod("vision-8gpu", &node, "vision", 8)).await?;

    // Team vision: its types in its order, one of them launched, and the pod runs.
    let vision = pods::wait_for(&api, "vision", "Running", DECIDED, |p| {
        phase(p) == "Running"
    })
    .await
    .map_err(|error| anyhow::anyhow!("{error:#}\norca log:\n{}", orca.log()))?;
    let recorded = decision(&vision).context("the decision annotation")?;
    ensure!(
        recorded["selectInstance"]["plugin"] == plugin,
        "the team selector chose the type: {recorded}"
    );
    ensure!(
        recorded["selectInstance"]["reason"] == "team vision's types",
        "{recorded}"
    );
    let instance_type = recorded["instanceType"].as_str().unwrap_or_default();
    ensure!(
        VISION_TYPES.contains(&instance_type),
        "a type of team vision, not {instance_type:?}: {recorded}"
    );
    ensure!(
        recorded["candidates"] == serde_json::json!(VISION_TYPES),
        "{recorded}"
    );

    // Another team: declined, so the default selector decides, and the record says why.
    let finance = wait_decided(&api, "finance", DECIDED).await?;
    ensure!(
        finance["selectInstance"]["plugin"] == "orca-default-selector",
        "{finance}"
    );
    let declined = &finance["fallbacks"][0];
    ensure!(
        declined["kind"] == "declined"
            && declined["error"]
                .as_str()
                .is_some_and(|e| e.contains("\"finance\"")),
        "the record says the team selector declined team finance: {finance}"
    );
    pods::wait_for(&api, "finance", "Running", DECIDED, |p| {
        phase(p) == "Running"
    })
    .await?;

    // A vision pod none of the team's types fits: no-match fails it (onError's default) rather
    // than letting the default selector pick a bigger type.
    let failed = pods::wait_for(&api, "vision-8gpu", "Failed", DECIDED, |p| {
        phase(p) == "Failed"
    })
    .await?;
    let message = pods::message(&failed);
    ensure!(pods::reason(&failed) == "PolicyError", "{failed:?}");
    ensure!(
        message.contains(plugin)
            && message.contains("none of team vision's types (g6.xlarge, g5.xlarge) fits"),
        "{message}"
    );
    namespace.delete().await
}

#[tokio::test]
async fn python_team_selector_decides_real_pods() -> Result<()> {
    team_selector_decides_real_pods(Language::Python).await
}

#[tokio::test]
async fn typescript_team_selector_decides_real_pods() -> Result<()> {
    team_selector_decides_real_pods(Language::TypeScript).await
}

/// Whether `message` tells the raising plugin's `TypeError` as its language does, at `line`
/// (`app.py:15`) of the plugin's own source, and not the runtime's wasm backtrace.
fn ensure_tells_the_type_error(message: &str, line: &str) -> Result<()> {
    ensure!(
        message.contains("TypeError: ") && message.contains(&format!("({line}, in ")),
        "the message names the TypeError and {line}: {message}"
    );
    ensure!(
        !message.contains("wasm backtrace"),
        "no wasm backtrace: {message}"
    );
    Ok(())
}

/// The SDK's raising plugin of `language` first in the chain (issue 46): the pod fails
/// (`onError`'s default for `crashed`), and its status message tells the `TypeError` at the
/// line of the plugin's source.
async fn type_error_reaches_the_pod_status(language: Language) -> Result<()> {
    let wasm = raises_type_error_wasm(language)?;
    let plugin = language.raises_type_error_name();
    let line = raising_line(language)?;
    let client = TestCluster::shared().kube_client().await?;
    let node = unique_node_name(plugin);
    let orca = start_with_plugin(&node, plugin, &wasm)?;
    orca.wait_ready(Duration::from_secs(30)).await?;
    orca.wait_serving(LOADED).await?;
    let namespace = TestNamespace::create(&client, plugin).await?;
    let api: Api<Pod> = Api::namespaced(client.clone(), &namespace.name);

    pods::create(&api, &team_pod("raises", &node, "vision", 0)).await?;
    let failed = pods::wait_for(&api, "raises", "Failed", DECIDED, |p| phase(p) == "Failed")
        .await
        .map_err(|error| anyhow::anyhow!("{error:#}\norca log:\n{}", orca.log()))?;
    ensure!(pods::reason(&failed) == "PolicyError", "{failed:?}");
    let message = pods::message(&failed);
    ensure!(message.contains(plugin), "{message}");
    ensure_tells_the_type_error(message, &line)?;
    namespace.delete().await
}

#[tokio::test]
async fn python_type_error_reaches_the_pod_status_at_its_line() -> Result<()> {
    type_error_reaches_the_pod_status(Language::Python).await
}

#[tokio::test]
async fn typescript_type_error_reaches_the_pod_status_at_its_ts_line() -> Result<()> {
    type_error_reaches_the_pod_status(Language::TypeScript).await
}

/// `orca plugin eval --plugin WASM --pod POD --settings SETTINGS -o json` of a pod of `team`
/// asking for `gpus`: whether the pod was decided, and the JSON.
fn eval(wasm: &Path, team: &str, gpus: u32) -> Result<(bool, Value)> {
    let dir = tempfile::tempdir()?;
    let pod: PathBuf = dir.path().join("pod.yaml");
    std::fs::write(
        &pod,
        format!(
            "metadata: {{name: p, namespace: default, labels: {{team: {team}}}}}\n\
             spec:\n  containers:\n  - name: main\n    image: busybox\n    \
             resources: {{limits: {{nvidia.com/gpu: '{gpus}'}}}}\n"
        ),
    )?;
    let output = Command::new(orca_e2e::orca::orca_binary())
        .args(["plugin", "eval", "-o", "json", "--plugin"])
        .arg(wasm)
        .arg("--pod")
        .arg(&pod)
        .args(["--settings", SETTINGS])
        .output()?;
    let evaluation: Value = serde_json::from_slice(&output.stdout).with_context(|| {
        format!(
            "orca plugin eval ({}): stdout {}, stderr {}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })?;
    Ok((output.status.success(), evaluation))
}

/// The team selector of `language`, built from source, through the real `orca plugin eval`.
fn team_selector_through_plugin_eval(language: Language) -> Result<()> {
    let wasm = team_selector_wasm(language)?;
    let plugin = language.team_selector_name();

    // Team vision: the plugin answers with the team's types; the first is the decision.
    let (decided, evaluation) = eval(&wasm, "vision", 1)?;
    ensure!(decided && evaluation["decided"] == true, "{evaluation}");
    let asked = &evaluation["asked"][0];
    ensure!(
        asked["plugin"] == plugin
            && asked["hook"] == "select-instance"
            && asked["outcome"] == "answered"
            && asked["interface"] == "0.3.0",
        "{evaluation}"
    );
    let decision = &evaluation["decision"];
    ensure!(decision["instanceType"] == "g6.xlarge", "{evaluation}");
    ensure!(
        decision["candidates"] == serde_json::json!(VISION_TYPES),
        "{evaluation}"
    );
    ensure!(
        decision["selectInstance"]["plugin"] == plugin
            && decision["selectInstance"]["reason"] == "team vision's types",
        "{evaluation}"
    );

    // Another team: declined, the embedded default selector decides.
    let (decided, evaluation) = eval(&wasm, "finance", 1)?;
    ensure!(decided, "{evaluation}");
    ensure!(
        evaluation["asked"][0]["plugin"] == plugin
            && evaluation["asked"][0]["outcome"] == "passedOn",
        "{evaluation}"
    );
    ensure!(
        evaluation["decision"]["selectInstance"]["plugin"] == "orca-default-selector",
        "{evaluation}"
    );

    // Eight GPUs: no-match, the pod would fail (exit status 1), the message naming the types.
    let (decided, evaluation) = eval(&wasm, "vision", 8)?;
    ensure!(
        !decided && evaluation["decided"] == false,
        "the pod must fail: {evaluation}"
    );
    ensure!(
        evaluation["asked"][0]["outcome"] == "failedThePod"
            && evaluation["asked"][0]["failure"]["kind"] == "noMatch",
        "{evaluation}"
    );
    let message = evaluation["error"]["message"].as_str().context("message")?;
    ensure!(message.contains("g6.xlarge, g5.xlarge"), "{message}");
    Ok(())
}

#[test]
fn python_team_selector_through_plugin_eval() -> Result<()> {
    team_selector_through_plugin_eval(Language::Python)
}

#[test]
fn typescript_team_selector_through_plugin_eval() -> Result<()> {
    team_selector_through_plugin_eval(Language::TypeScript)
}

/// The SDK's raising plugin of `language` through the real `orca plugin eval` (issue 46): the
/// step is `crashed`, the pod would fail, and the message tells the `TypeError` at the line of
/// the plugin's source.
fn type_error_through_plugin_eval(language: Language) -> Result<()> {
    let wasm = raises_type_error_wasm(language)?;
    let line = raising_line(language)?;
    let (decided, evaluation) = eval(&wasm, "vision", 0)?;
    ensure!(
        !decided && evaluation["decided"] == false,
        "the pod must fail: {evaluation}"
    );
    let asked = &evaluation["asked"][0];
    ensure!(
        asked["plugin"] == language.raises_type_error_name()
            && asked["outcome"] == "failedThePod"
            && asked["failure"]["kind"] == "crashed",
        "{evaluation}"
    );
    for message in [
        &asked["failure"]["message"],
        &evaluation["error"]["message"],
    ] {
        ensure_tells_the_type_error(message.as_str().context("message")?, &line)?;
    }
    Ok(())
}

#[test]
fn python_type_error_through_plugin_eval_at_its_line() -> Result<()> {
    type_error_through_plugin_eval(Language::Python)
}

#[test]
fn typescript_type_error_through_plugin_eval_at_its_ts_line() -> Result<()> {
    type_error_through_plugin_eval(Language::TypeScript)
}

/// The tag both every-helper plugins answer (`TAG` in their sources).
const EVERY_HELPER_TAG: (&str, &str) = ("orca-sdk/every-helper", "Zürich ß Ж 中 ٣ Ⅻ ½ 𝐀 𝟘");

/// The SDK's every-helper plugin of `language`, built from source with the SDK's `build`, asked
/// through the real `orca plugin eval`: every check of every helper passes inside the component
/// (issue 46: the TypeScript SDK's `validateTag` and `Quantity` passed in Node but broke the
/// component's build), its candidates come from orca's catalogue, and orca, which checks every
/// plugin's tags with the Rust SDK's rules, accepts the tag the plugin's own `validateTag`
/// accepted.
fn every_helper_runs_in_orca(language: Language) -> Result<()> {
    let wasm = every_helper_wasm(language)?;
    let plugin = language.every_helper_name();
    let (decided, evaluation) = eval(&wasm, "vision", 0)?;
    ensure!(decided && evaluation["decided"] == true, "{evaluation}");
    let asked = evaluation["asked"].as_array().context("asked")?;
    for hook in ["select-instance", "build-tags"] {
        ensure!(
            asked.iter().any(|step| step["hook"] == hook
                && step["plugin"] == plugin
                && step["outcome"] == "answered"),
            "{plugin} answered {hook}: {evaluation}"
        );
    }
    let candidates = evaluation["candidates"].as_array().context("candidates")?;
    ensure!(!candidates.is_empty(), "{evaluation}");
    for candidate in candidates {
        let reason = candidate["reason"].as_str().unwrap_or_default();
        ensure!(
            reason.starts_with("every helper checked")
                && reason.ends_with("helpers passed")
                && (language != Language::Python || reason.contains("in the component")),
            "every check passed in the component: {evaluation}"
        );
    }
    let (key, value) = EVERY_HELPER_TAG;
    ensure!(
        evaluation["decision"]["tags"][key] == value,
        "orca kept the plugin's tag {key}={value}: {evaluation}"
    );
    Ok(())
}

#[test]
fn python_plugin_calling_every_sdk_helper_runs_in_orca() -> Result<()> {
    every_helper_runs_in_orca(Language::Python)
}

#[test]
fn typescript_plugin_calling_every_sdk_helper_runs_in_orca() -> Result<()> {
    every_helper_runs_in_orca(Language::TypeScript)
}

/// `orca plugin test [--plugin WASM] CASES…`: its exit status and what it printed.
fn plugin_test(wasm: Option<&Path>, cases: &[PathBuf]) -> Result<(Option<i32>, String)> {
    let mut command = Command::new(orca_e2e::orca::orca_binary());
    command.args(["plugin", "test"]);
    if let Some(wasm) = wasm {
        command.arg("--plugin").arg(wasm);
    }
    let output = command.args(cases).output()?;
    Ok((
        output.status.code(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ),
    ))
}

/// The cases the example plugins of every language ship pass through the real
/// `orca plugin test` (issue 46, part 3: what `tests/run` runs for them): the default Rust
/// plugins' (embedded in orca, built from `plugins/`), and the Python and TypeScript team
/// selectors' on the components built from source above. Each folder holds at least one case
/// of a pod that must fail, so a plugin that stopped refusing would be caught.
#[test]
fn example_plugins_of_every_language_pass_their_cases() -> Result<()> {
    let root = orca_e2e::cluster::repo_root();
    let rust: Vec<PathBuf> = ["selector", "market", "tagger"]
        .iter()
        .map(|plugin| root.join("plugins").join(plugin).join("cases"))
        .collect();
    let mut runs = vec![(None, rust)];
    for (language, folder) in [
        (
            Language::Python,
            "plugin-sdk/python/examples/team_selector/cases",
        ),
        (
            Language::TypeScript,
            "plugin-sdk/js/examples/team-selector/cases",
        ),
    ] {
        runs.push((Some(team_selector_wasm(language)?), vec![root.join(folder)]));
    }
    for (wasm, folders) in runs {
        let (status, output) = plugin_test(wasm.as_deref(), &folders)?;
        ensure!(
            status == Some(0),
            "{folders:?}: exit status {status:?}:\n{output}"
        );
        let mut cases = 0;
        for folder in &folders {
            for entry in std::fs::read_dir(folder)? {
                cases += usize::from(entry?.path().is_file());
            }
        }
        ensure!(
            output.contains(&format!("{cases} cases: {cases} passed, 0 failed")),
            "{folders:?}:\n{output}"
        );
        for folder in &folders {
            let refusals = std::fs::read_dir(folder)?
                .filter_map(|entry| std::fs::read_to_string(entry.ok()?.path()).ok())
                .filter(|text| text.contains("failure:"))
                .count();
            ensure!(
                refusals > 0,
                "{}: no case of a pod that must fail",
                folder.display()
            );
        }
    }
    Ok(())
}
