//! The Launch step, top to bottom: plan the pod, reserve its price under its namespace's cap,
//! resolve what the instance runs into a [`LaunchRequest`](crate::provider::LaunchRequest)
//! and have the provider launch it. Each answer goes through a pure function of [`effects`]
//! that says what follows (the record, the decision, Events, the status); this file only makes
//! the calls and applies what those functions return.

pub mod effects;
#[cfg(test)]
mod tests;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;

use self::effects::{Effects, Facts, RetryTiming};
use super::error::ReconcileError;
use super::record::PodRecords;
use super::writer::{PodOutput, PodWriter};
use crate::cost::LaunchPrices;
use crate::policy::guardrails::Price;
use crate::policy::{DecisionRecord, Planner};
use crate::provider::zones::ZoneConstraint;
use crate::provider::{ErrorClass, LaunchFailed, PodKey, Provider};
use crate::spend::NamespaceSpend;
use crate::workload::{EnvSource, launch_request};

/// What the Launch step works with.
#[derive(Clone, Copy)]
pub struct Launcher<'a> {
    pub planner: &'a dyn Planner,
    /// What the launched instance costs an hour, for the decision record.
    pub prices: &'a LaunchPrices,
    pub provider: &'a dyn Provider,
    pub spend: &'a NamespaceSpend,
    pub records: &'a PodRecords,
    pub writer: &'a dyn PodWriter,
    /// Where the pod's ConfigMaps and Secrets are read from.
    pub objects: &'a dyn EnvSource,
    /// The node's name, which its pods' reservations carry.
    pub node_name: &'a str,
    /// The node's zone, when it is bound to one (its pods run there).
    pub node_zone: Option<&'a str>,
    pub timing: RetryTiming,
}

impl Launcher<'_> {
    /// Plans `pod` and launches its instance; answers the pod as written, if the step wrote
    /// its status. The decision goes onto the pod with the status write that follows (the
    /// launch's outcome, or the instance's status once listed).
    ///
    /// # Errors
    /// [`ReconcileError::StatusWriteFailed`]; the caller backs off.
    pub async fn launch(&self, pod: &Pod, key: &PodKey) -> Result<Option<Pod>, ReconcileError> {
        let decision = match self.planner.plan(pod).await {
            Ok(decision) => decision,
            Err(error) => {
                let effects = effects::plan_failed(&error, &self.facts(key).as_facts());
                return self.apply(pod, key, effects).await;
            }
        };
        // Decided: whatever the pod waited for is over (a wake for it would only plan it
        // again).
        self.records
            .update(&key.uid, |record| record.waits_for_policy = false);
        // Counted against the namespace's cap before anything is launched, so pods launching
        // at once cannot together pass it.
        let price = Price::of(decision.record.worst_case_price_per_hour);
        if let Err(error) = self
            .spend
            .reserve(&key.namespace, &key.uid, self.node_name, price)
        {
            let facts = self.facts(key);
            let effects = effects::no_room(
                decision.record,
                price,
                &error,
                &key.namespace,
                &facts.as_facts(),
            );
            return self.apply(pod, key, effects).await;
        }
        self.records
            .update(&key.uid, |record| record.waits_for_room = None);
        // The pod's zones, computed once: the request carries them, the decision shows them.
        let zones = ZoneConstraint::of(pod).on_node(self.node_zone);
        let mut warnings = Vec::new();
        let outcome = match launch_request(pod, &decision.plan, zones.clone(), self.objects).await {
            Ok(request) => {
                let created = self.provider.create(&request).await;
                warnings = request.workload.warnings;
                created
            }
            // Refused before any provider call, as the provider would have refused it.
            Err(error) => Err(LaunchFailed::new(error.into())),
        };
        if let Err(failed) = &outcome
            && failed.error.class == ErrorClass::AlreadyEnded
        {
            tracing::info!(pod = %key, error = %failed.error, "the pod's instance ended before any listing showed it");
        }
        let facts = self.facts(key);
        let mut effects = effects::launched(
            &outcome,
            decision.record,
            &decision.plan,
            &zones,
            &facts.as_facts(),
        );
        effects::warn(&mut effects, &warnings);
        if let Ok(launched) = &outcome
            && let Some(decision) = effects.decision.as_mut()
        {
            self.price(launched, decision);
            self.planner.launched(decision);
        }
        self.apply(pod, key, effects).await
    }

    /// Prices what was `launched` in its `decision`'s launch record, and the shadow's
    /// offering the same way: the same zone, the same sources.
    fn price(&self, launched: &crate::provider::Launched, decision: &mut DecisionRecord) {
        let priced = self.prices.at_launch(
            &launched.offering.instance_type,
            launched.offering.market,
            launched.zone.as_deref(),
        );
        if let Some(launch) = decision.launch.as_mut() {
            launch.price_per_hour = priced.map(|(price, _)| price.usd());
            launch.price_source = priced.map(|(_, source)| source);
        }
        if let Some(shadow) = decision.shadow.as_mut() {
            let offering = (
                launched.offering.instance_type.as_str(),
                launched.offering.market,
            );
            let candidate = shadow
                .launched_instead(offering)
                .and_then(|(instance_type, market)| {
                    self.prices
                        .at_launch(instance_type, market, launched.zone.as_deref())
                })
                .map(|(price, _)| price);
            shadow.priced(candidate, priced.map(|(price, _)| price));
        }
    }

    /// The pod's record as it stands, and the time.
    fn facts(&self, key: &PodKey) -> Snapshot {
        Snapshot {
            record: self.records.get(&key.uid).unwrap_or_default(),
            now: Timestamp::now(),
            timing: self.timing,
        }
    }

    /// Applies `effects` in their order: the reservation, the record, the decision, the
    /// Events, the status.
    async fn apply(
        &self,
        pod: &Pod,
        key: &PodKey,
        effects: Effects,
    ) -> Result<Option<Pod>, ReconcileError> {
        let Effects {
            release,
            record,
            decision,
            events,
            status,
        } = effects;
        if release {
            self.spend.release(&key.uid);
        }
        self.records.update(&key.uid, |stored| record.apply(stored));
        let output = PodOutput {
            writer: self.writer,
            records: self.records,
        };
        if let Some(decision) = decision {
            output.note_decision(pod, key, &decision).await;
        }
        for event in events {
            output.publish(pod, event).await;
        }
        match status {
            Some(change) => output.write_status(pod, key, change.status(pod)).await,
            None => Ok(None),
        }
    }
}

/// The facts a decision reads, owned while the step runs.
struct Snapshot {
    record: super::record::PodRecord,
    now: Timestamp,
    timing: RetryTiming,
}

impl Snapshot {
    fn as_facts(&self) -> Facts<'_> {
        Facts {
            record: &self.record,
            now: self.now,
            timing: self.timing,
        }
    }
}
