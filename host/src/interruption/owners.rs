//! Whose an instance is, for a notice no node served here lists: this orca's (another replica
//! serves its node now, or orca has not listed it yet), so its message is kept for whoever acts
//! on it; or not, so its message is deleted rather than left to circulate until the queue's
//! retention drops it.
//!
//! [`Ec2Owners`] asks EC2 once per receive (`DescribeInstances` filtered by `instance-id`, which
//! answers nothing for an id EC2 does not know, where naming the ids would fail the call) and
//! reads the tags itself ([`verdict`]), so an instance whose tags EC2 does not show yet is told
//! from one that has none.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use async_trait::async_trait;
use jiff::{SignedDuration, Timestamp};

use crate::provider::aws::api::{ApiError, Ec2Api, Ec2Instance, Filter};
use crate::provider::ownership::{MANAGED_BY_VALUE, TAG_CLUSTER_ID, TAG_MANAGED_BY, TAG_NODE};

/// One instance a notice named, and when EC2 sent the notice (the event's `time`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asked {
    pub instance_id: String,
    pub noticed: Timestamp,
}

/// Why EC2 could not say whose the instances are.
#[derive(Debug, thiserror::Error)]
pub enum OwnersError {
    #[error("DescribeInstances of {count} instance(s) named by interruption notices failed")]
    DescribeFailed {
        count: usize,
        #[source]
        source: ApiError,
    },
}

/// Which instances, of those notices named and no node served here lists, are this orca's.
#[async_trait]
pub trait InstanceOwners: Send + Sync + 'static {
    /// The ids among `asked` whose notices this orca keeps: its own, and those it cannot tell
    /// yet (see [`Verdict`]). Every other id is not this orca's.
    ///
    /// # Errors
    /// [`OwnersError`] when it could not find out; the caller then keeps every message, as
    /// when it cannot tell.
    async fn ours(&self, asked: &[Asked]) -> Result<HashSet<String>, OwnersError>;
}

/// What makes an instance this orca's: the tags it launches with.
#[derive(Debug, Clone)]
pub struct ThisOrca {
    /// The cluster's id (`orca.research/cluster-id`).
    pub cluster_id: String,
    /// The nodes this process declares (`orca.research/node`), served here or not.
    pub nodes: BTreeSet<String>,
    /// `pods.launchVisibilityGrace`: how long EC2 may take to show an instance and its tags.
    pub grace: SignedDuration,
}

/// What EC2's answer says about one instance a notice named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Tagged `ManagedBy=ORCA`, this cluster's id and a node this process declares; still a
    /// machine, or ended so recently that the listing may not have caught up. (An instance
    /// from before cluster ids is not, until this orca claims it: its node's listing then
    /// shows it.)
    Ours,
    /// EC2 does not say yet: it lists no such instance within the visibility grace of the
    /// notice, or lists one launched within the grace without all of orca's tags and with none
    /// that names another owner (EC2 shows new instances and their tags eventually, not at
    /// once, and not necessarily all together). A notice about another team's instance
    /// launched moments ago is kept until the grace has passed.
    Unsettled,
    /// Someone else's (another cluster, another orca's nodes, not orca's at all), or unknown to
    /// EC2 (never in this account, or gone long ago), or this orca's but ended long ago.
    NotOurs,
}

impl Verdict {
    /// Whether a message naming the instance is kept for whoever acts on it.
    pub fn keeps(self) -> bool {
        matches!(self, Verdict::Ours | Verdict::Unsettled)
    }
}

/// Whose the instance is that a notice sent at `noticed` named, from what EC2 listed for its id
/// (`None`: nothing) at `now`.
pub fn verdict(
    listed: Option<&Ec2Instance>,
    noticed: Timestamp,
    now: Timestamp,
    this: &ThisOrca,
) -> Verdict {
    let recent = |since: Timestamp| now.duration_since(since) < this.grace;
    let Some(instance) = listed else {
        return if recent(noticed) {
            Verdict::Unsettled
        } else {
            Verdict::NotOurs
        };
    };
    // Each of orca's tags as EC2 shows it: `None` while it does not show it (EC2 may show an
    // instance's tags one by one, each when it has caught up), else whether it says ours.
    let shown = |key: &str, ours: &dyn Fn(&str) -> bool| {
        instance.tags.get(key).map(|value| ours(value.as_str()))
    };
    let says = [
        shown(TAG_MANAGED_BY, &|value| value == MANAGED_BY_VALUE),
        shown(TAG_NODE, &|node| this.nodes.contains(node)),
        shown(TAG_CLUSTER_ID, &|id| id == this.cluster_id),
    ];
    if says.iter().all(|said| *said == Some(true)) {
        if instance.state.needs_termination() || recent(noticed) {
            Verdict::Ours
        } else {
            Verdict::NotOurs
        }
    } else if says.contains(&Some(false)) {
        // A tag that names another owner: someone else's, however new.
        Verdict::NotOurs
    } else if recent(instance.launch_time) {
        // Launched moments ago without all of orca's tags shown: EC2 may show an instance's
        // tags one by one, and which it shows first says nothing (the `Name` a plugin gave may
        // come before `ManagedBy`).
        Verdict::Unsettled
    } else {
        Verdict::NotOurs
    }
}

/// Ids per `DescribeInstances` call.
const IDS_PER_CALL: usize = 100;

/// [`InstanceOwners`] through EC2.
pub struct Ec2Owners {
    pub api: Arc<dyn Ec2Api>,
    pub this: ThisOrca,
}

#[async_trait]
impl InstanceOwners for Ec2Owners {
    async fn ours(&self, asked: &[Asked]) -> Result<HashSet<String>, OwnersError> {
        let ids: Vec<String> = asked
            .iter()
            .map(|asked| asked.instance_id.clone())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let mut listed: HashMap<String, Ec2Instance> = HashMap::new();
        for chunk in ids.chunks(IDS_PER_CALL) {
            let found = self
                .api
                .describe_instances(&[Filter::new("instance-id", chunk.iter().cloned())])
                .await
                .map_err(|source| OwnersError::DescribeFailed {
                    count: ids.len(),
                    source,
                })?;
            listed.extend(found.into_iter().map(|i| (i.instance_id.clone(), i)));
        }
        let now = Timestamp::now();
        Ok(asked
            .iter()
            .filter(|asked| {
                verdict(
                    listed.get(&asked.instance_id),
                    asked.noticed,
                    now,
                    &self.this,
                )
                .keeps()
            })
            .map(|asked| asked.instance_id.clone())
            .collect())
    }
}

#[cfg(test)]
mod tests;
