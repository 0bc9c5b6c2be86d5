//! Whose an instance is, as a table of what EC2 may answer; then the EC2 lookup against the
//! fake EC2 (which filters by `instance-id` as EC2 does).

use std::collections::BTreeMap;
use std::time::Duration;

use super::*;
use crate::provider::InstanceState;
use crate::provider::aws::fake::FakeEc2;

const CLUSTER: &str = "5f0c8a4e-1b2d-4c6e-9f00-1234567890ab";

fn this() -> ThisOrca {
    ThisOrca {
        cluster_id: CLUSTER.to_owned(),
        nodes: BTreeSet::from(["n1".to_owned(), "n2".to_owned()]),
        grace: SignedDuration::from_secs(120),
    }
}

fn at(text: &str) -> Timestamp {
    text.parse().unwrap()
}

fn instance(tags: &[(&str, &str)], state: InstanceState, launched: &str) -> Ec2Instance {
    Ec2Instance {
        instance_id: "i-0123456789abcdef0".to_owned(),
        instance_type: "m5.large".to_owned(),
        state,
        private_ip: None,
        launch_time: at(launched),
        spot: true,
        state_reason: None,
        tags: tags
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect::<BTreeMap<_, _>>(),
        zone: None,
        volume_ids: Vec::new(),
        ended_at: None,
    }
}

const OURS: [(&str, &str); 3] = [
    ("ManagedBy", "ORCA"),
    ("orca.research/node", "n2"),
    ("orca.research/cluster-id", CLUSTER),
];

/// The time the verdicts are given at.
fn now() -> Timestamp {
    at("2024-03-05T14:30:00Z")
}

/// Long before [`now`], past the grace.
const LONG_AGO: &str = "2024-03-05T12:00:00Z";
/// Within the grace before [`now`].
const JUST_NOW: &str = "2024-03-05T14:29:30Z";
const OTHER_CLUSTER: [(&str, &str); 3] = [
    ("ManagedBy", "ORCA"),
    ("orca.research/node", "n2"),
    ("orca.research/cluster-id", "another-cluster"),
];
const OTHER_NODE: [(&str, &str); 3] = [
    ("ManagedBy", "ORCA"),
    ("orca.research/node", "n3"),
    ("orca.research/cluster-id", CLUSTER),
];
const BEFORE_CLUSTER_IDS: [(&str, &str); 2] = [("ManagedBy", "ORCA"), ("orca.research/node", "n1")];
const NOT_ORCAS: [(&str, &str); 1] = [("Name", "batch-worker")];

/// A situation, what EC2 lists for the id, when the notice was sent, and the verdict.
type Case<'a> = (&'a str, Option<Ec2Instance>, &'a str, Verdict);

/// Checks each case's verdict at [`now`], naming the situation of one that differs.
fn assert_verdicts(cases: Vec<Case<'_>>) {
    for (situation, listed, noticed, expected) in cases {
        assert_eq!(
            verdict(listed.as_ref(), at(noticed), now(), &this()),
            expected,
            "{situation}"
        );
    }
}

#[test]
fn an_instance_is_this_orcas_by_its_tags() {
    use InstanceState::Running;
    use Verdict::{NotOurs, Ours};
    assert_verdicts(vec![
        (
            "ours, running",
            Some(instance(&OURS, Running, LONG_AGO)),
            LONG_AGO,
            Ours,
        ),
        (
            "from before cluster ids, not claimed: another cluster's at the same names, maybe",
            Some(instance(&BEFORE_CLUSTER_IDS, Running, LONG_AGO)),
            LONG_AGO,
            NotOurs,
        ),
        (
            "another cluster's at the same names",
            Some(instance(&OTHER_CLUSTER, Running, LONG_AGO)),
            LONG_AGO,
            NotOurs,
        ),
        (
            "a node this process does not declare",
            Some(instance(&OTHER_NODE, Running, LONG_AGO)),
            LONG_AGO,
            NotOurs,
        ),
        (
            "not orca's, launched long ago",
            Some(instance(&NOT_ORCAS, Running, LONG_AGO)),
            JUST_NOW,
            NotOurs,
        ),
        (
            "ManagedBy someone else",
            Some(instance(
                &[("ManagedBy", "karpenter"), ("orca.research/node", "n1")],
                Running,
                LONG_AGO,
            )),
            LONG_AGO,
            NotOurs,
        ),
        (
            "no tags, launched long ago",
            Some(instance(&[], Running, LONG_AGO)),
            JUST_NOW,
            NotOurs,
        ),
    ]);
}

#[test]
fn a_terminated_instance_is_ours_only_while_the_listing_may_not_have_caught_up() {
    use InstanceState::{ShuttingDown, Terminated};
    use Verdict::{NotOurs, Ours};
    assert_verdicts(vec![
        (
            "ours, terminated just after the notice: the listing may not have caught up",
            Some(instance(&OURS, ShuttingDown, LONG_AGO)),
            JUST_NOW,
            Ours,
        ),
        (
            "ours, terminated long after the notice: nothing left to act on",
            Some(instance(&OURS, Terminated, LONG_AGO)),
            LONG_AGO,
            NotOurs,
        ),
    ]);
}

#[test]
fn a_just_launched_instance_is_unsettled_while_ec2_may_not_show_its_tags_yet() {
    use InstanceState::Running;
    use Verdict::{NotOurs, Unsettled};
    assert_verdicts(vec![
        (
            "just launched, only a Name shown yet: orca's tags may come",
            Some(instance(&NOT_ORCAS, Running, JUST_NOW)),
            JUST_NOW,
            Unsettled,
        ),
        (
            "just launched, ours but the cluster id not shown yet (EC2 shows tags one by one)",
            Some(instance(&OURS[..2], Running, JUST_NOW)),
            JUST_NOW,
            Unsettled,
        ),
        (
            "just launched, only the cluster id shown yet",
            Some(instance(&OURS[2..], Running, JUST_NOW)),
            JUST_NOW,
            Unsettled,
        ),
        (
            "just launched with another cluster's id: not ours, however new",
            Some(instance(
                &[("orca.research/cluster-id", "another-cluster")],
                Running,
                JUST_NOW,
            )),
            JUST_NOW,
            NotOurs,
        ),
        (
            "just launched for a node this process does not declare",
            Some(instance(&OTHER_NODE[..2], Running, JUST_NOW)),
            JUST_NOW,
            NotOurs,
        ),
        (
            "no tags, just launched: EC2 may not show them yet",
            Some(instance(&[], Running, JUST_NOW)),
            LONG_AGO,
            Unsettled,
        ),
    ]);
}

#[test]
fn an_unlisted_instance_is_unsettled_only_while_ec2_may_not_show_it_yet() {
    use Verdict::{NotOurs, Unsettled};
    assert_verdicts(vec![
        (
            "not listed, noticed just now: EC2 may not show a new instance yet",
            None,
            JUST_NOW,
            Unsettled,
        ),
        (
            "not listed, noticed long ago: EC2 does not know it",
            None,
            LONG_AGO,
            NotOurs,
        ),
    ]);
}

#[test]
fn a_message_is_kept_for_an_instance_that_is_ours_or_unsettled() {
    use Verdict::{NotOurs, Ours, Unsettled};
    assert!(Ours.keeps() && Unsettled.keeps() && !NotOurs.keeps());
}

fn asked(instance_id: &str, noticed: Timestamp) -> Asked {
    Asked {
        instance_id: instance_id.to_owned(),
        noticed,
    }
}

#[tokio::test]
async fn ec2_is_asked_once_by_instance_id_and_only_this_orcas_instances_are_kept() {
    let ec2 = Arc::new(FakeEc2::default());
    let hour = Duration::from_secs(3600);
    let ours = ec2.launch_outside(&OURS, hour);
    let theirs = ec2.launch_outside(&[("ManagedBy", "ORCA"), ("orca.research/node", "n9")], hour);
    let someone = ec2.launch_outside(&[("Name", "web")], hour);
    let owners = Ec2Owners {
        api: ec2.clone(),
        this: this(),
    };
    let long_ago = Timestamp::now() - SignedDuration::from_hours(1);
    let kept = owners
        .ours(&[
            asked(&ours, long_ago),
            asked(&theirs, long_ago),
            asked(&someone, long_ago),
            asked(&ours, long_ago),
            asked("i-0fffffffffffffff0", long_ago),
            asked("i-0fffffffffffffff1", Timestamp::now()),
        ])
        .await
        .unwrap();
    assert_eq!(
        kept,
        HashSet::from([ours, "i-0fffffffffffffff1".to_owned()]),
        "ours, and an id EC2 may not show yet"
    );
    assert_eq!(ec2.calls(), ["DescribeInstances"]);
}

#[tokio::test]
async fn a_failed_lookup_says_how_many_instances_it_was_for() {
    let ec2 = Arc::new(FakeEc2::default());
    ec2.fail_next_call(ApiError::service(
        "RequestLimitExceeded",
        "Request limit exceeded.",
    ));
    let owners = Ec2Owners {
        api: ec2,
        this: this(),
    };
    let error = owners
        .ours(&[asked("i-0fffffffffffffff0", Timestamp::now())])
        .await
        .unwrap_err();
    assert_eq!(
        crate::support::errors::error_chain(&error),
        "DescribeInstances of 1 instance(s) named by interruption notices failed: \
         RequestLimitExceeded: Request limit exceeded."
    );
}
