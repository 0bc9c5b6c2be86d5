//! The cost loop: every period, one listing of the cluster's instances, one batched
//! `DescribeSpotPriceHistory` for the spot pools whose cached history is due, one turn of the
//! [`CostLedger`], the metrics, and each ended instance's cost recorded on its pod
//! (`orca.research/cost`), in a `PodCost` Event and in the log.
//!
//! # Guarantees
//! Nothing here launches or terminates anything, and launches and terminations never wait for
//! it: a failed listing or price lookup is logged and tried again next period (an instance's
//! price then falls back to the catalogue's, and its record says so).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kube::api::{ListParams, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use tokio_util::sync::CancellationToken;

use super::ledger::{CostLedger, Priced, Seen};
use super::pools::{SpotHistory, SpotPool};
use super::record::{COST_ANNOTATION, CostRecord, Known, pricing};
use crate::metrics::CostMetrics;
use crate::policy::catalogue::InstanceCatalogue;
use crate::policy::guardrails::Price;
use crate::provider::InstanceState;
use crate::provider::aws::api::{ApiError, Ec2Api, Ec2Instance};
use crate::provider::aws::listing::ClusterListing;
use crate::provider::ownership::{TAG_NODE, TAG_POD_NAME, TAG_POD_NAMESPACE, TAG_POD_UID};

/// Why a turn did not complete.
#[derive(Debug, thiserror::Error)]
pub enum CostError {
    #[error("listing the cluster's instances failed: {0}")]
    ListingFailed(#[source] ApiError),
}

/// What the cost loop works with.
pub struct CostLoop {
    /// For the spot price history.
    pub api: Arc<dyn Ec2Api>,
    /// The cluster's instances, the listing the census for the namespaces' caps shares.
    pub listing: Arc<ClusterListing>,
    pub catalogue: Arc<InstanceCatalogue>,
    pub client: kube::Client,
    pub metrics: Arc<CostMetrics>,
    /// How often instances are listed (`pods.syncInterval`).
    pub period: Duration,
    /// How long a pool's spot price history is used before it is asked again.
    pub ttl: Duration,
    /// The nodes this process serves: only their instances are counted here (with replicas,
    /// each node's by the replica serving it).
    pub served: Arc<crate::process::served_nodes::ServedNodes>,
    /// Where launches read their pool's price now.
    pub launch_prices: Arc<super::LaunchPrices>,
}

/// The loop's state between turns.
pub struct Books {
    ledger: CostLedger,
    history: SpotHistory,
    /// The price lookup's failure last logged (logged when it starts or changes).
    lookup_failing: Option<String>,
    /// After a failed lookup, no other before this.
    lookup_not_before: Option<Timestamp>,
}

/// How long after a failed price lookup the next one is made (each sync meanwhile prices
/// spot instances at the catalogue's price).
const LOOKUP_RETRY: jiff::SignedDuration = jiff::SignedDuration::from_secs(30);

impl Books {
    /// Counting from `started`.
    pub fn new(started: Timestamp) -> Books {
        Books {
            ledger: CostLedger::new(started),
            history: SpotHistory::default(),
            lookup_failing: None,
            lookup_not_before: None,
        }
    }
}

impl CostLoop {
    /// Counts every `period` until `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) {
        let mut tick = tokio::time::interval(self.period.max(Duration::from_millis(100)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut books = Books::new(Timestamp::now());
        let mut failing: Option<String> = None;
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            match self.turn(&mut books, Timestamp::now()).await {
                Ok(()) => {
                    if failing.take().is_some() {
                        tracing::info!(
                            "listing the cluster's instances for their cost works again"
                        );
                    }
                }
                Err(error) => {
                    let text = error.to_string();
                    if failing.as_deref() != Some(text.as_str()) {
                        tracing::warn!(error = %text, "counting what instances cost failed; retrying every sync period");
                        failing = Some(text);
                    }
                }
            }
        }
    }

    /// One turn at `now`.
    async fn turn(&self, books: &mut Books, now: Timestamp) -> Result<(), CostError> {
        let listed = self
            .listing
            .instances()
            .await
            .map_err(CostError::ListingFailed)?;
        let listing: Vec<Seen> = listed
            .instances
            .iter()
            .filter(|instance| {
                (instance.tags.get(TAG_NODE)).is_some_and(|node| self.served.serves(node))
            })
            .filter_map(seen)
            .collect();
        refresh_prices(self.api.as_ref(), self.ttl, books, &listing, now).await;
        self.launch_prices.set_pools(books.history.prices_at(now));
        // The ledger counts what the listing shows as of when it was asked (it may be older
        // than this turn, shared with the census, or slow to come back).
        let turn = books.ledger.turn(
            &listing,
            |seen| self.priced(&books.history, seen),
            listed.at,
        );
        if !turn.unpriced.is_empty() {
            tracing::warn!(types = ?turn.unpriced, "instances of types the catalogue has no price for count no cost");
        }
        for (series, (dollars, saved)) in &turn.accrued {
            self.metrics.accrue(series, *dollars, *saved);
        }
        self.metrics.set_live(turn.live);
        for (seen, record) in turn.ended {
            if self.record(&seen, &record).await {
                books.ledger.mark_recorded(&seen.instance_id);
            }
        }
        Ok(())
    }

    /// How `seen` is priced now.
    fn priced(&self, history: &SpotHistory, seen: &Seen) -> Option<Priced> {
        let listed = self.catalogue.get(&seen.instance_type);
        let on_demand = listed.as_ref().and_then(|t| Price::of(t.on_demand_price));
        let catalogue_spot = listed.as_ref().and_then(|t| Price::of(t.spot_price));
        let pool_history = match &seen.zone {
            Some(zone) => history.points(&SpotPool {
                instance_type: seen.instance_type.clone(),
                zone: zone.clone(),
            }),
            None => &[],
        };
        let pricing = pricing(
            seen.market,
            seen.launched_at,
            Known {
                on_demand,
                catalogue_spot,
                pool_history,
            },
        )?;
        Some(Priced { pricing, on_demand })
    }

    /// Puts `record` on the pod, in an Event and in the log. Whether it is on record (written
    /// now or before, or the pod is gone and the Event and log hold it).
    async fn record(&self, seen: &Seen, record: &CostRecord) -> bool {
        let summary = record.summary();
        let Some(name) = &seen.pod_name else {
            tracing::info!(namespace = %seen.namespace, pod_uid = %seen.pod_uid, cost = %record.to_json(), "{summary}");
            return true;
        };
        let pods: kube::Api<Pod> = kube::Api::namespaced(self.client.clone(), &seen.namespace);
        // Read by a listing of the one name and written through `pods/status`, as the decision
        // annotation is: the install grants orca `list` and `pods/status` `patch`, not `get`
        // or `patch` on pods themselves.
        let named = ListParams::default().fields(&format!("metadata.name={name}"));
        let found = pods
            .list(&named)
            .await
            .map(|list| list.items.into_iter().next());
        let written = match found {
            Ok(Some(pod)) if pod.metadata.uid.as_deref() == Some(seen.pod_uid.as_str()) => {
                let annotations = pod.metadata.annotations.unwrap_or_default();
                if annotations.contains_key(COST_ANNOTATION) {
                    // Written before a restart: on record already, announced already.
                    return true;
                }
                let patch = serde_json::json!({
                    "metadata": {
                        "uid": seen.pod_uid,
                        "annotations": { COST_ANNOTATION: record.to_json() }
                    }
                });
                match pods
                    .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                {
                    Ok(_) => true,
                    Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {
                        false
                    }
                    Err(error) => {
                        tracing::warn!(pod = %name, namespace = %seen.namespace, %error, "writing the pod's cost failed; trying again next period");
                        return false;
                    }
                }
            }
            // The pod is gone (or a new one took its name): the Event and the log keep it.
            Ok(_) => false,
            Err(error) => {
                tracing::warn!(pod = %name, namespace = %seen.namespace, %error, "reading the pod to record its cost failed; trying again next period");
                return false;
            }
        };
        tracing::info!(pod = %name, namespace = %seen.namespace, on_pod = written, cost = %record.to_json(), "{summary}");
        self.announce(seen, name, summary).await;
        true
    }

    /// The `PodCost` Event on the pod (kept by the apiserver even once the pod is gone).
    async fn announce(&self, seen: &Seen, name: &str, note: String) {
        let recorder = Recorder::new(
            self.client.clone(),
            Reporter {
                controller: "orca".to_owned(),
                instance: None,
            },
        );
        let event = Event {
            type_: EventType::Normal,
            reason: "PodCost".to_owned(),
            note: Some(note),
            action: "Account".to_owned(),
            secondary: None,
        };
        let reference = ObjectReference {
            api_version: Some("v1".to_owned()),
            kind: Some("Pod".to_owned()),
            namespace: Some(seen.namespace.clone()),
            name: Some(name.to_owned()),
            uid: Some(seen.pod_uid.clone()),
            resource_version: None,
            field_path: None,
        };
        if let Err(error) = recorder.publish(&event, &reference).await {
            tracing::warn!(pod = %name, %error, "publishing the PodCost event failed");
        }
    }
}

/// Brings the spot pools of unrecorded instances up to date: one call for every pool due.
pub async fn refresh_prices(
    api: &dyn Ec2Api,
    ttl: Duration,
    books: &mut Books,
    listing: &[Seen],
    now: Timestamp,
) {
    let mut wanted: BTreeMap<SpotPool, Timestamp> = BTreeMap::new();
    for seen in listing {
        if seen.market != crate::provider::plan::Market::Spot
            || books.ledger.is_recorded(&seen.instance_id)
        {
            continue;
        }
        let Some(zone) = &seen.zone else { continue };
        let since = wanted
            .entry(SpotPool {
                instance_type: seen.instance_type.clone(),
                zone: zone.clone(),
            })
            .or_insert(seen.launched_at);
        *since = (*since).min(seen.launched_at);
    }
    books
        .history
        .retain(&wanted.keys().cloned().collect::<BTreeSet<_>>());
    if books
        .lookup_not_before
        .is_some_and(|not_before| now < not_before)
    {
        return;
    }
    let Some((query, pools)) = books.history.due(&wanted, now, ttl) else {
        return;
    };
    match api.spot_price_history(&query).await {
        Ok(changes) => {
            books.history.absorb(&query, &pools, &changes, now);
            books.lookup_not_before = None;
            if books.lookup_failing.take().is_some() {
                tracing::info!("reading spot price histories works again");
            }
        }
        Err(error) => {
            books.lookup_not_before = Some(now + LOOKUP_RETRY);
            let text = error.to_string();
            if books.lookup_failing.as_deref() != Some(text.as_str()) {
                tracing::warn!(error = %text, pools = pools.len(), "reading the spot price history failed; spot instances are priced at the catalogue's spot price until it works");
                books.lookup_failing = Some(text);
            }
        }
    }
}

/// An instance that names its pod, as the cost loop sees it.
fn seen(instance: &Ec2Instance) -> Option<Seen> {
    Some(Seen {
        instance_id: instance.instance_id.clone(),
        namespace: instance.tags.get(TAG_POD_NAMESPACE)?.clone(),
        pod_uid: instance.tags.get(TAG_POD_UID)?.clone(),
        pod_name: instance.tags.get(TAG_POD_NAME).cloned(),
        instance_type: instance.instance_type.clone(),
        market: instance.market(),
        zone: instance.zone.clone(),
        launched_at: instance.launch_time,
        live: bills(instance.state),
        ended_at: instance.ended_at,
    })
}

/// Whether EC2 bills the instance's compute in `state` (not once it stops or ends).
fn bills(state: InstanceState) -> bool {
    matches!(
        state,
        InstanceState::Pending | InstanceState::Running | InstanceState::Stopping
    )
}

#[cfg(test)]
mod tests;
