//! Why a reconcile step failed.

use crate::provider::{PodKey, ProviderError};

/// Why a reconcile step failed; the pod is retried with backoff.
// Variants are named after the step that failed (kube-rs style), hence the shared suffix.
#[allow(clippy::enum_variant_names)]
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("writing status of pod {pod}")]
    StatusWriteFailed {
        pod: PodKey,
        #[source]
        source: kube::Error,
    },
    #[error("removing pod {pod}")]
    PodRemovalFailed {
        pod: PodKey,
        #[source]
        source: kube::Error,
    },
    #[error("terminating instance {instance_id} of pod {pod}: {source}")]
    TerminateFailed {
        pod: PodKey,
        instance_id: String,
        source: ProviderError,
    },
    #[error("looking up instance {instance_id} of pod {pod}: {source}")]
    LookUpFailed {
        pod: PodKey,
        instance_id: String,
        source: ProviderError,
    },
    #[error("attaching volumes to instance {instance_id} of pod {pod}: {source}")]
    AttachFailed {
        pod: PodKey,
        instance_id: String,
        source: ProviderError,
    },
    #[error("reading the exit report of instance {instance_id} of pod {pod}: {source}")]
    ExitReadFailed {
        pod: PodKey,
        instance_id: String,
        source: ProviderError,
    },
    /// The turn's tenure ended mid-reconcile; the replica serving the node next reconciles
    /// the pod.
    #[error("reconciling pod {pod}")]
    HoldEnded {
        pod: PodKey,
        #[source]
        source: crate::replicas::TenureError,
    },
}

impl ReconcileError {
    /// The failed step, for the reconcile metrics.
    pub fn step(&self) -> &'static str {
        match self {
            ReconcileError::StatusWriteFailed { .. } => "StatusWriteFailed",
            ReconcileError::PodRemovalFailed { .. } => "PodRemovalFailed",
            ReconcileError::TerminateFailed { .. } => "TerminateFailed",
            ReconcileError::LookUpFailed { .. } => "LookUpFailed",
            ReconcileError::AttachFailed { .. } => "AttachFailed",
            ReconcileError::ExitReadFailed { .. } => "ExitReadFailed",
            ReconcileError::HoldEnded { .. } => "HoldEnded",
        }
    }

    pub fn pod(&self) -> &PodKey {
        match self {
            ReconcileError::StatusWriteFailed { pod, .. }
            | ReconcileError::PodRemovalFailed { pod, .. }
            | ReconcileError::TerminateFailed { pod, .. }
            | ReconcileError::LookUpFailed { pod, .. }
            | ReconcileError::AttachFailed { pod, .. }
            | ReconcileError::ExitReadFailed { pod, .. }
            | ReconcileError::HoldEnded { pod, .. } => pod,
        }
    }

    /// A 409 means someone wrote the pod after we read it: retry at once on fresh data.
    pub fn is_conflict(&self) -> bool {
        matches!(self, ReconcileError::StatusWriteFailed { source: kube::Error::Api(status), .. } if status.code == 409)
    }
}
