//! Authentication and authorization of kubelet API requests, delegated to the apiserver.
//!
//! A request is authenticated by its verified client certificate or, failing that, by a
//! bearer token the apiserver vouches for through a TokenReview; then authorized by a
//! SubjectAccessReview for a verb on a `nodes/<subresource>` of this Node, mapped from the
//! request as the kubelet maps it. Both answers are cached for the configured TTLs.
//!
//! orca's ServiceAccount needs `create` on `authentication.k8s.io/tokenreviews` and
//! `authorization.k8s.io/subjectaccessreviews`, which the `system:auth-delegator`
//! ClusterRole grants.

mod attributes;
mod authenticate;
mod authorize;
mod bearer;
mod cache;
mod gate;
mod refusal;
mod reviews;
mod user;

#[cfg(test)]
mod tests;

pub use attributes::{RequestAttributes, access_review_spec, subresources, verb};
pub use gate::Gate;
pub use refusal::Refusal;
pub use reviews::{KubeReviews, ReviewApi, ReviewError};
pub use user::{AUTHENTICATED_GROUP, User};
