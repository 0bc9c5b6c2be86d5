//! Counting one client's apiserver requests from the harness's audit log.

use std::collections::BTreeMap;
use std::path::Path;

use jiff::Timestamp;

/// One completed apiserver request from the audit log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditedRequest {
    pub verb: String,
    /// `resource` or `resource/subresource`.
    pub resource: String,
    pub namespace: Option<String>,
    /// The HTTP status the apiserver answered (403: RBAC refused it).
    pub code: u16,
}

impl AuditedRequest {
    /// "verb resource[/sub]", the key [`requests_by`] counts by.
    pub fn key(&self) -> String {
        format!("{} {}", self.verb, self.resource)
    }
}

/// Requests by `username` whose stage time falls in `[from, to]`, by "verb resource[/sub]".
pub fn requests_by(
    path: &Path,
    username: &str,
    from: Timestamp,
    to: Timestamp,
) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for request in requests(path, username, from, to) {
        *counts.entry(request.key()).or_insert(0) += 1;
    }
    counts
}

/// Every completed request by `username` whose stage time falls in `[from, to]`, in log order.
pub fn requests(
    path: &Path,
    username: &str,
    from: Timestamp,
    to: Timestamp,
) -> Vec<AuditedRequest> {
    let needle = format!(r#""username":"{username}""#);
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter(|line| line.contains(&needle))
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|event| event["stage"] == "ResponseComplete")
        .filter(|event| {
            event["stageTimestamp"]
                .as_str()
                .and_then(|t| t.parse::<Timestamp>().ok())
                .is_some_and(|at| at >= from && at <= to)
        })
        .map(|event| {
            let object = &event["objectRef"];
            let mut resource = object["resource"].as_str().unwrap_or("-").to_owned();
            if let Some(sub) = object["subresource"].as_str() {
                resource.push('/');
                resource.push_str(sub);
            }
            AuditedRequest {
                verb: event["verb"].as_str().unwrap_or("?").to_owned(),
                resource,
                namespace: object["namespace"].as_str().map(str::to_owned),
                code: event["responseStatus"]["code"]
                    .as_u64()
                    .and_then(|c| u16::try_from(c).ok())
                    .unwrap_or(0),
            }
        })
        .collect()
}
