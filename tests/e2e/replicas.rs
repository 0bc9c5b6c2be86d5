//! Two orca replicas sharing two nodes through Leases, end to end: the real binary twice, the
//! real apiserver's coordination Leases, the real scheduler, and moto's EC2. The replica
//! holding the nodes is SIGKILLed with pods running, then again in the middle of a burst of
//! creates and deletes; the other must hold every node within 15 s, without a Node going
//! NotReady, a pod losing its instance, or a pod getting a second one.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use aws_sdk_ec2::types::InstanceStateName;
use k8s_openapi::api::core::v1::Pod;
use kube::api::DeleteParams;
use orca_e2e::TestCluster;
use orca_e2e::ec2::{state_of, tags_of};
use orca_e2e::http::curl_status;
use orca_e2e::metrics;
use orca_e2e::pods::{self, instance_id};
use orca_e2e::replicas::Replicas;
use orca_e2e::wait::poll_until;

const TICK: Duration = Duration::from_millis(250);
const POD_UID_TAG: &str = "orca.research/pod-uid";
const TAKEOVER_WITHIN: Duration = Duration::from_secs(15);

/// The two scenarios run one after the other: four orca processes at once would measure the
/// machine (and moto's one Python process), not the takeover.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn uid(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap_or_default()
}

#[tokio::test]
async fn the_other_replica_takes_over_every_node_within_15_s_of_a_sigkill_and_no_pod_loses_or_doubles_its_instance()
-> Result<()> {
    let _turn = ONE_AT_A_TIME.lock().await;
    let mut replicas = Replicas::start("replicas-kill", 2).await?;
    const PODS: usize = 10;
    for i in 0..PODS {
        pods::create(&replicas.pods, &replicas.pod_on(&format!("steady-{i}"), i)).await?;
    }
    let before = replicas
        .wait_all_running(PODS, Duration::from_secs(60))
        .await?;
    let instance_before: BTreeMap<String, String> = before
        .iter()
        .map(|pod| (uid(pod), instance_id(pod).unwrap_or_default()))
        .collect();
    let holders = replicas.holders().await?;
    ensure!(
        holders.values().all(|holder| holder == "replica-a"),
        "the first replica holds both nodes: {holders:?}"
    );
    // The standby watches every node's pods while it serves none: a takeover starts from
    // them listed ("watches synced").
    poll_until(
        "the standby's pod watches hold every pod of every node",
        Duration::from_secs(10),
        TICK,
        || async {
            let page = metrics::scrape(replicas.b.metrics_port)?;
            let watched = metrics::by_label(&page, "orca_node_pods_watched", "node");
            let all = watched.len() == replicas.nodes.len()
                && watched.values().sum::<f64>() == PODS as f64;
            Ok(all.then_some(()))
        },
    )
    .await?;

    let (watching, not_ready) = replicas.watch_ready();
    let killed = Instant::now();
    replicas.a.kill()?;
    replicas
        .wait_held_by("replica-b", &replicas.b, TAKEOVER_WITHIN)
        .await?;
    let takeover = killed.elapsed();

    // The kubelet API and the metrics of the new holder answer for both nodes: `kubectl logs`
    // reaches it through the Node's advertised port.
    let (status, metrics) = curl_status(
        &format!("http://127.0.0.1:{}/metrics", replicas.b.metrics_port),
        &[],
    )?;
    assert_eq!(status, 200);
    for node in &replicas.nodes {
        assert!(
            metrics.contains(&format!("orca_node_served{{node=\"{node}\"}} 1")),
            "{metrics}"
        );
    }
    let logs = TestCluster::shared()
        .kubectl()
        .args(["logs", "-n", &replicas.namespace.name, "steady-1"])
        .output()?;
    assert!(
        logs.status.success(),
        "kubectl logs through the new holder: {}",
        String::from_utf8_lossy(&logs.stderr)
    );

    // New pods launch through the new holder.
    for i in PODS..PODS + 2 {
        pods::create(&replicas.pods, &replicas.pod_on(&format!("steady-{i}"), i)).await?;
    }
    let after = replicas
        .wait_all_running(PODS + 2, Duration::from_secs(60))
        .await?;
    watching.store(false, Ordering::Release);
    let not_ready = not_ready.await?;
    assert!(not_ready.is_empty(), "no Node went NotReady: {not_ready:?}");
    for pod in &after {
        if let Some(before) = instance_before.get(&uid(pod)) {
            assert_eq!(
                instance_id(pod).as_ref(),
                Some(before),
                "{:?} keeps its instance",
                pod.metadata.name
            );
        }
    }
    let launches = replicas.launches_per_pod().await?;
    assert_eq!(launches.len(), PODS + 2, "{launches:?}");
    assert!(
        launches.values().all(|&n| n == 1),
        "one instance per pod: {launches:?}"
    );
    eprintln!("takeover after SIGKILL: {takeover:?}");
    replicas.finish().await
}

#[tokio::test]
async fn a_sigkill_of_the_holder_during_a_burst_of_50_creates_and_deletes_launches_nothing_twice_and_leaks_nothing()
-> Result<()> {
    let _turn = ONE_AT_A_TIME.lock().await;
    let mut replicas = Replicas::start("replicas-burst", 2).await?;
    const PODS: usize = 50;
    const DELETED: usize = 20;
    let names: Vec<String> = (0..PODS).map(|i| format!("burst-{i:02}")).collect();
    let (watching, not_ready) = replicas.watch_ready();
    for (i, name) in names.iter().enumerate() {
        pods::create(&replicas.pods, &replicas.pod_on(name, i)).await?;
    }
    poll_until(
        "the first launches",
        Duration::from_secs(30),
        Duration::from_millis(50),
        || async { Ok((!replicas.instances().await?.is_empty()).then_some(())) },
    )
    .await?;
    // Deletes go out while the holder launches; it dies in the middle of them.
    for name in &names[..DELETED / 2] {
        replicas.pods.delete(name, &DeleteParams::default()).await?;
    }
    let killed = Instant::now();
    replicas.a.kill()?;
    for name in &names[DELETED / 2..DELETED] {
        replicas.pods.delete(name, &DeleteParams::default()).await?;
    }
    replicas
        .wait_held_by("replica-b", &replicas.b, TAKEOVER_WITHIN)
        .await?;
    let takeover = killed.elapsed();
    let running = replicas
        .wait_all_running(PODS - DELETED, Duration::from_secs(120))
        .await?;
    let kept: BTreeSet<String> = running.iter().map(uid).collect();
    // Every instance of a deleted pod ends terminated; every kept pod has exactly one.
    poll_until(
        "the deleted pods' instances terminated",
        Duration::from_secs(60),
        TICK,
        || async {
            let live = replicas
                .instances()
                .await?
                .into_iter()
                .filter(|i| {
                    !matches!(
                        state_of(i),
                        InstanceStateName::ShuttingDown | InstanceStateName::Terminated
                    )
                })
                .filter_map(|i| tags_of(&i).get(POD_UID_TAG).cloned())
                .collect::<Vec<_>>();
            Ok(
                (live.len() == kept.len() && live.iter().all(|uid| kept.contains(uid)))
                    .then_some(()),
            )
        },
    )
    .await
    .context("no instance leaked")?;
    watching.store(false, Ordering::Release);
    let not_ready = not_ready.await?;
    assert!(not_ready.is_empty(), "no Node went NotReady: {not_ready:?}");
    let launches = replicas.launches_per_pod().await?;
    assert!(
        launches.values().all(|&n| n == 1),
        "nothing launched twice: {launches:?}"
    );
    for uid in &kept {
        assert_eq!(launches.get(uid), Some(&1), "pod {uid} has its instance");
    }
    eprintln!("takeover after SIGKILL mid-burst: {takeover:?}");
    replicas.finish().await
}

/// Two replicas' Lease locks on one Lease in the real apiserver, looking in lockstep on
/// what a watch would show: never do both hold it; a holder that stalls is replaced only
/// once the Lease has not changed for its duration; its renewal, when it wakes, is refused
/// (guarded by the resourceVersion it wrote) rather than landing on the new holder's Lease;
/// and a released Lease is taken at once. `kube-lease-manager`, used before, livelocked on
/// the stalled holder's late renewal: no replica could ever take the Lease again.
#[tokio::test]
async fn lease_locks_never_hold_a_lease_twice_and_a_stalled_holder_cannot_block_the_next()
-> Result<()> {
    use k8s_openapi::api::coordination::v1::Lease;
    use orca::replicas::{BootInstant, LeaseLock, Step};

    // A hold serves for DURATION less orca's two seconds of margin and is renewed once
    // RENEW_BEFORE is all that is left of the Lease (a second after each write), so every
    // renewal here has five seconds to be answered: with a 4 s Lease the renewal after the
    // takeover had half a second, and a busy CI apiserver did not answer in it.
    const DURATION: Duration = Duration::from_secs(8);
    const RENEW_BEFORE: Duration = Duration::from_secs(7);
    const LOOK: Duration = Duration::from_millis(200);
    let client = TestCluster::shared().kube_client().await?;
    let namespace = orca_e2e::TestNamespace::create(&client, "lease-lock").await?;
    let api: kube::Api<Lease> = kube::Api::namespaced(client, &namespace.name);
    let name = "orca-node-lock".to_owned();
    let lock = |identity: &str| {
        LeaseLock::new(
            api.clone(),
            name.clone(),
            identity.to_owned(),
            DURATION,
            RENEW_BEFORE,
        )
    };
    let (mut a, mut b) = (lock("replica-a"), lock("replica-b"));
    let holder = || async {
        let lease = api.get(&name).await?;
        anyhow::Ok(lease.spec.and_then(|spec| spec.holder_identity))
    };

    ensure!(a.look(None).await? == Step::Create, "a creates the Lease");
    // Both look at the same (sometimes stale) record for a while: one holder only.
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(3) {
        let seen = api.get_opt(&name).await?;
        a.look(seen.as_ref()).await?;
        b.look(seen.as_ref()).await?;
        let now = BootInstant::now();
        ensure!(
            !(a.hold().held(now) && b.hold().held(now)),
            "both replicas hold the Lease"
        );
        ensure!(a.hold().held(now), "the renewing holder keeps the Lease");
        tokio::time::sleep(LOOK).await;
    }
    let stale = api.get_opt(&name).await?;

    // a stalls: b takes the Lease once it has not changed for a whole duration.
    let stalled = Instant::now();
    let (taken_at, taken) = loop {
        let seen = api.get_opt(&name).await?;
        if b.look(seen.as_ref()).await? == Step::Take {
            break (Instant::now(), stalled.elapsed());
        }
        ensure!(
            stalled.elapsed() < DURATION * 3,
            "b never took the stalled Lease"
        );
        tokio::time::sleep(LOOK).await;
    };
    ensure!(
        b.hold().held(BootInstant::now()),
        "b holds it after taking it"
    );
    ensure!(
        taken >= DURATION - Duration::from_secs(1),
        "taken {taken:?} after the last renewal: before the holder could have stopped"
    );
    ensure!(holder().await?.as_deref() == Some("replica-b"));

    // a wakes up believing it holds the Lease, renews on what it saw before: refused.
    a.look(stale.as_ref()).await?;
    ensure!(
        !a.hold().held(BootInstant::now()),
        "the stalled replica still believes it holds the Lease"
    );
    ensure!(
        holder().await?.as_deref() == Some("replica-b"),
        "the stalled replica's renewal landed on the new holder's Lease"
    );
    // No livelock: b keeps renewing, then gives the Lease back and a takes it at once. Its
    // renewal is due once RENEW_BEFORE is all that is left of the Lease it wrote.
    tokio::time::sleep_until((taken_at + (DURATION - RENEW_BEFORE)).into()).await;
    let seen = api.get_opt(&name).await?;
    ensure!(b.look(seen.as_ref()).await? == Step::Renew, "b renews");
    ensure!(b.hold().held(BootInstant::now()));
    b.release().await?;
    ensure!(holder().await?.is_none(), "released");
    let seen = api.get_opt(&name).await?;
    ensure!(
        a.look(seen.as_ref()).await? == Step::Take,
        "a released Lease is taken at once"
    );
    ensure!(a.hold().held(BootInstant::now()));
    ensure!(holder().await?.as_deref() == Some("replica-a"));
    namespace.delete().await
}
