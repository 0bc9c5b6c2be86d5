//! Counting one client's apiserver requests from the harness's audit log.

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
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
    /// When the apiserver completed it.
    pub at: Timestamp,
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
    requests_after(path, 0, username, from, to)
}

/// How long the audit log is now: a benchmark notes it before a window and reads only what
/// follows ([`requests_after`]), not the whole log of every earlier round.
pub fn log_length(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |meta| meta.len())
}

/// [`requests`] among the log's lines from byte `offset` on (a [`log_length`] taken earlier).
pub fn requests_after(
    path: &Path,
    offset: u64,
    username: &str,
    from: Timestamp,
    to: Timestamp,
) -> Vec<AuditedRequest> {
    let needle = format!(r#""username":"{username}""#);
    let text = read_from(path, offset);
    text.lines()
        .filter(|line| line.contains(&needle))
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|event| event["stage"] == "ResponseComplete")
        .filter_map(|event| {
            let at = event["stageTimestamp"]
                .as_str()
                .and_then(|t| t.parse::<Timestamp>().ok())?;
            (at >= from && at <= to).then_some((event, at))
        })
        .map(|(event, at)| {
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
                at,
            }
        })
        .collect()
}

/// The file from byte `offset` on (empty if it cannot be read; a line cut at `offset` is
/// dropped by the JSON parse).
fn read_from(path: &Path, offset: u64) -> String {
    let read = |file: &Path, from: u64, text: &mut Vec<u8>| {
        std::fs::File::open(file).and_then(|mut file| {
            file.seek(SeekFrom::Start(from))?;
            file.read_to_end(text)
        })
    };
    let mut text = Vec::new();
    // The apiserver rotates its log at `--audit-log-maxsize`: a log now shorter than `offset`
    // was renamed meanwhile (to `audit-<time>.log`, the newest such file), so what came after
    // `offset` is the rest of that file, then all of the new one.
    let from = if log_length(path) < offset {
        if let Some(rotated) = rotated_away(path) {
            let _ = read(&rotated, offset, &mut text);
        }
        0
    } else {
        offset
    };
    let _ = read(path, from, &mut text);
    String::from_utf8_lossy(&text).into_owned()
}

/// The newest rotated log beside `path` (`audit.log` → `audit-<time>.log`).
fn rotated_away(path: &Path) -> Option<std::path::PathBuf> {
    let dir = path.parent()?;
    let prefix = format!("{}-", path.file_stem()?.to_str()?);
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .filter(|entry| {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            name.starts_with(&prefix) && name.ends_with(".log")
        })
        .filter_map(|entry| Some((entry.metadata().ok()?.modified().ok()?, entry.path())))
        .max()
        .map(|(_, path)| path)
}

#[cfg(test)]
mod rotation_tests {
    use super::*;

    /// What was written after the offset is read whole across a rotation.
    #[test]
    fn a_rotated_log_is_read_on_from_the_offset_then_the_new_log() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("audit.log");
        std::fs::write(&log, "old line\n").unwrap();
        let offset = log_length(&log);
        std::fs::write(&log, "old line\nafter offset\n").unwrap();
        assert_eq!(read_from(&log, offset), "after offset\n", "no rotation");
        std::fs::rename(&log, dir.path().join("audit-2026-11-24T07-25-07.700.log")).unwrap();
        std::fs::write(&log, "new log\n").unwrap();
        assert_eq!(read_from(&log, offset), "after offset\nnew log\n");
    }
}
