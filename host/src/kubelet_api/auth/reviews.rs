//! The two apiserver calls the gate needs: TokenReview and SubjectAccessReview.
//!
//! A narrow trait over them is the seam for fakes in tests; [`KubeReviews`] is the real one.

use async_trait::async_trait;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, TokenReviewStatus};
use k8s_openapi::api::authorization::v1::{
    SubjectAccessReview, SubjectAccessReviewSpec, SubjectAccessReviewStatus,
};
use kube::Api;
use kube::api::PostParams;

use crate::support::BoxError;

/// Why the apiserver gave no answer to a review (its cause boxed, so fakes need not build a
/// `kube::Error`). Not an answer of "no": that is a status.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    #[error("creating a TokenReview")]
    TokenReviewFailed(#[source] BoxError),
    #[error("creating a SubjectAccessReview")]
    AccessReviewFailed(#[source] BoxError),
    #[error("the apiserver returned a {kind} without a status")]
    StatusMissing { kind: &'static str },
}

/// Asks the apiserver who a token belongs to, and what a user may do.
#[async_trait]
pub trait ReviewApi: Send + Sync {
    /// # Errors
    /// [`ReviewError`] when the apiserver could not be asked or gave no status; a token it
    /// rejects is `Ok` with `authenticated` false.
    async fn review_token(&self, token: &str) -> Result<TokenReviewStatus, ReviewError>;

    /// # Errors
    /// [`ReviewError`] when the apiserver could not be asked or gave no status; a denial is
    /// `Ok` with `allowed` false.
    async fn review_access(
        &self,
        spec: SubjectAccessReviewSpec,
    ) -> Result<SubjectAccessReviewStatus, ReviewError>;
}

/// [`ReviewApi`] against the apiserver. orca's ServiceAccount needs `create` on
/// `tokenreviews` and `subjectaccessreviews`: the `system:auth-delegator` ClusterRole.
pub struct KubeReviews {
    tokens: Api<TokenReview>,
    access: Api<SubjectAccessReview>,
}

impl KubeReviews {
    pub fn new(client: kube::Client) -> Self {
        KubeReviews {
            tokens: Api::all(client.clone()),
            access: Api::all(client),
        }
    }
}

#[async_trait]
impl ReviewApi for KubeReviews {
    async fn review_token(&self, token: &str) -> Result<TokenReviewStatus, ReviewError> {
        // No audiences: the apiserver then checks the token against its own, which is what a
        // client of the kubelet (kubectl, the apiserver itself, Prometheus) presents.
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_string(),
                audiences: None,
            },
            ..TokenReview::default()
        };
        let created = self
            .tokens
            .create(&PostParams::default(), &review)
            .await
            .map_err(|error| ReviewError::TokenReviewFailed(Box::new(error)))?;
        created.status.ok_or(ReviewError::StatusMissing {
            kind: "TokenReview",
        })
    }

    async fn review_access(
        &self,
        spec: SubjectAccessReviewSpec,
    ) -> Result<SubjectAccessReviewStatus, ReviewError> {
        let review = SubjectAccessReview {
            spec,
            ..SubjectAccessReview::default()
        };
        let created = self
            .access
            .create(&PostParams::default(), &review)
            .await
            .map_err(|error| ReviewError::AccessReviewFailed(Box::new(error)))?;
        created.status.ok_or(ReviewError::StatusMissing {
            kind: "SubjectAccessReview",
        })
    }
}
