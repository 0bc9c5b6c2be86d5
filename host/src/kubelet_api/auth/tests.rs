//! The gate end to end against a fake apiserver: credentials, caching, and refusals.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use axum::http::{HeaderValue, Method, StatusCode};
use k8s_openapi::api::authentication::v1::{TokenReviewStatus, UserInfo};
use k8s_openapi::api::authorization::v1::{SubjectAccessReviewSpec, SubjectAccessReviewStatus};

use super::cache::tests::ManualClock;
use super::*;
use crate::config::{KubeletApiConfig, Seconds};
use crate::support::errors::lock;

const NODE: &str = "orca-node";

/// Which review the fake apiserver fails, as if it could not be reached.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Down {
    #[default]
    Nothing,
    Tokens,
    Access,
}

/// A fake apiserver. Unknown tokens and an unreachable apiserver fail the call, so a test
/// that forgets to configure an answer sees it.
#[derive(Default)]
struct FakeReviews {
    /// Token → the user it belongs to; tokens in `rejected` are answered "not authenticated".
    users: Mutex<HashMap<String, UserInfo>>,
    rejected: Mutex<HashMap<String, String>>,
    /// (user, verb, subresource) triples RBAC allows; everything else is denied.
    allowed: Mutex<HashSet<(String, String, String)>>,
    down: Mutex<Down>,
    token_calls: Mutex<Vec<String>>,
    access_calls: Mutex<Vec<SubjectAccessReviewSpec>>,
}

impl FakeReviews {
    fn user(&self, token: &str, name: &str) {
        let info = UserInfo {
            username: Some(name.to_string()),
            uid: Some(format!("uid-{name}")),
            groups: Some(vec!["developers".to_string()]),
            extra: Some(BTreeMap::from([(
                "scopes".to_string(),
                vec!["read".to_string()],
            )])),
        };
        lock(&self.users).insert(token.to_string(), info);
    }

    fn reject(&self, token: &str, error: &str) {
        lock(&self.rejected).insert(token.to_string(), error.to_string());
    }

    fn allow(&self, user: &str, verb: &str, subresource: &str) {
        lock(&self.allowed).insert((user.into(), verb.into(), subresource.into()));
    }

    fn set_down(&self, down: Down) {
        *lock(&self.down) = down;
    }

    fn token_calls(&self) -> usize {
        lock(&self.token_calls).len()
    }

    fn access_calls(&self) -> Vec<SubjectAccessReviewSpec> {
        lock(&self.access_calls).clone()
    }

    fn asked_subresources(&self) -> Vec<String> {
        self.access_calls()
            .into_iter()
            .filter_map(|spec| spec.resource_attributes?.subresource)
            .collect()
    }
}

fn unreachable() -> ReviewError {
    ReviewError::TokenReviewFailed(Box::new(std::io::Error::new(
        std::io::ErrorKind::ConnectionRefused,
        "connection refused",
    )))
}

#[async_trait]
impl ReviewApi for FakeReviews {
    async fn review_token(&self, token: &str) -> Result<TokenReviewStatus, ReviewError> {
        lock(&self.token_calls).push(token.to_string());
        if *lock(&self.down) == Down::Tokens {
            return Err(unreachable());
        }
        if let Some(info) = lock(&self.users).get(token) {
            return Ok(TokenReviewStatus {
                authenticated: Some(true),
                user: Some(info.clone()),
                ..TokenReviewStatus::default()
            });
        }
        match lock(&self.rejected).get(token) {
            Some(error) => Ok(TokenReviewStatus {
                authenticated: Some(false),
                error: Some(error.clone()).filter(|error| !error.is_empty()),
                ..TokenReviewStatus::default()
            }),
            None => Err(ReviewError::StatusMissing {
                kind: "TokenReview for a token the test did not configure",
            }),
        }
    }

    async fn review_access(
        &self,
        spec: SubjectAccessReviewSpec,
    ) -> Result<SubjectAccessReviewStatus, ReviewError> {
        lock(&self.access_calls).push(spec.clone());
        if *lock(&self.down) == Down::Access {
            return Err(unreachable());
        }
        let resource = spec.resource_attributes.unwrap_or_default();
        let triple = (
            spec.user.unwrap_or_default(),
            resource.verb.unwrap_or_default(),
            resource.subresource.unwrap_or_default(),
        );
        let allowed = lock(&self.allowed).contains(&triple);
        Ok(SubjectAccessReviewStatus {
            allowed,
            reason: (!allowed).then(|| "no RBAC policy matched".to_string()),
            ..SubjectAccessReviewStatus::default()
        })
    }
}

struct Harness {
    api: Arc<FakeReviews>,
    clock: Arc<ManualClock>,
    gate: Gate,
}

fn harness() -> Harness {
    let api = Arc::new(FakeReviews::default());
    let clock = ManualClock::new();
    let config = KubeletApiConfig {
        authentication_cache_ttl: Seconds::from_secs(120),
        authorization_allowed_ttl: Seconds::from_secs(300),
        authorization_denied_ttl: Seconds::from_secs(30),
        ..KubeletApiConfig::default()
    };
    let gate = Gate::with_clock(api.clone(), &config, clock.clone());
    Harness { api, clock, gate }
}

fn bearer(token: &str) -> HeaderValue {
    HeaderValue::from_str(&format!("Bearer {token}")).expect("a valid header value")
}

impl Harness {
    async fn get(&self, token: &str, path: &str) -> Result<User, Refusal> {
        let header = bearer(token);
        self.gate
            .admit(NODE, None, Some(&header), &Method::GET, path)
            .await
    }
}

#[tokio::test]
async fn no_credentials_are_refused_with_401_without_asking_the_apiserver() {
    let h = harness();
    let refusal = h.gate.admit(NODE, None, None, &Method::GET, "/pods").await;
    assert_eq!(
        refusal,
        Err(Refusal::Unauthenticated("Unauthorized".into()))
    );
    let basic = HeaderValue::from_static("Basic dXNlcjpwYXNz");
    let refusal = h
        .gate
        .admit(NODE, None, Some(&basic), &Method::GET, "/pods")
        .await;
    assert_eq!(
        refusal,
        Err(Refusal::Unauthenticated("Unauthorized".into()))
    );
    assert_eq!(h.api.token_calls(), 0);
    assert!(h.api.access_calls().is_empty());
}

#[tokio::test]
async fn rejected_token_is_401_with_the_reviews_error_and_is_remembered_for_the_ttl() {
    let h = harness();
    h.api.reject("stale", "token has expired");
    for _ in 0..3 {
        let refusal = h.get("stale", "/pods").await;
        assert_eq!(
            refusal,
            Err(Refusal::Unauthenticated(
                "Unauthorized: token has expired".into()
            ))
        );
    }
    assert_eq!(h.api.token_calls(), 1, "the rejection is cached");
    assert!(h.api.access_calls().is_empty());
    h.clock.advance(Duration::from_secs(120));
    let _ = h.get("stale", "/pods").await;
    assert_eq!(h.api.token_calls(), 2, "the rejection expires with the TTL");
}

#[tokio::test]
async fn rejected_token_without_an_error_is_plain_unauthorized() {
    let h = harness();
    h.api.reject("forged", "");
    let refusal = h.get("forged", "/pods").await;
    assert_eq!(
        refusal,
        Err(Refusal::Unauthenticated("Unauthorized".into()))
    );
}

#[tokio::test]
async fn allowed_token_is_admitted_and_a_second_request_asks_the_apiserver_nothing() {
    let h = harness();
    h.api.user("good", "alice");
    h.api.allow("alice", "get", "log");
    let user = h.get("good", "/logs/messages").await.expect("admitted");
    assert_eq!(user.name, "alice");
    assert_eq!(user.uid, "uid-alice");
    assert_eq!(user.groups, ["developers", AUTHENTICATED_GROUP]);
    assert_eq!((h.api.token_calls(), h.api.access_calls().len()), (1, 1));

    let again = h.get("good", "/logs/other").await.expect("admitted");
    assert_eq!(again, user);
    assert_eq!((h.api.token_calls(), h.api.access_calls().len()), (1, 1));

    // The allowed answer lasts its own TTL (300s), beyond the token's (120s).
    h.clock.advance(Duration::from_secs(299));
    let _ = h.get("good", "/logs/").await;
    assert_eq!((h.api.token_calls(), h.api.access_calls().len()), (2, 1));
    h.clock.advance(Duration::from_secs(1));
    let _ = h.get("good", "/logs/").await;
    assert_eq!(h.api.access_calls().len(), 2, "the allowed answer expired");
}

#[tokio::test]
async fn denied_request_is_403_naming_verb_and_subresources_until_the_denied_ttl_passes() {
    let h = harness();
    h.api.user("good", "alice");
    let refusal = h.get("good", "/pods").await;
    let expected = "Forbidden (user=alice, verb=get, resource=nodes, subresource(s)=[pods proxy]): \
                    no RBAC policy matched";
    assert_eq!(refusal, Err(Refusal::Forbidden(expected.into())));
    assert_eq!(h.api.asked_subresources(), ["pods", "proxy"]);

    h.clock.advance(Duration::from_secs(29));
    assert!(h.get("good", "/pods").await.is_err());
    assert_eq!(h.api.access_calls().len(), 2, "the denial is cached");

    // RBAC changes; the cached denial still holds until it expires.
    h.api.allow("alice", "get", "proxy");
    h.clock.advance(Duration::from_secs(1));
    let user = h
        .get("good", "/pods")
        .await
        .expect("admitted after the denial expired");
    assert_eq!(user.name, "alice");
    assert_eq!(
        h.api.asked_subresources(),
        ["pods", "proxy", "pods", "proxy"]
    );
}

#[tokio::test]
async fn post_is_authorized_as_create() {
    let h = harness();
    h.api.user("good", "alice");
    h.api.allow("alice", "get", "proxy");
    let header = bearer("good");
    let refusal = h
        .gate
        .admit(
            NODE,
            None,
            Some(&header),
            &Method::POST,
            "/exec/default/web/app?command=sh",
        )
        .await;
    let Err(refusal) = refusal else {
        panic!("POST /exec with only get on nodes/proxy must be refused");
    };
    assert_eq!(refusal.status(), StatusCode::FORBIDDEN);
    assert!(
        refusal.message().starts_with(
            "Forbidden (user=alice, verb=create, resource=nodes, subresource(s)=[proxy])"
        ),
        "{}",
        refusal.message()
    );
}

#[tokio::test]
async fn fine_grained_subresource_is_enough_without_proxy() {
    let h = harness();
    h.api.user("good", "alice");
    h.api.allow("alice", "get", "healthz");
    assert!(h.get("good", "/healthz").await.is_ok());
    assert_eq!(h.api.asked_subresources(), ["healthz"]);
}

#[tokio::test]
async fn certificate_user_skips_token_review() {
    let h = harness();
    h.api.allow("kube-apiserver-kubelet-client", "get", "proxy");
    let user = User::from_certificate(
        "kube-apiserver-kubelet-client".into(),
        vec!["kubeadm:cluster-admins".into()],
    );
    // A token alongside the certificate is not even looked at.
    let header = bearer("unconfigured");
    let admitted = h
        .gate
        .admit(
            NODE,
            Some(user.clone()),
            Some(&header),
            &Method::GET,
            "/containerLogs/default/web/app?follow=true",
        )
        .await;
    assert_eq!(admitted, Ok(user));
    assert_eq!(h.api.token_calls(), 0);
    let spec = h.api.access_calls().pop().expect("one SubjectAccessReview");
    assert_eq!(
        spec.groups,
        Some(vec![
            "kubeadm:cluster-admins".to_string(),
            AUTHENTICATED_GROUP.to_string()
        ])
    );
    assert_eq!(spec.uid, None);
    assert_eq!(spec.extra, None);
}

#[tokio::test]
async fn token_review_failure_is_503_and_not_cached() {
    let h = harness();
    h.api.user("good", "alice");
    h.api.allow("alice", "get", "stats");
    h.api.set_down(Down::Tokens);
    for calls in 1..=2 {
        let refusal = h
            .get("good", "/stats/summary")
            .await
            .expect_err("apiserver down");
        assert_eq!(refusal.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(
            refusal.message().contains("connection refused"),
            "{}",
            refusal.message()
        );
        assert_eq!(
            h.api.token_calls(),
            calls,
            "a failed TokenReview is not cached"
        );
    }
    h.api.set_down(Down::Nothing);
    assert!(
        h.get("good", "/stats/summary").await.is_ok(),
        "recovers with the apiserver"
    );
}

#[tokio::test]
async fn access_review_failure_is_503_and_not_cached() {
    let h = harness();
    h.api.user("good", "alice");
    h.api.allow("alice", "get", "stats");
    h.api.set_down(Down::Access);
    for calls in 1..=2 {
        let refusal = h.get("good", "/stats").await.expect_err("apiserver down");
        assert_eq!(refusal.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(
            refusal.message().contains("subresource=stats"),
            "{}",
            refusal.message()
        );
        assert_eq!(
            h.api.access_calls().len(),
            calls,
            "a failed review is not cached"
        );
    }
    h.api.set_down(Down::Nothing);
    assert!(
        h.get("good", "/stats").await.is_ok(),
        "recovers with the apiserver"
    );
    assert_eq!(
        h.api.token_calls(),
        1,
        "the token answer was cached all along"
    );
}

#[tokio::test]
async fn access_review_spec_carries_user_groups_extra_and_node() {
    let h = harness();
    h.api.user("good", "alice");
    h.api.allow("alice", "get", "metrics");
    assert!(h.get("good", "/metrics/cadvisor").await.is_ok());
    let spec = h.api.access_calls().pop().expect("one SubjectAccessReview");
    assert_eq!(spec.user.as_deref(), Some("alice"));
    assert_eq!(spec.uid.as_deref(), Some("uid-alice"));
    assert_eq!(
        spec.groups,
        Some(vec![
            "developers".to_string(),
            AUTHENTICATED_GROUP.to_string()
        ])
    );
    assert_eq!(
        spec.extra,
        Some(BTreeMap::from([(
            "scopes".to_string(),
            vec!["read".to_string()]
        )]))
    );
    let resource = spec.resource_attributes.expect("resource attributes");
    assert_eq!(resource.name.as_deref(), Some(NODE));
    assert_eq!(resource.resource.as_deref(), Some("nodes"));
    assert_eq!(resource.subresource.as_deref(), Some("metrics"));
    assert_eq!(resource.verb.as_deref(), Some("get"));
}

#[tokio::test]
async fn answers_for_one_user_are_not_reused_for_another() {
    let h = harness();
    h.api.user("a", "alice");
    h.api.user("b", "bob");
    h.api.allow("alice", "get", "stats");
    assert!(h.get("a", "/stats").await.is_ok());
    let refusal = h.get("b", "/stats").await.expect_err("bob may not");
    assert_eq!(refusal.status(), StatusCode::FORBIDDEN);
    assert_eq!(h.api.access_calls().len(), 2);
}

#[test]
fn refusals_map_to_401_403_503() {
    let cases = [
        (
            Refusal::Unauthenticated("u".into()),
            StatusCode::UNAUTHORIZED,
        ),
        (Refusal::Forbidden("f".into()), StatusCode::FORBIDDEN),
        (
            Refusal::Unavailable("a".into()),
            StatusCode::SERVICE_UNAVAILABLE,
        ),
    ];
    for (refusal, status) in cases {
        assert_eq!(refusal.status(), status);
        assert_eq!(refusal.message().len(), 1);
    }
}
