//! `deploy/` against the real control plane: the kustomize base and the examples pass a
//! server-side dry run; orca running with the `orca` ServiceAccount's own token (bound only by
//! `deploy/`'s RBAC: the kustomize base's, then a release of the Helm chart's) takes a pod
//! through its whole life on moto, every request allowed and every permission used; and the
//! custom plugin example, packaged as a ConfigMap by its overlay, goes live in a running orca
//! without a restart.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use aws_sdk_ec2::types::InstanceStateName;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use orca_e2e::audit;
use orca_e2e::cluster::{kubectl_ok, kubectl_ok_with_input, repo_root};
use orca_e2e::deploy::{
    ServiceAccount, apply_base, find_object, service_account_can, service_account_kubeconfig,
    to_yaml, yaml_file,
};
use orca_e2e::ec2::{self, finish_workload, state_of, tags_of};
use orca_e2e::helm::Release;
use orca_e2e::http::curl_status;
use orca_e2e::plugins::{publish_like_kubelet, team_selector_wasm};
use orca_e2e::pods::{self, burst_pod, instance_id, wait_decided};
use orca_e2e::volumes::{Claimed, pod_with_claim};
use orca_e2e::wait::poll_until;
use orca_e2e::{OrcaProcess, TestCluster, TestNamespace, test_config, unique_node_name};
use serde_json::{Value, json};

const TICK: Duration = Duration::from_millis(250);

/// The objects `kubectl kustomize DIR` renders, as JSON (kubectl prints one document each).
fn rendered(dir: &Path) -> Result<Vec<Value>> {
    let yaml = kubectl_ok(&["kustomize", &dir.to_string_lossy()])?;
    let json = kubectl_ok_with_input(
        &["create", "--dry-run=client", "-o", "json", "-f", "-"],
        yaml.as_bytes(),
    )?;
    Ok(serde_json::Deserializer::from_str(&json)
        .into_iter::<Value>()
        .collect::<Result<_, _>>()?)
}

/// `deploy/base` and the custom plugin overlay copied to `dir`, with the example plugin built
/// into the overlay as the docs say; returns the overlay's path.
fn custom_plugin_overlay(dir: &Path) -> Result<PathBuf> {
    let deploy = repo_root().join("deploy");
    let base = dir.join("base");
    std::fs::create_dir_all(&base)?;
    for entry in std::fs::read_dir(deploy.join("base"))? {
        let entry = entry?;
        std::fs::copy(entry.path(), base.join(entry.file_name()))?;
    }
    let overlay = dir.join("examples/custom-plugin");
    std::fs::create_dir_all(&overlay)?;
    for file in ["kustomization.yaml", "config.yaml"] {
        std::fs::copy(
            deploy.join("examples/custom-plugin").join(file),
            overlay.join(file),
        )?;
    }
    std::fs::copy(team_selector_wasm()?, overlay.join("team-selector.wasm"))?;
    Ok(overlay)
}

#[tokio::test]
async fn the_base_and_the_examples_pass_a_server_side_dry_run() -> Result<()> {
    let client = TestCluster::shared().kube_client().await?;
    apply_base()?;
    let deploy = repo_root().join("deploy");
    let dry_run = kubectl_ok(&["apply", "--dry-run=server", "-k", &deploy.to_string_lossy()])?;
    for object in [
        "namespace/orca-system",
        "serviceaccount/orca",
        "clusterrole.rbac.authorization.k8s.io/orca",
        "deployment.apps/orca",
        "configmap/orca-plugins",
        "service/orca-metrics",
    ] {
        assert!(dry_run.contains(object), "{object} missing:\n{dry_run}");
    }

    let objects = rendered(&deploy)?;
    let deployment = find_object(&objects, "Deployment", "orca")?;
    let pod = &deployment["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    assert_eq!(pod["serviceAccountName"], "orca");
    assert_eq!(pod["securityContext"]["runAsUser"], 65532);
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(
        container["securityContext"]["allowPrivilegeEscalation"],
        false
    );
    assert_eq!(
        container["securityContext"]["capabilities"]["drop"][0],
        "ALL"
    );
    assert!(container["resources"]["requests"]["memory"].is_string());
    assert!(container["resources"]["limits"]["memory"].is_string());
    assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
    // The probes' named port is the one orca serves health on by default.
    let metrics_port = container["ports"]
        .as_array()
        .and_then(|ports| ports.iter().find(|p| p["name"] == "metrics"))
        .context("a metrics port")?;
    assert_eq!(metrics_port["containerPort"], 10255);
    // The config ConfigMap (hashed name) is what --config points into.
    let config_map = find_object(&objects, "ConfigMap", "orca-config-")?;
    let volumes = pod["volumes"].as_array().context("volumes")?;
    assert!(
        volumes
            .iter()
            .any(|v| v["configMap"]["name"] == config_map["metadata"]["name"]),
        "{volumes:?}"
    );
    assert_eq!(
        config_map["data"]["config.yaml"].as_str(),
        Some(std::fs::read_to_string(deploy.join("base/config.yaml"))?.as_str())
    );

    let namespace = TestNamespace::create(&client, "e2e-deploy-examples").await?;
    for example in ["gpu-training-pod.yaml", "spot-pod.yaml", "cpu-pod.yaml"] {
        let path = deploy.join("examples").join(example);
        kubectl_ok(&[
            "apply",
            "--dry-run=server",
            "-n",
            &namespace.name,
            "-f",
            &path.to_string_lossy(),
        ])
        .with_context(|| format!("deploy/examples/{example}"))?;
    }
    let scratch = tempfile::tempdir()?;
    let overlay = custom_plugin_overlay(scratch.path())?;
    // Server-side apply: a client-side apply would copy the plugin into the
    // last-applied-configuration annotation, past its 256 KiB limit.
    kubectl_ok(&[
        "apply",
        "--server-side",
        "--dry-run=server",
        "-k",
        &overlay.to_string_lossy(),
    ])?;
    namespace.delete().await
}

/// An install's config.yaml as the test runs it: the node's own name (and cluster name, so it
/// sees no other test's instances), moto as the EC2 endpoint with moto's own subnet and
/// security group, short intervals, and the node Leases in the install's namespace (orca in a
/// pod finds it in POD_NAMESPACE). Everything else, the TLS sources included, as shipped.
async fn shipped_config_for_moto(
    shipped: &Value,
    account: &ServiceAccount,
    node: &str,
    plugins_dir: &Path,
) -> Result<String> {
    let cluster = TestCluster::shared();
    let ec2 = cluster.ec2_client().await;
    let subnet = ec2
        .describe_subnets()
        .send()
        .await?
        .subnets()
        .iter()
        .find_map(|s| s.subnet_id().map(str::to_owned))
        .context("moto has a default subnet")?;
    let group = ec2
        .describe_security_groups()
        .group_names("default")
        .send()
        .await?
        .security_groups()
        .iter()
        .find_map(|g| g.group_id().map(str::to_owned))
        .context("moto has a default security group")?;
    let mut config = shipped.clone();
    config["replicas"]["namespace"] = json!(account.namespace);
    config["node"]["name"] = json!(node);
    config["node"]["clusterName"] = json!(node);
    config["node"]["leaseRenewInterval"] = json!("2s");
    config["policy"]["pluginsDir"] = json!(plugins_dir);
    // moto posts no console output: the exit report comes from the tag once the short
    // visibility grace has passed.
    config["pods"] = json!({
        "syncInterval": "1s",
        "launchVisibilityGrace": "5s",
        "retryInitialBackoff": "200ms",
        "retryMaxBackoff": "1s"
    });
    config["provider"]["region"] = json!(cluster.var("AWS_REGION"));
    let aws = &mut config["provider"]["aws"];
    aws["endpointUrl"] = json!(cluster.var("AWS_ENDPOINT_URL"));
    aws["subnetIds"] = json!([subnet]);
    aws["securityGroupIds"] = json!([group]);
    aws["catalogueRefresh"] = json!("0s");
    config["kubeletApi"]["bindAddress"] = json!("127.0.0.1");
    config["kubeletApi"]["followPollInterval"] = json!("500ms");
    to_yaml(&config)
}

/// A pod of deploy/examples pinned to `node` (tests share the cluster).
fn example_pod(example: &str, node: &str) -> Result<Pod> {
    let mut pod = yaml_file(&format!("deploy/examples/{example}"))?;
    pod["spec"]["nodeSelector"]["kubernetes.io/hostname"] = json!(node);
    Ok(serde_json::from_value(pod)?)
}

/// The design doc's GPU training pod, with env from a ConfigMap and a Secret as a real
/// training job would have.
fn gpu_training_pod(node: &str) -> Result<Pod> {
    let mut pod = serde_json::to_value(example_pod("gpu-training-pod.yaml", node)?)?;
    pod["spec"]["containers"][0]["env"] = json!([
        {"name": "EPOCHS", "valueFrom": {"configMapKeyRef": {"name": "training", "key": "epochs"}}},
        {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "training", "key": "token"}}},
    ]);
    Ok(serde_json::from_value(pod)?)
}

/// One permission a Role or ClusterRole of an install grants.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Grant {
    verb: String,
    group: String,
    /// `resource` or `resource/subresource`, as the audit log names it.
    resource: String,
    namespace: Option<String>,
    /// The one object the rule allows (`resourceNames`), if it names one.
    name: Option<String>,
}

impl Grant {
    /// Asked with `kubectl auth can-i`, which names a group as `resource.group` and a
    /// subresource with `--subresource`.
    fn allowed(&self, account: &ServiceAccount) -> Result<bool> {
        let qualified = match (self.group.as_str(), self.resource.split_once('/')) {
            ("", _) => self.resource.clone(),
            (group, Some((resource, sub))) => format!("{resource}.{group}/{sub}"),
            (group, None) => format!("{}.{group}", self.resource),
        };
        service_account_can(
            account,
            &self.verb,
            &qualified,
            self.name.as_deref(),
            self.namespace.as_deref(),
        )
    }
}

/// Every permission the Roles and ClusterRoles among `documents` grant.
fn granted_by(documents: &[Value]) -> BTreeSet<Grant> {
    let strings = |value: &Value| -> Vec<String> {
        value
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect()
    };
    let mut granted = BTreeSet::new();
    for role in documents
        .iter()
        .filter(|d| d["kind"] == "ClusterRole" || d["kind"] == "Role")
    {
        let namespace = role["metadata"]["namespace"].as_str().map(str::to_owned);
        for rule in role["rules"].as_array().into_iter().flatten() {
            for group in strings(&rule["apiGroups"]) {
                for resource in strings(&rule["resources"]) {
                    let names = strings(&rule["resourceNames"]);
                    let names: Vec<Option<String>> = if names.is_empty() {
                        vec![None]
                    } else {
                        names.into_iter().map(Some).collect()
                    };
                    for verb in strings(&rule["verbs"]) {
                        for name in &names {
                            granted.insert(Grant {
                                verb: verb.clone(),
                                group: group.clone(),
                                resource: resource.clone(),
                                namespace: namespace.clone(),
                                name: name.clone(),
                            });
                        }
                    }
                }
            }
        }
    }
    granted
}

/// An install of orca in the cluster, whose RBAC the whole-life test runs orca under.
struct Install {
    account: ServiceAccount,
    /// Its objects: the Roles and ClusterRoles among them are what it grants.
    objects: Vec<Value>,
    /// Its config.yaml.
    config: Value,
}

#[tokio::test]
async fn orca_with_only_its_service_accounts_rbac_takes_a_pod_through_its_whole_life() -> Result<()>
{
    apply_base()?;
    let rbac = std::fs::read_to_string(repo_root().join("deploy/base/rbac.yaml"))?;
    let install = Install {
        account: ServiceAccount::base(),
        objects: serde_saphyr::from_multiple(&rbac)?,
        config: yaml_file("deploy/base/config.yaml")?,
    };
    whole_life_under(&install, "deploy-rbac").await
}

/// The same life under a release of the Helm chart (deploy/charts/orca) in a namespace of its
/// own, with the roles and the config the release holds; uninstalled afterwards.
#[tokio::test]
async fn orca_with_only_the_charts_rbac_takes_a_pod_through_its_whole_life() -> Result<()> {
    let client = TestCluster::shared().kube_client().await?;
    let namespace = TestNamespace::create(&client, "e2e-deploy-chart").await?;
    // Cluster-scoped objects are named after the release: one unique to this test.
    let release = Release::install(&namespace.name, &namespace.name, &[])?;
    let objects = release.manifest()?;
    let account = find_object(&objects, "ServiceAccount", "")?;
    let config_map = find_object(
        &objects,
        "ConfigMap",
        &format!("{}-orca-config", release.name),
    )?;
    let install = Install {
        account: ServiceAccount {
            namespace: namespace.name.clone(),
            name: account["metadata"]["name"]
                .as_str()
                .context("the ServiceAccount's name")?
                .to_owned(),
        },
        config: serde_saphyr::from_str(
            config_map["data"]["config.yaml"]
                .as_str()
                .context("the release's config.yaml")?,
        )?,
        objects,
    };
    let lived = whole_life_under(&install, "chart-rbac").await;
    release.uninstall()?;
    namespace.delete().await?;
    lived
}

/// orca with only `install`'s ServiceAccount's token and `install`'s config (on moto) takes
/// pods through their whole lives; every request is allowed, every permission the install
/// grants is used, and what orca must not do is refused.
async fn whole_life_under(install: &Install, node_prefix: &str) -> Result<()> {
    let cluster = TestCluster::shared();
    let client = cluster.kube_client().await?;
    let account = &install.account;
    let credentials = tempfile::tempdir()?;
    let kubeconfig = service_account_kubeconfig(credentials.path(), account)?;
    let node = unique_node_name(node_prefix);
    let plugins = credentials.path().join("plugins");
    std::fs::create_dir(&plugins)?;
    let config = shipped_config_for_moto(&install.config, account, &node, &plugins).await?;
    let from = Timestamp::now();
    let mut orca = OrcaProcess::start_with_kubeconfig(&node, &kubeconfig, |_| config)?;
    orca.wait_ready(Duration::from_secs(30)).await?;

    let namespace = TestNamespace::create(&client, "e2e-deploy-rbac").await?;
    let ns = namespace.name.clone();
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    config_maps
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "training"}, "data": {"epochs": "3"}
            }))?,
        )
        .await?;
    kubectl_ok(&[
        "create",
        "secret",
        "generic",
        "training",
        "-n",
        &ns,
        "--from-literal=token=hf_secret",
    ])?;
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), &ns);
    // A pod with an EBS claim: orca reads the claim and its PersistentVolume, and attaches the
    // volume (made in the zone of the config's subnet).
    let ec2 = cluster.ec2_client().await;
    let config: Value = serde_saphyr::from_str(&std::fs::read_to_string(orca.config_path())?)?;
    let subnet = config["provider"]["aws"]["subnetIds"][0]
        .as_str()
        .context("the config's subnet")?
        .to_owned();
    let zone = ec2
        .describe_subnets()
        .subnet_ids(&subnet)
        .send()
        .await?
        .subnets()
        .first()
        .and_then(|s| s.availability_zone().map(str::to_owned))
        .context("the subnet's zone")?;
    let _claimed = Claimed::make(&client, &ec2, &ns, "checkpoints", &zone).await?;
    pods::create(
        &pods_api,
        &pod_with_claim("checkpointed", &node, "checkpoints"),
    )
    .await?;
    pods::create(&pods_api, &gpu_training_pod(&node)?).await?;
    // A second pod, deleted while it runs: orca terminates its instance and removes the pod.
    pods::create(&pods_api, &example_pod("spot-pod.yaml", &node)?).await?;
    let running = pods::wait_for_phase(
        &pods_api,
        "gpu-training",
        "Running",
        Duration::from_secs(60),
    )
    .await
    .map_err(|e| anyhow::anyhow!("{e:#}\norca log:\n{}", orca.log()))?;
    assert!(
        running.status.as_ref().is_some_and(|s| s.host_ip.is_some()),
        "{running:?}"
    );
    let decision = pods::decision(&running).context("the decision annotation")?;
    assert_eq!(decision["instanceType"], "p5.48xlarge", "{decision}");
    assert_eq!(decision["market"], "spot", "{decision}");

    let id = instance_id(&running).context("the pod names its instance")?;
    let instance = ec2::instance(&ec2, &id).await?;
    assert_eq!(
        instance.instance_type().map(|t| t.as_str()),
        Some("p5.48xlarge")
    );
    assert_eq!(
        instance.instance_lifecycle().map(|l| l.as_str()),
        Some("spot")
    );
    assert_eq!(
        instance.subnet_id(),
        config["provider"]["aws"]["subnetIds"][0].as_str()
    );
    let tags = tags_of(&instance);
    assert_eq!(tags.get("orca.research/cluster"), Some(&node));
    assert_eq!(
        tags.get("orca.research/pod-name").map(String::as_str),
        Some("gpu-training")
    );

    // A restart (a rollout of the Deployment) adopts the instance: the Node exists, so its
    // labels and taints are patched rather than created.
    let exit = orca.stop()?;
    assert!(exit.success(), "orca exited with {exit}");
    orca.restart()?;
    orca.wait_serving(Duration::from_secs(30)).await?;

    // kubectl logs: the apiserver calls orca's kubelet API, which authorizes the apiserver's
    // client certificate with a SubjectAccessReview.
    let logs = kubectl_ok(&["logs", "-n", &ns, "gpu-training"])?;
    assert!(logs.starts_with("Linux version"), "{logs}");
    // A bearer token is checked with a TokenReview; this one may not read the node's pods.
    let stranger = kubectl_ok(&["create", "token", "default", "-n", &ns])?;
    let (code, body) = curl_status(
        &format!("https://127.0.0.1:{}/pods", orca.kubelet_port),
        &[
            "-k",
            "-H",
            &format!("Authorization: Bearer {}", stranger.trim()),
        ],
    )?;
    assert_eq!(code, 403, "{body}");

    // The workload ends (what the bootstrap does): exit code tagged, instance powered off.
    finish_workload(&ec2, &id, 0).await?;
    pods::wait_for_phase(
        &pods_api,
        "gpu-training",
        "Succeeded",
        Duration::from_secs(60),
    )
    .await?;
    let spot =
        pods::wait_for_phase(&pods_api, "spot-batch", "Running", Duration::from_secs(30)).await?;
    let spot_instance = instance_id(&spot).context("the spot pod's instance")?;
    let checkpointed = pods::wait_for_phase(
        &pods_api,
        "checkpointed",
        "Running",
        Duration::from_secs(30),
    )
    .await?;
    assert!(instance_id(&checkpointed).is_some(), "{checkpointed:?}");
    for name in ["gpu-training", "spot-batch", "checkpointed"] {
        pods_api.delete(name, &DeleteParams::default()).await?;
    }
    for name in ["gpu-training", "spot-batch", "checkpointed"] {
        poll_until(
            &format!("{name} removed"),
            Duration::from_secs(30),
            TICK,
            || async { Ok(pods_api.get_opt(name).await?.is_none().then_some(())) },
        )
        .await?;
    }
    let state = state_of(&ec2::instance(&ec2, &spot_instance).await?);
    assert!(
        matches!(
            state,
            InstanceStateName::ShuttingDown | InstanceStateName::Terminated
        ),
        "{state:?}"
    );
    let exit = orca.stop()?;
    assert!(exit.success(), "orca exited with {exit}");
    let requests = audit::requests(
        Path::new(cluster.var("AUDIT_LOG")),
        &account.username(),
        from,
        Timestamp::now(),
    );

    // Everything orca asked for was allowed...
    let refused: Vec<_> = requests.iter().filter(|r| r.code == 403).collect();
    assert!(
        refused.is_empty(),
        "RBAC refused orca: {refused:#?}\norca log:\n{}",
        orca.log()
    );
    // ...and every permission the install grants was used. Two are not visible as such: events are
    // patched only when one repeats, which these pods' lives do not provoke; and the Lease is
    // created by a server-side apply patch, audited as patch but authorized as create (without
    // create it is refused).
    let used: BTreeSet<String> = requests.iter().map(|r| r.key()).collect();
    let granted = granted_by(&install.objects);
    let unused: Vec<_> = granted
        .iter()
        .filter(|g| !used.contains(&format!("{} {}", g.verb, g.resource)))
        .filter(|g| {
            !matches!(
                (g.verb.as_str(), g.resource.as_str()),
                ("patch", "events") | ("create", "leases")
            )
        })
        .collect();
    assert!(
        unused.is_empty(),
        "granted but never used: {unused:?}\nused: {used:?}"
    );
    for grant in &granted {
        assert!(grant.allowed(account)?, "can-i {grant:?}");
    }
    // What orca must not be able to do.
    let own = Some(account.namespace.as_str());
    for (verb, resource, namespace) in [
        ("create", "pods", None),
        ("update", "pods", None),
        ("create", "pods/exec", None),
        ("create", "events", None),
        ("delete", "nodes", None),
        ("get", "namespaces", None),
        ("list", "namespaces", None),
        ("update", "nodes", None),
        ("get", "nodes/proxy", None),
        ("list", "secrets", None),
        ("watch", "configmaps", None),
        ("create", "secrets", own),
        ("create", "serviceaccounts/token", own),
        ("create", "deployments", own),
        ("create", "clusterrolebindings", None),
        ("impersonate", "users", None),
        ("update", "certificatesigningrequests/approval", None),
        ("delete", "leases", Some("kube-node-lease")),
        ("delete", "leases", own),
        ("patch", "leases", own),
        ("get", "leases", Some("default")),
    ] {
        assert!(
            !service_account_can(account, verb, resource, None, namespace)?,
            "orca may {verb} {resource} in {namespace:?}"
        );
    }
    namespace.delete().await
}

#[tokio::test]
async fn the_custom_plugin_example_packaged_as_a_configmap_goes_live_without_a_restart()
-> Result<()> {
    let client = TestCluster::shared().kube_client().await?;
    let scratch = tempfile::tempdir()?;
    let objects = rendered(&custom_plugin_overlay(scratch.path())?)?;
    let plugins_map = find_object(&objects, "ConfigMap", "orca-plugins")?;
    let shipped_config: Value = serde_saphyr::from_str(
        find_object(&objects, "ConfigMap", "orca-config-")?["data"]["config.yaml"]
            .as_str()
            .context("the overlay's config.yaml")?,
    )?;
    ensure!(
        plugins_map["binaryData"]["team-selector.wasm"].is_string(),
        "the overlay packs the plugin as binaryData: {}",
        plugins_map["metadata"]
    );

    // The overlay's policy section on a simulated-provider orca whose plugins directory is
    // written the way the kubelet writes a ConfigMap volume, empty at first.
    let node = unique_node_name("custom-plugin");
    let mut plugins_dir = PathBuf::new();
    let orca = OrcaProcess::start(&node, |dir| {
        plugins_dir = dir.join("plugins");
        std::fs::create_dir(&plugins_dir).expect("plugins dir");
        publish_like_kubelet(&plugins_dir, "2026_11_22_empty", &BTreeMap::new())
            .expect("an empty ConfigMap volume");
        let mut config: Value =
            serde_saphyr::from_str(&test_config(&node, dir, "")).expect("the test config");
        config["policy"] = shipped_config["policy"].clone();
        config["policy"]["pluginsDir"] = json!(plugins_dir);
        to_yaml(&config).expect("config as YAML")
    })?;
    orca.wait_ready(Duration::from_secs(20)).await?;
    let namespace = TestNamespace::create(&client, "e2e-custom-plugin").await?;
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), &namespace.name);
    let team_pod = |name: &str, team: &str| {
        let mut pod = burst_pod(name, &node, &[]);
        pod.metadata.labels = Some(BTreeMap::from([("team".to_owned(), team.to_owned())]));
        pod
    };

    // Not delivered yet: the example's `onError: {notLoaded: fallback}` hands the pod to the
    // default selector.
    pods::create(&pods_api, &team_pod("before", "vision")).await?;
    let decision = wait_decided(&pods_api, "before", Duration::from_secs(30)).await?;
    assert_eq!(
        decision["selectInstance"]["plugin"], "orca-default-selector",
        "{decision}"
    );

    // The ConfigMap goes to the apiserver; the kubelet would read it back and swap the volume.
    let map_name = "orca-plugins";
    let mut delivered = plugins_map.clone();
    delivered["metadata"] = json!({"name": map_name});
    // kustomize folds the base64 into lines, which the apiserver's decoder skips and serde's
    // does not.
    for encoded in delivered["binaryData"]
        .as_object_mut()
        .into_iter()
        .flat_map(|files| files.values_mut())
    {
        let folded = encoded.as_str().unwrap_or_default();
        *encoded = json!(folded.split_whitespace().collect::<String>());
    }
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace.name);
    config_maps
        .create(&PostParams::default(), &serde_json::from_value(delivered)?)
        .await?;
    let stored = config_maps.get(map_name).await?;
    let files: BTreeMap<String, Vec<u8>> = stored
        .binary_data
        .unwrap_or_default()
        .into_iter()
        .map(|(name, bytes)| (name, bytes.0))
        .collect();
    let expected = std::fs::read(team_selector_wasm()?)?;
    assert_eq!(files.get("team-selector.wasm"), Some(&expected));
    publish_like_kubelet(&plugins_dir, "2026_11_22_v1", &files)?;
    poll_until(
        "team-selector loaded",
        Duration::from_secs(10),
        TICK,
        || {
            let loaded =
                orca.log().contains("plugin loaded") && orca.log().contains("team-selector");
            async move { Ok(loaded.then_some(())) }
        },
    )
    .await?;

    pods::create(&pods_api, &team_pod("vision", "vision")).await?;
    let decision = wait_decided(&pods_api, "vision", Duration::from_secs(30)).await?;
    assert_eq!(
        decision["selectInstance"]["plugin"], "team-selector",
        "{decision}"
    );
    assert_eq!(decision["instanceType"], "g6.xlarge", "{decision}");
    // A team the settings do not know falls through to the default selector.
    pods::create(&pods_api, &team_pod("finance", "finance")).await?;
    let decision = wait_decided(&pods_api, "finance", Duration::from_secs(30)).await?;
    assert_eq!(
        decision["selectInstance"]["plugin"], "orca-default-selector",
        "{decision}"
    );
    if decision["fallbacks"][0]["error"]
        .as_str()
        .is_none_or(|e| !e.contains("finance"))
        || decision["fallbacks"][0]["kind"] != "declined"
    {
        bail!("the record says the team-selector declined and why: {decision}");
    }
    namespace.delete().await
}

/// `orca plugin eval` of an example pod: the decision the embedded default plugins record.
fn decision_for_example(example: &str) -> Result<Value> {
    let pod = repo_root().join("deploy/examples").join(example);
    let output = std::process::Command::new(orca_e2e::orca::orca_binary())
        .args(["plugin", "eval", "-o", "json", "--pod"])
        .arg(&pod)
        .output()?;
    ensure!(
        output.status.success(),
        "orca plugin eval --pod {example}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let evaluation: Value = serde_json::from_slice(&output.stdout)?;
    Ok(evaluation["decision"].clone())
}

/// `orca plugin eval --config` of the custom-plugin example's config.yaml (its plugins
/// directory holding the team-selector), for a pod of `team` asking for `gpus`.
fn eval_with_example_config(team: &str, gpus: u32, json: bool) -> Result<(bool, String)> {
    let dir = tempfile::tempdir()?;
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins)?;
    std::fs::copy(team_selector_wasm()?, plugins.join("team-selector.wasm"))?;
    let example = repo_root().join("deploy/examples/custom-plugin/config.yaml");
    let config = std::fs::read_to_string(example)?
        .replace("/etc/orca/plugins", &plugins.display().to_string());
    std::fs::write(dir.path().join("config.yaml"), config)?;
    std::fs::write(
        dir.path().join("pod.yaml"),
        format!(
            "metadata: {{name: p, labels: {{team: {team}}}}}\n\
             spec:\n  containers:\n  - name: main\n    image: busybox\n    \
             resources: {{limits: {{nvidia.com/gpu: '{gpus}'}}}}\n"
        ),
    )?;
    let mut command = std::process::Command::new(orca_e2e::orca::orca_binary());
    command
        .args(["plugin", "eval", "--config"])
        .arg(dir.path().join("config.yaml"))
        .arg("--pod")
        .arg(dir.path().join("pod.yaml"))
        .env("XDG_CACHE_HOME", dir.path().join("cache"));
    if json {
        command.args(["-o", "json"]);
    }
    let output = command.output()?;
    Ok((
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    ))
}

#[test]
fn eval_with_a_config_shows_every_plugin_asked_and_why() -> Result<()> {
    // A team the selector does not know: it declines, the default selector answers.
    let (decided, text) = eval_with_example_config("finance", 1, false)?;
    ensure!(decided, "{text}");
    for expected in [
        "select-instance\n  team-selector 0.1.0 (orca:policy@0.3.0): declined, next plugin asked: ",
        "team \"finance\" has no instance types",
        "orca-default-selector",
        "candidates, best first\n",
        "decision\n",
    ] {
        ensure!(text.contains(expected), "{expected:?} in:\n{text}");
    }

    // A vision pod bigger than the team's types: no-match fails it (the example's onError),
    // and the JSON says so with every step.
    let (decided, json) = eval_with_example_config("vision", 8, true)?;
    ensure!(!decided, "the pod must fail: {json}");
    let evaluation: Value = serde_json::from_str(&json)?;
    ensure!(evaluation["decided"] == false, "{evaluation}");
    let asked = evaluation["asked"].as_array().context("asked")?;
    ensure!(
        asked.len() == 1,
        "only the team-selector was asked: {evaluation}"
    );
    ensure!(asked[0]["outcome"] == "failedThePod", "{evaluation}");
    ensure!(asked[0]["failure"]["kind"] == "noMatch", "{evaluation}");
    let message = evaluation["error"]["message"].as_str().context("message")?;
    ensure!(message.contains("g6.xlarge, g5.xlarge"), "{message}");

    // A vision pod that fits: the team's types, each with its reason.
    let (decided, json) = eval_with_example_config("vision", 1, true)?;
    ensure!(decided, "{json}");
    let evaluation: Value = serde_json::from_str(&json)?;
    ensure!(
        evaluation["candidates"][0]["instanceType"] == "g6.xlarge",
        "{evaluation}"
    );
    ensure!(
        evaluation["candidates"][0]["reason"] == "team vision's types",
        "{evaluation}"
    );
    Ok(())
}

#[test]
fn the_example_pods_get_the_decisions_their_comments_promise() -> Result<()> {
    let gpu = decision_for_example("gpu-training-pod.yaml")?;
    assert_eq!(gpu["instanceType"], "p5.48xlarge", "{gpu}");
    assert_eq!(gpu["market"], "spot", "{gpu}");

    let spot = decision_for_example("spot-pod.yaml")?;
    assert_eq!(spot["instanceType"], "c7i.2xlarge", "{spot}");
    assert_eq!(spot["market"], "spot", "{spot}");
    assert_eq!(spot["tags"]["CostCenter"], "batch-42", "{spot}");

    let cpu = decision_for_example("cpu-pod.yaml")?;
    let chosen = cpu["instanceType"].as_str().context("a type")?;
    let candidates = cpu["candidates"].as_array().map(Vec::len).unwrap_or(0);
    assert!(candidates > 1, "fallback candidates: {cpu}");
    // The cheapest amd64 type (the Node's architecture) with 4 vCPUs and 16 GiB.
    assert_eq!(chosen, "t3a.xlarge", "{cpu}");
    Ok(())
}
