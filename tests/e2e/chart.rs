//! The Helm chart (`deploy/charts/orca`) with the real helm CLI (built from the Go module proxy
//! by tests/cluster/build-helm): it lints; its values schema and its own checks refuse what
//! orca could not run; with default values it renders the kustomize base object for object
//! (the differences README.md in the chart lists, and no others); it installs into the harness
//! cluster, upgrades with a rollout, and uninstalls leaving nothing behind; and every metric
//! its dashboard and alert rules read is one orca exports. `tests/e2e/deploy.rs` runs orca
//! under the chart's RBAC.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use orca_e2e::cluster::{kubectl_ok, kubectl_ok_with_input, repo_root};
use orca_e2e::deploy::find_object;
use orca_e2e::helm::{Release, chart_dir, helm_err, helm_ok, kube_version, template};
use orca_e2e::wait::poll_until;
use orca_e2e::{TestCluster, TestNamespace};
use serde_json::{Value, json};

mod metrics;

/// Labels helm's conventions add to every pod (and `instance` to every selector), which the
/// kustomize base does not carry: README.md of the chart, "Differences from deploy/base".
const HELM_LABELS: [&str; 4] = [
    "helm.sh/chart",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
    "app.kubernetes.io/managed-by",
];
/// On objects, helm's standard labels are these and `app.kubernetes.io/name`, which the base
/// puts only on its Deployment, PodDisruptionBudget and Service.
const NAME_LABEL: &str = "app.kubernetes.io/name";

/// `objects` as `kubectl create --dry-run=client -o json` prints them, so YAML written two ways
/// (flow or block lists, quoted or bare numbers) compares as the API would read it.
fn as_api_json(objects: &[Value]) -> Result<Vec<Value>> {
    let list = json!({"apiVersion": "v1", "kind": "List", "items": objects});
    let json = kubectl_ok_with_input(
        &["create", "--dry-run=client", "-o", "json", "-f", "-"],
        serde_json::to_string(&list)?.as_bytes(),
    )?;
    let mut objects = Vec::new();
    for value in serde_json::Deserializer::from_str(&json).into_iter::<Value>() {
        let value = value?;
        match value["items"].as_array() {
            Some(items) if value["kind"] == "List" => objects.extend(items.iter().cloned()),
            _ => objects.push(value),
        }
    }
    Ok(objects)
}

fn key(object: &Value) -> String {
    format!(
        "{} {}/{}",
        object["kind"].as_str().unwrap_or_default(),
        object["metadata"]["namespace"].as_str().unwrap_or_default(),
        object["metadata"]["name"].as_str().unwrap_or_default()
    )
}

/// Removes helm's labels (and `also`) from a label map, and the map itself when nothing is
/// left.
fn strip_labels_and(parent: &mut Value, field: &str, also: &[&str]) {
    if let Some(map) = parent.get_mut(field).and_then(Value::as_object_mut) {
        for label in HELM_LABELS.iter().chain(also) {
            map.remove(*label);
        }
        if map.is_empty() {
            parent.as_object_mut().map(|p| p.remove(field));
        }
    }
}

fn strip_labels(parent: &mut Value, field: &str) {
    strip_labels_and(parent, field, &[]);
}

/// The chart's objects with helm's labels and the config checksum taken out, the config read
/// as YAML: the documented differences, undone.
fn chart_normalised(mut object: Value) -> Result<Value> {
    strip_labels_and(&mut object["metadata"], "labels", &[NAME_LABEL]);
    if object["kind"] == "Deployment" {
        let spec = &mut object["spec"];
        strip_labels(&mut spec["selector"], "matchLabels");
        let template = &mut spec["template"];
        strip_labels(&mut template["metadata"], "labels");
        let annotations = template["metadata"]["annotations"]
            .as_object_mut()
            .context("the pod template's annotations")?;
        ensure!(
            annotations
                .remove("checksum/config")
                .is_some_and(|sum| sum.as_str().is_some_and(|s| s.len() == 64)),
            "the pod template carries the config's sha256: {annotations:?}"
        );
        if annotations.is_empty() {
            template["metadata"]
                .as_object_mut()
                .map(|m| m.remove("annotations"));
        }
        let pod = &mut template["spec"];
        for term in
            pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                .as_array_mut()
                .into_iter()
                .flatten()
        {
            strip_labels(&mut term["labelSelector"], "matchLabels");
        }
        for constraint in pod["topologySpreadConstraints"]
            .as_array_mut()
            .into_iter()
            .flatten()
        {
            strip_labels(&mut constraint["labelSelector"], "matchLabels");
        }
        let container = &mut pod["containers"][0];
        // Kubernetes' default for an image with a tag other than latest, written out.
        ensure!(
            container["imagePullPolicy"] == "IfNotPresent",
            "{container}"
        );
        container
            .as_object_mut()
            .map(|c| c.remove("imagePullPolicy"));
    }
    match object["kind"].as_str() {
        Some("Service") => strip_labels(&mut object["spec"], "selector"),
        Some("PodDisruptionBudget") => {
            strip_labels(&mut object["spec"]["selector"], "matchLabels");
        }
        _ => {}
    }
    config_as_yaml(&mut object)?;
    Ok(object)
}

/// A ConfigMap's config.yaml parsed, so comments and key order do not count.
fn config_as_yaml(object: &mut Value) -> Result<()> {
    if let Some(text) = object["data"]["config.yaml"].as_str() {
        let parsed: Value = serde_saphyr::from_str(text)?;
        object["data"]["config.yaml"] = parsed;
    }
    Ok(())
}

/// The base's objects with the config ConfigMap's content hash taken out of its name (the
/// chart names it `orca-config` and rolls the Deployment with a checksum instead).
fn base_normalised(mut object: Value) -> Result<Value> {
    strip_labels_and(&mut object["metadata"], "labels", &[NAME_LABEL]);
    let unhashed = |name: &str| {
        name.strip_prefix("orca-config-")
            .map_or(name.to_owned(), |_| "orca-config".to_owned())
    };
    if object["kind"] == "ConfigMap" {
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        object["metadata"]["name"] = json!(unhashed(name));
    }
    if object["kind"] == "Deployment" {
        for volume in object["spec"]["template"]["spec"]["volumes"]
            .as_array_mut()
            .into_iter()
            .flatten()
        {
            if let Some(name) = volume["configMap"]["name"].as_str() {
                volume["configMap"]["name"] = json!(unhashed(name));
            }
        }
    }
    config_as_yaml(&mut object)?;
    Ok(object)
}

#[test]
fn the_chart_lints_and_refuses_values_orca_could_not_run() -> Result<()> {
    let chart = chart_dir();
    let chart = chart.to_str().context("a UTF-8 chart path")?;
    let kube = kube_version()?;
    let lint = |extra: &[&str]| {
        let mut args = vec!["lint", "--strict", chart, "--kube-version", kube.as_str()];
        args.extend_from_slice(extra);
        helm_ok(&args, false)
    };
    lint(&[])?;
    // Every optional part on, and the settings an install changes.
    lint(&[
        "--set",
        "dashboard.enabled=true,prometheusRule.enabled=true,serviceMonitor.enabled=true",
        "--set",
        "settings.interruptionQueue=https://sqs.us-west-2.amazonaws.com/111122223333/q",
        "--set",
        "plugins.oci[0]=oci://registry.example/team-selector:v1",
        "--set",
        "plugins.registryCredentialsSecret=registry,image.digest=sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    ])?;

    let refused = |set: &str| helm_err(&["template", "orca", chart, "--set", set]);
    let shared = refused("settings.shareNodes=false")?;
    ensure!(
        shared.contains("replicas is 2 but settings.shareNodes is false"),
        "{shared}"
    );
    refused("settings.shareNodes=false,replicas=1")
        .err()
        .context("one replica without sharing is fine")?;
    let host = refused("hostNetwork=true")?;
    ensure!(
        host.contains("hostNetwork is true but orca's kubelet API would listen on 10250"),
        "{host}"
    );
    refused("hostNetwork=true,config.node.daemonPort=10260")
        .err()
        .context("the host's network with a port of orca's own is fine")?;
    for (set, field) in [
        ("logFormat=xml", "logFormat"),
        ("plugins.oci[0]=https://registry.example/p:v1", "oci"),
        ("settings.interruptionQueue=sqs://q", "interruptionQueue"),
        ("image.digest=latest", "digest"),
        ("replica=3", "replica"),
    ] {
        let error = refused(set)?;
        ensure!(
            error.contains("values don't meet the specifications of the schema")
                && error.contains(field),
            "--set {set}: {error}"
        );
    }
    Ok(())
}

#[test]
fn with_default_values_the_chart_renders_the_kustomize_base() -> Result<()> {
    let deploy = repo_root().join("deploy");
    let base_yaml = kubectl_ok(&["kustomize", &deploy.to_string_lossy()])?;
    let base: Vec<Value> = serde_saphyr::from_multiple(&base_yaml)?;
    let mut expected: BTreeMap<String, Value> = BTreeMap::new();
    for object in as_api_json(&base)? {
        // The chart installs into the namespace helm is given (`--create-namespace`, or made
        // beforehand with its Pod Security label): README.md of the chart.
        if object["kind"] == "Namespace" {
            continue;
        }
        let object = base_normalised(object)?;
        expected.insert(key(&object), object);
    }
    let mut rendered: BTreeMap<String, Value> = BTreeMap::new();
    for object in as_api_json(&template("orca", "orca-system", &[])?)? {
        let object = chart_normalised(object)?;
        rendered.insert(key(&object), object);
    }
    let expected_keys: BTreeSet<&String> = expected.keys().collect();
    let rendered_keys: BTreeSet<&String> = rendered.keys().collect();
    ensure!(
        expected_keys == rendered_keys,
        "only in deploy/base: {:?}\nonly in the chart: {:?}",
        expected_keys.difference(&rendered_keys).collect::<Vec<_>>(),
        rendered_keys.difference(&expected_keys).collect::<Vec<_>>()
    );
    for (key, base) in &expected {
        let chart = &rendered[key];
        ensure!(
            base == chart,
            "{key} differs\ndeploy/base:\n{}\nthe chart:\n{}",
            serde_json::to_string_pretty(base)?,
            serde_json::to_string_pretty(chart)?
        );
    }
    Ok(())
}

#[test]
fn settings_and_plugins_land_in_orcas_config() -> Result<()> {
    let objects = template(
        "team",
        "platform",
        &[
            "--set",
            "settings.clusterName=prod,settings.nodeName=orca-a",
            "--set",
            "settings.interruptionQueue=https://sqs.us-west-2.amazonaws.com/111122223333/q",
            "--set",
            "plugins.oci[0]=oci://registry.example/team-selector:v1",
            "--set",
            "plugins.registryCredentialsSecret=registry",
            "--set-string",
            "plugins.binaryData.team-selector\\.wasm=AGFzbQ==",
            "--set",
            "config.policy.guardrails.maxPodPricePerHour=5",
        ],
    )?;
    let find = |kind: &str, name: &str| find_object(&objects, kind, name);
    let config_map = find("ConfigMap", "team-orca-config")?;
    let config: Value = serde_saphyr::from_str(
        config_map["data"]["config.yaml"]
            .as_str()
            .context("config.yaml")?,
    )?;
    assert_eq!(config["node"]["name"], "orca-a");
    assert_eq!(config["node"]["clusterName"], "prod");
    assert_eq!(config["replicas"]["shareNodes"], true);
    assert_eq!(config["policy"]["pluginsDir"], "/etc/orca/plugins");
    assert_eq!(
        config["policy"]["plugins"],
        json!(["oci://registry.example/team-selector:v1"])
    );
    assert_eq!(
        config["policy"]["registry"]["dockerConfig"],
        "/etc/orca/registry/.dockerconfigjson"
    );
    assert_eq!(config["policy"]["guardrails"]["maxPodPricePerHour"], 5);
    assert_eq!(
        config["provider"]["aws"]["interruptionQueue"]["url"],
        "https://sqs.us-west-2.amazonaws.com/111122223333/q"
    );
    // What the values did not touch stays as the defaults set it.
    assert_eq!(
        config["provider"]["aws"]["instanceProfile"],
        "orca-workload"
    );
    let plugins = find("ConfigMap", "team-orca-plugins")?;
    assert_eq!(plugins["binaryData"]["team-selector.wasm"], "AGFzbQ==");
    let deployment = find("Deployment", "team-orca")?;
    let pod = &deployment["spec"]["template"]["spec"];
    let mounts = pod["containers"][0]["volumeMounts"]
        .as_array()
        .context("mounts")?;
    assert!(
        mounts
            .iter()
            .any(|m| m["name"] == "registry-credentials" && m["mountPath"] == "/etc/orca/registry"),
        "{mounts:?}"
    );
    let volumes = pod["volumes"].as_array().context("volumes")?;
    assert!(
        volumes
            .iter()
            .any(|v| v["secret"]["secretName"] == "registry"),
        "{volumes:?}"
    );
    assert_eq!(
        pod["hostNetwork"],
        Value::Null,
        "the pod network by default"
    );
    // On the host's network (an overlay CNI): the host's DNS policy for the cluster's names,
    // and orca's kubelet API on its own port, which the Node advertises.
    let objects = template(
        "team",
        "platform",
        &[
            "--set",
            "hostNetwork=true,config.node.daemonPort=10260,config.metrics.port=10265",
        ],
    )?;
    let deployment = find_object(&objects, "Deployment", "team-orca")?;
    let host = &deployment["spec"]["template"]["spec"];
    assert_eq!(host["hostNetwork"], true);
    assert_eq!(host["dnsPolicy"], "ClusterFirstWithHostNet");
    assert_eq!(
        host["containers"][0]["ports"],
        json!([
            {"name": "kubelet-api", "containerPort": 10260},
            {"name": "metrics", "containerPort": 10265},
        ])
    );
    let config_map = find_object(&objects, "ConfigMap", "team-orca-config")?;
    let config: Value = serde_saphyr::from_str(
        config_map["data"]["config.yaml"]
            .as_str()
            .context("config.yaml")?,
    )?;
    assert_eq!(config["node"]["daemonPort"], 10260);
    // The roles bind the release's own ServiceAccount, in its namespace.
    let binding = find("RoleBinding", "team-orca-node-lease")?;
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": "team-orca", "namespace": "platform"}])
    );
    Ok(())
}

#[tokio::test]
async fn the_chart_installs_upgrades_and_uninstalls_in_the_cluster() -> Result<()> {
    let client = TestCluster::shared().kube_client().await?;
    let namespace = TestNamespace::create(&client, "e2e-chart").await?;
    // As the install guide does: the namespace enforces the restricted Pod Security level.
    kubectl_ok(&[
        "label",
        "namespace",
        &namespace.name,
        "pod-security.kubernetes.io/enforce=restricted",
    ])?;
    let name = namespace.name.clone();
    let release = Release::install(
        &name,
        &namespace.name,
        &["--set", "dashboard.enabled=true", "--wait=false"],
    )?;
    let manifest = release.manifest()?;
    ensure!(
        manifest.len() >= 12,
        "the release holds every object: {manifest:#?}"
    );
    // Each object is in the cluster, in the namespace the chart put it in.
    for object in &manifest {
        let kind = object["kind"].as_str().context("kind")?;
        let name = object["metadata"]["name"].as_str().context("name")?;
        let mut args = vec!["get", kind, name, "-o", "name"];
        if let Some(ns) = object["metadata"]["namespace"].as_str() {
            args.extend(["-n", ns]);
        }
        kubectl_ok(&args).with_context(|| format!("{kind} {name} after helm install"))?;
    }
    let fullname = format!("{name}-orca");
    let dashboard = kubectl_ok(&[
        "get",
        "configmap",
        &format!("{fullname}-dashboard"),
        "-n",
        &namespace.name,
        "-o",
        "json",
    ])?;
    let dashboard: Value = serde_json::from_str(&dashboard)?;
    assert_eq!(dashboard["metadata"]["labels"]["grafana_dashboard"], "1");
    let shipped: Value = serde_json::from_str(&std::fs::read_to_string(
        chart_dir().join("files/orca-dashboard.json"),
    )?)?;
    let installed: Value = serde_json::from_str(
        dashboard["data"]["orca-dashboard.json"]
            .as_str()
            .context("the dashboard's JSON")?,
    )?;
    assert_eq!(installed, shipped);

    // An upgrade that changes the config rolls the Deployment (a new pod template).
    let template_of = || -> Result<Value> {
        let deployment: Value = serde_json::from_str(&kubectl_ok(&[
            "get",
            "deployment",
            &fullname,
            "-n",
            &namespace.name,
            "-o",
            "json",
        ])?)?;
        Ok(deployment["spec"]["template"]["metadata"]["annotations"]["checksum/config"].clone())
    };
    let before = template_of()?;
    let chart = chart_dir();
    helm_ok(
        &[
            "upgrade",
            &name,
            chart.to_str().context("a UTF-8 chart path")?,
            "--namespace",
            &namespace.name,
            "--reuse-values",
            "--set",
            "settings.clusterName=upgraded",
        ],
        true,
    )?;
    let after = template_of()?;
    ensure!(
        before != after && after.is_string(),
        "checksum {before} -> {after}"
    );

    release.uninstall()?;
    // Nothing of the release is left, in its namespace or in the others it wrote to.
    for object in &manifest {
        let kind = object["kind"].as_str().context("kind")?;
        let object_name = object["metadata"]["name"].as_str().context("name")?;
        let mut args = vec!["get", kind, object_name, "--ignore-not-found", "-o", "name"];
        if let Some(ns) = object["metadata"]["namespace"].as_str() {
            args.extend(["-n", ns]);
        }
        poll_until(
            &format!("{kind} {object_name} gone"),
            Duration::from_secs(30),
            Duration::from_millis(250),
            || {
                let left = kubectl_ok(&args);
                async move { Ok(left?.trim().is_empty().then_some(())) }
            },
        )
        .await?;
    }
    namespace.delete().await
}

#[test]
fn the_prometheus_rule_and_the_dashboard_config_map_ship_the_files() -> Result<()> {
    let objects = template(
        "orca",
        "orca-system",
        &[
            "--set",
            "prometheusRule.enabled=true,dashboard.enabled=true,dashboard.folder=AWS",
        ],
    )?;
    let rule = find_object(&objects, "PrometheusRule", "")?;
    let rules: Value = serde_saphyr::from_str(&std::fs::read_to_string(
        chart_dir().join("files/orca-alerts.rules.yaml"),
    )?)?;
    assert_eq!(rule["spec"], rules);
    let dashboard = find_object(&objects, "ConfigMap", "orca-dashboard")?;
    assert_eq!(
        dashboard["metadata"]["annotations"]["grafana_folder"],
        "AWS"
    );
    // Off by default: the chart installs without the Prometheus operator's CRDs.
    let defaults = template("orca", "orca-system", &[])?;
    ensure!(
        !defaults.iter().any(|o| {
            o["kind"] == "PrometheusRule"
                || o["kind"] == "ServiceMonitor"
                || o["metadata"]["name"] == "orca-dashboard"
        }),
        "optional objects rendered by default"
    );
    Ok(())
}
