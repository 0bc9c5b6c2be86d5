use std::sync::Arc;

use jiff::Timestamp;

use super::*;
use crate::provider::aws::usage::fake::FakeCloudWatch;
use crate::provider::{PodKey, Sample};

const NAMESPACE: &str = "Orca/Pods";

fn at(seconds: i64) -> Timestamp {
    // 1_800_000_000 is a multiple of 60 (and of 3600).
    Timestamp::from_second(1_800_000_000 + seconds).unwrap()
}

fn pod(uid: &str, containers: &[&str], gpus: bool) -> UsageQuery {
    UsageQuery {
        pod: PodKey {
            namespace: "ml".to_owned(),
            name: format!("pod-{uid}"),
            uid: uid.to_owned(),
        },
        containers: containers.iter().map(|c| (*c).to_owned()).collect(),
        gpus,
    }
}

fn reader(api: Arc<FakeCloudWatch>) -> UsageReader {
    UsageReader {
        api,
        namespace: NAMESPACE.to_owned(),
        period_seconds: 60,
    }
}

#[test]
fn each_container_has_two_figures_and_a_gpu_pod_two_more() {
    let (queries, targets) = queries(&[pod("u-1", &["a", "b"], false), pod("u-2", &["c"], true)]);
    let described: Vec<String> = queries
        .iter()
        .map(|q| {
            let dims: Vec<String> = q
                .dimensions
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            format!("{} {} {}", q.id, q.metric, dims.join(","))
        })
        .collect();
    assert_eq!(
        described,
        [
            "q0 CpuUsageSeconds PodUID=u-1,Container=a",
            "q1 MemoryWorkingSetBytes PodUID=u-1,Container=a",
            "q2 CpuUsageSeconds PodUID=u-1,Container=b",
            "q3 MemoryWorkingSetBytes PodUID=u-1,Container=b",
            "q4 CpuUsageSeconds PodUID=u-2,Container=c",
            "q5 MemoryWorkingSetBytes PodUID=u-2,Container=c",
            "q6 GpuUtilization PodUID=u-2",
            "q7 GpuMemoryUsedBytes PodUID=u-2",
        ]
    );
    assert_eq!(
        targets[3],
        Target {
            pod: 0,
            figure: Figure::Memory(1)
        }
    );
    assert_eq!(
        targets[6],
        Target {
            pod: 1,
            figure: Figure::GpuUtilization
        }
    );
}

#[test]
fn the_window_is_the_last_periods_on_their_boundaries() {
    let cases = [
        (at(0), 60, at(-180), at(60)),
        (at(59), 60, at(-180), at(60)),
        (at(61), 60, at(-120), at(120)),
        (at(7), 5, at(-10), at(10)),
        (at(3599), 3600, at(-3 * 3600), at(3600)),
    ];
    for (now, period, start, end) in cases {
        assert_eq!(window(now, period), (start, end), "{now} every {period}s");
    }
}

#[test]
fn answers_go_back_to_their_pods_newest_first_and_empty_ones_are_left_out() {
    let pods = [pod("u-1", &["a", "b"], true), pod("u-2", &["c"], false)];
    let (_, targets) = queries(&pods);
    let sample = |second, value| Sample {
        at: at(second),
        value,
    };
    let series = |id: &str, points: Vec<Sample>| Series {
        id: id.to_owned(),
        points,
    };
    let answers = vec![
        // Oldest first on purpose: the order CloudWatch answers in is not relied upon.
        series(
            "q0",
            vec![sample(0, 1.0), sample(120, 9.0), sample(60, 4.0)],
        ),
        series("q1", vec![sample(60, 100.0), sample(120, 200.0)]),
        series("q2", vec![]),
        series("q4", vec![sample(120, 97.5)]),
    ];
    let usage = assemble(&pods, &targets, answers);
    assert_eq!(usage.len(), 1, "u-2 has no figure at all: {usage:?}");
    let u1 = &usage[0];
    assert_eq!(u1.pod.uid, "u-1");
    assert_eq!(u1.containers.len(), 1, "b has no figure: {u1:?}");
    assert_eq!(
        u1.containers[0].cpu,
        vec![sample(120, 9.0), sample(60, 4.0)]
    );
    assert_eq!(u1.containers[0].memory, Some(sample(120, 200.0)));
    assert_eq!(u1.containers[0].cpu_rate(), Some(5.0 / 60.0));
    let gpu = u1.gpu.expect("u-1 has GPU figures");
    assert_eq!(gpu.utilization_percent, sample(120, 97.5));
    assert_eq!(gpu.memory_bytes, None, "no GPU memory datapoint");
}

#[tokio::test]
async fn pods_are_read_in_as_many_calls_as_the_batch_size_needs_whatever_their_count() {
    let cases = [(1, 1), (250, 1), (251, 2), (1000, 4)];
    for (count, calls) in cases {
        let api = Arc::new(FakeCloudWatch::default());
        let pods: Vec<UsageQuery> = (0..count)
            .map(|i| pod(&format!("u-{i}"), &["main"], false))
            .collect();
        for i in 0..count {
            let uid = format!("u-{i}");
            let dims = [("PodUID", uid.as_str()), ("Container", "main")];
            api.put(NAMESPACE, "CpuUsageSeconds", &dims, at(-60), 10.0);
            api.put(NAMESPACE, "CpuUsageSeconds", &dims, at(0), 40.0);
            api.put(NAMESPACE, "MemoryWorkingSetBytes", &dims, at(0), 5.0e8);
        }
        let usage = reader(api.clone()).read(&pods, at(30)).await.unwrap();
        assert_eq!(api.calls().len(), calls, "{count} pods");
        assert!(
            api.calls()
                .iter()
                .all(|c| c.queries.len() <= MAX_QUERIES_PER_CALL)
        );
        assert_eq!(usage.len(), count, "every pod has figures");
        assert!(
            usage
                .iter()
                .all(|u| u.containers[0].cpu_rate() == Some(0.5)),
            "{count} pods"
        );
    }
}

#[tokio::test]
async fn figures_of_another_namespace_dimension_set_or_an_older_period_are_not_read() {
    let api = Arc::new(FakeCloudWatch::default());
    let dims = [("PodUID", "u-1"), ("Container", "main")];
    api.put("Other/Pods", "CpuUsageSeconds", &dims, at(0), 1.0);
    api.put(
        NAMESPACE,
        "CpuUsageSeconds",
        &[("PodUID", "u-1")],
        at(0),
        2.0,
    );
    api.put(NAMESPACE, "MemoryWorkingSetBytes", &dims, at(-240), 3.0);
    let usage = reader(api.clone())
        .read(&[pod("u-1", &["main"], false)], at(0))
        .await
        .unwrap();
    assert_eq!(usage, Vec::new());
}

#[tokio::test]
async fn a_failed_call_fails_the_read_so_no_pod_shows_as_using_nothing() {
    let api = Arc::new(FakeCloudWatch::default());
    let pods: Vec<UsageQuery> = (0..300)
        .map(|i| pod(&format!("u-{i}"), &["main"], false))
        .collect();
    api.refuse_next(CloudWatchError::classify("Throttling", "Rate exceeded"));
    let error = reader(api.clone()).read(&pods, at(0)).await.unwrap_err();
    assert!(error.transient, "{error}");
    assert_eq!(
        api.calls().len(),
        1,
        "nothing more is asked once a call failed"
    );
}
