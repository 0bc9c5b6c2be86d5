//! Options for reading a pod's logs, mirroring the kubelet's `containerLogs` query.

/// Which part of the log to return.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogOptions {
    /// The container's name; `None` is the pod's only (or first) container.
    pub container: Option<String>,
    /// Only the last N lines.
    pub tail_lines: Option<u64>,
    /// At most this many bytes, from the end of the selected lines.
    pub limit_bytes: Option<u64>,
    /// Prefix each line with its RFC 3339 timestamp where the provider knows it.
    pub timestamps: bool,
    /// Only lines from the last N seconds, where the provider knows line times.
    pub since_seconds: Option<u64>,
}

use jiff::{SignedDuration, Timestamp};

/// Renders timestamped lines as the kubelet would: `since_seconds` first, then `tail_lines`,
/// then `limit_bytes` from the end (cut at a line boundary when possible), with optional
/// RFC 3339 timestamps.
pub fn render(lines: &[(Timestamp, String)], options: &LogOptions, now: Timestamp) -> String {
    let since = options
        .since_seconds
        .map(|seconds| now - SignedDuration::from_secs(i64::try_from(seconds).unwrap_or(i64::MAX)));
    let selected: Vec<&(Timestamp, String)> = lines
        .iter()
        .filter(|(at, _)| since.is_none_or(|since| *at >= since))
        .collect();
    let skip = match options.tail_lines {
        Some(tail) => selected
            .len()
            .saturating_sub(usize::try_from(tail).unwrap_or(usize::MAX)),
        None => 0,
    };
    let mut text = String::new();
    for (at, line) in &selected[skip..] {
        if options.timestamps {
            text.push_str(&at.to_string());
            text.push(' ');
        }
        text.push_str(line);
        text.push('\n');
    }
    match options
        .limit_bytes
        .map(|limit| usize::try_from(limit).unwrap_or(usize::MAX))
    {
        Some(limit) if text.len() > limit => {
            let mut start = text.len() - limit;
            while !text.is_char_boundary(start) {
                start += 1;
            }
            text.split_off(start)
        }
        _ => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines() -> Vec<(Timestamp, String)> {
        (0..5)
            .map(|i| {
                (
                    Timestamp::from_second(100 + i).unwrap(),
                    format!("line {i}"),
                )
            })
            .collect()
    }

    #[test]
    fn tail_keeps_the_last_lines() {
        let options = LogOptions {
            tail_lines: Some(2),
            ..LogOptions::default()
        };
        assert_eq!(
            render(&lines(), &options, Timestamp::from_second(200).unwrap()),
            "line 3\nline 4\n"
        );
    }

    #[test]
    fn since_seconds_drops_older_lines() {
        let options = LogOptions {
            since_seconds: Some(2),
            ..LogOptions::default()
        };
        assert_eq!(
            render(&lines(), &options, Timestamp::from_second(104).unwrap()),
            "line 2\nline 3\nline 4\n"
        );
    }

    #[test]
    fn limit_bytes_keeps_the_end() {
        let options = LogOptions {
            limit_bytes: Some(7),
            ..LogOptions::default()
        };
        assert_eq!(
            render(&lines(), &options, Timestamp::from_second(200).unwrap()),
            "line 4\n"
        );
    }

    #[test]
    fn timestamps_prefix_each_line() {
        let options = LogOptions {
            tail_lines: Some(1),
            timestamps: true,
            ..LogOptions::default()
        };
        assert_eq!(
            render(&lines(), &options, Timestamp::from_second(200).unwrap()),
            "1970-01-01T00:01:44Z line 4\n"
        );
    }
}
