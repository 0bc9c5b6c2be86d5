//! The config schema and the configuration reference are generated from the config types, and
//! committed: `deploy/config.schema.json` for editors, `docs/src/reference/configuration.md`
//! for readers. These tests keep both current and complete, and check every shipped config
//! against the schema, so code, schema, reference and configs cannot drift apart.
//!
//! Regenerate both files: `ORCA_BLESS=1 cargo test -p orca --test config_schema`.

use std::path::{Path, PathBuf};

use orca::config::Config;
use orca::config::reference::{REFERENCE_PATH, markdown};
use orca::config::schema::{SCHEMA_PATH, json_schema, schema_text};
use serde_json::Value;

fn repo(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(relative)
}

fn read(relative: &str) -> String {
    std::fs::read_to_string(repo(relative)).unwrap_or_else(|error| panic!("{relative}: {error}"))
}

fn validator() -> jsonschema::Validator {
    jsonschema::validator_for(&json_schema()).expect("the generated schema is a valid schema")
}

/// Every violation of `value` against the schema, one per line with its path.
fn violations(validator: &jsonschema::Validator, value: &Value) -> Vec<String> {
    validator
        .iter_errors(value)
        .map(|error| format!("{}: {error}", error.instance_path()))
        .collect()
}

#[test]
fn the_committed_schema_and_reference_are_generated_from_the_config_types() {
    let schema = schema_text();
    let reference = markdown(&json_schema());
    let bless = std::env::var_os("ORCA_BLESS").is_some_and(|v| v == "1");
    let mut stale = Vec::new();
    for (path, generated) in [(SCHEMA_PATH, &schema), (REFERENCE_PATH, &reference)] {
        let committed = std::fs::read_to_string(repo(path)).unwrap_or_default();
        if committed == *generated {
            continue;
        }
        if bless {
            let file = repo(path);
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(&file, generated).unwrap();
        } else {
            stale.push(path);
        }
    }
    assert!(
        stale.is_empty(),
        "{stale:?} differ from what the config types generate; regenerate with \
         `ORCA_BLESS=1 cargo test -p orca --test config_schema` and commit them"
    );
}

/// Where a schema node lacks a description: every property, every named type and every
/// allowed value of an enumeration must say what it is.
fn undocumented(path: &str, schema: &Value, missing: &mut Vec<String>) {
    let Some(object) = schema.as_object() else {
        return;
    };
    if let Some(properties) = object.get("properties").and_then(Value::as_object) {
        for (name, property) in properties {
            let at = format!("{path}.{name}");
            if property.get("description").is_none() {
                missing.push(format!("property {at}"));
            }
            undocumented(&at, property, missing);
        }
    }
    if let Some(branches) = object.get("oneOf").and_then(Value::as_array) {
        for (index, branch) in branches.iter().enumerate() {
            if branch.get("description").is_none() {
                let value = branch
                    .get("const")
                    .map_or_else(|| "…".to_owned(), Value::to_string);
                missing.push(format!("value {value} of {path} (oneOf[{index}])"));
            }
            undocumented(&format!("{path}.oneOf[{index}]"), branch, missing);
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(inner) = object.get(key) {
            undocumented(&format!("{path}.{key}"), inner, missing);
        }
    }
    for key in ["anyOf", "allOf"] {
        for (index, branch) in object
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            undocumented(&format!("{path}.{key}[{index}]"), branch, missing);
        }
    }
}

#[test]
fn every_field_type_and_value_of_the_config_is_documented() {
    let schema = json_schema();
    let mut missing = Vec::new();
    undocumented("", &schema, &mut missing);
    for (name, def) in schema["$defs"].as_object().unwrap() {
        if def.get("description").is_none() {
            missing.push(format!("type {name}"));
        }
        undocumented(&format!("$defs.{name}"), def, &mut missing);
    }
    assert!(
        missing.is_empty(),
        "every config field, type and enumeration value needs a doc comment (it becomes the \
         schema's description and the reference's text); undocumented:\n  {}",
        missing.join("\n  ")
    );
}

/// Every `config.yaml`, `config-*.yaml` and `config.*.yaml` under `dir` (recursively, a Helm
/// chart's templates aside), and the `config.yaml` of every ConfigMap in the YAML files there.
fn configs_under(dir: &Path, found: &mut Vec<(PathBuf, String)>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            // A Helm chart's templates are Go templates, not YAML; what they render is the
            // chart test's to check (tests/e2e/chart.rs).
            let chart_templates = path.ends_with("templates") && dir.join("Chart.yaml").is_file();
            if !chart_templates {
                configs_under(&path, found);
            }
            continue;
        }
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let Some(stem) = name
            .strip_suffix(".yaml")
            .or_else(|| name.strip_suffix(".yml"))
        else {
            continue;
        };
        let text = std::fs::read_to_string(&path).unwrap();
        if stem == "config" || stem.starts_with("config.") || stem.starts_with("config-") {
            found.push((path, text));
            continue;
        }
        // Other YAML (manifests, kustomizations) may hold a config in a ConfigMap; files that
        // are not plain YAML (templates) hold none we can read.
        let Ok(documents) = serde_saphyr::from_multiple::<Value>(&text) else {
            continue;
        };
        for document in documents {
            if document["kind"] == "ConfigMap"
                && let Some(config) = document["data"]["config.yaml"].as_str()
            {
                found.push((path.clone(), config.to_owned()));
            }
        }
    }
}

fn shipped_configs() -> Vec<(PathBuf, String)> {
    let mut found = vec![(repo("config.yaml"), read("config.yaml"))];
    configs_under(&repo("deploy"), &mut found);
    if repo("tests/fixtures").is_dir() {
        configs_under(&repo("tests/fixtures"), &mut found);
    }
    found
}

#[test]
fn the_schema_accepts_config_yaml_and_every_config_under_deploy_and_the_fixtures() {
    let validator = validator();
    let configs = shipped_configs();
    assert!(configs.len() >= 3, "{configs:?}");
    let mut failures = Vec::new();
    for (path, text) in &configs {
        let value: Value = serde_saphyr::from_str(text).unwrap();
        for violation in violations(&validator, &value) {
            failures.push(format!("{}: {violation}", path.display()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_shipped_config_file_names_the_schema_for_editors() {
    let schema = repo(SCHEMA_PATH).canonicalize().unwrap();
    for (path, text) in shipped_configs() {
        if !path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("config")
        {
            continue;
        }
        let first = text.lines().next().unwrap_or_default();
        let named = first
            .strip_prefix("# yaml-language-server: $schema=")
            .unwrap_or_else(|| panic!("{}: the first line is {first:?}", path.display()));
        let target = path.parent().unwrap().join(named);
        assert_eq!(
            target.canonicalize().ok().as_ref(),
            Some(&schema),
            "{}: $schema={named} is not {SCHEMA_PATH}",
            path.display()
        );
    }
}

#[test]
fn every_shipped_config_loads() {
    // The in-cluster configs name the plugins volume's mount point; here, any directory.
    let plugins = tempfile::tempdir().unwrap();
    for (path, text) in shipped_configs() {
        let text = text.replace("/etc/orca/plugins", &plugins.path().to_string_lossy());
        if let Err(error) = Config::parse(&text) {
            panic!("{}: {error}", path.display());
        }
    }
}

#[test]
fn the_schema_accepts_what_serde_accepts_and_refuses_what_it_refuses() {
    let validator = validator();
    for (yaml, accepted) in [
        ("{}", true),
        ("node: {cpu: 64, memory: 4Ti, gpu: \"8\"}", true),
        ("node: {internalIP: 10.0.0.1, daemonPort: 10250}", true),
        ("node: {cpus: 4}", false),
        ("node: {daemonPort: 70000}", false),
        ("node: {daemonPort: -1}", false),
        ("node: {taints: [{key: a, effect: NoSchedule}]}", true),
        ("node: {taints: [{key: a, effect: Sometimes}]}", false),
        ("node: {taints: [{value: b, effect: NoSchedule}]}", false),
        ("node: {leaseDuration: 40s, pingInterval: 1m 30s}", true),
        ("node: {leaseDuration: 40}", false),
        ("node: {memory: null}", false),
        ("nodes: [{name: a, zone: us-west-2a, cpu: 8}]", true),
        ("nodes: [{zone: us-west-2a}]", false),
        ("nodes: [{name: a, cpu: null}]", false),
        ("nodez: {}", false),
        (
            "provider: {kind: aws, aws: {defaultAmi: ami-0123456789abcdef0}}",
            true,
        ),
        ("provider: {kind: ec2}", false),
        ("provider: {aws: {instanceStorePolicy: RAID0}}", true),
        ("provider: {aws: {instanceStorePolicy: raid0}}", false),
        ("provider: {aws: {launchApi: runInstances}}", true),
        ("provider: {aws: {launchApi: run-instances}}", false),
        ("provider: {aws: {interruptionQueue: {url: u}}}", true),
        ("provider: {aws: {interruptionQueue: {uri: u}}}", false),
        ("provider: {aws: {interruptionQueue: null}}", true),
        (
            "provider: {aws: {logs: {group: g, bufferSize: 1048576}}}",
            true,
        ),
        ("provider: {aws: {logs: {retentionDays: 3}}}", false),
        (
            "provider: {aws: {fleet: {spotAllocationStrategy: lowest-price}}}",
            true,
        ),
        (
            "provider: {aws: {fleet: {spotAllocationStrategy: cheapest}}}",
            false,
        ),
        ("provider: {simulated: {runTime: null, exitCode: 3}}", true),
        (
            "policy: {limits: {maxMemory: 64Mi, instances: reused}}",
            true,
        ),
        ("policy: {limits: {maxMemory: 64}}", false),
        ("policy: {limits: {instances: sometimes}}", false),
        (
            "policy: {pluginLimits: {py: {maxMemory: 128Mi, timeout: 200ms}}}",
            true,
        ),
        ("policy: {pluginLimits: {py: {memory: 1Gi}}}", false),
        (
            "policy: {selectInstance: [{plugin: p, settings: {any: [thing]}}]}",
            true,
        ),
        (
            "policy: {selectInstance: [{plugin: p, onError: fallback}]}",
            true,
        ),
        (
            "policy: {selectInstance: [{plugin: p, onError: {timedOut: fallback}}]}",
            true,
        ),
        (
            "policy: {selectInstance: [{plugin: p, onError: retry}]}",
            false,
        ),
        ("policy: {selectInstance: [{settings: {}}]}", false),
        (
            "policy: {guardrails: {markets: [on-demand], maxPodPricePerHour: 2.5}}",
            true,
        ),
        ("policy: {guardrails: {markets: [reserved]}}", false),
        (
            "policy: {guardrails: {maxPricePerHourByNamespace: {team-a: 10}}}",
            true,
        ),
        (
            "policy: {registry: {verify: [{keyless: [{issuer: i, subject: s}]}]}}",
            true,
        ),
        (
            "policy: {registry: {verify: [{keyless: [{issuer: i}]}]}}",
            false,
        ),
        (
            "kubeletApi: {tls: {sources: [files, csr, selfSigned]}}",
            true,
        ),
        ("kubeletApi: {tls: {sources: [acme]}}", false),
        ("kubeletApi: {bindAddress: null, maxConnections: 10}", true),
        ("metrics: {port: 10255, bindAddress: 0.0.0.0}", true),
        ("logging: {level: debug, format: json}", true),
        ("logging: {format: yaml}", false),
        ("replicas: {shareNodes: \"true\"}", false),
    ] {
        let value: Value = serde_saphyr::from_str(yaml).unwrap();
        let serde = serde_json::from_value::<Config>(value.clone()).map(|_| ());
        let schema = violations(&validator, &value);
        assert_eq!(serde.is_ok(), accepted, "serde on {yaml}: {serde:?}");
        assert_eq!(
            schema.is_empty(),
            accepted,
            "the schema on {yaml}: {schema:?}"
        );
    }
}

#[test]
fn config_yaml_shows_every_default_it_sets() {
    let shipped = Config::load(&repo("config.yaml")).unwrap();
    assert_eq!(
        serde_json::to_value(&shipped).unwrap(),
        serde_json::to_value(Config::default()).unwrap(),
        "config.yaml says it shows the defaults; a value it sets differs from the code's"
    );
}

#[test]
fn the_defaults_the_schema_publishes_are_a_valid_config() {
    let defaults = serde_json::to_value(Config::default()).unwrap();
    assert!(violations(&validator(), &defaults).is_empty());
    let text = serde_json::to_string(&defaults).unwrap();
    Config::parse(&text).unwrap();
}

/// Dotted paths of every field set in `value`; list entries as `[]`. Maps whose keys are data
/// (labels, annotations, plugin settings, per-namespace caps) end the path.
fn field_paths(prefix: &str, value: &Value, paths: &mut Vec<String>) {
    let free_form = [
        "labels",
        "annotations",
        "settings",
        "maxPricePerHourByNamespace",
    ];
    let is_free_form = free_form.iter().any(|name| prefix.ends_with(name));
    // A list's entries (`node.taints[]`) are documented by their fields.
    if !prefix.is_empty() && !prefix.ends_with("[]") {
        paths.push(prefix.to_owned());
    }
    if is_free_form {
        return;
    }
    match value {
        Value::Object(fields) => {
            for (name, field) in fields {
                let path = match prefix {
                    "" => name.clone(),
                    _ => format!("{prefix}.{name}"),
                };
                field_paths(&path, field, paths);
            }
        }
        Value::Array(entries) => {
            for entry in entries.iter().filter(|e| e.is_object()) {
                field_paths(&format!("{prefix}[]"), entry, paths);
            }
        }
        _ => {}
    }
}

#[test]
fn the_generated_reference_documents_every_field_config_yaml_sets() {
    let text = read("config.yaml");
    let config: Value = serde_saphyr::from_str(&text).unwrap();
    let reference = read(REFERENCE_PATH);
    let mut paths = Vec::new();
    field_paths("", &config, &mut paths);
    assert!(paths.len() > 50, "{paths:?}");
    let missing: Vec<&String> = paths
        .iter()
        .filter(|path| {
            let heading = if path.contains('.') { "###" } else { "##" };
            !reference.contains(&format!("\n{heading} `{path}`\n"))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "{REFERENCE_PATH} has no heading for {missing:?}"
    );
}
