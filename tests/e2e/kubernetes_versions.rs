//! orca on whichever Kubernetes release the harness runs (issue 59). `tests/run` runs this
//! binary on the default cluster and again on each end of the version matrix (`K8S_OLDEST`,
//! `K8S_NEWEST` in `tests/cluster/versions.env`), with the node, pod, logs, RBAC and chart
//! tests. What each test expects is read from the server itself (its `/version` and its
//! OpenAPI schema): on a server whose Node has no `status.declaredFeatures` (before 1.35) orca
//! leaves it out, and one that refuses it anyway never keeps the Node from Ready. The one
//! release written here is what exec needs (1.36), whose both sides the matrix checks.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use orca_e2e::metrics::{scrape, series};
use orca_e2e::nodes::ready_condition;
use orca_e2e::pods::{self, burst_pod, wait_for_event};
use orca_e2e::proxy::{Fault, Proxy};
use orca_e2e::wait::poll_until;
use orca_e2e::{OrcaProcess, Scenario, TestCluster, test_config, unique_node_name};

const TICK: Duration = Duration::from_millis(250);
const DECLARED: &str = "status.declaredFeatures";

/// What the server says of itself: its release, and whether its Node status has
/// `declaredFeatures` (its OpenAPI v3 schema, read as orca's admin would).
struct Server {
    git_version: String,
    minor: u32,
    knows_declared_features: bool,
}

impl Server {
    async fn read(client: &kube::Client) -> Result<Server> {
        let version = client.apiserver_version().await?;
        let minor = version
            .minor
            .trim_end_matches(|c: char| !c.is_ascii_digit())
            .parse()
            .with_context(|| format!("the server's minor {:?}", version.minor))?;
        let document: serde_json::Value = serde_json::from_str(
            &client
                .request_text(hyper::Request::get("/openapi/v3/api/v1").body(Vec::new())?)
                .await?,
        )?;
        let properties =
            &document["components"]["schemas"]["io.k8s.api.core.v1.NodeStatus"]["properties"];
        ensure!(
            properties.is_object(),
            "no NodeStatus in the server's schema"
        );
        Ok(Server {
            git_version: version.git_version,
            minor,
            knows_declared_features: properties.get("declaredFeatures").is_some(),
        })
    }
}

/// The value of the series of `metric` whose labels include all of `labels`, if any.
fn metric(page: &str, metric: &str, labels: &[(&str, &str)]) -> Result<Option<f64>> {
    Ok(series(page, metric)?
        .into_iter()
        .find(|(have, _)| {
            labels
                .iter()
                .all(|(k, v)| have.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|(_, value)| value))
}

/// The Node's `status.declaredFeatures`, as the apiserver keeps it.
async fn declared_features(nodes: &Api<Node>, name: &str) -> Result<Option<Vec<String>>> {
    Ok(nodes
        .get(name)
        .await?
        .status
        .and_then(|status| status.declared_features))
}

async fn wait_ready(nodes: &Api<Node>, name: &str, timeout: Duration) -> Result<()> {
    poll_until(&format!("node {name} Ready"), timeout, TICK, || async {
        Ok(ready_condition(nodes, name)
            .await?
            .filter(|(status, _)| status == "True")
            .map(drop))
    })
    .await
}

/// The tests `tests/versions` runs on every release of the matrix: all of this file's (it
/// selects them by this module's name).
mod on_every_release {
    use super::*;

    #[tokio::test]
    async fn the_node_carries_only_the_fields_the_apiserver_knows_and_is_ready() -> Result<()> {
        let cluster = TestCluster::shared();
        let client = cluster.kube_client().await?;
        let server = Server::read(&client).await?;
        let name = unique_node_name("versions-fields");
        let orca = OrcaProcess::start(&name, |dir| test_config(&name, dir, ""))?;
        let nodes: Api<Node> = Api::all(client.clone());
        wait_ready(&nodes, &name, Duration::from_secs(30))
            .await
            .with_context(|| format!("orca log:\n{}", orca.log()))?;
        orca.wait_ready(Duration::from_secs(10)).await?;

        let declared = declared_features(&nodes, &name).await?;
        let page = scrape(orca.metrics_port)?;
        let omitted = metric(
            &page,
            "orca_apiserver_fields_omitted",
            &[("kind", "Node"), ("field", DECLARED)],
        )?;
        if server.knows_declared_features {
            assert_eq!(
                declared.as_deref(),
                Some(&["ExtendWebSocketsToKubelet".to_owned()][..]),
                "{}",
                server.git_version
            );
            assert_eq!(omitted, None, "{page}");
        } else {
            assert_eq!(declared, None, "{}", server.git_version);
            assert_eq!(omitted, Some(1.0), "{page}");
            let log = orca.log();
            assert!(
                log.lines().any(|line| line.contains("leaves it out")
                    && line.contains(DECLARED)
                    && line.contains(&server.git_version)),
                "{log}"
            );
        }
        // Nothing was refused: what the server does not know was never sent.
        let refusals = metric(&page, "orca_apiserver_field_refusals_total", &[])?;
        assert_eq!(refusals, None, "{page}");
        let info = metric(
            &page,
            "orca_apiserver_info",
            &[("version", &server.git_version)],
        )?;
        assert_eq!(info, Some(1.0), "{page}");
        Ok(())
    }

    /// The schema cannot be read (a gateway in front of the apiserver lets only the API paths
    /// through), so orca sends what it would send to the newest release: a server that does not
    /// know `declaredFeatures` refuses the whole status, as a 1.33 apiserver did in issue 59, and
    /// orca writes it again without that field.
    #[tokio::test]
    async fn a_field_the_apiserver_refuses_never_keeps_the_node_from_ready() -> Result<()> {
        let cluster = TestCluster::shared();
        let client = cluster.kube_client().await?;
        let server = Server::read(&client).await?;
        let proxy = Proxy::apiserver(
            std::path::Path::new(cluster.var("ORCA_KUBECONFIG")),
            Box::new(|_, path| path.starts_with("/openapi")),
        )
        .await?;
        proxy.set_fault(Some(Fault::Forbidden));
        let dir = tempfile::tempdir()?;
        let kubeconfig = proxy.kubeconfig_in(dir.path())?;
        let name = unique_node_name("versions-refused");
        let orca = OrcaProcess::start_with_kubeconfig(&name, &kubeconfig, |dir| {
            test_config(&name, dir, "")
        })?;
        let nodes: Api<Node> = Api::all(client.clone());
        wait_ready(&nodes, &name, Duration::from_secs(30))
            .await
            .with_context(|| format!("orca log:\n{}", orca.log()))?;
        orca.wait_ready(Duration::from_secs(10)).await?;

        let schema_reads: Vec<_> = proxy
            .seen()
            .into_iter()
            .filter(|seen| seen.path.starts_with("/openapi"))
            .collect();
        assert!(
            !schema_reads.is_empty() && schema_reads.iter().all(|seen| seen.faulted),
            "{schema_reads:?}"
        );
        let page = scrape(orca.metrics_port)?;
        let refusals = metric(
            &page,
            "orca_apiserver_field_refusals_total",
            &[("kind", "Node"), ("field", DECLARED)],
        )?;
        let declared = declared_features(&nodes, &name).await?;
        let log = orca.log();
        if server.knows_declared_features {
            assert_eq!(refusals, None, "{page}");
            assert!(declared.is_some(), "{}", server.git_version);
        } else {
            assert_eq!(refusals, Some(1.0), "{page}");
            assert_eq!(declared, None);
            // The typed refusal, naming the field, the kind and the release.
            let refused = format!(
                "the apiserver ({}) refused Node field {DECLARED}",
                server.git_version
            );
            assert!(log.contains(&refused), "{log}");
            assert!(log.contains("field not declared in schema"), "{log}");
        }
        assert!(
            metric(
                &page,
                "orca_apiserver_schema_reads_total",
                &[("result", "error")]
            )?
            .is_some_and(|n| n >= 1.0),
            "{page}"
        );
        Ok(())
    }

    /// `kubectl exec` works where the apiserver passes its WebSocket through to the node (1.36
    /// on); before that, the apiserver speaks SPDY to nodes, and the refusal says which control
    /// plane exec needs, to kubectl and in a Warning on the pod.
    #[tokio::test]
    async fn kubectl_exec_runs_or_says_which_control_plane_it_needs() -> Result<()> {
        let cluster = TestCluster::shared();
        let scenario = Scenario::start("versions-exec").await?;
        let server = Server::read(&scenario.client).await?;
        let (node, ns) = (scenario.node().to_owned(), scenario.namespace.name.clone());
        pods::create(&scenario.pods, &burst_pod("talker", &node, &[])).await?;
        pods::wait_for_phase(&scenario.pods, "talker", "Running", Duration::from_secs(60)).await?;
        // Of all orca wrote for the Node, its Lease and the pod's life so far, the one field an
        // apiserver of the supported range may not know is the Node's declaredFeatures.
        let page = scrape(scenario.orca.metrics_port)?;
        let omitted: Vec<_> = series(&page, "orca_apiserver_fields_omitted")?
            .into_iter()
            .map(|(labels, _)| (labels["kind"].clone(), labels["field"].clone()))
            .collect();
        assert!(
            omitted
                .iter()
                .all(|(kind, field)| (kind.as_str(), field.as_str()) == ("Node", DECLARED)),
            "{}: {omitted:?}",
            server.git_version
        );

        let exec = cluster
            .kubectl()
            .args(["exec", "-n", &ns, "talker", "--", "echo", "hello"])
            .output()?;
        let (stdout, stderr) = (
            String::from_utf8_lossy(&exec.stdout),
            String::from_utf8_lossy(&exec.stderr),
        );
        if server.minor >= 36 {
            assert!(exec.status.success(), "{stdout}{stderr}");
            assert_eq!(stdout, "hello\n");
        } else {
            assert!(!exec.status.success(), "{stdout}{stderr}");
            let needs = "kubectl exec needs a Kubernetes control plane of 1.36 or later";
            assert!(
                stderr.contains(needs) && stderr.contains(&server.git_version),
                "{stderr}"
            );
            let warning = wait_for_event(
                &scenario.client,
                &ns,
                "talker",
                "ExecRefused",
                Duration::from_secs(10),
            )
            .await?;
            assert_eq!(warning.type_.as_deref(), Some("Warning"));
            assert!(
                warning
                    .note
                    .as_deref()
                    .is_some_and(|note| note.contains(needs)),
                "{warning:?}"
            );
        }
        scenario.finish().await
    }
}
