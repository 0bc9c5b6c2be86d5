//! The GPU pods' utilisation and GPU memory, from the usage last read for the served pods
//! ([`PodUsages`]), so a GPU instance sitting idle while it is paid for shows on a dashboard.
//! Read at scrape time: a pod that stopped is gone from the next scrape.

use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;

use crate::process::pod_usage::PodUsages;
use crate::provider::PodUsage;

pub(super) struct PodGpus(pub Arc<PodUsages>);

impl std::fmt::Debug for PodGpus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("PodGpus").finish()
    }
}

/// One gauge family over the GPU pods, labelled by namespace and pod.
fn encode_gpu_family(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    pods: &[PodUsage],
    figure: fn(&PodUsage) -> Option<f64>,
) -> Result<(), std::fmt::Error> {
    let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for pod in pods {
        if let Some(value) = figure(pod) {
            let labels = vec![
                ("namespace".to_owned(), pod.pod.namespace.clone()),
                ("pod".to_owned(), pod.pod.name.clone()),
            ];
            ConstGauge::new(value).encode(metric.encode_family(&labels)?)?;
        }
    }
    Ok(())
}

impl Collector for PodGpus {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let mut pods: Vec<PodUsage> = self
            .0
            .all()
            .into_iter()
            .filter(|p| p.gpu.is_some())
            .collect();
        pods.sort_by(|a, b| (&a.pod.namespace, &a.pod.name).cmp(&(&b.pod.namespace, &b.pod.name)));
        encode_gpu_family(
            &mut encoder,
            "orca_pod_gpu_utilization_percent",
            "Mean utilisation of a GPU pod's GPUs as its instance last sampled them, in percent",
            &pods,
            |pod| pod.gpu.map(|gpu| gpu.utilization_percent.value),
        )?;
        encode_gpu_family(
            &mut encoder,
            "orca_pod_gpu_memory_used_bytes",
            "Memory in use on a GPU pod's GPUs as its instance last sampled them",
            &pods,
            |pod| pod.gpu.and_then(|gpu| gpu.memory_bytes).map(|m| m.value),
        )
    }
}

#[cfg(test)]
mod tests {
    use jiff::Timestamp;
    use prometheus_client::registry::Registry;

    use super::*;
    use crate::provider::{GpuUsage, PodKey, Sample, UsageQuery};

    fn usage(name: &str, gpu: Option<(f64, Option<f64>)>) -> PodUsage {
        let sample = |value| Sample {
            at: Timestamp::UNIX_EPOCH,
            value,
        };
        PodUsage {
            pod: PodKey {
                namespace: "ml".to_owned(),
                name: name.to_owned(),
                uid: format!("uid-{name}"),
            },
            containers: Vec::new(),
            gpu: gpu.map(|(utilization, memory)| GpuUsage {
                utilization_percent: sample(utilization),
                memory_bytes: memory.map(sample),
            }),
        }
    }

    fn scrape(usages: &Arc<PodUsages>) -> String {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(PodGpus(usages.clone())));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        text
    }

    #[test]
    fn each_gpu_pod_shows_its_figures_and_a_stopped_pod_is_gone_at_the_next_scrape() {
        let usages = Arc::new(PodUsages::default());
        let asked: Vec<UsageQuery> = Vec::new();
        usages.replace(
            &asked,
            vec![
                usage("idle", Some((0.0, Some(1.5e9)))),
                usage("busy", Some((97.5, None))),
                usage("cpu-only", None),
            ],
        );
        let text = scrape(&usages);
        for line in [
            "orca_pod_gpu_utilization_percent{namespace=\"ml\",pod=\"idle\"} 0.0",
            "orca_pod_gpu_utilization_percent{namespace=\"ml\",pod=\"busy\"} 97.5",
            "orca_pod_gpu_memory_used_bytes{namespace=\"ml\",pod=\"idle\"} 1500000000.0",
        ] {
            assert!(text.contains(line), "{line} in\n{text}");
        }
        assert!(!text.contains("cpu-only"), "{text}");
        assert!(!text.contains("orca_pod_gpu_memory_used_bytes{namespace=\"ml\",pod=\"busy\"}"));
        usages.retain(&["uid-busy".to_owned()].into_iter().collect());
        let text = scrape(&usages);
        assert!(!text.contains("idle"), "{text}");
        assert!(text.contains("pod=\"busy\""), "{text}");
    }
}
