//! Authorization through SubjectAccessReview, with answers cached as the apiserver's webhook
//! authorizer caches them: allowed and denied answers for separate TTLs, errors not at all.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::attributes::{RequestAttributes, access_review_spec};
use super::cache::{CAPACITY, Clock, TtlCache};
use super::refusal::Refusal;
use super::reviews::ReviewApi;
use super::user::User;
use crate::support::errors::error_chain;

/// Everything a SubjectAccessReview is asked about, so equal keys mean equal questions.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Question {
    user: String,
    uid: String,
    groups: Vec<String>,
    extra: BTreeMap<String, Vec<String>>,
    verb: String,
    subresource: &'static str,
    /// The node asked about: one process serves several.
    node: String,
}

#[derive(Debug, Clone)]
struct Answer {
    allowed: bool,
    reason: String,
}

/// The TTLs of the two kinds of answer.
pub struct AnswerTtls {
    pub allowed: Duration,
    pub denied: Duration,
}

/// Decides whether a user may make a request to the kubelet API of a node orca serves.
pub struct AccessAuthorizer {
    api: Arc<dyn ReviewApi>,
    cache: TtlCache<Question, Answer>,
    ttls: AnswerTtls,
}

impl AccessAuthorizer {
    pub fn new(api: Arc<dyn ReviewApi>, ttls: AnswerTtls, clock: Arc<dyn Clock>) -> Self {
        AccessAuthorizer {
            api,
            cache: TtlCache::new(CAPACITY, clock),
            ttls,
        }
    }

    /// Allows the request to `node`'s kubelet API when any of its subresources is allowed,
    /// trying them in order as the kubelet does.
    ///
    /// # Errors
    /// [`Refusal::Forbidden`] naming user, verb and subresources when none is allowed;
    /// [`Refusal::Unavailable`] when the apiserver cannot be asked.
    pub async fn authorize(
        &self,
        node: &str,
        user: &User,
        attributes: &RequestAttributes,
    ) -> Result<(), Refusal> {
        let mut reasons = Vec::new();
        for subresource in &attributes.subresources {
            let answer = self
                .answer(node, user, &attributes.verb, subresource)
                .await?;
            if answer.allowed {
                return Ok(());
            }
            if !answer.reason.is_empty() && !reasons.contains(&answer.reason) {
                reasons.push(answer.reason);
            }
        }
        // The kubelet's words, so guides and searches for its 403s apply to orca.
        let mut message = format!(
            "Forbidden (user={}, verb={}, resource=nodes, subresource(s)=[{}])",
            user.name,
            attributes.verb,
            attributes.subresources.join(" ")
        );
        if !reasons.is_empty() {
            message.push_str(": ");
            message.push_str(&reasons.join("; "));
        }
        tracing::debug!(%message, "kubelet API request forbidden");
        Err(Refusal::Forbidden(message))
    }

    async fn answer(
        &self,
        node: &str,
        user: &User,
        verb: &str,
        subresource: &'static str,
    ) -> Result<Answer, Refusal> {
        let question = Question {
            user: user.name.clone(),
            uid: user.uid.clone(),
            groups: user.groups.clone(),
            extra: user.extra.clone(),
            verb: verb.to_string(),
            subresource,
            node: node.to_owned(),
        };
        if let Some(answer) = self.cache.get(&question) {
            return Ok(answer);
        }
        let spec = access_review_spec(user, verb, subresource, node);
        let status = self.api.review_access(spec).await.map_err(|error| {
            let cause = error_chain(&error);
            tracing::warn!(error = %cause, "SubjectAccessReview failed; answering 503");
            Refusal::Unavailable(format!(
                "could not authorize the request (user={}, verb={verb}, resource=nodes, \
                 subresource={subresource}): {cause}",
                user.name
            ))
        })?;
        let answer = Answer {
            allowed: status.allowed,
            reason: status.reason.unwrap_or_default(),
        };
        let ttl = if answer.allowed {
            self.ttls.allowed
        } else {
            self.ttls.denied
        };
        self.cache.insert(question, answer.clone(), ttl);
        Ok(answer)
    }
}
