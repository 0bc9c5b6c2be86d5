//! `policy.guardrails` end to end: the real orca binary, the real scheduler, and moto's EC2
//! behind the SDK. A plugin that answers a denied type, a pod over the per-pod price, and a
//! namespace whose cap fills under a burst: each pod's status and Events name the guardrail,
//! and moto, polled all along, never holds an instance over the limits.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use aws_sdk_ec2::types::{Filter, Instance, InstanceStateName};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::DeleteParams;
use orca_e2e::ec2::{state_of, tags_of};
use orca_e2e::plugins::hostile_wasm;
use orca_e2e::pods::{self, burst_pod, decision, events_about, phase};
use orca_e2e::wait::poll_until;
use orca_e2e::{OrcaProcess, TestCluster, TestNamespace, aws_test_config, unique_node_name};

const TICK: Duration = Duration::from_millis(250);
const MODE: &str = "hostile.orca.research/mode";
/// The catalogue's us-east-1 on-demand price of m7i.large, which the hostile plugin answers.
const M7I_LARGE: f64 = 0.1008;
/// The capped namespace's cap: a $0.05/h spot pod and two m7i.large fit ($0.2516), a third
/// does not. Were the spot pod counted at its on-demand price, only one would.
const CAP: f64 = 0.26;

/// The live instances moto holds for `node` in `namespace`.
async fn live(ec2: &aws_sdk_ec2::Client, node: &str, namespace: &str) -> Result<Vec<Instance>> {
    let filter = |name: &str, value: &str| Filter::builder().name(name).values(value).build();
    let pages = ec2
        .describe_instances()
        .filters(filter("tag:orca.research/node", node))
        .filters(filter("tag:orca.research/pod-namespace", namespace))
        .send()
        .await?;
    Ok(pages
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

/// What `instances` cost an hour as the guardrails count them: spot at its max price tag.
fn cost(instances: &[Instance]) -> Result<f64> {
    instances.iter().try_fold(0.0, |sum, instance| {
        let tags = tags_of(instance);
        let price = match instance.instance_lifecycle().map(|l| l.as_str()) {
            Some("spot") => tags
                .get("orca.research/spot-max-price")
                .context("a spot instance carries its max price")?
                .parse::<f64>()?,
            _ => {
                let kind = instance.instance_type().map(|t| t.as_str());
                ensure!(kind == Some("m7i.large"), "unexpected type {kind:?}");
                M7I_LARGE
            }
        };
        Ok(sum + price)
    })
}

/// Polls until `check` answers, asserting at every poll that the capped namespace's live
/// instances stay within the cap.
async fn within_cap_until<T: std::fmt::Debug>(
    what: &str,
    ec2: &aws_sdk_ec2::Client,
    node: &str,
    namespace: &str,
    check: impl AsyncFn() -> Result<Option<T>>,
) -> Result<T> {
    poll_until(what, Duration::from_secs(60), TICK, || async {
        let running = live(ec2, node, namespace).await?;
        let spent = cost(&running)?;
        ensure!(
            spent <= CAP + 1e-9,
            "namespace {namespace} holds ${spent}/h of instances, over its ${CAP}/h cap: {running:?}"
        );
        check().await
    })
    .await
}

fn names_of(pods: &[Pod], wanted: &str) -> Vec<String> {
    pods.iter()
        .filter(|p| phase(p) == wanted)
        .filter_map(|p| p.metadata.name.clone())
        .collect()
}

#[tokio::test]
async fn plugins_choices_stay_within_the_guardrails_and_a_full_namespace_waits_for_room()
-> Result<()> {
    let hostile = std::fs::read(hostile_wasm()?)?;
    let cluster = TestCluster::shared();
    let client = cluster.kube_client().await?;
    let ec2 = cluster.ec2_client().await;
    let open = TestNamespace::create(&client, "e2e-guard").await?;
    let capped = TestNamespace::create(&client, "e2e-guard-cap").await?;
    let node = unique_node_name("guardrails");
    let orca = OrcaProcess::start(&node, |dir| {
        let plugins = dir.join("plugins");
        std::fs::create_dir(&plugins).expect("plugins dir");
        std::fs::write(plugins.join("hostile.wasm"), &hostile).expect("plugin file");
        format!(
            "{}policy:\n  pluginsDir: {}\n  selectInstance:\n    - plugin: hostile\n    - plugin: \
             orca-default-selector\n  guardrails:\n    denyFamilies: [\"p5*\"]\n    \
             maxPodPricePerHour: 1\n    maxPricePerHourByNamespace:\n      {}: {CAP}\n",
            aws_test_config(&node, ""),
            plugins.display(),
            capped.name,
        )
    })?;
    orca.wait_ready(Duration::from_secs(30)).await?;

    // A selector gone expensive: the denied type is dropped, its next candidate launches.
    let open_pods: Api<Pod> = Api::namespaced(client.clone(), &open.name);
    pods::create(
        &open_pods,
        &burst_pod("dear-first", &node, &[(MODE, "dear-first")]),
    )
    .await?;
    // Only the denied type, and (the hostile plugin declining, so the default selector
    // answers the pod's annotation) a type over the per-pod price: nothing left to launch.
    pods::create(
        &open_pods,
        &burst_pod("dear-only", &node, &[(MODE, "dear-only")]),
    )
    .await?;
    pods::create(
        &open_pods,
        &burst_pod(
            "over-price",
            &node,
            &[
                (MODE, "decline"),
                ("orca.research/instance-type", "g6e.xlarge"),
            ],
        ),
    )
    .await?;
    let dropped = "policy.guardrails.denyFamilies (p5*) dropped p5.48xlarge, chosen by plugin \
                   hostile 0.0.1";
    let running =
        pods::wait_for_phase(&open_pods, "dear-first", "Running", Duration::from_secs(60)).await?;
    let record = decision(&running).context("the decision annotation")?;
    assert_eq!(record["instanceType"], "m7i.large");
    assert_eq!(record["guardrails"][0]["guardrail"], "denyFamilies");
    assert_eq!(record["guardrails"][0]["effect"], "dropped");
    assert_eq!(record["guardrails"][0]["plugin"], "hostile 0.0.1");
    assert_eq!(record["guardrails"][0]["value"], "p5.48xlarge");
    let events = events_about(&client, &open.name, "dear-first").await?;
    assert!(
        events
            .iter()
            .any(|e| e.reason.as_deref() == Some("PolicyDecision")
                && e.note.as_deref().unwrap_or_default().contains(dropped)),
        "{events:?}"
    );
    for (name, expected) in [
        (
            "dear-only",
            "policy.guardrails.denyFamilies (p5*) refused p5.48xlarge, chosen by plugin hostile \
             0.0.1",
        ),
        (
            "over-price",
            "policy.guardrails.maxPodPricePerHour ($1/h) refused g6e.xlarge on-demand at \
             $1.861/h, chosen by plugin orca-default-selector",
        ),
    ] {
        let failed =
            pods::wait_for_phase(&open_pods, name, "Failed", Duration::from_secs(60)).await?;
        assert_eq!(pods::reason(&failed), "GuardrailViolation", "{name}");
        assert!(
            pods::message(&failed).contains(expected),
            "{name}: {}",
            pods::message(&failed)
        );
        let record = decision(&failed).context("the refused decision is on record")?;
        assert_eq!(record["guardrails"][0]["effect"], "refused", "{name}");
        let events = events_about(&client, &open.name, name).await?;
        assert!(
            events
                .iter()
                .any(|e| e.reason.as_deref() == Some("GuardrailViolation")
                    && e.note.as_deref().unwrap_or_default().contains(expected)),
            "{name}: {events:?}"
        );
    }

    // The capped namespace: a spot pod at a $0.05/h max price counts at that (its instance's
    // tag, read back from EC2's listing) once listed.
    let capped_pods: Api<Pod> = Api::namespaced(client.clone(), &capped.name);
    pods::create(
        &capped_pods,
        &burst_pod(
            "spot",
            &node,
            &[
                ("orca.research/launch-type", "spot"),
                ("orca.research/max-spot-price", "0.05"),
            ],
        ),
    )
    .await?;
    pods::wait_for_phase(&capped_pods, "spot", "Running", Duration::from_secs(60)).await?;
    within_cap_until(
        "the spot pod counted at its max price",
        &ec2,
        &node,
        &capped.name,
        async || {
            let page = orca_e2e::metrics::scrape(orca.metrics_port)?;
            let spend = orca_e2e::metrics::by_label(
                &page,
                "orca_namespace_spend_usd_per_hour",
                "namespace",
            );
            Ok(spend
                .get(&capped.name)
                .is_some_and(|spend| (spend - 0.05).abs() < 1e-9)
                .then_some(()))
        },
    )
    .await?;

    // A burst of five: exactly two fit, whatever order the reconciles race in.
    for n in 0..5 {
        pods::create(&capped_pods, &burst_pod(&format!("fill-{n}"), &node, &[])).await?;
    }
    // The fill pods, but one deleted (Terminating, until orca removes it).
    let fills = async |deleted: Option<&str>| {
        let listed = capped_pods.list(&Default::default()).await?.items;
        Ok::<_, anyhow::Error>(
            listed
                .into_iter()
                .filter(|p| {
                    p.metadata
                        .name
                        .as_deref()
                        .is_some_and(|n| n.starts_with("fill-") && Some(n) != deleted)
                })
                .collect::<Vec<Pod>>(),
        )
    };
    let waiting = |pod: &Pod| {
        pods::condition_reason(pod, "Ready").as_deref() == Some("NamespaceBudgetExceeded")
    };
    let (running, waiting_pods) = within_cap_until(
        "two fill pods Running, three waiting",
        &ec2,
        &node,
        &capped.name,
        async || {
            let fills = fills(None).await?;
            let running = names_of(&fills, "Running");
            let waiting: Vec<Pod> = fills.iter().filter(|p| waiting(p)).cloned().collect();
            Ok((running.len() == 2 && waiting.len() == 3).then_some((running, waiting)))
        },
    )
    .await?;
    let message = pods::message(&waiting_pods[0]);
    for part in [
        format!(
            "namespace {}'s live instances cost $0.2516/h of its cap of $0.26/h",
            capped.name
        ),
        format!(
            "(policy.guardrails.maxPricePerHourByNamespace.{})",
            capped.name
        ),
        "this pod's instance may cost up to $0.1008/h, which would bring it to $0.3524/h"
            .to_owned(),
    ] {
        assert!(message.contains(&part), "{message}");
    }
    let waiting_name = waiting_pods[0].metadata.name.clone().unwrap_or_default();
    let events = events_about(&client, &capped.name, &waiting_name).await?;
    assert!(
        events
            .iter()
            .any(|e| e.reason.as_deref() == Some("NamespaceBudgetExceeded")
                && e.note
                    .as_deref()
                    .unwrap_or_default()
                    .contains("of its cap of $0.26/h")),
        "{events:?}"
    );
    let record = decision(&waiting_pods[0]).context("a waiting pod's decision")?;
    assert_eq!(record["guardrails"][0]["effect"], "waits");

    // One running pod deleted: its instance ends, and exactly one waiting pod takes the room.
    let deleted = running[0].clone();
    capped_pods
        .delete(&deleted, &DeleteParams::default())
        .await?;
    within_cap_until(
        "a waiting pod launched in the freed room",
        &ec2,
        &node,
        &capped.name,
        async || {
            let fills = fills(Some(&deleted)).await?;
            let running = names_of(&fills, "Running");
            let waiting = fills.iter().filter(|p| waiting(p)).count();
            Ok((running.len() == 2 && waiting == 2).then_some(()))
        },
    )
    .await?;

    // Nothing over the limits ever reached EC2: no denied or over-price type, in any state.
    let everything = ec2
        .describe_instances()
        .filters(
            Filter::builder()
                .name("tag:orca.research/node")
                .values(&node)
                .build(),
        )
        .send()
        .await?;
    let mut types: BTreeMap<String, usize> = BTreeMap::new();
    for instance in everything.reservations().iter().flat_map(|r| r.instances()) {
        let kind = instance
            .instance_type()
            .map(|t| t.as_str().to_owned())
            .unwrap_or_default();
        *types.entry(kind).or_default() += 1;
    }
    assert_eq!(
        types.keys().map(String::as_str).collect::<Vec<_>>(),
        ["m7i.large"],
        "{types:?}"
    );
    // dear-first, spot, and three fill pods: two at first, one in the freed room.
    assert_eq!(types["m7i.large"], 5, "{types:?}");
    drop(orca);
    open.delete().await?;
    capped.delete().await
}
