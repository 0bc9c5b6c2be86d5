use std::collections::HashMap;
use std::sync::Mutex;

use super::*;
use crate::provider::aws::fake::FakeEc2;
use crate::provider::ownership::{MANAGED_BY_VALUE, TAG_CLUSTER_ID, TAG_MANAGED_BY};

const OURS: &str = "9d1c7a52-0000-4000-8000-000000000001";
const THEIRS: &str = "4f3e2d1c-0000-4000-8000-000000000002";
const OLD: Duration = Duration::from_secs(600);
const GRACE: Duration = Duration::from_secs(120);

/// Pods by UID: present (`Some(true)`), absent (`Some(false)` or not named), or an apiserver
/// that cannot tell (`None`).
#[derive(Default)]
struct Pods(Mutex<HashMap<String, Option<bool>>>);

#[async_trait]
impl PodPresence for Pods {
    async fn exists(&self, pod: &PodKey) -> Result<bool, kube::Error> {
        let answer = self.0.lock().unwrap().get(&pod.uid).copied();
        match answer {
            Some(Some(present)) => Ok(present),
            Some(None) => Err(kube::Error::Api(
                kube::core::Status::failure("etcdserver: request timed out", "InternalError")
                    .with_code(500)
                    .boxed(),
            )),
            None => Ok(false),
        }
    }
}

fn tags<'a>(cluster: Option<&'a str>, node: &'a str, uid: &'a str) -> Vec<(&'a str, &'a str)> {
    let mut tags = vec![
        (TAG_MANAGED_BY, MANAGED_BY_VALUE),
        (TAG_NODE, node),
        ("orca.research/cluster", "kubernetes"),
        (TAG_POD_NAMESPACE, "ml"),
        (TAG_POD_NAME, uid),
        (TAG_POD_UID, uid),
    ];
    if let Some(cluster) = cluster {
        tags.push((TAG_CLUSTER_ID, cluster));
    }
    tags
}

fn sweep(fake: &Arc<FakeEc2>, pods: Pods) -> StraySweep {
    StraySweep {
        api: fake.clone(),
        pods: Arc::new(pods),
        cluster_id: OURS.to_owned(),
        declared: HashSet::from(["orca-new".to_owned()]),
        grace: GRACE,
    }
}

fn terminated(fake: &FakeEc2) -> Vec<String> {
    let mut ids: Vec<String> = fake
        .instances()
        .into_iter()
        .filter(|i| i.state == crate::provider::InstanceState::ShuttingDown)
        .map(|i| i.instance_id)
        .collect();
    ids.sort_unstable();
    ids
}

/// Issue 39, case 1: after `node.name` changed, the old name's instances were listed by no
/// node and ran on at full price. The sweep ends those whose pod is gone, keeps the one whose
/// pod lives on (bound to the old Node), and leaves the declared node's own to its node.
#[tokio::test]
async fn a_renamed_nodes_instances_whose_pods_are_gone_are_terminated_and_the_rest_kept() {
    let fake = Arc::new(FakeEc2::default());
    let gone = fake.launch_outside(&tags(Some(OURS), "orca-old", "gone"), OLD);
    let _alive = fake.launch_outside(&tags(Some(OURS), "orca-old", "alive"), OLD);
    let _own = fake.launch_outside(&tags(Some(OURS), "orca-new", "own-gone"), OLD);
    let pods = Pods::default();
    pods.0.lock().unwrap().insert("alive".into(), Some(true));
    let answered = sweep(&fake, pods).sweep_once().await.unwrap();
    assert_eq!(answered, std::slice::from_ref(&gone));
    assert_eq!(terminated(&fake), [gone]);
}

/// Another cluster's instances (another id) and those launched before instances carried an
/// id are never the sweep's, whatever their pods; neither is a young stray (its pod may be
/// being created), nor one whose pod the apiserver cannot tell about, nor one without the
/// tags that name its pod.
#[tokio::test]
async fn the_sweep_ends_only_this_clusters_old_strays_whose_pods_are_surely_gone() {
    let fake = Arc::new(FakeEc2::default());
    fake.launch_outside(&tags(Some(THEIRS), "orca-old", "a"), OLD);
    fake.launch_outside(&tags(None, "orca-old", "b"), OLD);
    fake.launch_outside(
        &tags(Some(OURS), "orca-old", "young"),
        Duration::from_secs(30),
    );
    fake.launch_outside(&tags(Some(OURS), "orca-old", "unsure"), OLD);
    fake.launch_outside(
        &[
            (TAG_MANAGED_BY, MANAGED_BY_VALUE),
            (TAG_CLUSTER_ID, OURS),
            (TAG_NODE, "orca-old"),
        ],
        OLD,
    );
    let pods = Pods::default();
    pods.0.lock().unwrap().insert("unsure".into(), None);
    let answered = sweep(&fake, pods).sweep_once().await.unwrap();
    assert!(answered.is_empty(), "{answered:?}");
    assert!(terminated(&fake).is_empty());
    assert_eq!(fake.count("TerminateInstances"), 0);
}

#[test]
fn strays_are_old_live_instances_of_undeclared_nodes_that_name_their_pod() {
    use crate::provider::InstanceState::{Running, ShuttingDown, Stopped};
    let now = Timestamp::now();
    let instance = |id: &str, node: &str, state, age_s: i64| Ec2Instance {
        instance_id: id.into(),
        instance_type: "m5.large".into(),
        state,
        private_ip: None,
        launch_time: now - jiff::SignedDuration::from_secs(age_s),
        spot: false,
        state_reason: None,
        tags: tags(Some(OURS), node, id)
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
        zone: None,
        volume_ids: Vec::new(),
        ended_at: None,
    };
    let listed = [
        instance("i-a", "old", Running, 600),
        instance("i-b", "old", Stopped, 600),
        instance("i-c", "old", ShuttingDown, 600),
        instance("i-d", "old", Running, 10),
        instance("i-e", "new", Running, 600),
    ];
    let declared = HashSet::from(["new".to_owned()]);
    let cutoff = now - jiff::SignedDuration::from_secs(120);
    let found: Vec<String> = strays(&listed, &declared, cutoff)
        .into_iter()
        .map(|stray| stray.instance_id)
        .collect();
    assert_eq!(found, ["i-a", "i-b"]);
}
