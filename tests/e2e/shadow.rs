//! Shadow plugins end to end (issue 46): the real orca binary on the harness's moto, with
//! `policy.shadow` naming the example team selector (a file in its plugins directory) whose
//! settings give the `vision` team a bigger type than the default selector picks. A vision pod
//! and a pod of no team launch as the live chains decide; the candidate's decision is in each
//! one's decision record (differed, with its price per hour against what was launched; agreed),
//! counted in orca's metrics, and never launched: EC2 holds exactly the live instances. Then
//! `orca plugin replay` over the same config prints the difference for the running pods.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use aws_sdk_ec2::types::{Filter, InstanceStateName};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use orca_e2e::ec2::state_of;
use orca_e2e::plugins::team_selector_wasm;
use orca_e2e::pods::{self, burst_pod, decision};
use orca_e2e::{OrcaProcess, TestCluster, TestNamespace, aws_test_config, unique_node_name};

/// What the candidate gives the `vision` team: far bigger than the default selector's choice
/// for a 1-CPU pod.
const CANDIDATE_TYPE: &str = "c7i.2xlarge";

/// The pod, labelled with its team when it has one.
fn team_pod(name: &str, node: &str, team: Option<&str>) -> Pod {
    let mut pod = burst_pod(name, node, &[]);
    if let Some(team) = team {
        pod.metadata.labels = Some([("team".to_owned(), team.to_owned())].into());
    }
    pod
}

/// The instances tagged for `node`, pending or running.
async fn live_instances(
    ec2: &aws_sdk_ec2::Client,
    node: &str,
) -> Result<Vec<aws_sdk_ec2::types::Instance>> {
    let page = ec2
        .describe_instances()
        .filters(
            Filter::builder()
                .name("tag:orca.research/node")
                .values(node)
                .build(),
        )
        .send()
        .await?;
    Ok(page
        .reservations()
        .iter()
        .flat_map(|r| r.instances().iter().cloned())
        .filter(|i| {
            matches!(
                state_of(i),
                InstanceStateName::Pending | InstanceStateName::Running
            )
        })
        .collect())
}

fn number(value: &serde_json::Value, what: &str) -> Result<f64> {
    value.as_f64().with_context(|| format!("{what}: {value}"))
}

#[tokio::test]
async fn a_shadow_plugin_is_recorded_counted_and_priced_and_never_launches() -> Result<()> {
    let candidate = std::fs::read(team_selector_wasm()?)?;
    let cluster = TestCluster::shared();
    let client = cluster.kube_client().await?;
    let ec2 = cluster.ec2_client().await;
    let namespace = TestNamespace::create(&client, "e2e-shadow").await?;
    let node = unique_node_name("shadow");
    let orca = OrcaProcess::start(&node, |dir| {
        let plugins = dir.join("plugins");
        std::fs::create_dir(&plugins).expect("plugins dir");
        std::fs::write(plugins.join("team-selector.wasm"), &candidate).expect("plugin file");
        // A generous budget: the test machine is busy, and a timed-out shadow is not what
        // this test is about.
        format!(
            "{}policy:\n  pluginsDir: {}\n  shadow:\n    plugin: team-selector\n    settings: \
             {{\"teams\": {{\"vision\": [\"{CANDIDATE_TYPE}\"]}}}}\n    budget: 5s\n",
            aws_test_config(&node, ""),
            plugins.display(),
        )
    })?;
    orca.wait_ready(Duration::from_secs(30)).await?;

    let api: Api<Pod> = Api::namespaced(client.clone(), &namespace.name);
    pods::create(&api, &team_pod("vision", &node, Some("vision"))).await?;
    pods::create(&api, &team_pod("no-team", &node, None)).await?;
    let mut launched_types = Vec::new();
    let mut difference = 0.0;
    for name in ["vision", "no-team"] {
        let running = pods::wait_for_phase(&api, name, "Running", Duration::from_secs(60)).await?;
        let record = decision(&running).context("the decision annotation")?;
        let shadow = &record["shadow"];
        assert_eq!(shadow["plugin"], "team-selector", "{name}: {record}");
        let launch = &record["launch"];
        let launched = number(&launch["pricePerHour"], "the launch's price")?;
        let offering = launch["offering"].as_str().context("offering")?;
        launched_types.push(offering.split(' ').next().unwrap_or_default().to_owned());
        if name == "vision" {
            // Differed: both decisions on record, and what the candidate would cost.
            assert_eq!(shadow["outcome"], "differed", "{record}");
            assert_eq!(shadow["instanceType"], CANDIDATE_TYPE, "{record}");
            ensure!(
                shadow["differences"]
                    .as_array()
                    .is_some_and(|d| d.iter().any(|f| f == "instanceType")),
                "{record}"
            );
            ensure!(
                record["instanceType"] != CANDIDATE_TYPE,
                "the live chains chose the candidate's type: {record}"
            );
            let price = number(&shadow["pricePerHour"], "the candidate's price")?;
            difference = number(&shadow["priceDifferencePerHour"], "the difference")?;
            ensure!(
                (price - launched - difference).abs() < 1e-6 && difference > 0.0,
                "candidate ${price}/h against ${launched}/h launched: {record}"
            );
        } else {
            // The candidate declined a pod of no team: the same chains decided the same plan.
            assert_eq!(shadow["outcome"], "agreed", "{record}");
            assert_eq!(shadow["priceDifferencePerHour"], 0.0, "{record}");
        }
        // The PolicyDecision Event says what the shadow would have done.
        let events = pods::events_about(&client, &namespace.name, name).await?;
        ensure!(
            events
                .iter()
                .any(|e| e.reason.as_deref() == Some("PolicyDecision")
                    && e.note
                        .as_deref()
                        .unwrap_or_default()
                        .contains("shadow team-selector")),
            "{name}: {events:?}"
        );
    }

    // Never acted on: EC2 holds the two live instances, none of the candidate's type.
    let instances = live_instances(&ec2, &node).await?;
    let mut types: Vec<String> = instances
        .iter()
        .filter_map(|i| i.instance_type().map(|t| t.as_str().to_owned()))
        .collect();
    types.sort();
    launched_types.sort();
    assert_eq!(types, launched_types, "{instances:?}");

    // Counted: one decision each way, the field that differed, and the hourly prices.
    let page = orca_e2e::metrics::scrape(orca.metrics_port)?;
    let sum = |metric: &str, label: &str, value: &str| -> Result<f64> {
        Ok(orca_e2e::metrics::series(&page, metric)?
            .into_iter()
            .filter(|(labels, _)| {
                labels.get("plugin").map(String::as_str) == Some("team-selector")
                    && labels.get(label).map(String::as_str) == Some(value)
            })
            .map(|(_, v)| v)
            .sum())
    };
    assert_eq!(
        sum("orca_shadow_decisions_total", "outcome", "differed")?,
        1.0,
        "{page}"
    );
    assert_eq!(
        sum("orca_shadow_decisions_total", "outcome", "agreed")?,
        1.0,
        "{page}"
    );
    assert_eq!(
        sum("orca_shadow_differences_total", "field", "instanceType")?,
        1.0,
        "{page}"
    );
    let counted = sum("orca_shadow_price_per_hour_usd_total", "side", "candidate")?
        - sum("orca_shadow_price_per_hour_usd_total", "side", "launched")?;
    ensure!(
        (counted - difference).abs() < 1e-6,
        "counted {counted}, recorded {difference}:\n{page}"
    );

    // Replay over the running pods, read-only, with the config the node runs.
    let replay = |output: &str| -> Result<String> {
        let out = std::process::Command::new(orca_e2e::orca::orca_binary())
            .args(["plugin", "replay", "--config"])
            .arg(orca.config_path())
            .arg("--kubeconfig")
            .arg(cluster.var("KUBECONFIG"))
            .args(["-n", &namespace.name, "-o", output])
            .output()?;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        ensure!(
            out.status.success(),
            "replay: {}\n{stdout}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(stdout)
    };
    let json: serde_json::Value = serde_json::from_str(&replay("json")?)?;
    assert_eq!(json["summary"]["pods"], 2, "{json}");
    assert_eq!(json["summary"]["differed"], 1, "{json}");
    assert_eq!(json["summary"]["agreed"], 1, "{json}");
    let vision = json["pods"]
        .as_array()
        .and_then(|pods| pods.iter().find(|p| p["name"] == "vision"))
        .with_context(|| format!("the vision pod in {json}"))?;
    assert_eq!(vision["shadow"]["instanceType"], CANDIDATE_TYPE, "{json}");
    ensure!(
        number(
            &vision["shadow"]["priceDifferencePerHour"],
            "replay's difference"
        )? > 0.0,
        "{json}"
    );
    let text = replay("text")?;
    ensure!(
        text.contains(&format!("{}/vision", namespace.name))
            && text.contains(CANDIDATE_TYPE)
            && text.contains("2 pods compared, 1 would differ"),
        "{text}"
    );
    // Read-only: still the same two instances.
    ensure!(live_instances(&ec2, &node).await?.len() == 2);
    Ok(())
}
