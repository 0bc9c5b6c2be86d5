use k8s_openapi::api::core::v1::Pod;
use kube::api::ObjectMeta;
use prometheus_client::registry::Registry;

use super::*;
use crate::config::{Seconds, SimulatedConfig};
use crate::provider::InstanceState;
use crate::provider::aws::strays::PodPresence;
use crate::provider::plan::LaunchPlan;
use crate::provider::simulated::SimulatedProvider;
use crate::workload::testing::bare_request;

fn pod(uid: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            namespace: Some("ns".into()),
            name: Some(format!("pod-{uid}")),
            uid: Some(uid.into()),
            ..ObjectMeta::default()
        },
        ..Pod::default()
    }
}

fn plan() -> LaunchPlan {
    LaunchPlan::on_demand("m5.large")
}

/// Which pods exist as the apiserver would answer, set by the test.
#[derive(Default)]
struct Apiserver {
    pods: std::sync::Mutex<HashSet<String>>,
}

#[async_trait::async_trait]
impl PodPresence for Apiserver {
    async fn exists(&self, pod: &PodKey) -> Result<bool, kube::Error> {
        Ok(self.pods.lock().unwrap().contains(&pod.uid))
    }
}

fn sync_over(provider: Arc<dyn Provider>) -> StatusSync {
    sync_with(provider, Arc::new(Apiserver::default()))
}

fn sync_with(provider: Arc<dyn Provider>, presence: Arc<dyn PodPresence>) -> StatusSync {
    StatusSync {
        sync_now: Arc::new(tokio::sync::Notify::new()),
        provider,
        instances: Arc::new(InstanceCache::default()),
        records: Arc::new(PodRecords::default()),
        ledger: Arc::new(TerminationLedger::default()),
        config: PodsConfig::default(),
        metrics: Arc::new(ReconcileMetrics::register(&mut Registry::default())),
        node: "node".into(),
        spend: Arc::new(crate::spend::NamespaceSpend::new(
            Arc::new(crate::policy::guardrails::Guardrails::none()),
            std::time::Duration::from_secs(120),
        )),
        presence,
    }
}

/// Regression (simulation seed 1 and 2 in CI): the request for an instance that is shutting
/// down once its pod is gone was kept for the whole visibility grace, as if EC2 did not list
/// the instance at all, because the listing was filtered before the ledger saw it.
#[tokio::test]
async fn a_request_is_done_once_its_instance_is_listed_going_even_with_its_pod_gone() {
    let provider = Arc::new(
        SimulatedProvider::new(SimulatedConfig {
            boot_delay: Seconds::from_millis(0),
            shutdown_delay: Seconds::from_secs(600),
            ..SimulatedConfig::default()
        })
        .unwrap(),
    );
    let launched = provider
        .create(&bare_request(&pod("gone"), &plan()))
        .await
        .unwrap();
    let sync = sync_over(provider.clone());
    let answer = provider.terminate(&launched.instance_id).await.unwrap();
    sync.ledger
        .note(&launched.instance_id, answer, Timestamp::now());
    let listing = provider.statuses().await.unwrap();
    assert_eq!(listing[0].state, InstanceState::ShuttingDown);

    let (changed, _pending) = mpsc::unbounded();
    assert_eq!(
        sync.sync_once(&changed, HashMap::new(), Some(&HashSet::new()))
            .await,
        Some(1),
        "the whole listing is counted (what the heap trims wait for), the gone pod's instance too"
    );

    assert_eq!(
        sync.ledger.len(),
        0,
        "the request is done: EC2 shows it going"
    );
    assert_eq!(
        sync.instances.len(),
        0,
        "and a going instance of a gone pod is not kept"
    );
}

/// The request for an instance the listing does not show yet is kept through the grace, so a
/// termination asked for right after launch is not taken for done.
#[tokio::test]
async fn a_request_for_an_instance_not_listed_yet_is_kept() {
    let provider = Arc::new(SimulatedProvider::new(SimulatedConfig::default()).unwrap());
    let sync = sync_over(provider);
    sync.ledger.note(
        "i-0notlistedyet",
        crate::provider::Termination::Requested,
        Timestamp::now(),
    );

    let (changed, _pending) = mpsc::unbounded();
    assert!(
        sync.sync_once(&changed, HashMap::new(), Some(&HashSet::new()))
            .await
            .is_some()
    );

    assert_eq!(sync.ledger.len(), 1);
}

/// A provider whose listings wait until the test lets them answer.
struct HeldListing {
    inner: SimulatedProvider,
    started: tokio::sync::Notify,
    answer: tokio::sync::Notify,
}

#[async_trait::async_trait]
impl Provider for HeldListing {
    async fn create(
        &self,
        request: &crate::provider::LaunchRequest,
    ) -> Result<crate::provider::Launched, crate::provider::LaunchFailed> {
        self.inner.create(request).await
    }
    async fn terminate(
        &self,
        instance_id: &str,
    ) -> Result<crate::provider::Termination, crate::provider::ProviderError> {
        self.inner.terminate(instance_id).await
    }
    async fn lookup(
        &self,
        pod: &PodKey,
        instance_id: &str,
    ) -> Result<Option<InstanceStatus>, crate::provider::ProviderError> {
        self.inner.lookup(pod, instance_id).await
    }
    async fn workload_exit(
        &self,
        instance: &InstanceStatus,
    ) -> Result<Option<crate::provider::WorkloadExit>, crate::provider::ProviderError> {
        self.inner.workload_exit(instance).await
    }
    async fn statuses(&self) -> Result<Vec<InstanceStatus>, crate::provider::ProviderError> {
        self.started.notify_one();
        self.answer.notified().await;
        self.inner.statuses().await
    }
    async fn log_page(
        &self,
        pod: &PodKey,
        container: &str,
        start: &crate::provider::LogStart,
    ) -> Result<crate::provider::LogPage, crate::provider::ProviderError> {
        self.inner.log_page(pod, container, start).await
    }
    async fn ping(&self) -> Result<(), crate::provider::ProviderError> {
        self.inner.ping().await
    }
}

/// Regression (the zone e2e, a pod Running without its decision): the sync dropped the records
/// of pods missing from the store as it was *before* the listing, so a pod that arrived while
/// EC2 answered lost its record (its decision, what its launch got) in the middle of launching.
#[tokio::test]
async fn a_pod_that_arrives_while_the_listing_runs_keeps_its_record() {
    let provider = Arc::new(HeldListing {
        inner: SimulatedProvider::new(SimulatedConfig::default()).unwrap(),
        started: tokio::sync::Notify::new(),
        answer: tokio::sync::Notify::new(),
    });
    let sync = sync_over(provider.clone());
    let records = sync.records.clone();
    let (store, mut writer) = kube::runtime::reflector::store();
    writer.apply_watcher_event(&kube::runtime::watcher::Event::InitDone);
    let (_listed_tx, listed) = tokio::sync::watch::channel(true);
    let (changed, _pending) = mpsc::unbounded();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(sync.run(store, listed, changed, shutdown.clone()));

    provider.started.notified().await;
    // The pod arrives, and its reconcile decides, while EC2 has not answered yet.
    writer.apply_watcher_event(&kube::runtime::watcher::Event::Apply(pod("arrived")));
    records.get_or_create("arrived");
    records.update("arrived", |record| {
        record.decision = Some("{\"decided\":true}".to_owned());
    });
    provider.answer.notify_one();
    // The next listing starts only after this one's records were settled.
    provider.started.notified().await;
    assert!(
        records
            .get("arrived")
            .is_some_and(|record| record.decision.is_some()),
        "the record of a pod in the store after the listing is kept"
    );
    shutdown.cancel();
    provider.answer.notify_one();
    task.await.unwrap();
}

/// Issue 39, case 2: a replica stopped (SIGSTOP, a frozen VM) past its hold runs again with a
/// pod store as old as the stop, while its first listing is fresh: the instances the replica
/// serving the node meanwhile launched for new pods looked like orphans, and were terminated
/// under their running pods. An instance whose pod the store lacks is now terminated only once
/// the apiserver says the pod is gone.
#[tokio::test]
async fn an_instance_whose_pod_only_the_store_lacks_is_not_collected() {
    let provider = Arc::new(
        SimulatedProvider::new(SimulatedConfig {
            boot_delay: Seconds::from_millis(0),
            ..SimulatedConfig::default()
        })
        .unwrap(),
    );
    let apiserver = Arc::new(Apiserver::default());
    let mut sync = sync_with(provider.clone(), apiserver.clone());
    sync.config.orphan_grace_period = Seconds::from_secs(0);
    let launched = provider
        .create(&bare_request(&pod("fresh"), &plan()))
        .await
        .unwrap();
    apiserver.pods.lock().unwrap().insert("fresh".to_owned());
    // The store has not seen the pod (it lags); the listing has its instance.
    let stale_store = HashSet::new();
    let (changed, _pending) = mpsc::unbounded();
    sync.sync_once(&changed, HashMap::new(), Some(&stale_store))
        .await
        .unwrap();

    sync.collect_orphans(&stale_store).await;
    let listed = provider.statuses().await.unwrap();
    assert_eq!(
        listed[0].state,
        InstanceState::Running,
        "the pod exists: its instance is no orphan"
    );
    assert_eq!(sync.ledger.len(), 0, "nothing asked");

    // Once the pod is gone from the apiserver too, its instance is an orphan.
    apiserver.pods.lock().unwrap().clear();
    sync.collect_orphans(&stale_store).await;
    assert!(sync.ledger.get(&launched.instance_id).is_some());
}
