//! Which served node a kubelet API request concerns, and so which node it is authorized on.
//!
//! One listener answers for every node this process serves, so a request must be authorized
//! on the node whose data it reads. The pod a path names is read the way axum's router reads
//! it (each raw segment percent-decoded on its own, with the crate axum uses), so the pod
//! authorized is the pod the handler gets: `/containerLogs/ns/web%2D1/c` concerns `web-1`.
//!
//! Issue 40: the pod was once looked up by its raw, still-encoded name; an encoded name found
//! no pod, was authorized on the first node, and the handler then served the decoded pod
//! from whichever node it was on.

use percent_encoding::percent_decode_str;

use super::auth::Refusal;

/// The first path segments whose second and third segments name a pod, as the kubelet's
/// routes do (`/containerLogs/{namespace}/{pod}/{container}`, `/exec/{namespace}/{pod}/...`).
const POD_PATHS: [&str; 5] = ["containerLogs", "exec", "attach", "portForward", "run"];

/// The paths answered from the pods of every served node the caller may see: the pod list,
/// and the pods' usage (`/metrics/resource`, `/stats/summary`).
const SERVED_PODS_PATHS: [&str; 3] = ["/pods", "/metrics/resource", "/stats/summary"];

/// What a request path is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A pod's path: the pod it names, decoded, or `None` when the path names no pod a
    /// router would decode (a missing or empty segment, an encoding that is not UTF-8).
    Pod(Option<PodName>),
    /// `/pods`, `/metrics/resource`, `/stats/summary`: the pods of every served node the
    /// caller may see.
    ServedPods,
    /// Anything else (`/healthz`, an unknown path): the node itself, no pod in particular.
    Node,
}

/// A pod's namespace and name as the router decodes them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodName {
    pub namespace: String,
    pub name: String,
}

impl Target {
    /// What `path` (without its query) is about. The first segment is compared undecoded, as
    /// the router matches its literal segments.
    pub fn of(path: &str) -> Target {
        if SERVED_PODS_PATHS.contains(&path) {
            return Target::ServedPods;
        }
        let mut segments = path.strip_prefix('/').unwrap_or(path).split('/');
        if !segments
            .next()
            .is_some_and(|first| POD_PATHS.contains(&first))
        {
            return Target::Node;
        }
        let pod = match (segments.next(), segments.next()) {
            (Some(namespace), Some(name)) => decoded(namespace)
                .zip(decoded(name))
                .map(|(namespace, name)| PodName { namespace, name }),
            _ => None,
        };
        Target::Pod(pod)
    }
}

/// One raw path segment decoded as axum decodes a path parameter: percent-decoded, then
/// UTF-8 (`+` stays `+`). `None` for an empty segment or bytes that are not UTF-8.
pub(super) fn decoded(segment: &str) -> Option<String> {
    let text = percent_decode_str(segment).decode_utf8().ok()?;
    (!text.is_empty()).then(|| text.into_owned())
}

/// The nodes a request is authorized on, and how their answers combine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// Each node must allow the request: the node of the pod served, or, for a pod on no
    /// served node, every served node (so that "no such pod" is only ever told to a caller
    /// who could have listed every node's pods, and anyone else is refused as for a pod of a
    /// node they may not see).
    Every(Vec<String>),
    /// The request is answered from the nodes that allow it (`/pods`); none allowing it is a
    /// refusal.
    Any(Vec<String>),
}

impl Check {
    /// The check for a request about `target`: `pod_node` is the node of the pod it names, if
    /// that pod is on a served node; `served` the nodes served now; `first` the first declared
    /// node, which stands for them all while none is served here.
    pub fn for_target(
        target: &Target,
        pod_node: Option<&str>,
        served: &[String],
        first: &str,
    ) -> Check {
        let every = || {
            if served.is_empty() {
                vec![first.to_owned()]
            } else {
                served.to_vec()
            }
        };
        match (target, pod_node) {
            (Target::Pod(Some(_)), Some(node)) => Check::Every(vec![node.to_owned()]),
            (Target::Pod(_), _) => Check::Every(every()),
            (Target::ServedPods, _) => Check::Any(every()),
            (Target::Node, _) => Check::Every(vec![first.to_owned()]),
        }
    }

    pub fn nodes(&self) -> &[String] {
        match self {
            Check::Every(nodes) | Check::Any(nodes) => nodes,
        }
    }

    /// The nodes admitted, from each node's answer (in the order of [`Check::nodes`]).
    ///
    /// # Errors
    /// For [`Check::Every`], the first refusal. For [`Check::Any`], an apiserver that could
    /// not answer for some node ([`Refusal::Unavailable`]: a partial list would read as pods
    /// gone), else, when no node allows it, the first node's refusal. No nodes at all is
    /// forbidden, never an open door.
    pub fn verdict(
        &self,
        answers: Vec<(String, Result<(), Refusal>)>,
    ) -> Result<Vec<String>, Refusal> {
        let nothing = || Refusal::Forbidden("Forbidden (no node to authorize on)".to_owned());
        match self {
            Check::Every(_) => {
                if answers.is_empty() {
                    return Err(nothing());
                }
                answers
                    .into_iter()
                    .map(|(node, answer)| answer.map(|()| node))
                    .collect()
            }
            Check::Any(_) => {
                let mut allowed = Vec::new();
                let mut first_refusal = None;
                for (node, answer) in answers {
                    match answer {
                        Ok(()) => allowed.push(node),
                        Err(refusal @ Refusal::Unavailable(_)) => return Err(refusal),
                        Err(refusal) => {
                            first_refusal.get_or_insert(refusal);
                        }
                    }
                }
                if allowed.is_empty() {
                    Err(first_refusal.unwrap_or_else(nothing))
                } else {
                    Ok(allowed)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(namespace: &str, name: &str) -> Target {
        Target::Pod(Some(PodName {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }))
    }

    #[test]
    fn a_path_concerns_the_pod_the_router_decodes_from_it() {
        let table = [
            ("/containerLogs/ns/web-1/main", pod("ns", "web-1")),
            // Issue 40: the encoded name is the same pod.
            ("/containerLogs/ns/web%2D1/main", pod("ns", "web-1")),
            ("/containerLogs/ns/web%2d1/main", pod("ns", "web-1")),
            ("/containerLogs/n%73/%77eb-1/main", pod("ns", "web-1")),
            // As axum: `+` is not a space, an encoded `/` stays inside its segment.
            ("/containerLogs/ns/a+b/main", pod("ns", "a+b")),
            ("/containerLogs/ns/a%2Fb/main", pod("ns", "a/b")),
            ("/exec/ns/web-1/main", pod("ns", "web-1")),
            ("/exec/ns/web%2D1/main", pod("ns", "web-1")),
            ("/attach/ns/web-1/main", pod("ns", "web-1")),
            ("/portForward/ns/web-1", pod("ns", "web-1")),
            ("/run/ns/web-1/main", pod("ns", "web-1")),
            // Pod paths that name no pod.
            ("/containerLogs/ns", Target::Pod(None)),
            ("/containerLogs//web-1/main", Target::Pod(None)),
            ("/containerLogs/ns//main", Target::Pod(None)),
            ("/containerLogs/ns/%FF/main", Target::Pod(None)),
            ("/exec", Target::Pod(None)),
            ("/pods", Target::ServedPods),
            // Not the `/pods` route: the node's own refusal.
            ("/pods/", Target::Node),
            ("/healthz", Target::Node),
            ("/", Target::Node),
            ("", Target::Node),
            // The router matches the literal segment undecoded: no route, no pod.
            ("/container%4Cogs/ns/web-1/main", Target::Node),
            ("/containerlogs/ns/web-1/main", Target::Node),
            ("/stats/summary", Target::ServedPods),
            ("/metrics/resource", Target::ServedPods),
            ("/stats/summary/", Target::Node),
            ("/metrics", Target::Node),
            ("/metrics/cadvisor", Target::Node),
        ];
        for (path, expected) in table {
            assert_eq!(Target::of(path), expected, "{path:?}");
        }
    }

    #[test]
    fn a_request_is_checked_on_the_node_whose_data_it_reads() {
        let served = nodes(&["a", "b"]);
        let web = pod("ns", "web-1");
        let table = [
            (
                "a pod on b: b alone",
                &web,
                Some("b"),
                &served[..],
                Check::Every(nodes(&["b"])),
            ),
            (
                "a pod on a: a alone",
                &web,
                Some("a"),
                &served[..],
                Check::Every(nodes(&["a"])),
            ),
            (
                "a pod on no served node: every served node",
                &web,
                None,
                &served[..],
                Check::Every(nodes(&["a", "b"])),
            ),
            (
                "a path naming no pod: every served node",
                &Target::Pod(None),
                None,
                &served[..],
                Check::Every(nodes(&["a", "b"])),
            ),
            (
                "a pod while nothing is served: the first declared node",
                &web,
                None,
                &[][..],
                Check::Every(nodes(&["first"])),
            ),
            (
                "/pods: each served node",
                &Target::ServedPods,
                None,
                &served[..],
                Check::Any(nodes(&["a", "b"])),
            ),
            (
                "/pods while nothing is served: the first declared node",
                &Target::ServedPods,
                None,
                &[][..],
                Check::Any(nodes(&["first"])),
            ),
            (
                "/healthz: the first declared node",
                &Target::Node,
                None,
                &served[..],
                Check::Every(nodes(&["first"])),
            ),
        ];
        for (situation, target, pod_node, served, expected) in table {
            assert_eq!(
                Check::for_target(target, pod_node, served, "first"),
                expected,
                "{situation}"
            );
        }
    }

    fn forbidden(node: &str) -> Refusal {
        Refusal::Forbidden(format!("Forbidden on {node}"))
    }

    fn unavailable() -> Refusal {
        Refusal::Unavailable("could not authorize".to_owned())
    }

    fn nodes(names: &[&str]) -> Vec<String> {
        names.iter().map(|name| (*name).to_owned()).collect()
    }

    #[test]
    fn the_answers_of_each_node_decide_what_is_admitted() {
        type Answers = Vec<(&'static str, Result<(), Refusal>)>;
        type Admitted = Result<Vec<String>, Refusal>;
        let table: Vec<(&str, Check, Answers, Admitted)> = vec![
            (
                "a pod's node allows",
                Check::Every(nodes(&["a"])),
                vec![("a", Ok(()))],
                Ok(nodes(&["a"])),
            ),
            (
                "a pod's node refuses",
                Check::Every(nodes(&["b"])),
                vec![("b", Err(forbidden("b")))],
                Err(forbidden("b")),
            ),
            (
                "a pod on no node: one node refusing is enough to refuse",
                Check::Every(nodes(&["a", "b"])),
                vec![("a", Ok(())), ("b", Err(forbidden("b")))],
                Err(forbidden("b")),
            ),
            (
                "a pod on no node, every node allows (the answer will be 404)",
                Check::Every(nodes(&["a", "b"])),
                vec![("a", Ok(())), ("b", Ok(()))],
                Ok(nodes(&["a", "b"])),
            ),
            (
                "nothing to authorize on",
                Check::Every(vec![]),
                vec![],
                Err(Refusal::Forbidden(
                    "Forbidden (no node to authorize on)".to_owned(),
                )),
            ),
            (
                "/pods: only the nodes allowed",
                Check::Any(nodes(&["a", "b", "c"])),
                vec![("a", Ok(())), ("b", Err(forbidden("b"))), ("c", Ok(()))],
                Ok(nodes(&["a", "c"])),
            ),
            (
                "/pods: none allowed, the first refusal",
                Check::Any(nodes(&["a", "b"])),
                vec![("a", Err(forbidden("a"))), ("b", Err(forbidden("b")))],
                Err(forbidden("a")),
            ),
            (
                "/pods: an unanswered node is 503, not a shorter list",
                Check::Any(nodes(&["a", "b"])),
                vec![("a", Ok(())), ("b", Err(unavailable()))],
                Err(unavailable()),
            ),
            (
                "/pods: no nodes",
                Check::Any(vec![]),
                vec![],
                Err(Refusal::Forbidden(
                    "Forbidden (no node to authorize on)".to_owned(),
                )),
            ),
        ];
        for (situation, check, answers, expected) in table {
            let answers = answers
                .into_iter()
                .map(|(node, answer)| (node.to_owned(), answer))
                .collect();
            assert_eq!(check.verdict(answers), expected, "{situation}");
        }
    }
}
