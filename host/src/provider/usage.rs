//! What a pod's instance uses, as the provider reads it back: per container the cumulative CPU
//! time and the memory working set, and for GPU pods the GPUs' utilisation and memory. The
//! kubelet API serves it as the kubelet does (`/metrics/resource`, `/stats/summary`) for
//! metrics-server, `kubectl top` and autoscalers; orca's own `/metrics` shows the GPU figures.

use jiff::Timestamp;

use super::PodKey;

/// A pod whose usage is asked for: its containers, and whether it has GPUs to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageQuery {
    pub pod: PodKey,
    /// Every container that may run (init containers, sidecars, regular ones).
    pub containers: Vec<String>,
    /// The pod asks for `nvidia.com/gpu`.
    pub gpus: bool,
}

/// One figure at the time it was sampled (CloudWatch: the start of its period).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub at: Timestamp,
    pub value: f64,
}

/// A container's usage: each figure as last sampled.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerUsage {
    pub name: String,
    /// Cumulative CPU seconds, newest first: the last two samples when there were two, so a
    /// rate can be told.
    pub cpu: Vec<Sample>,
    /// The working set in bytes (memory in use, less the inactive file cache).
    pub memory: Option<Sample>,
}

impl ContainerUsage {
    /// CPU seconds used per second between the last two samples; `None` with fewer than two,
    /// or a counter that went back (the container restarted).
    pub fn cpu_rate(&self) -> Option<f64> {
        let [last, previous, ..] = self.cpu.as_slice() else {
            return None;
        };
        let seconds = last.at.duration_since(previous.at).as_secs_f64();
        (seconds > 0.0 && last.value >= previous.value)
            .then(|| (last.value - previous.value) / seconds)
    }
}

/// The pod's GPUs together, as last sampled.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GpuUsage {
    /// Mean utilisation over the pod's GPUs, in percent.
    pub utilization_percent: Sample,
    /// Memory in use on all of them, in bytes.
    pub memory_bytes: Option<Sample>,
}

/// What one pod uses: only the containers with figures appear.
#[derive(Debug, Clone, PartialEq)]
pub struct PodUsage {
    pub pod: PodKey,
    pub containers: Vec<ContainerUsage>,
    pub gpu: Option<GpuUsage>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).unwrap()
    }

    #[test]
    fn the_cpu_rate_is_told_from_the_last_two_samples_only_when_it_can_be() {
        let sample = |second, value| Sample {
            at: at(second),
            value,
        };
        let cases: [(&str, Vec<Sample>, Option<f64>); 5] = [
            ("none", vec![], None),
            ("one sample", vec![sample(60, 30.0)], None),
            (
                "half a core",
                vec![sample(60, 60.0), sample(0, 30.0)],
                Some(0.5),
            ),
            (
                "the counter went back: a restart",
                vec![sample(60, 1.0), sample(0, 30.0)],
                None,
            ),
            ("one time twice", vec![sample(0, 2.0), sample(0, 1.0)], None),
        ];
        for (name, cpu, rate) in cases {
            let usage = ContainerUsage {
                name: "c".to_owned(),
                cpu,
                memory: None,
            };
            assert_eq!(usage.cpu_rate(), rate, "{name}");
        }
    }
}
