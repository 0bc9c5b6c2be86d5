//! One reconcile of one pod: observe (the pod, its instance as last listed, its record), decide
//! ([`super::decide`]), execute ([`super::execute`]), and again until there is nothing to do
//! now. kube-runtime's controller guarantees one reconcile at a time per pod and many pods in
//! parallel.

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::controller::Action;

use super::context::Context;
use super::decide::{Observation, Step, decide};
use super::error::ReconcileError;
use super::execute::{Executed, execute};
use super::view::PodView;
use crate::provider::PodKey;

/// Steps one reconcile takes at most before it yields (a launch, its status write and a
/// lookup take three); the pod is requeued if there is more.
const MAX_STEPS: usize = 6;

/// [`reconcile`], timed into the reconcile metrics by result.
pub async fn measured_reconcile(
    pod: Arc<Pod>,
    ctx: Arc<Context>,
) -> Result<Action, ReconcileError> {
    let started = std::time::Instant::now();
    let result = reconcile(pod, ctx.clone()).await;
    let outcome = match &result {
        Ok(_) => "ok",
        Err(error) => error.step(),
    };
    ctx.metrics.observe(outcome, started.elapsed());
    result
}

pub async fn reconcile(pod: Arc<Pod>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    let Some(key) = PodKey::of(&pod) else {
        return Ok(Action::await_change());
    };
    let record = ctx.records.get_or_create(&key.uid);
    // While the store lags our last write, the pod as written is the newer truth.
    let pod = match record.write.as_ref().map(|write| write.newer_than(&pod)) {
        Some(Some(written)) => written,
        Some(None) => {
            ctx.records.update(&key.uid, |record| record.write = None);
            pod
        }
        None => pod,
    };
    let listed = ctx.instances.get(&key.uid);
    if listed.is_some() {
        // The listing supersedes a second look.
        ctx.records.update(&key.uid, |record| {
            record.looked_up = None;
            record.lookup_missed = None;
        });
    }
    let mut pod = pod;
    for _ in 0..MAX_STEPS {
        let Some(view) = PodView::of(&pod) else {
            return Ok(Action::await_change());
        };
        // The pod left the store while this reconcile ran.
        let Some(record) = ctx.records.get(&key.uid) else {
            return Ok(Action::await_change());
        };
        let mut observation = Observation {
            pod: &view,
            listed: listed.as_ref(),
            record: &record,
            asked: None,
            now: Timestamp::now(),
            timing: ctx.timing(),
        };
        observation.asked = observation
            .instance_id()
            .and_then(|instance_id| ctx.ledger.get(instance_id));
        let step = decide(&observation);
        tracing::debug!(pod = %key, ?step, "decided");
        if let Step::Wait(after) = step {
            return Ok(after.map_or_else(Action::await_change, Action::requeue));
        }
        match execute(step, &pod, &view.key, &ctx).await {
            Ok(Executed::Continue) => {}
            Ok(Executed::PodChanged(updated)) => pod = Arc::new(*updated),
            Ok(Executed::PodRemoved) => return Ok(Action::await_change()),
            Err(error) => {
                if !error.is_conflict() {
                    let (initial, max) = (
                        ctx.config.retry_initial_backoff.get(),
                        ctx.config.retry_max_backoff.get(),
                    );
                    let now = Timestamp::now();
                    ctx.records.update(&key.uid, |record| {
                        record.retry = record.retry.failed(now, initial, max);
                    });
                }
                return Err(error);
            }
        }
    }
    Ok(Action::requeue(ctx.config.sync_interval.get()))
}

/// What the controller does after a failed step: at once for a conflict (fresh data will
/// differ), else when the pod's backoff says.
pub fn error_policy(_pod: Arc<Pod>, error: &ReconcileError, ctx: Arc<Context>) -> Action {
    if error.is_conflict() {
        return Action::requeue(Duration::from_millis(200));
    }
    if let ReconcileError::HoldEnded { pod, .. } = error {
        // The turn is ending: whoever serves the node next takes the pod up.
        tracing::debug!(%pod, "reconcile stopped: this replica's hold on the node ended");
        return Action::await_change();
    }
    let pod = error.pod();
    let retry = ctx
        .records
        .get(&pod.uid)
        .map(|record| record.retry)
        .unwrap_or_default();
    let delay = retry
        .wait(Timestamp::now())
        .unwrap_or_else(|| ctx.config.retry_initial_backoff.get());
    tracing::warn!(%pod, error = %crate::support::errors::error_chain(error), failures = retry.failures, ?delay, "reconcile failed; retrying with backoff");
    Action::requeue(delay)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16) -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure("conflict", "Conflict")
                .with_code(code)
                .boxed(),
        )
    }

    #[test]
    fn only_a_status_write_conflict_is_retried_at_once() {
        let pod = PodKey {
            namespace: "ns".into(),
            name: "p".into(),
            uid: "u".into(),
        };
        let conflict = ReconcileError::StatusWriteFailed {
            pod: pod.clone(),
            source: api_error(409),
        };
        assert!(conflict.is_conflict());
        let other = ReconcileError::StatusWriteFailed {
            pod,
            source: api_error(500),
        };
        assert!(!other.is_conflict());
    }
}
