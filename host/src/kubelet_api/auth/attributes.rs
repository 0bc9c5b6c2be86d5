//! What a kubelet API request asks to do, in RBAC terms: a verb on a subresource of this Node.
//!
//! Mirrors `nodeAuthorizerAttributesGetter` in the kubelet's `pkg/kubelet/server/auth.go`, so
//! the same ClusterRoles (`system:kubelet-api-admin`, `nodes/log`, `nodes/proxy`, ...) grant
//! the same access to orca as to a kubelet.

use axum::http::Method;
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReviewSpec};

use super::user::User;

/// The RBAC view of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestAttributes {
    pub verb: String,
    /// Tried in order; any one allowed is enough. Fine-grained subresources come before the
    /// `proxy` fallback, as with the kubelet's `KubeletFineGrainedAuthz` (on by default since
    /// 1.33), so a client holding only `nodes/proxy` keeps working.
    pub subresources: Vec<&'static str>,
}

impl RequestAttributes {
    pub fn of(method: &Method, path_and_query: &str) -> RequestAttributes {
        RequestAttributes {
            verb: verb(method),
            subresources: subresources(request_path(path_and_query)),
        }
    }
}

/// The API verb for an HTTP method, as the kubelet maps it.
///
/// HEAD is a read like GET (the kubelet leaves it without a verb, which only `*` rules match);
/// any other method becomes its lowercase name, which likewise matches only `*` rules.
pub fn verb(method: &Method) -> String {
    match *method {
        Method::GET | Method::HEAD => "get".to_string(),
        Method::POST => "create".to_string(),
        Method::PUT => "update".to_string(),
        Method::PATCH => "patch".to_string(),
        Method::DELETE => "delete".to_string(),
        ref other => other.as_str().to_ascii_lowercase(),
    }
}

/// The path without its query (and fragment, which clients should not send).
pub fn request_path(path_and_query: &str) -> &str {
    path_and_query
        .split(['?', '#'])
        .next()
        .unwrap_or(path_and_query)
}

/// The `nodes/<subresource>` names that may authorize a request for `path`, most specific
/// first.
pub fn subresources(path: &str) -> Vec<&'static str> {
    // A `.` or `..` segment could make a path look like `/stats/..` while meaning something
    // else to a router; such a path needs the most powerful subresource, `proxy`.
    if path
        .split('/')
        .any(|segment| segment == "." || segment == "..")
    {
        return vec!["proxy"];
    }
    // Endpoints with their own subresource: nothing else authorizes them.
    const DEDICATED: [(&str, &str); 4] = [
        ("/stats", "stats"),
        ("/metrics", "metrics"),
        ("/logs", "log"),
        ("/checkpoint", "checkpoint"),
    ];
    // Endpoints with a fine-grained subresource that `proxy` also authorizes.
    const FINE_GRAINED: [(&str, &str); 5] = [
        ("/pods", "pods"),
        ("/runningpods", "pods"),
        ("/healthz", "healthz"),
        ("/configz", "configz"),
        ("/statusz", "statusz"),
    ];
    if let Some((_, subresource)) = DEDICATED
        .iter()
        .find(|(prefix, _)| is_subpath(path, prefix))
    {
        return vec![subresource];
    }
    match FINE_GRAINED
        .iter()
        .find(|(prefix, _)| is_subpath(path, prefix))
    {
        Some((_, subresource)) => vec![subresource, "proxy"],
        // exec, attach, run, portForward, containerLogs, spec, debug, ...
        None => vec!["proxy"],
    }
}

/// `path` is `prefix` or below it: `/stats` and `/stats/summary`, not `/statsx`.
fn is_subpath(path: &str, prefix: &str) -> bool {
    match path.strip_prefix(prefix) {
        Some(rest) => rest.is_empty() || rest.starts_with('/'),
        None => false,
    }
}

/// The SubjectAccessReview spec asking whether `user` may `verb` `nodes/<subresource>` of
/// `node`, with the attributes the kubelet sends (core group, `v1`, no namespace).
pub fn access_review_spec(
    user: &User,
    verb: &str,
    subresource: &str,
    node: &str,
) -> SubjectAccessReviewSpec {
    SubjectAccessReviewSpec {
        user: Some(user.name.clone()),
        uid: Some(user.uid.clone()).filter(|uid| !uid.is_empty()),
        groups: Some(user.groups.clone()).filter(|groups| !groups.is_empty()),
        extra: Some(user.extra.clone()).filter(|extra| !extra.is_empty()),
        resource_attributes: Some(ResourceAttributes {
            verb: Some(verb.to_string()),
            group: Some(String::new()),
            version: Some("v1".to_string()),
            resource: Some("nodes".to_string()),
            subresource: Some(subresource.to_string()),
            name: Some(node.to_string()),
            ..ResourceAttributes::default()
        }),
        non_resource_attributes: None,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn paths_map_to_the_kubelets_subresources() {
        let table: &[(&str, &[&str])] = &[
            ("/stats", &["stats"]),
            ("/stats/summary?only_cpu_and_memory=true", &["stats"]),
            ("/metrics", &["metrics"]),
            ("/metrics/cadvisor", &["metrics"]),
            ("/metrics/resource", &["metrics"]),
            ("/logs/", &["log"]),
            ("/logs/messages", &["log"]),
            ("/checkpoint/default/web/app", &["checkpoint"]),
            ("/pods", &["pods", "proxy"]),
            ("/pods/", &["pods", "proxy"]),
            ("/runningpods/", &["pods", "proxy"]),
            ("/healthz", &["healthz", "proxy"]),
            ("/healthz/ping", &["healthz", "proxy"]),
            ("/configz", &["configz", "proxy"]),
            ("/statusz", &["statusz", "proxy"]),
            ("/containerLogs/default/web/app?follow=true", &["proxy"]),
            ("/exec/default/web/app?command=sh", &["proxy"]),
            ("/attach/default/web/app", &["proxy"]),
            ("/run/default/web/app", &["proxy"]),
            ("/portForward/default/web", &["proxy"]),
            ("/spec", &["proxy"]),
            ("/", &["proxy"]),
            ("", &["proxy"]),
            // Segment boundaries: a longer first segment is another endpoint.
            ("/statsx", &["proxy"]),
            ("/metricsfoo/x", &["proxy"]),
            ("/podsx", &["proxy"]),
            ("/logsx", &["proxy"]),
            // The query is not part of the path.
            ("/exec?x=/stats", &["proxy"]),
            // Dot segments need proxy whatever they start with.
            ("/stats/../exec/default/web/app", &["proxy"]),
            ("/logs/./x", &["proxy"]),
        ];
        for (path_and_query, expected) in table {
            let attributes = RequestAttributes::of(&Method::GET, path_and_query);
            assert_eq!(
                attributes.subresources, *expected,
                "subresources of {path_and_query:?}"
            );
        }
    }

    #[test]
    fn methods_map_to_api_verbs() {
        let table = [
            (Method::GET, "get"),
            (Method::HEAD, "get"),
            (Method::POST, "create"),
            (Method::PUT, "update"),
            (Method::PATCH, "patch"),
            (Method::DELETE, "delete"),
            (Method::OPTIONS, "options"),
            (Method::CONNECT, "connect"),
        ];
        for (method, expected) in table {
            assert_eq!(verb(&method), expected, "verb of {method}");
        }
    }

    #[test]
    fn access_review_spec_carries_the_user_and_node() {
        let user = User {
            name: "system:serviceaccount:monitoring:prometheus".into(),
            uid: "1234".into(),
            groups: vec![
                "system:serviceaccounts".into(),
                "system:authenticated".into(),
            ],
            extra: BTreeMap::from([(
                "authentication.kubernetes.io/pod-name".into(),
                vec!["p".into()],
            )]),
        };
        let spec = access_review_spec(&user, "get", "metrics", "orca-node");
        assert_eq!(spec.user.as_deref(), Some(user.name.as_str()));
        assert_eq!(spec.uid.as_deref(), Some("1234"));
        assert_eq!(spec.groups, Some(user.groups.clone()));
        assert_eq!(spec.extra, Some(user.extra.clone()));
        let resource = spec.resource_attributes.unwrap_or_default();
        assert_eq!(resource.verb.as_deref(), Some("get"));
        assert_eq!(resource.group.as_deref(), Some(""));
        assert_eq!(resource.version.as_deref(), Some("v1"));
        assert_eq!(resource.resource.as_deref(), Some("nodes"));
        assert_eq!(resource.subresource.as_deref(), Some("metrics"));
        assert_eq!(resource.name.as_deref(), Some("orca-node"));
        assert_eq!(resource.namespace, None);
    }
}
