//! `orca plugin replay --config FILE [--shadow PLUGIN] [-n NAMESPACE] [-o text|json]`: a
//! candidate plugin over the pods orca runs on a live cluster, read-only. Each pod's recorded
//! decision (`orca.research/decision`) is set beside what the candidate would decide for it
//! now, as `policy.shadow` would (the config's chains, node, guardrails), each priced from the
//! catalogue in the zone the pod runs in. It lists pods, one page at a time; it writes nothing.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use serde::Serialize;

use super::{PluginCommandError, inputs};
use crate::config::Config;
use crate::cost::LaunchPrices;
use crate::policy::decision::DecisionRecord;
use crate::policy::shadow::{ShadowOutcome, ShadowRecord, signed_price};
use crate::policy::{DECISION_ANNOTATION, Pipeline};
use crate::provider::plan::Market;

/// Pods asked for per list call.
const PAGE: u32 = 250;

/// What `replay` is run with.
pub struct ReplayOptions<'a> {
    pub config: &'a std::path::Path,
    pub shadow: Option<inputs::ShadowArgs<'a>>,
    pub kubeconfig: Option<&'a std::path::Path>,
    pub namespace: Option<&'a str>,
    pub output: &'a str,
}

/// One pod: what runs, and what the candidate would have run.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Replayed {
    namespace: String,
    name: String,
    node: String,
    /// The offering launched (or decided, if not launched yet).
    instance_type: String,
    market: Market,
    #[serde(skip_serializing_if = "Option::is_none")]
    zone: Option<String>,
    /// Its catalogue price an hour in that zone.
    #[serde(skip_serializing_if = "Option::is_none")]
    price_per_hour: Option<f64>,
    shadow: ShadowRecord,
}

/// The whole replay, as `-o json` prints it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Replay {
    /// The candidate, `name version`.
    candidate: String,
    pods: Vec<Replayed>,
    /// Pods orca serves that carry no decision yet (pending their first plan, or failed
    /// before one): nothing to compare.
    undecided: Vec<String>,
    summary: Summary,
}

#[derive(Serialize, Default)]
#[serde(rename_all = "camelCase")]
struct Summary {
    pods: usize,
    agreed: usize,
    differed: usize,
    /// The candidate's chains would have failed the pod.
    would_fail: usize,
    /// What the pods compared run at an hour, and what the candidate's choices would, both
    /// from the catalogue (pods either side cannot price are left out of both).
    price_per_hour: f64,
    candidate_price_per_hour: f64,
}

/// # Errors
/// The config, the candidate or the cluster could not be read.
pub fn run(options: &ReplayOptions) -> Result<(), PluginCommandError> {
    let spec = inputs::PipelineSpec {
        plugin: None,
        config: Some(options.config),
        settings: "{}",
        region: None,
        architecture: None,
        instances: None,
        max_memory: None,
        shadow: options.shadow,
    };
    let (pipeline, catalogue) = inputs::pipeline(&spec)?;
    let Some(candidate) = pipeline.shadow_plugin().map(str::to_owned) else {
        return Err(PluginCommandError::NoCandidate);
    };
    let config = Config::load(options.config)?;
    let prices = LaunchPrices::new(catalogue);
    let runtime = tokio::runtime::Handle::current();
    let client = runtime
        .block_on(crate::cluster::connection::connect(options.kubeconfig))
        .map_err(PluginCommandError::Cluster)?
        .0;
    let mut replay = Replay {
        candidate: candidate.clone(),
        pods: Vec::new(),
        undecided: Vec::new(),
        summary: Summary::default(),
    };
    for declared in config.declared_nodes() {
        let node = &declared.node.name;
        let on_node =
            pipeline.for_node(node, &declared.node.architecture, declared.zone.as_deref());
        let pods = runtime.block_on(list_pods(&client, options.namespace, node))?;
        for pod in pods.iter().filter(|pod| is_live(pod)) {
            match replay_pod(&on_node, &prices, node, pod) {
                Some(replayed) => replay.pods.push(replayed),
                None => replay.undecided.push(pod_name(pod)),
            }
        }
    }
    if let Some(version) = replay.pods.iter().find_map(|p| p.shadow.version.as_deref()) {
        replay.candidate = format!("{candidate} {version}");
    }
    replay.summary = summarize(&replay.pods);
    if options.output == "json" {
        let json = serde_json::to_string_pretty(&replay).map_err(PluginCommandError::Print)?;
        println!("{json}");
    } else {
        print!("{}", text(&replay));
    }
    Ok(())
}

/// Every pod on `node` (in `namespace`, if given), a page at a time.
async fn list_pods(
    client: &kube::Client,
    namespace: Option<&str>,
    node: &str,
) -> Result<Vec<Pod>, PluginCommandError> {
    let api: Api<Pod> = match namespace {
        Some(namespace) => Api::namespaced(client.clone(), namespace),
        None => Api::all(client.clone()),
    };
    let mut params = ListParams::default()
        .fields(&format!("spec.nodeName={node}"))
        .limit(PAGE);
    let mut pods = Vec::new();
    loop {
        let page = api
            .list(&params)
            .await
            .map_err(|source| PluginCommandError::ListPods {
                node: node.to_owned(),
                source,
            })?;
        pods.extend(page.items);
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => return Ok(pods),
        }
    }
}

/// A pod still running or to run: not ended, not being deleted.
fn is_live(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    !matches!(phase, Some("Succeeded" | "Failed")) && pod.metadata.deletion_timestamp.is_none()
}

fn pod_name(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or(""),
        pod.metadata.name.as_deref().unwrap_or("")
    )
}

/// The pod's recorded decision beside the candidate's, both priced in the pod's zone; `None`
/// when the pod carries no decision.
fn replay_pod(
    pipeline: &Pipeline,
    prices: &LaunchPrices,
    node: &str,
    pod: &Pod,
) -> Option<Replayed> {
    let recorded: DecisionRecord = pod
        .metadata
        .annotations
        .as_ref()?
        .get(DECISION_ANNOTATION)
        .and_then(|json| serde_json::from_str(json).ok())?;
    let (instance_type, market) = launched_offering(&recorded);
    let zone = recorded.launch.as_ref().and_then(|l| l.zone.clone());
    let price = |(instance_type, market): (&str, Market)| {
        prices
            .at_launch(instance_type, market, zone.as_deref())
            .map(|(price, _)| price)
    };
    let mut shadow = pipeline.shadow_beside(pod, Ok(&recorded))?;
    let live_price = price((&instance_type, market));
    let candidate_price = shadow
        .launched_instead((&instance_type, market))
        .and_then(price);
    shadow.priced(candidate_price, live_price);
    Some(Replayed {
        namespace: pod.metadata.namespace.clone().unwrap_or_default(),
        name: pod.metadata.name.clone().unwrap_or_default(),
        node: node.to_owned(),
        instance_type,
        market,
        zone,
        price_per_hour: live_price.map(|p| p.usd()),
        shadow,
    })
}

/// What the record says was launched (`m5.large spot`), else what was decided.
fn launched_offering(record: &DecisionRecord) -> (String, Market) {
    record
        .launch
        .as_ref()
        .and_then(|launch| {
            let (instance_type, market) = launch.offering.split_once(' ')?;
            Some((instance_type.to_owned(), Market::parse(market)?))
        })
        .unwrap_or_else(|| (record.instance_type.clone(), record.market))
}

fn summarize(pods: &[Replayed]) -> Summary {
    let mut summary = Summary {
        pods: pods.len(),
        ..Summary::default()
    };
    for pod in pods {
        match pod.shadow.outcome {
            ShadowOutcome::Agreed => summary.agreed += 1,
            ShadowOutcome::Differed => summary.differed += 1,
            ShadowOutcome::ShadowFailed | ShadowOutcome::BothFailed => summary.would_fail += 1,
            _ => {}
        }
        if let (Some(live), Some(candidate)) = (pod.price_per_hour, pod.shadow.price_per_hour) {
            summary.price_per_hour += live;
            summary.candidate_price_per_hour += candidate;
        }
    }
    summary.price_per_hour = round(summary.price_per_hour);
    summary.candidate_price_per_hour = round(summary.candidate_price_per_hour);
    summary
}

fn round(dollars: f64) -> f64 {
    (dollars * 1e6).round() / 1e6
}

/// A line per pod that would change, then the summary.
fn text(replay: &Replay) -> String {
    let mut out = String::new();
    let rows: Vec<[String; 5]> = replay
        .pods
        .iter()
        .filter(|pod| pod.shadow.outcome != ShadowOutcome::Agreed)
        .map(|pod| {
            let now = format!(
                "{} {}{}",
                pod.instance_type,
                pod.market.as_str(),
                pod.price_per_hour
                    .map_or_else(String::new, |p| format!(" ${p}/h"))
            );
            let candidate = match pod.shadow.outcome {
                ShadowOutcome::Differed | ShadowOutcome::LiveFailed => {
                    let (instance_type, market) =
                        pod.shadow.offering().unwrap_or(("?", pod.market));
                    format!(
                        "{instance_type} {}{}",
                        market.as_str(),
                        pod.shadow
                            .price_per_hour
                            .map_or_else(String::new, |p| format!(" ${p}/h"))
                    )
                }
                ShadowOutcome::ShadowFailed | ShadowOutcome::BothFailed => {
                    format!("fails: {}", pod.shadow.error.as_deref().unwrap_or_default())
                }
                other => other.as_str().to_owned(),
            };
            let differs: Vec<&str> = pod.shadow.differences.iter().map(|f| f.as_str()).collect();
            [
                format!("{}/{}", pod.namespace, pod.name),
                now,
                candidate,
                pod.shadow
                    .price_difference_per_hour
                    .map_or_else(String::new, signed_price),
                differs.join(","),
            ]
        })
        .collect();
    if !rows.is_empty() {
        let header = [
            "POD".to_owned(),
            "RUNS".to_owned(),
            "CANDIDATE".to_owned(),
            "DIFFERENCE".to_owned(),
            "DIFFERS".to_owned(),
        ];
        let widths: Vec<usize> = (0..5)
            .map(|i| {
                std::iter::once(&header)
                    .chain(&rows)
                    .map(|row| row[i].chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        for row in std::iter::once(&header).chain(&rows) {
            let line: Vec<String> = row
                .iter()
                .zip(&widths)
                .map(|(cell, width)| format!("{cell:<width$}"))
                .collect();
            out.push_str(line.join("  ").trim_end());
            out.push('\n');
        }
    }
    let summary = &replay.summary;
    let difference = summary.candidate_price_per_hour - summary.price_per_hour;
    out.push_str(&format!(
        "{}: {} pods compared, {} would differ, {} would fail, {} agree; ${}/h now, ${}/h with the candidate ({})\n",
        replay.candidate,
        summary.pods,
        summary.differed,
        summary.would_fail,
        summary.agreed,
        summary.price_per_hour,
        summary.candidate_price_per_hour,
        signed_price(round(difference)),
    ));
    if !replay.undecided.is_empty() {
        out.push_str(&format!(
            "{} pods carry no decision yet: {}\n",
            replay.undecided.len(),
            replay.undecided.join(", ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_offering_compared_is_the_one_launched_else_the_one_decided() {
        let mut record = DecisionRecord::on_demand(&["m5.large", "m5a.large"]);
        assert_eq!(
            launched_offering(&record),
            ("m5.large".to_owned(), Market::OnDemand)
        );
        record.launch = Some(
            serde_json::from_value(serde_json::json!({
                "offering": "m5a.large spot", "zone": "us-east-1a"
            }))
            .unwrap(),
        );
        assert_eq!(
            launched_offering(&record),
            ("m5a.large".to_owned(), Market::Spot)
        );
        // A launch that failed records an empty offering: the decided one is compared.
        record.launch = Some(serde_json::from_value(serde_json::json!({"offering": ""})).unwrap());
        assert_eq!(
            launched_offering(&record),
            ("m5.large".to_owned(), Market::OnDemand)
        );
    }

    #[test]
    fn only_pods_still_running_or_to_run_are_replayed() {
        let pod = |phase: Option<&str>, deleting: bool| -> Pod {
            let mut pod = Pod {
                status: phase.map(|phase| k8s_openapi::api::core::v1::PodStatus {
                    phase: Some(phase.to_owned()),
                    ..Default::default()
                }),
                ..Pod::default()
            };
            if deleting {
                pod.metadata.deletion_timestamp =
                    Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                        jiff::Timestamp::UNIX_EPOCH,
                    ));
            }
            pod
        };
        // (phase, being deleted, replayed)
        let cases = [
            (None, false, true),
            (Some("Pending"), false, true),
            (Some("Running"), false, true),
            (Some("Running"), true, false),
            (Some("Succeeded"), false, false),
            (Some("Failed"), false, false),
        ];
        for (phase, deleting, live) in cases {
            assert_eq!(is_live(&pod(phase, deleting)), live, "{phase:?} {deleting}");
        }
    }
}
