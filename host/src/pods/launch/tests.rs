//! The executor with fakes: a scripted planner and provider, and a writer that keeps what it
//! was given. What each answer leads to is `effects`' business (its table tests); these check
//! that the executor makes the calls in order and applies what the effects say.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;
use crate::pods::events::PodEvent;
use crate::policy::guardrails::Guardrails;
use crate::policy::{
    DECISION_ANNOTATION, Decision, DecisionRecord, PlanError, PlanFailure, PlanRetry,
};
use crate::provider::plan::LaunchPlan;
use crate::provider::{
    InstanceStatus, LaunchFailed, LaunchRequest, Launched, LogPage, LogStart, Offering,
    ProviderError, Termination, WorkloadExit,
};
use crate::support::errors::lock;
use crate::workload::NoObjects;

fn pod() -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some("train".to_owned()),
            namespace: Some("team".to_owned()),
            uid: Some("uid-1".to_owned()),
            resource_version: Some("7".to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "main".to_owned(),
                image: Some("busybox".to_owned()),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        ..Pod::default()
    }
}

fn decided() -> Result<Decision, PlanError> {
    Ok(Decision {
        plan: LaunchPlan::on_demand("m5.large"),
        record: DecisionRecord::on_demand(&["m5.large"]),
    })
}

struct ScriptedPlanner(Mutex<VecDeque<Result<Decision, PlanError>>>);

#[async_trait]
impl Planner for ScriptedPlanner {
    async fn plan(&self, _pod: &Pod) -> Result<Decision, PlanError> {
        lock(&self.0)
            .pop_front()
            .expect("a planner answer scripted")
    }
}

/// Answers `create` from its script and counts the calls; nothing else is asked of it here.
#[derive(Default)]
struct ScriptedProvider {
    creates: Mutex<VecDeque<Result<Launched, LaunchFailed>>>,
    asked: Mutex<u32>,
}

fn not_in_test() -> ProviderError {
    ProviderError::permanent("NotInTest", "the launch step does not call this")
}

#[async_trait]
impl Provider for ScriptedProvider {
    async fn create(&self, _request: &LaunchRequest) -> Result<Launched, LaunchFailed> {
        *lock(&self.asked) += 1;
        lock(&self.creates)
            .pop_front()
            .expect("a create answer scripted")
    }
    async fn terminate(&self, _instance_id: &str) -> Result<Termination, ProviderError> {
        Err(not_in_test())
    }
    async fn lookup(
        &self,
        _pod: &PodKey,
        _instance_id: &str,
    ) -> Result<Option<InstanceStatus>, ProviderError> {
        Err(not_in_test())
    }
    async fn workload_exit(
        &self,
        _instance: &InstanceStatus,
    ) -> Result<Option<WorkloadExit>, ProviderError> {
        Err(not_in_test())
    }
    async fn statuses(&self) -> Result<Vec<InstanceStatus>, ProviderError> {
        Err(not_in_test())
    }
    async fn log_page(
        &self,
        _pod: &PodKey,
        _container: &str,
        _start: &LogStart,
    ) -> Result<LogPage, ProviderError> {
        Err(not_in_test())
    }
    async fn ping(&self) -> Result<(), ProviderError> {
        Err(not_in_test())
    }
}

/// Keeps every patch and Event; answers a patch with the pod at the next resourceVersion, or
/// with the apiserver error it was told to give.
#[derive(Default)]
struct KeptWrites {
    patches: Mutex<Vec<serde_json::Value>>,
    events: Mutex<Vec<PodEvent>>,
    refuse: Mutex<Option<u16>>,
}

#[async_trait]
impl PodWriter for KeptWrites {
    async fn patch_status(
        &self,
        _key: &PodKey,
        patch: &serde_json::Value,
    ) -> Result<Pod, kube::Error> {
        if let Some(code) = *lock(&self.refuse) {
            return Err(kube::Error::Api(
                kube::core::Status::failure("refused", "Conflict")
                    .with_code(code)
                    .boxed(),
            ));
        }
        lock(&self.patches).push(patch.clone());
        let mut written = pod();
        written.metadata.resource_version = Some("8".to_owned());
        Ok(written)
    }
    async fn remove(&self, _key: &PodKey) -> Result<(), kube::Error> {
        unreachable!("the launch step removes no pod")
    }
    async fn publish(&self, _pod: &Pod, event: PodEvent) {
        lock(&self.events).push(event);
    }
}

struct Harness {
    planner: ScriptedPlanner,
    provider: ScriptedProvider,
    spend: NamespaceSpend,
    prices: crate::cost::LaunchPrices,
    records: PodRecords,
    writes: KeptWrites,
    key: PodKey,
}

impl Harness {
    fn new(
        plans: Vec<Result<Decision, PlanError>>,
        creates: Vec<Result<Launched, LaunchFailed>>,
    ) -> Harness {
        let key = PodKey::of(&pod()).unwrap();
        let records = PodRecords::default();
        records.get_or_create(&key.uid);
        Harness {
            planner: ScriptedPlanner(Mutex::new(plans.into())),
            provider: ScriptedProvider {
                creates: Mutex::new(creates.into()),
                asked: Mutex::new(0),
            },
            spend: NamespaceSpend::new(Arc::new(Guardrails::none()), Duration::from_secs(60)),
            prices: crate::cost::LaunchPrices::new(Arc::new(
                crate::policy::catalogue::InstanceCatalogue::bundled("us-east-1").unwrap(),
            )),
            records,
            writes: KeptWrites::default(),
            key,
        }
    }

    fn launcher(&self) -> Launcher<'_> {
        Launcher {
            planner: &self.planner,
            prices: &self.prices,
            provider: &self.provider,
            spend: &self.spend,
            records: &self.records,
            writer: &self.writes,
            objects: &NoObjects,
            node_name: "orca-node",
            node_zone: None,
            timing: RetryTiming {
                initial_backoff: Duration::from_secs(5),
                max_backoff: Duration::from_secs(300),
                grace: Duration::from_secs(60),
            },
        }
    }

    async fn launch(&self) -> Result<Option<Pod>, ReconcileError> {
        self.launcher().launch(&pod(), &self.key).await
    }

    fn event_reasons(&self) -> Vec<&'static str> {
        lock(&self.writes.events).iter().map(|e| e.reason).collect()
    }

    fn patches(&self) -> Vec<serde_json::Value> {
        lock(&self.writes.patches).clone()
    }

    fn record(&self) -> super::super::record::PodRecord {
        self.records.get(&self.key.uid).unwrap()
    }
}

fn instance() -> Launched {
    Launched {
        instance_id: "i-0abc".to_owned(),
        offering: Offering {
            instance_type: "m5.large".to_owned(),
            market: crate::provider::plan::Market::OnDemand,
        },
        adopted: false,
        passed_over: Vec::new(),
        chosen_by: None,
        zone: None,
        volumes: Vec::new(),
    }
}

#[tokio::test]
async fn a_launched_instance_is_recorded_and_announced_and_the_status_waits_for_a_listing() {
    let harness = Harness::new(vec![decided()], vec![Ok(instance())]);
    let written = harness.launch().await.unwrap();
    assert!(written.is_none(), "no status until a listing shows it");
    assert!(harness.patches().is_empty());
    assert_eq!(
        harness.event_reasons(),
        ["PolicyDecision", "ProviderCreateSuccess"]
    );
    let record = harness.record();
    assert!(
        matches!(&record.launch, super::super::record::Launch::Answered { launch, .. } if launch.instance_id == "i-0abc")
    );
    let decision = record
        .decision
        .expect("the decision waits for the next write");
    assert!(decision.contains("i-0abc"), "{decision}");
}

#[tokio::test]
async fn a_refused_launch_fails_the_pod_with_the_decision_riding_on_the_write() {
    let refused = LaunchFailed::new(ProviderError::permanent("UnauthorizedOperation", "no"));
    let harness = Harness::new(vec![decided()], vec![Err(refused)]);
    let written = harness.launch().await.unwrap();
    assert_eq!(
        written.and_then(|p| p.metadata.resource_version),
        Some("8".to_owned())
    );
    let patches = harness.patches();
    let [patch] = patches.as_slice() else {
        panic!("one status write: {patches:?}");
    };
    assert_eq!(patch["metadata"]["resourceVersion"], "7");
    assert!(patch["metadata"]["annotations"][DECISION_ANNOTATION].is_string());
    assert_eq!(patch["status"]["phase"], "Failed");
    assert_eq!(patch["status"]["reason"], "InstanceCreationFailed");
    assert_eq!(
        harness.event_reasons(),
        ["PolicyDecision", "ProviderCreateFailed"]
    );
    let record = harness.record();
    assert!(record.decision.is_none(), "written with the status");
    assert!(
        record.write.is_some(),
        "the write is kept while the store lags"
    );
}

#[tokio::test]
async fn a_pod_waiting_for_a_plugin_is_not_launched_and_says_so() {
    let not_loaded = PlanError {
        reason: PlanFailure::PolicyError,
        message: "plugin team-selector is not loaded".to_owned(),
        retry: PlanRetry::WhenLoaded,
        refused: None,
    };
    let harness = Harness::new(vec![Err(not_loaded)], Vec::new());
    harness.launch().await.unwrap();
    assert_eq!(*lock(&harness.provider.asked), 0);
    let patches = harness.patches();
    assert_eq!(patches.len(), 1);
    assert_eq!(patches[0]["status"]["phase"], "Pending");
    assert_eq!(harness.event_reasons(), ["PolicyNotReady"]);
    let record = harness.record();
    assert!(record.waits_for_policy);
    assert_eq!(record.retry.failures, 1);
    // Once it loads, the next plan launches and the wait is over.
    let harness = Harness {
        planner: ScriptedPlanner(Mutex::new(vec![decided()].into())),
        provider: ScriptedProvider {
            creates: Mutex::new(vec![Ok(instance())].into()),
            asked: Mutex::new(0),
        },
        ..harness
    };
    harness.launch().await.unwrap();
    assert!(!harness.record().waits_for_policy);
    assert_eq!(*lock(&harness.provider.asked), 1);
}

#[tokio::test]
async fn a_status_write_the_apiserver_refuses_is_the_steps_error() {
    let refused = LaunchFailed::new(ProviderError::permanent("UnauthorizedOperation", "no"));
    let harness = Harness::new(vec![decided()], vec![Err(refused)]);
    *lock(&harness.writes.refuse) = Some(409);
    let error = harness.launch().await.unwrap_err();
    assert!(error.is_conflict(), "{error}");
    assert!(
        harness.record().decision.is_some(),
        "the decision waits for the write that succeeds"
    );
}

#[tokio::test]
async fn a_launch_in_doubt_keeps_its_place_and_the_next_try_adopts_the_instance() {
    let mut lost = LaunchFailed::new(ProviderError::transient("RequestTimeout", "no answer"));
    lost.in_doubt = true;
    let adopted = Launched {
        adopted: true,
        ..instance()
    };
    let harness = Harness::new(vec![decided(), decided()], vec![Err(lost), Ok(adopted)]);
    harness.launch().await.unwrap();
    assert!(matches!(
        harness.record().launch,
        super::super::record::Launch::InDoubt { .. }
    ));
    harness.launch().await.unwrap();
    let events: HashSet<&str> = harness.event_reasons().into_iter().collect();
    assert!(events.contains("ProviderCreateFailed"));
    assert!(events.contains("ProviderCreateSuccess"));
    let notes: HashMap<&str, String> = lock(&harness.writes.events)
        .iter()
        .map(|e| (e.reason, e.note.clone()))
        .collect();
    assert!(notes["ProviderCreateSuccess"].starts_with("adopted"));
    assert_eq!(harness.record().retry.failures, 0, "the retry is over");
}
