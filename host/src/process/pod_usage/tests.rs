use std::sync::Mutex;

use jiff::Timestamp;
use kube::runtime::reflector::store;
use kube::runtime::watcher::Event;
use serde_json::{Value, json};

use super::*;
use crate::config::SimulatedConfig;
use crate::process::served_nodes::ServedNode;
use crate::provider::simulated::SimulatedProvider;
use crate::provider::{
    ContainerUsage, InstanceStatus, LaunchFailed, LaunchRequest, Launched, LogPage, LogStart,
    Provider, ProviderError, Sample, Termination, WorkloadExit,
};

fn pod(name: &str, phase: &str, spec: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ml", "uid": format!("uid-{name}")},
        "spec": spec,
        "status": {"phase": phase},
    }))
    .unwrap()
}

fn one(name: &str) -> Value {
    json!({"containers": [{"name": name, "image": "busybox"}]})
}

#[test]
fn only_running_pods_are_asked_for_with_every_container_and_whether_they_have_gpus() {
    let gpu = json!({
        "initContainers": [{"name": "fetch", "image": "busybox"}],
        "containers": [
            {"name": "trainer", "image": "pytorch",
             "resources": {"limits": {"nvidia.com/gpu": "8"}}},
            {"name": "eval", "image": "python"},
        ],
    });
    let zero_gpus = json!({"containers": [{"name": "c", "image": "busybox",
        "resources": {"requests": {"nvidia.com/gpu": "0"}}}]});
    let mut deleting = pod("deleting", "Running", one("c"));
    deleting.metadata.deletion_timestamp = Some(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Timestamp::UNIX_EPOCH),
    );
    /// The case, the pod, and the containers and GPUs asked for (`None`: not asked).
    type Case<'a> = (&'a str, Pod, Option<(&'a [&'a str], bool)>);
    let cases: [Case; 6] = [
        (
            "running",
            pod("web", "Running", one("nginx")),
            Some((&["nginx"], false)),
        ),
        (
            "gpus",
            pod("train", "Running", gpu),
            Some((&["fetch", "trainer", "eval"], true)),
        ),
        (
            "zero gpus",
            pod("z", "Running", zero_gpus),
            Some((&["c"], false)),
        ),
        ("pending", pod("p", "Pending", one("c")), None),
        ("succeeded", pod("s", "Succeeded", one("c")), None),
        ("being deleted", deleting, None),
    ];
    for (case, pod, expected) in cases {
        let query = usage_query(&pod);
        let described = query.as_ref().map(|q| (q.containers.clone(), q.gpus));
        let expected = expected.map(|(names, gpus)| {
            (
                names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>(),
                gpus,
            )
        });
        assert_eq!(described, expected, "{case}");
        if let Some(query) = query {
            assert_eq!(query.pod.uid, format!("uid-{}", pod.metadata.name.unwrap()));
        }
    }
}

/// A provider whose usage answers are scripted, and which records what it was asked.
#[derive(Default)]
struct Scripted {
    answers: Mutex<Vec<Result<Vec<PodUsage>, ProviderError>>>,
    asked: Mutex<Vec<Vec<String>>>,
}

#[async_trait::async_trait]
impl Provider for Scripted {
    async fn create(&self, _: &LaunchRequest) -> Result<Launched, LaunchFailed> {
        Err(ProviderError::permanent("Unused", "not in this test").into())
    }
    async fn terminate(&self, _: &str) -> Result<Termination, ProviderError> {
        Err(ProviderError::permanent("Unused", "not in this test"))
    }
    async fn lookup(&self, _: &PodKey, _: &str) -> Result<Option<InstanceStatus>, ProviderError> {
        Ok(None)
    }
    async fn workload_exit(
        &self,
        _: &InstanceStatus,
    ) -> Result<Option<WorkloadExit>, ProviderError> {
        Ok(None)
    }
    async fn statuses(&self) -> Result<Vec<InstanceStatus>, ProviderError> {
        Ok(Vec::new())
    }
    async fn log_page(&self, _: &PodKey, _: &str, _: &LogStart) -> Result<LogPage, ProviderError> {
        Err(ProviderError::permanent("Unused", "not in this test"))
    }
    async fn usage(&self, pods: &[UsageQuery]) -> Result<Vec<PodUsage>, ProviderError> {
        self.asked
            .lock()
            .unwrap()
            .push(pods.iter().map(|q| q.pod.name.clone()).collect());
        self.answers.lock().unwrap().remove(0)
    }
    async fn ping(&self) -> Result<(), ProviderError> {
        Ok(())
    }
}

fn usage_of(name: &str, cpu: f64) -> PodUsage {
    PodUsage {
        pod: PodKey {
            namespace: "ml".to_owned(),
            name: name.to_owned(),
            uid: format!("uid-{name}"),
        },
        containers: vec![ContainerUsage {
            name: "c".to_owned(),
            cpu: vec![Sample {
                at: Timestamp::UNIX_EPOCH,
                value: cpu,
            }],
            memory: None,
        }],
        gpu: None,
    }
}

#[tokio::test]
async fn each_period_reads_the_running_pods_keeps_figures_through_a_failure_and_forgets_stopped_pods()
 {
    let provider = Arc::new(Scripted::default());
    *provider.answers.lock().unwrap() = vec![
        Ok(vec![usage_of("a", 1.0), usage_of("b", 2.0)]),
        Err(ProviderError::transient("Throttling", "Rate exceeded")),
        Ok(vec![usage_of("b", 3.0)]),
    ];
    let (pods, mut writer) = store();
    writer.apply_watcher_event(&Event::Apply(pod("a", "Running", one("c"))));
    writer.apply_watcher_event(&Event::Apply(pod("b", "Running", one("c"))));
    writer.apply_watcher_event(&Event::Apply(pod("p", "Pending", one("c"))));
    let served = Arc::new(ServedNodes::default());
    served.serve(
        "n1",
        ServedNode {
            pods,
            provider: provider.clone(),
        },
    );
    let looped = UsageLoop {
        served: served.clone(),
        usages: Arc::new(PodUsages::default()),
        period: Duration::from_secs(60),
    };
    let cpu = |uid: &str| looped.usages.of(uid).map(|u| u.containers[0].cpu[0].value);

    looped.read_once().await;
    assert_eq!((cpu("uid-a"), cpu("uid-b")), (Some(1.0), Some(2.0)));
    looped.read_once().await;
    assert_eq!(
        (cpu("uid-a"), cpu("uid-b")),
        (Some(1.0), Some(2.0)),
        "kept through a failure"
    );
    writer.apply_watcher_event(&Event::Apply(pod("a", "Succeeded", one("c"))));
    looped.read_once().await;
    assert_eq!((cpu("uid-a"), cpu("uid-b")), (None, Some(3.0)), "a stopped");
    let mut asked = provider.asked.lock().unwrap().clone();
    for names in &mut asked {
        names.sort();
    }
    assert_eq!(asked, [vec!["a", "b"], vec!["a", "b"], vec!["b"]]);
}

#[tokio::test]
async fn a_node_no_longer_served_takes_its_pods_figures_with_it_and_idle_nodes_cost_no_call() {
    let provider = Arc::new(Scripted::default());
    *provider.answers.lock().unwrap() = vec![Ok(vec![usage_of("a", 1.0)])];
    let (pods, mut writer) = store();
    writer.apply_watcher_event(&Event::Apply(pod("a", "Running", one("c"))));
    let served = Arc::new(ServedNodes::default());
    served.serve(
        "n1",
        ServedNode {
            pods,
            provider: provider.clone(),
        },
    );
    let idle: Arc<dyn Provider> =
        Arc::new(SimulatedProvider::new(SimulatedConfig::default()).unwrap());
    let (empty, _) = store();
    served.serve(
        "n2",
        ServedNode {
            pods: empty,
            provider: idle,
        },
    );
    let looped = UsageLoop {
        served: served.clone(),
        usages: Arc::new(PodUsages::default()),
        period: Duration::from_secs(60),
    };
    looped.read_once().await;
    assert!(looped.usages.of("uid-a").is_some());
    served.stop_serving("n1");
    looped.read_once().await;
    assert_eq!(looped.usages.all(), Vec::new());
    assert_eq!(provider.asked.lock().unwrap().len(), 1);
}
