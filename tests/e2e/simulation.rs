//! Exactly one instance per pod, none leaked, honest outcomes: checked as invariants over
//! seeded random runs, not as scripts.
//!
//! Each run puts the real orca (node and pod controllers, policy, aws provider; in this
//! process) against the harness's real apiserver and a hostile model of EC2
//! (`orca-ec2-model`: late visibility, late tags, stale reads, throttling bursts, lost answers,
//! capacity errors, per-id refusals, termination protection). A seeded driver creates pods,
//! deletes them gracefully or by force, lets workloads complete, interrupts spot instances,
//! stops on-demand ones, protects some from termination, crashes and restarts orca
//! (everything in memory lost; the apiserver and EC2 keep theirs), crashes the replica
//! serving the node so that a standby replica takes it over through the node's Lease, and
//! stalls the serving replica (every thread stopped, as SIGSTOP or a frozen VM would) past its
//! Lease and the orphan grace while the standby takes over, then lets it run again with its
//! old view. Then it lets everything settle, deletes what is left, and checks:
//!
//! 1. every pod that ever existed had at most one instance launched for it (over the model's
//!    whole history, by the pod-UID tag);
//! 2. every instance whose pod is gone is terminated (stopped ones too), within
//!    `orphanGracePeriod` plus a sync period of when it could have been (its pod gone, it
//!    visible, orca up, protection off);
//! 3. no pod stays Terminating longer than the visibility grace plus a few sync periods, once
//!    EC2 answers (time orca was down or the instance protected does not count);
//! 4. each pod's final phase and reason match what happened to its instance (exit code, spot
//!    interruption, stop; a failed launch had no instance);
//! 5. orca's per-pod state is empty once every pod is gone;
//! 6. (see `check_interruption_queue`) every spot notice for a present pod is acted on; every
//!    message that is not orca's (an unknown or another cluster's instance, another account's
//!    forgery) is deleted and acts on nothing;
//! 7. no instance orca launched for a pod is asked to terminate while its pod lives and its
//!    workload runs, whatever else carries the pod's tags: a person's look-alike ("launch
//!    more like this" copies every tag) is the extra, never the instance it copies;
//! 8. another cluster's instances under the same node and cluster names (another cluster id,
//!    or none: launched before instances carried one) are never asked to terminate;
//! 9. a fleet token is never sent again with other parameters: whatever a restart or a
//!    takeover forgot (the unavailable-offering cache among it), a replay sends what was
//!    sent, so EC2 never answers `IdempotentParameterMismatch` and no pod waits out the
//!    visibility grace for it.
//!
//! A failing run names its seed; `ORCA_SIM_SEEDS=<seed>[,<seed>…]` replays exactly those.
//! `ORCA_SIM_LOG` sets the filter of orca's log a failing seed shows (`info`), and
//! `ORCA_SIM_LOG_LINES` how many of its last lines (150).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use orca::interruption::NoticeQueue;
use orca::provider::aws::FLEET_TOKENS_SPENT_ANNOTATION;
use orca_e2e::captured_log::CapturedLog;
use orca_e2e::inprocess::InProcessOrca;
use orca_e2e::model_ec2::ModelEc2;
use orca_e2e::model_queue::ModelQueue;
use orca_e2e::notices::{spot_warning, spot_warning_from};
use orca_e2e::orca::free_port;
use orca_e2e::wait::poll_until;
use orca_e2e::{TestCluster, TestNamespace, unique_node_name};
use orca_ec2_model::{Behaviour, Ec2Model, Ending, State, WorkloadEnd};
use serde_json::json;

/// Seeds CI runs. Each takes about a minute.
const CI_SEEDS: [u64; 4] = [1, 2, 3, 4];

const SYNC: Duration = Duration::from_millis(500);
/// Above the model's worst visibility lag, tag lag and describe staleness together (6 s), as
/// the 120 s default is above EC2's.
const GRACE: Duration = Duration::from_secs(8);
const ORPHAN_GRACE: Duration = Duration::from_secs(3);
/// Driver steps per run, one every [`TICK`].
const TICKS: usize = 80;
const TICK: Duration = Duration::from_millis(250);
/// Pods alive at once, at most.
const MAX_PODS: usize = 10;
/// How long one instance refuses termination while everything is deleted at the end.
const END_PROTECTION: Duration = Duration::from_secs(20);
/// `pods.retryMaxBackoff`.
const RETRY_MAX: Duration = Duration::from_secs(1);
/// How long a stalled replica stops: past its Lease (4 s) and the orphan grace, so that the
/// instances the standby launches meanwhile are old enough to be collected as orphans by a
/// replica that would act on its old pod store.
const STALL: Duration = Duration::from_secs(9);
/// Allowance for the model's throttling bursts and stale reads, on top of the bounds.
const SLACK: Duration = Duration::from_secs(4);
const POD_UID_TAG: &str = "orca.research/pod-uid";
/// How much of orca's log a failing seed shows, unless `ORCA_SIM_LOG_LINES` says.
const ORCA_LOG_LINES: usize = 150;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_instance_per_pod_none_leaked_and_honest_outcomes_over_random_runs() -> Result<()> {
    let seeds: Vec<u64> = match std::env::var("ORCA_SIM_SEEDS") {
        Ok(list) => list
            .split(',')
            .map(|seed| seed.trim().parse())
            .collect::<Result<_, _>>()
            .context("ORCA_SIM_SEEDS is a comma-separated list of integers")?,
        Err(_) => CI_SEEDS.to_vec(),
    };
    // orca's log, shown for a seed that fails: `ORCA_SIM_LOG=orca=debug,info` for more.
    let filter = std::env::var("ORCA_SIM_LOG").unwrap_or_else(|_| "info".into());
    let orca_log = CapturedLog::install(&filter)?;
    let log_lines = std::env::var("ORCA_SIM_LOG_LINES")
        .ok()
        .and_then(|lines| lines.parse().ok())
        .unwrap_or(ORCA_LOG_LINES);
    let mut failed = Vec::new();
    for seed in &seeds {
        let started = Instant::now();
        orca_log.clear();
        let run = Run::start(*seed).await?;
        match run.play().await.map_err(|error| {
            error.context(format!(
                "orca's last {log_lines} log lines:\n  {}",
                orca_log.last(log_lines).join("\n  ")
            ))
        }) {
            Ok(summary) => eprintln!(
                "seed {seed}: ok in {:.0} s: {summary}",
                started.elapsed().as_secs_f64()
            ),
            Err(error) => {
                eprintln!(
                    "seed {seed} broke invariants; replay with \
                     `ORCA_SIM_SEEDS={seed} cargo test -p orca-e2e --test e2e simulation::`:\n{error:#}\n"
                );
                failed.push(*seed);
            }
        }
    }
    ensure!(
        failed.is_empty(),
        "seeds {failed:?} of {seeds:?} broke invariants (each is described above)"
    );
    Ok(())
}

/// What the driver knows of one pod it created.
#[derive(Debug, Clone)]
struct Tracked {
    uid: String,
    deleted_at: Option<Timestamp>,
    gone_at: Option<Timestamp>,
}

struct Run {
    rng: fastrand::Rng,
    model: Arc<Ec2Model>,
    node: String,
    namespace: TestNamespace,
    pods: Api<Pod>,
    /// The namespace of the run's pods and of the node's Lease.
    lease_namespace: String,
    kubeconfig: PathBuf,
    /// The replica serving the node (holding its Lease), as far as the driver made it so.
    orca: Option<InProcessOrca>,
    /// Its identity in the node's Lease: a restart keeps it, as a restarted container keeps
    /// its pod's name.
    orca_identity: String,
    /// A second replica, waiting for the node's Lease.
    standby: Option<(InProcessOrca, String)>,
    /// A replica stalled while it served the node, its identity, and when it runs again.
    stalled: Option<(InProcessOrca, String, Instant)>,
    /// How many times the serving replica stalled.
    stalls: usize,
    replicas_started: u32,
    /// Takeovers by the standby, and how long each took from the crash to serving.
    takeovers: Vec<Duration>,
    /// When no replica served the node: (from, to).
    downtime: Vec<(Timestamp, Option<Timestamp>)>,
    /// Instances protected from termination: (id, from, until).
    protected: Vec<(String, Timestamp, Timestamp)>,
    tracked: BTreeMap<String, Tracked>,
    /// The interruption queue EventBridge would fill: the model's spot notices, and messages
    /// for other clusters' instances.
    queue: Arc<ModelQueue>,
    /// Instances EC2 warned, and when.
    warned: BTreeMap<String, Timestamp>,
    /// Messages that are not this orca's to act on: orca must delete them all, acting on none.
    foreign: Vec<String>,
    /// Look-alikes a person launched from a pod's instance: (copy, original).
    look_alikes: Vec<(String, String)>,
    /// Instances another cluster launched under this node's names.
    foreign_instances: Vec<String>,
    /// What the driver did, for the failure message.
    log: Vec<String>,
    next_pod: u32,
}

impl Run {
    async fn start(seed: u64) -> Result<Run> {
        let cluster = TestCluster::shared();
        let client = cluster.kube_client().await?;
        let namespace = TestNamespace::create(&client, &format!("sim-{seed}")).await?;
        let node = unique_node_name(&format!("sim{seed}"));
        let model = Arc::new(Ec2Model::new(seed, Behaviour::hostile()));
        let lease_namespace = namespace.name.clone();
        let kubeconfig = PathBuf::from(cluster.var("ORCA_KUBECONFIG"));
        let pods = Api::namespaced(client, &namespace.name);
        let mut run = Run {
            rng: fastrand::Rng::with_seed(seed),
            model,
            node,
            namespace,
            pods,
            lease_namespace,
            kubeconfig,
            orca: None,
            orca_identity: "replica-1".into(),
            standby: None,
            replicas_started: 1,
            takeovers: Vec::new(),
            downtime: Vec::new(),
            protected: Vec::new(),
            tracked: BTreeMap::new(),
            queue: Arc::new(ModelQueue::default()),
            warned: BTreeMap::new(),
            foreign: Vec::new(),
            look_alikes: Vec::new(),
            foreign_instances: Vec::new(),
            log: Vec::new(),
            next_pod: 0,
            stalled: None,
            stalls: 0,
        };
        run.start_orca().await?;
        run.start_standby()?;
        Ok(run)
    }

    /// A replica of orca named `identity` in the node's Lease.
    fn replica(&self, identity: &str) -> Result<InProcessOrca> {
        let ec2 = Arc::new(ModelEc2::new(self.model.clone()));
        let queue: Arc<dyn NoticeQueue> = self.queue.clone();
        InProcessOrca::start(
            &config(&self.node, &self.lease_namespace, identity)?,
            &self.kubeconfig,
            ec2,
            Some(queue),
        )
    }

    /// (Re)starts the serving replica and waits until some replica serves the node.
    async fn start_orca(&mut self) -> Result<()> {
        self.orca = Some(self.replica(&self.orca_identity)?);
        self.end_downtime().await
    }

    fn start_standby(&mut self) -> Result<()> {
        self.replicas_started += 1;
        let identity = format!("replica-{}", self.replicas_started);
        self.standby = Some((self.replica(&identity)?, identity));
        Ok(())
    }

    fn serves(&self, orca: &InProcessOrca) -> bool {
        orca.metric(&format!("orca_node_served{{node=\"{}\"}}", self.node))
            .is_ok_and(|served| served == 1.0)
    }

    /// Ends the downtime in progress once a replica serves the node (a Lease held and the
    /// node's controllers started).
    async fn end_downtime(&mut self) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let serving = self.orca.as_ref().is_some_and(|orca| self.serves(orca))
                || self
                    .standby
                    .as_ref()
                    .is_some_and(|(orca, _)| self.serves(orca));
            if serving {
                break;
            }
            ensure!(
                Instant::now() < deadline,
                "no replica serves the node 20 s after a start"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if let Some((_, to @ None)) = self.downtime.last_mut() {
            *to = Some(Timestamp::now());
        }
        Ok(())
    }

    /// The replica serving the node now.
    fn holder(&self) -> Option<&InProcessOrca> {
        let standby = self.standby.as_ref().map(|(orca, _)| orca);
        [self.orca.as_ref(), standby]
            .into_iter()
            .flatten()
            .find(|orca| self.serves(orca))
    }

    /// Which replicas say they serve the node, and what the node's Lease says: for a
    /// failure's message.
    async fn who_serves(&self) -> String {
        let serving = |orca: Option<&InProcessOrca>| match orca {
            None => "not running".to_owned(),
            Some(orca) => match orca.metric(&format!("orca_node_served{{node=\"{}\"}}", self.node))
            {
                Ok(served) => format!("orca_node_served {served}"),
                Err(error) => format!("{error:#}"),
            },
        };
        let standby = self.standby.as_ref();
        let leases: Api<Lease> =
            Api::namespaced(self.pods.clone().into_client(), &self.lease_namespace);
        let lease = match leases
            .get_opt(&::orca::config::ReplicasConfig::lease_name(&self.node))
            .await
        {
            Ok(Some(lease)) => format!("{:?}", lease.spec),
            Ok(None) => "no Lease".to_owned(),
            Err(error) => format!("reading the Lease: {error}"),
        };
        format!(
            "{}: {}; standby {}: {}; the node's Lease: {lease}",
            self.orca_identity,
            serving(self.orca.as_ref()),
            standby.map_or("none", |(_, identity)| identity.as_str()),
            serving(standby.map(|(orca, _)| orca)),
        )
    }

    fn note(&mut self, what: String) {
        self.log.push(format!("{} {what}", Timestamp::now()));
    }

    async fn play(mut self) -> Result<String> {
        let result = self.drive_and_check().await;
        if let Some(orca) = self.orca.take() {
            orca.crash();
        }
        if let Some((standby, _)) = self.standby.take() {
            standby.crash();
        }
        let summary = match result {
            Ok(summary) => summary,
            Err(error) => {
                let tail: Vec<&String> = self.log.iter().rev().take(60).collect();
                let tail: Vec<&str> = tail.into_iter().rev().map(String::as_str).collect();
                return Err(
                    error.context(format!("the driver's last steps:\n  {}", tail.join("\n  ")))
                );
            }
        };
        self.namespace.delete().await?;
        Ok(summary)
    }

    async fn drive_and_check(&mut self) -> Result<String> {
        for _ in 0..TICKS {
            self.run_stalled_again(false);
            self.step().await?;
            self.publish_notices();
            self.observe_gone().await?;
            tokio::time::sleep(TICK).await;
        }
        self.run_stalled_again(true);
        if self.orca.is_none() {
            self.start_orca().await?;
        }
        // Every invariant is checked, and every one broken is reported.
        let mut broken: Vec<String> = Vec::new();
        let mut record = |result: Result<()>| {
            if let Err(error) = result {
                broken.push(format!("{error:#}"));
            }
        };
        let finals = match self.settle().await {
            Ok(finals) => finals,
            Err(error) => {
                record(Err(error));
                self.current_pods().await?
            }
        };
        // Pods whose fleet launches failed before one launched carry how many tokens EC2
        // answered with nothing, for a restart to resume after them.
        let recorded_tokens = finals
            .values()
            .filter(|pod| {
                pod.metadata
                    .annotations
                    .as_ref()
                    .is_some_and(|a| a.contains_key(FLEET_TOKENS_SPENT_ANNOTATION))
            })
            .count();
        record(self.check_outcomes(&finals));
        record(self.check_clean_statuses(&finals));
        record(self.check_interruption_queue(&finals).await);
        // One instance refuses termination for a long while as everything is deleted at
        // once: the others of its batch must go regardless.
        self.protect_one_at_the_end();
        record(self.delete_everything().await);
        record(self.check_no_leak().await);
        record(self.check_one_instance_per_pod());
        record(self.check_no_live_workload_killed());
        record(self.check_foreign_instances_untouched());
        record(self.check_replays_word_for_word());
        record(self.check_termination_times());
        record(self.check_no_hot_loop());
        record(self.check_state_is_empty().await);
        ensure!(broken.is_empty(), "{}", broken.join("\n"));
        let history = self.model.history();
        Ok(format!(
            "{} pods ({recorded_tokens} recording spent fleet tokens), {} instances, {} crashes, {} takeovers ({:?}), {} stalls, {} spot warnings, {} messages not orca's, {} look-alikes, {} other clusters' instances",
            self.tracked.len(),
            history.len(),
            self.downtime.len() - self.takeovers.len(),
            self.takeovers.len(),
            self.takeovers,
            self.stalls,
            self.warned.len(),
            self.foreign.len(),
            self.look_alikes.len(),
            self.foreign_instances.len()
        ))
    }

    /// One random step of the world.
    async fn step(&mut self) -> Result<()> {
        let roll = self.rng.u32(0..100);
        let now = Timestamp::now();
        match roll {
            0..30 if self.live_pods().len() < MAX_PODS => self.create_pod().await?,
            30..40 => self.delete_random(false).await?,
            40..44 => self.delete_random(true).await?,
            44..58 => {
                if let Some(id) = self.random_instance(|spot| spot.is_some()) {
                    let code = [0, 0, 0, 1, 3][self.rng.usize(0..5)];
                    let sidecar = if self.rng.bool() { 0 } else { code };
                    let end = WorkloadEnd {
                        pod_exit_code: code,
                        containers: vec![("main".into(), code), ("sidecar".into(), sidecar)],
                        finished_at: now,
                    };
                    if self.model.complete_workload(now, &id, &end) {
                        self.note(format!("workload on {id} completed with {code}"));
                    }
                }
            }
            58..63 => {
                if let Some(id) = self.random_instance(|spot| spot == Some(true))
                    && self.model.interrupt_spot(now, &id).is_some()
                {
                    self.note(format!("spot interruption notice for {id}"));
                }
            }
            63..67 => {
                if let Some(id) = self.random_instance(|spot| spot == Some(false))
                    && self.model.stop_by_someone(now, &id)
                {
                    self.note(format!("someone stopped {id}"));
                }
            }
            67..70 => {
                if let Some(id) = self.random_instance(|spot| spot.is_some()) {
                    let until = now + SignedDuration::from_millis(self.rng.i64(1_000..3_000));
                    if self.model.protect(now, &id, until) {
                        self.protected.push((id.clone(), now, until));
                        self.note(format!("termination protection on {id} until {until}"));
                    }
                }
            }
            74..77 => {
                // A message that is not this orca's to act on: a notice about an instance EC2
                // does not know, about another cluster's instance, or forged by another
                // account's rule about one of this orca's instances.
                let (id, body, whose) = match self.rng.u32(0..3) {
                    0 => {
                        let id = format!("i-0{:016x}", self.rng.u64(..) >> 4);
                        let body = spot_warning(&id, now);
                        (id, body, "an unknown instance")
                    }
                    1 => match self.foreign_instances.last() {
                        Some(id) => (id.clone(), spot_warning(id, now), "another cluster's"),
                        None => return Ok(()),
                    },
                    _ => match self.random_instance(|spot| spot.is_some()) {
                        Some(id) => {
                            let body = spot_warning_from("210987654321", "us-west-2", &id, now);
                            (id, body, "another account's forged")
                        }
                        None => return Ok(()),
                    },
                };
                self.queue.send(body.clone());
                self.foreign.push(body);
                self.note(format!("{whose} notice for {id}"));
            }
            70..74 => {
                if let Some(orca) = self.orca.take() {
                    orca.crash();
                    self.downtime.push((Timestamp::now(), None));
                    self.note("orca crashed".into());
                    let down = Duration::from_millis(self.rng.u64(0..1_500));
                    tokio::time::sleep(down).await;
                    self.start_orca().await?;
                    self.note("orca restarted".into());
                }
            }
            77..80 if self.standby.is_some() => {
                // The serving replica dies for good: the standby takes the node over once
                // the Lease expires, and a new standby starts.
                if let (Some(orca), Some((standby, identity))) =
                    (self.orca.take(), self.standby.take())
                {
                    let crashed = Instant::now();
                    orca.crash();
                    self.downtime.push((Timestamp::now(), None));
                    self.note(format!("{} crashed for good", self.orca_identity));
                    self.orca = Some(standby);
                    self.orca_identity = identity;
                    self.end_downtime().await?;
                    self.takeovers.push(crashed.elapsed());
                    self.note(format!(
                        "{} took the node over after {:?}",
                        self.orca_identity,
                        crashed.elapsed()
                    ));
                    self.start_standby()?;
                }
            }
            80..83 => {
                // A person at the console: "launch more like this" from a pod's instance.
                if let Some(id) = self.random_instance(|spot| spot.is_some())
                    && let Some(copy) = self.model.launch_look_alike(now, &id)
                {
                    self.note(format!("someone launched {copy}, a look-alike of {id}"));
                    self.look_alikes.push((copy, id));
                }
            }
            83..85 => {
                // Another cluster in the account at the same node and cluster names: its
                // instance carries another cluster id, or none (launched by an orca from
                // before instances carried one).
                let uid = format!("{:032x}", self.rng.u128(..));
                let mut tags = BTreeMap::from([
                    ("ManagedBy".to_owned(), "ORCA".to_owned()),
                    ("orca.research/node".to_owned(), self.node.clone()),
                    ("orca.research/cluster".to_owned(), self.node.clone()),
                    (
                        "orca.research/pod-namespace".to_owned(),
                        self.namespace.name.clone(),
                    ),
                    ("orca.research/pod-name".to_owned(), "p1".to_owned()),
                    (POD_UID_TAG.to_owned(), uid),
                ]);
                let with_id = self.rng.bool();
                if with_id {
                    tags.insert(
                        "orca.research/cluster-id".to_owned(),
                        format!("{:032x}", self.rng.u128(..)),
                    );
                }
                let id = self.model.launch_by_someone(now, "m5.large", &tags);
                self.note(format!(
                    "another cluster launched {id} under this node's names ({})",
                    if with_id {
                        "its own cluster id"
                    } else {
                        "no cluster id"
                    }
                ));
                self.foreign_instances.push(id);
            }
            85..88 => self.stall_holder().await?,
            _ => {}
        }
        Ok(())
    }

    /// The serving replica stalls (SIGSTOP, a frozen VM, a long pause) for longer than its
    /// Lease and the orphan grace: the standby takes the node over and serves it, launching
    /// for new pods, getting spot notices; then the stalled replica runs again (see
    /// [`Self::run_stalled_again`]) with a pod store and an instance cache as old as the
    /// stall, and its status sync due. It must take no step for the node: an instance of the
    /// new holder's it terminated breaks invariant 7, a notice it deleted unacted invariant 6.
    async fn stall_holder(&mut self) -> Result<()> {
        if self.stalled.is_some() || self.orca.is_none() || self.standby.is_none() {
            return Ok(());
        }
        let (Some(mut orca), Some((standby, identity))) = (self.orca.take(), self.standby.take())
        else {
            return Ok(());
        };
        let stalled = Instant::now();
        orca.freeze();
        self.stalls += 1;
        self.downtime.push((Timestamp::now(), None));
        self.note(format!("{} stalled", self.orca_identity));
        let stalled_identity = std::mem::replace(&mut self.orca_identity, identity);
        self.stalled = Some((orca, stalled_identity, stalled + STALL));
        self.orca = Some(standby);
        self.end_downtime().await?;
        self.takeovers.push(stalled.elapsed());
        self.note(format!(
            "{} took the node over after {:?}",
            self.orca_identity,
            stalled.elapsed()
        ));
        Ok(())
    }

    /// The stalled replica runs again once its stall is over (or `now`): it lost the Lease,
    /// and stays on as the standby.
    fn run_stalled_again(&mut self, now: bool) {
        let due = self
            .stalled
            .as_ref()
            .is_some_and(|(_, _, until)| now || Instant::now() >= *until);
        if !due {
            return;
        }
        if let Some((mut orca, identity, _)) = self.stalled.take() {
            orca.thaw();
            self.note(format!("{identity} runs again after its stall"));
            self.standby = Some((orca, identity));
        }
    }

    async fn create_pod(&mut self) -> Result<()> {
        self.next_pod += 1;
        let name = format!("p{}", self.next_pod);
        let spot = self.rng.bool();
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {
                "name": name,
                "annotations": {
                    "orca.research/instance-type": "m5.large",
                    "orca.research/launch-type": if spot { "spot" } else { "on-demand" },
                },
            },
            "spec": {
                "nodeName": self.node,
                "tolerations": [{"key": "orca.research/burst-node", "operator": "Exists", "effect": "NoSchedule"}],
                "containers": [
                    {"name": "main", "image": "busybox", "command": ["sh", "-c", "work"]},
                    {"name": "sidecar", "image": "busybox"},
                ],
            },
        }))?;
        let created = self.pods.create(&PostParams::default(), &pod).await?;
        let uid = created
            .metadata
            .uid
            .clone()
            .context("created pod has a uid")?;
        self.note(format!("created {name} ({uid}, spot={spot})"));
        self.tracked.insert(
            name,
            Tracked {
                uid,
                deleted_at: None,
                gone_at: None,
            },
        );
        Ok(())
    }

    fn live_pods(&self) -> Vec<String> {
        self.tracked
            .iter()
            .filter(|(_, t)| t.deleted_at.is_none())
            .map(|(name, _)| name.clone())
            .collect()
    }

    async fn delete_random(&mut self, force: bool) -> Result<()> {
        let live = self.live_pods();
        if live.is_empty() {
            return Ok(());
        }
        let name = live[self.rng.usize(0..live.len())].clone();
        self.delete(&name, force).await
    }

    async fn delete(&mut self, name: &str, force: bool) -> Result<()> {
        let params = if force {
            DeleteParams::default().grace_period(0)
        } else {
            DeleteParams::default()
        };
        // orca may act on the deletion before the call returns (a slow apiserver): the pod
        // counts as deleted from the moment it was asked.
        let asked = Timestamp::now();
        match self.pods.delete(name, &params).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(error) => return Err(error.into()),
        }
        let now = Timestamp::now();
        if let Some(tracked) = self.tracked.get_mut(name) {
            tracked.deleted_at = Some(asked);
            if force {
                tracked.gone_at = Some(now);
            }
        }
        self.note(format!(
            "{} {name}",
            if force { "force-deleted" } else { "deleted" }
        ));
        Ok(())
    }

    /// A running instance of a live pod; `market` filters by `Some(spot)` (`None`: any).
    fn random_instance(&mut self, market: impl Fn(Option<bool>) -> bool) -> Option<String> {
        let now = Timestamp::now();
        let live: Vec<String> = self
            .tracked
            .values()
            .filter(|t| t.deleted_at.is_none())
            .map(|t| t.uid.clone())
            .collect();
        let running: Vec<String> = self
            .model
            .history()
            .into_iter()
            .filter(|h| {
                h.tags
                    .get(POD_UID_TAG)
                    .is_some_and(|uid| live.contains(uid))
            })
            .filter(|h| market(Some(h.spot)))
            .filter(|h| {
                !self
                    .look_alikes
                    .iter()
                    .any(|(copy, _)| *copy == h.instance_id)
            })
            .filter(|h| state_at(h, now) == Some(State::Running))
            .map(|h| h.instance_id)
            .collect();
        (!running.is_empty()).then(|| running[self.rng.usize(0..running.len())].clone())
    }

    /// Notes when gracefully deleted pods leave the apiserver.
    async fn observe_gone(&mut self) -> Result<()> {
        let present: Vec<String> = self
            .pods
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .collect();
        let now = Timestamp::now();
        for (name, tracked) in &mut self.tracked {
            if tracked.gone_at.is_none() && !present.contains(name) {
                tracked.gone_at = Some(now);
            }
        }
        Ok(())
    }

    /// Waits until every live pod is Running or final, and every live pod whose instance's
    /// workload ended is final; answers their statuses.
    async fn settle(&mut self) -> Result<BTreeMap<String, Pod>> {
        let deadline = Instant::now() + GRACE * 3 + Duration::from_secs(20);
        loop {
            let listed = self.pods.list(&ListParams::default()).await?.items;
            let history = self.launched_by_orca();
            let now = Timestamp::now();
            let unsettled: Vec<String> = listed
                .iter()
                .filter(|pod| pod.metadata.deletion_timestamp.is_none())
                .filter(|pod| {
                    let phase = phase(pod);
                    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
                    let ended = history.iter().any(|h| {
                        h.tags.get(POD_UID_TAG).map(String::as_str) == Some(uid)
                            && h.ending.as_ref().is_some_and(|e| e.at() <= now)
                    });
                    !(phase == "Succeeded" || phase == "Failed" || (phase == "Running" && !ended))
                })
                .filter_map(|pod| pod.metadata.name.clone())
                .collect();
            if unsettled.is_empty() {
                return Ok(listed
                    .into_iter()
                    .filter(|pod| pod.metadata.deletion_timestamp.is_none())
                    .filter_map(|pod| Some((pod.metadata.name.clone()?, pod)))
                    .collect());
            }
            if Instant::now() > deadline {
                let states: Vec<String> = listed
                    .iter()
                    .filter(|p| unsettled.contains(p.metadata.name.as_ref().unwrap()))
                    .map(|p| {
                        format!(
                            "{}: {} {:?}",
                            p.metadata.name.as_deref().unwrap_or("?"),
                            phase(p),
                            p.status.as_ref().and_then(|s| s.message.clone())
                        )
                    })
                    .collect();
                bail!(
                    "pods never settled: {}; {}",
                    states.join("; "),
                    self.who_serves().await
                );
            }
            tokio::time::sleep(SYNC).await;
        }
    }

    /// The pods not being deleted, by name.
    async fn current_pods(&self) -> Result<BTreeMap<String, Pod>> {
        Ok(self
            .pods
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|pod| pod.metadata.deletion_timestamp.is_none())
            .filter_map(|pod| Some((pod.metadata.name.clone()?, pod)))
            .collect())
    }

    /// Invariant 4: each final phase and reason match what happened to the pod's instance.
    fn check_outcomes(&self, finals: &BTreeMap<String, Pod>) -> Result<()> {
        let history = self.model.history();
        // Endings still to come (an interruption notice running out) have not happened.
        let now = Timestamp::now();
        let mut problems = Vec::new();
        for (name, pod) in finals {
            let uid = pod.metadata.uid.as_deref().unwrap_or_default();
            let instances: Vec<_> = history
                .iter()
                .filter(|h| h.tags.get(POD_UID_TAG).map(String::as_str) == Some(uid))
                .collect();
            let status = pod.status.clone().unwrap_or_default();
            let (phase, reason, message) = (
                status.phase.unwrap_or_default(),
                status.reason.unwrap_or_default(),
                status.message.unwrap_or_default(),
            );
            let ending = instances
                .first()
                .and_then(|h| h.ending.clone())
                .filter(|ending| ending.at() <= now);
            let honest = match (phase.as_str(), reason.as_str(), &ending) {
                ("Running", _, None) => true,
                (
                    "Succeeded",
                    _,
                    Some(Ending::Completed {
                        pod_exit_code: 0, ..
                    }),
                ) => true,
                ("Failed", "InstanceTerminated", Some(Ending::Completed { pod_exit_code, .. })) => {
                    *pod_exit_code != 0
                        && message.contains(&format!("exited with code {pod_exit_code}"))
                }
                ("Failed", "SpotInterrupted", Some(Ending::Interrupted { .. })) => true,
                // Warned, then the workload ended before the instance went: the run may be
                // partial, and the pod says it was interrupted.
                ("Failed", "SpotInterrupted", Some(Ending::Completed { at, .. })) => instances
                    .first()
                    .and_then(|h| self.warned.get(&h.instance_id))
                    .is_some_and(|warned| warned <= at),
                ("Failed", "InstanceStopped", Some(Ending::Stopped { .. })) => true,
                ("Failed", "InstanceCreationFailed", _) => instances.is_empty(),
                _ => false,
            };
            if !honest {
                problems.push(format!(
                    "{name} ({uid}) is {phase} {reason} ({message}) but its instance(s) {:?} ended {ending:?}",
                    instances.iter().map(|h| &h.instance_id).collect::<Vec<_>>()
                ));
            }
            if phase == "Succeeded" || phase == "Failed" {
                // Per-container exit codes of a completed workload.
                if let Some(Ending::Completed { containers, .. }) = &ending {
                    for (container, code) in containers {
                        let reported = status
                            .container_statuses
                            .iter()
                            .flatten()
                            .find(|c| &c.name == container)
                            .and_then(|c| c.state.as_ref()?.terminated.as_ref())
                            .map(|t| t.exit_code);
                        if reported != Some(*code) {
                            problems.push(format!(
                                "{name}: container {container} exited {code}, reported {reported:?}"
                            ));
                        }
                    }
                }
            }
        }
        ensure!(
            problems.is_empty(),
            "dishonest outcomes:\n  {}",
            problems.join("\n  ")
        );
        Ok(())
    }

    /// EC2's spot notices since the last step go into the queue, as EventBridge would put
    /// them.
    fn publish_notices(&mut self) {
        for notice in self.model.take_notices() {
            self.queue
                .send(spot_warning(&notice.instance_id, notice.issued_at));
            self.warned.insert(notice.instance_id, notice.issued_at);
        }
    }

    /// Invariant 6 (issues 19, 39): every notice about an instance of a pod still here is
    /// acted on and deleted, and its pod carries `DisruptionTarget`; no other pod does (a
    /// forged warning marks none); every message that is not this orca's is deleted.
    async fn check_interruption_queue(&self, finals: &BTreeMap<String, Pod>) -> Result<()> {
        let history = self.model.history();
        let instance_of = |uid: &str| {
            history
                .iter()
                .filter(|h| h.tags.get(POD_UID_TAG).map(String::as_str) == Some(uid))
                .map(|h| h.instance_id.clone())
                .collect::<Vec<_>>()
        };
        let owned: Vec<(String, String)> = finals
            .iter()
            .flat_map(|(name, pod)| {
                let uid = pod.metadata.uid.clone().unwrap_or_default();
                instance_of(&uid)
                    .into_iter()
                    .filter(|id| self.warned.contains_key(id))
                    .map(move |id| (name.clone(), id))
            })
            .collect();
        // Delivered and deleted, within a few long polls.
        let queue = self.queue.clone();
        let pending = |queue: &ModelQueue| {
            let remaining = queue.remaining();
            let joined = remaining.join("\n");
            owned
                .iter()
                .filter(|(_, id)| joined.contains(&format!("\"{id}\"")))
                .map(|(name, id)| format!("{name}'s instance {id}"))
                .chain(
                    self.foreign
                        .iter()
                        .filter(|body| remaining.contains(body))
                        .map(|body| format!("a message that is not orca's: {body}")),
                )
                .collect::<Vec<_>>()
        };
        let waited = poll_until(
            "every notice about a present pod's instance acted on, every other message deleted",
            Duration::from_secs(15),
            Duration::from_millis(250),
            || {
                let left = pending(&queue);
                async move { Ok(left.is_empty().then_some(())) }
            },
        )
        .await;
        let mut problems = Vec::new();
        if waited.is_err() {
            problems.push(format!("messages left in the queue: {:?}", pending(&queue)));
        }
        let pods = self.current_pods().await?;
        for (name, pod) in &pods {
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            let was_warned = instance_of(&uid)
                .iter()
                .any(|id| self.warned.contains_key(id));
            let marked = pod
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|conditions| {
                    conditions.iter().any(|c| {
                        c.type_ == "DisruptionTarget"
                            && c.status == "True"
                            && c.reason.as_deref() == Some("SpotInterruption")
                    })
                });
            if was_warned && !marked && finals.contains_key(name) {
                problems.push(format!("{name} was warned but has no DisruptionTarget"));
            }
            if marked && !was_warned {
                problems.push(format!("{name} has DisruptionTarget but was never warned"));
            }
        }
        ensure!(
            problems.is_empty(),
            "the interruption queue:\n  {}",
            problems.join("\n  ")
        );
        Ok(())
    }

    /// Issue 16, defect 9: a status written over another keeps nothing stale: a Running pod
    /// says nothing of launching, and its containers are only running.
    fn check_clean_statuses(&self, finals: &BTreeMap<String, Pod>) -> Result<()> {
        let mut problems = Vec::new();
        for (name, pod) in finals {
            let status = pod.status.clone().unwrap_or_default();
            if status.phase.as_deref() != Some("Running") {
                continue;
            }
            if status.message.is_some() || status.reason.is_some() {
                problems.push(format!(
                    "{name} is Running with {:?} {:?}",
                    status.reason, status.message
                ));
            }
            for condition in status.conditions.iter().flatten() {
                // A warning's condition says why by design: EC2 reclaims the instance soon.
                let warning = condition.type_ == "DisruptionTarget"
                    || condition.type_.starts_with("orca.research/");
                if condition.status == "True"
                    && condition.type_ != orca::pods::LAUNCHED_CONDITION
                    && !warning
                    && (condition.reason.is_some() || condition.message.is_some())
                {
                    problems.push(format!(
                        "{name}: condition {} keeps {:?} {:?}",
                        condition.type_, condition.reason, condition.message
                    ));
                }
            }
            for container in status.container_statuses.iter().flatten() {
                let state = container.state.clone().unwrap_or_default();
                if state.waiting.is_some() || state.terminated.is_some() {
                    problems.push(format!(
                        "{name}: container {} is running and {state:?}",
                        container.name
                    ));
                }
            }
        }
        ensure!(
            problems.is_empty(),
            "stale status fields:\n  {}",
            problems.join("\n  ")
        );
        Ok(())
    }

    fn protect_one_at_the_end(&mut self) {
        let now = Timestamp::now();
        if let Some(id) = self.random_instance(|spot| spot.is_some()) {
            let until = now + SignedDuration::try_from(END_PROTECTION).unwrap_or_default();
            if self.model.protect(now, &id, until) {
                self.protected.push((id.clone(), now, until));
                self.note(format!(
                    "termination protection on {id} until {until}, then everything deleted"
                ));
            }
        }
    }

    /// Issue 16, defect 8: a step that keeps failing backs off. A termination refused for the
    /// whole protection is asked at most about once per retryMaxBackoff, not once per
    /// retryInitialBackoff.
    fn check_no_hot_loop(&self) -> Result<()> {
        let mut problems = Vec::new();
        for h in self.model.history() {
            let protected: Duration = self
                .protected
                .iter()
                .filter(|(id, _, _)| *id == h.instance_id)
                .map(|(_, from, until)| span(*from, *until))
                .sum();
            let bound = 8 + 2 * (protected.as_millis() / RETRY_MAX.as_millis()) as usize;
            if h.termination_requests.len() > bound {
                problems.push(format!(
                    "{} was asked to terminate {} times (bound {bound})",
                    h.instance_id,
                    h.termination_requests.len()
                ));
            }
        }
        ensure!(
            problems.is_empty(),
            "retries without backoff:\n  {}",
            problems.join("\n  ")
        );
        Ok(())
    }

    /// Deletes every pod left and waits for all of them to go.
    async fn delete_everything(&mut self) -> Result<()> {
        for name in self.live_pods() {
            self.delete(&name, false).await?;
        }
        let deadline = Instant::now() + END_PROTECTION + GRACE * 4 + Duration::from_secs(30);
        loop {
            self.observe_gone().await?;
            if self.tracked.values().all(|t| t.gone_at.is_some()) {
                return Ok(());
            }
            if Instant::now() > deadline {
                let stuck: Vec<&String> = self
                    .tracked
                    .iter()
                    .filter(|(_, t)| t.gone_at.is_none())
                    .map(|(name, _)| name)
                    .collect();
                bail!("pods stayed Terminating: {stuck:?}");
            }
            tokio::time::sleep(SYNC).await;
        }
    }

    /// Invariant 2, at quiescence: every instance is shutting down or terminated (another
    /// cluster's are that cluster's business).
    async fn check_no_leak(&self) -> Result<()> {
        let deadline = Instant::now() + ORPHAN_GRACE + GRACE + Duration::from_secs(20);
        loop {
            let now = Timestamp::now();
            let live: Vec<String> = self
                .model
                .history()
                .into_iter()
                .filter(|h| !self.foreign_instances.contains(&h.instance_id))
                .filter(|h| {
                    !matches!(
                        state_at(h, now),
                        Some(State::ShuttingDown | State::Terminated)
                    )
                })
                .map(|h| {
                    format!(
                        "{} of pod {} ({:?})",
                        h.instance_id,
                        h.tags.get(POD_UID_TAG).map(String::as_str).unwrap_or("?"),
                        state_at(&h, now)
                    )
                })
                .collect();
            if live.is_empty() {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("instances left running after every pod was gone: {live:?}");
            }
            tokio::time::sleep(SYNC).await;
        }
    }

    /// The instances orca launched: not a person's look-alikes, not another cluster's.
    fn launched_by_orca(&self) -> Vec<orca_ec2_model::InstanceHistory> {
        self.model
            .history()
            .into_iter()
            .filter(|h| {
                !self.foreign_instances.contains(&h.instance_id)
                    && !self
                        .look_alikes
                        .iter()
                        .any(|(copy, _)| *copy == h.instance_id)
            })
            .collect()
    }

    /// Invariant 7: no instance orca launched for a pod was asked to terminate while the pod
    /// lived (not deleted) and the workload ran (no ending but orca's own termination).
    fn check_no_live_workload_killed(&self) -> Result<()> {
        let launched = self.launched_by_orca();
        let mut problems = Vec::new();
        for (name, tracked) in &self.tracked {
            let Some(h) = launched
                .iter()
                .find(|h| h.tags.get(POD_UID_TAG) == Some(&tracked.uid))
            else {
                continue;
            };
            let ended = h
                .ending
                .as_ref()
                .filter(|ending| !matches!(ending, Ending::TerminatedByClient { .. }))
                .map(Ending::at);
            let may_end_from = [tracked.deleted_at, ended].into_iter().flatten().min();
            let early: Vec<&Timestamp> = h
                .termination_requests
                .iter()
                .filter(|at| may_end_from.is_none_or(|from| **at < from))
                .collect();
            if !early.is_empty() {
                let copies: Vec<&String> = self
                    .look_alikes
                    .iter()
                    .filter(|(_, original)| *original == h.instance_id)
                    .map(|(copy, _)| copy)
                    .collect();
                problems.push(format!(
                    "{} of {name} was asked to terminate at {early:?} while its pod lived and its workload ran (look-alikes of it: {copies:?})",
                    h.instance_id
                ));
            }
        }
        ensure!(
            problems.is_empty(),
            "running workloads killed:\n  {}",
            problems.join("\n  ")
        );
        Ok(())
    }

    /// Invariant 8: another cluster's instances are never asked to terminate.
    fn check_foreign_instances_untouched(&self) -> Result<()> {
        let touched: Vec<String> = self
            .model
            .history()
            .into_iter()
            .filter(|h| self.foreign_instances.contains(&h.instance_id))
            .filter(|h| !h.termination_requests.is_empty())
            .map(|h| format!("{} ({:?})", h.instance_id, h.tags))
            .collect();
        ensure!(
            touched.is_empty(),
            "another cluster's instances asked to terminate: {touched:?}"
        );
        Ok(())
    }

    /// Invariant 9.
    fn check_replays_word_for_word(&self) -> Result<()> {
        let refused: Vec<String> = self
            .model
            .refused_replays()
            .iter()
            .filter(|refused| refused.operation == "CreateFleet")
            .map(|refused| format!("{} at {}", refused.client_token, refused.at))
            .collect();
        ensure!(
            refused.is_empty(),
            "fleet tokens replayed with other parameters (IdempotentParameterMismatch): {refused:?}"
        );
        Ok(())
    }

    /// Invariant 1.
    fn check_one_instance_per_pod(&self) -> Result<()> {
        let mut by_pod: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for h in self.launched_by_orca() {
            let uid = h.tags.get(POD_UID_TAG).cloned().unwrap_or_default();
            by_pod.entry(uid).or_default().push(h.instance_id);
        }
        let duplicates: Vec<String> = by_pod
            .iter()
            .filter(|(_, ids)| ids.len() > 1)
            .map(|(uid, ids)| format!("pod {uid}: {ids:?}"))
            .collect();
        ensure!(
            duplicates.is_empty(),
            "pods with more than one instance: {duplicates:?}"
        );
        Ok(())
    }

    /// Invariants 2 and 3 in time: instances of pods that are gone end within the orphan
    /// grace, and Terminating pods go within the visibility grace, plus sync periods, plus
    /// the time orca was down or the instance protected.
    fn check_termination_times(&self) -> Result<()> {
        let history = self.model.history();
        let mut problems = Vec::new();
        for (name, tracked) in &self.tracked {
            let instance = history
                .iter()
                .find(|h| h.tags.get(POD_UID_TAG) == Some(&tracked.uid));
            let excused = |from: Timestamp, to: Timestamp| {
                let mut excused = self.overlap_down(from, to);
                if let Some(h) = instance {
                    excused += self.overlap_protected(&h.instance_id, from, to);
                }
                excused
            };
            if let (Some(deleted), Some(gone)) = (tracked.deleted_at, tracked.gone_at)
                && gone > deleted
            {
                let took = span(deleted, gone);
                let bound = GRACE + 4 * SYNC + SLACK + excused(deleted, gone);
                if took > bound {
                    problems.push(format!(
                        "{name} stayed Terminating {took:?} (bound {bound:?})"
                    ));
                }
            }
            if let (Some(h), Some(gone)) = (instance, tracked.gone_at) {
                // When the instance could first be known to be an orphan: its pod gone, it
                // listed (at most the model's visibility and tag lags after launch), and old
                // enough to pass the orphan grace.
                let listed = h.launch_time + SignedDuration::from_secs(4);
                let eligible = gone
                    .max(listed)
                    .max(h.launch_time + SignedDuration::try_from(ORPHAN_GRACE)?);
                let ended = h
                    .transitions
                    .iter()
                    .find(|(_, state, _)| matches!(state, State::ShuttingDown | State::Terminated))
                    .map(|(at, _, _)| *at);
                match ended {
                    Some(ended) if ended > eligible => {
                        let took = span(eligible, ended);
                        let bound = 2 * SYNC + SLACK + excused(eligible, ended);
                        if took > bound {
                            problems.push(format!(
                                "{} of {name} ended {took:?} after it could have (bound {bound:?})",
                                h.instance_id
                            ));
                        }
                    }
                    Some(_) => {}
                    None => problems.push(format!("{} of {name} never ended", h.instance_id)),
                }
            }
        }
        ensure!(
            problems.is_empty(),
            "too slow:\n  {}",
            problems.join("\n  ")
        );
        Ok(())
    }

    /// Invariant 5: the controller holds no per-pod or per-instance state any more.
    async fn check_state_is_empty(&self) -> Result<()> {
        let orca = self.holder().context("a replica serves the node")?;
        // The last request is done once a listing shows its instance going: stale reads and
        // throttled listings can delay that, as for every other bound here.
        let deadline = Instant::now() + GRACE + 4 * SYNC + SLACK;
        loop {
            let records = orca.metric("orca_pod_records")?;
            let asked = orca.metric("orca_termination_requests")?;
            if records == 0.0 && asked == 0.0 {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "orca still holds {records} pod records and {asked} termination requests with every pod gone"
                );
            }
            tokio::time::sleep(SYNC).await;
        }
    }

    fn overlap_down(&self, from: Timestamp, to: Timestamp) -> Duration {
        self.downtime
            .iter()
            .map(|(down, up)| overlap((*down, up.unwrap_or(to)), (from, to)))
            .sum()
    }

    fn overlap_protected(&self, instance_id: &str, from: Timestamp, to: Timestamp) -> Duration {
        let mine: Vec<&(String, Timestamp, Timestamp)> = self
            .protected
            .iter()
            .filter(|(id, _, _)| id == instance_id)
            .collect();
        let overlapping: Duration = mine
            .iter()
            .map(|(_, start, until)| overlap((*start, *until), (from, to)))
            .sum();
        // After a refusal, termination is asked again with backoff: up to retryMaxBackoff
        // after the protection ends.
        if mine.is_empty() {
            overlapping
        } else {
            overlapping + RETRY_MAX + 2 * SYNC
        }
    }
}

/// The instance's state at `at`, from its transitions.
fn state_at(history: &orca_ec2_model::InstanceHistory, at: Timestamp) -> Option<State> {
    history
        .transitions
        .iter()
        .take_while(|(when, _, _)| *when <= at)
        .last()
        .map(|(_, state, _)| *state)
}

fn span(from: Timestamp, to: Timestamp) -> Duration {
    let elapsed = to.duration_since(from);
    if elapsed.is_negative() {
        Duration::ZERO
    } else {
        elapsed.unsigned_abs()
    }
}

fn overlap(a: (Timestamp, Timestamp), b: (Timestamp, Timestamp)) -> Duration {
    let from = a.0.max(b.0);
    let to = a.1.min(b.1);
    span(from, to)
}

fn phase(pod: &Pod) -> String {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_default()
}

/// A replica's config: the node, the model's subnets, short periods, and sharing the node
/// through a Lease in the run's `namespace` as `identity`, with the shortest Lease orca
/// accepts.
fn config(node: &str, namespace: &str, identity: &str) -> Result<String> {
    Ok(format!(
        "replicas:
  shareNodes: true
  namespace: {namespace}
  identity: {identity}
  leaseDuration: 4s
  renewBefore: 3s
node:
  name: {node}
  clusterName: {node}
  daemonPort: {kubelet}
  leaseRenewInterval: 2s
  pingInterval: 1s
  statusUpdateInterval: 10s
pods:
  syncInterval: {sync}ms
  orphanGracePeriod: {orphan}s
  launchVisibilityGrace: {grace}s
  retryInitialBackoff: 100ms
  retryMaxBackoff: {retry_max}ms
provider:
  kind: aws
  region: us-west-2
  aws:
    defaultAmi: ami-0123456789abcdef0
    catalogueRefresh: 0s
    unavailableOfferingTtl: 2s
    subnetIds: [subnet-0a0a0a0a0a0a0a0a0, subnet-0b0b0b0b0b0b0b0b0, subnet-0c0c0c0c0c0c0c0c0]
    rateLimit:
      mutatingPerSecond: 100
      mutatingBurst: 200
      describePerSecond: 100
      describeBurst: 200
kubeletApi:
  bindAddress: 127.0.0.1
  tls:
    sources: [selfSigned]
metrics:
  bindAddress: 127.0.0.1
  port: {metrics}
logging:
  level: info
",
        kubelet = free_port()?,
        metrics = free_port()?,
        sync = SYNC.as_millis(),
        orphan = ORPHAN_GRACE.as_secs(),
        grace = GRACE.as_secs(),
        retry_max = RETRY_MAX.as_millis(),
    ))
}
