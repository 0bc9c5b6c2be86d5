//! Counting one client's apiserver requests from the harness's audit log.

use std::collections::BTreeMap;
use std::path::Path;

use jiff::Timestamp;

/// Requests by `username` whose stage time falls in `[from, to]`, by "verb resource[/sub]".
pub fn requests_by(
    path: &Path,
    username: &str,
    from: Timestamp,
    to: Timestamp,
) -> BTreeMap<String, u64> {
    let needle = format!(r#""username":"{username}""#);
    let mut counts = BTreeMap::new();
    let text = std::fs::read_to_string(path).unwrap_or_default();
    for line in text.lines().filter(|line| line.contains(&needle)) {
        let Ok(event) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let Some(at) = event["stageTimestamp"]
            .as_str()
            .and_then(|t| t.parse::<Timestamp>().ok())
        else {
            continue;
        };
        if at < from || at > to || event["stage"] != "ResponseComplete" {
            continue;
        }
        let object = &event["objectRef"];
        let mut resource = object["resource"].as_str().unwrap_or("-").to_owned();
        if let Some(sub) = object["subresource"].as_str() {
            resource.push('/');
            resource.push_str(sub);
        }
        let key = format!("{} {resource}", event["verb"].as_str().unwrap_or("?"));
        *counts.entry(key).or_insert(0) += 1;
    }
    counts
}
