//! Authentication by bearer token through TokenReview, with answers cached as the apiserver's
//! webhook token authenticator caches them.

use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};

use super::cache::{CAPACITY, Clock, TtlCache};
use super::refusal::Refusal;
use super::reviews::ReviewApi;
use super::user::User;
use crate::support::errors::error_chain;

/// The body of every 401, as the kubelet writes it.
pub const UNAUTHORIZED: &str = "Unauthorized";

/// A TokenReview's answer, kept under the token's hash.
#[derive(Debug, Clone)]
enum Verdict {
    Authenticated(User),
    Rejected(String),
}

/// Turns bearer tokens into users.
pub struct TokenAuthenticator {
    api: Arc<dyn ReviewApi>,
    /// Keyed by SHA-256 of the token, so a memory dump holds no usable credentials.
    cache: TtlCache<[u8; 32], Verdict>,
    ttl: Duration,
}

impl TokenAuthenticator {
    pub fn new(api: Arc<dyn ReviewApi>, ttl: Duration, clock: Arc<dyn Clock>) -> Self {
        TokenAuthenticator {
            api,
            cache: TtlCache::new(CAPACITY, clock),
            ttl,
        }
    }

    /// The user `token` belongs to.
    ///
    /// # Errors
    /// [`Refusal::Unauthenticated`] for a token the apiserver rejects (remembered for the TTL,
    /// like an accepted one); [`Refusal::Unavailable`] when the apiserver cannot be asked
    /// (not remembered, so the next request asks again).
    pub async fn authenticate(&self, token: &str) -> Result<User, Refusal> {
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let verdict = match self.cache.get(&key) {
            Some(verdict) => verdict,
            None => {
                let status = self.api.review_token(token).await.map_err(|error| {
                    let cause = error_chain(&error);
                    tracing::warn!(error = %cause, "TokenReview failed; answering 503");
                    Refusal::Unavailable(format!("could not authenticate the request: {cause}"))
                })?;
                let verdict = match status.user.and_then(User::from_user_info) {
                    Some(user) if status.authenticated == Some(true) => {
                        Verdict::Authenticated(user)
                    }
                    _ => Verdict::Rejected(match status.error.filter(|e| !e.is_empty()) {
                        Some(error) => format!("{UNAUTHORIZED}: {error}"),
                        None => UNAUTHORIZED.to_string(),
                    }),
                };
                self.cache.insert(key, verdict.clone(), self.ttl);
                verdict
            }
        };
        match verdict {
            Verdict::Authenticated(user) => Ok(user),
            Verdict::Rejected(message) => Err(Refusal::Unauthenticated(message)),
        }
    }
}
