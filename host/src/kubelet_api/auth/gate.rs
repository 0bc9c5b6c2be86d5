//! The one check every kubelet API request passes: who is calling, and may they.

use std::sync::Arc;

use axum::http::{HeaderValue, Method};

use super::attributes::RequestAttributes;
use super::authenticate::{TokenAuthenticator, UNAUTHORIZED};
use super::authorize::{AccessAuthorizer, AnswerTtls};
use super::bearer::bearer_token;
use super::cache::{Clock, SystemClock};
use super::refusal::Refusal;
use super::reviews::ReviewApi;
use super::user::User;
use crate::config::KubeletApiConfig;

/// Authenticates and authorizes kubelet API requests as a kubelet started with
/// `--anonymous-auth=false --authentication-token-webhook --authorization-mode=Webhook` does.
pub struct Gate {
    tokens: TokenAuthenticator,
    access: AccessAuthorizer,
}

impl Gate {
    pub fn new(api: Arc<dyn ReviewApi>, config: &KubeletApiConfig) -> Gate {
        Gate::with_clock(api, config, Arc::new(SystemClock))
    }

    pub(super) fn with_clock(
        api: Arc<dyn ReviewApi>,
        config: &KubeletApiConfig,
        clock: Arc<dyn Clock>,
    ) -> Gate {
        let ttls = AnswerTtls {
            allowed: config.authorization_allowed_ttl.get(),
            denied: config.authorization_denied_ttl.get(),
        };
        Gate {
            tokens: TokenAuthenticator::new(
                api.clone(),
                config.authentication_cache_ttl.get(),
                clock.clone(),
            ),
            access: AccessAuthorizer::new(api, ttls, clock),
        }
    }

    /// Authenticates (client certificate first, else `Authorization: Bearer <token>` via
    /// TokenReview, cached), then authorizes via SubjectAccessReview (cached) on `node`, as
    /// the kubelet does: [`Gate::authenticate`], then [`Gate::authorize`].
    ///
    /// # Errors
    /// As those two.
    pub async fn admit(
        &self,
        node: &str,
        certificate_user: Option<User>,
        authorization: Option<&HeaderValue>,
        method: &Method,
        path_and_query: &str,
    ) -> Result<User, Refusal> {
        let user = self.authenticate(certificate_user, authorization).await?;
        self.authorize(node, &user, method, path_and_query).await?;
        Ok(user)
    }

    /// Who is calling: the user of a verified client certificate, else the bearer token's
    /// (TokenReview, cached).
    ///
    /// `certificate_user` is the user of a client certificate the TLS layer already verified
    /// against the client CA; a bearer token alongside it is ignored, as in the kubelet's
    /// authenticator union where x509 comes first.
    ///
    /// # Errors
    /// [`Refusal::Unauthenticated`] without credentials (anonymous requests are not allowed)
    /// or with a rejected token; [`Refusal::Unavailable`] when the apiserver cannot be asked.
    pub async fn authenticate(
        &self,
        certificate_user: Option<User>,
        authorization: Option<&HeaderValue>,
    ) -> Result<User, Refusal> {
        match (certificate_user, bearer_token(authorization)) {
            (Some(user), _) => Ok(user),
            (None, Some(token)) => self.tokens.authenticate(token).await,
            (None, None) => Err(Refusal::Unauthenticated(UNAUTHORIZED.to_string())),
        }
    }

    /// Whether `user` may make this request to `node`'s kubelet API (SubjectAccessReview,
    /// cached).
    ///
    /// # Errors
    /// [`Refusal::Forbidden`] when RBAC denies the request; [`Refusal::Unavailable`] when the
    /// apiserver cannot be asked.
    pub async fn authorize(
        &self,
        node: &str,
        user: &User,
        method: &Method,
        path_and_query: &str,
    ) -> Result<(), Refusal> {
        let attributes = RequestAttributes::of(method, path_and_query);
        self.access.authorize(node, user, &attributes).await
    }
}
