//! A container's log as the provider hands it out: pages of timed lines, each with the cursor
//! the next read starts from. `kubectl logs` reads the first page (or pages), `-f` keeps
//! reading from the last cursor; what the query selects and how it is printed is the kubelet
//! API's business ([`crate::kubelet_api`]), not the provider's.

use jiff::Timestamp;

/// One line of a container's output and when it was written; [`Timestamp::UNIX_EPOCH`] when
/// the source does not say (such a line is never taken for a new one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    pub at: Timestamp,
    pub text: String,
}

impl From<(Timestamp, String)> for LogLine {
    fn from((at, text): (Timestamp, String)) -> LogLine {
        LogLine { at, text }
    }
}

impl LogLine {
    pub fn new(at: Timestamp, text: impl Into<String>) -> LogLine {
        LogLine {
            at,
            text: text.into(),
        }
    }
}

/// Where a read starts.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum LogStart {
    /// The first lines written at or after `since` (all of them without it), in pages.
    Head { since: Option<Timestamp> },
    /// The last `lines` lines written at or after `since`, in one page.
    Tail {
        lines: u64,
        since: Option<Timestamp>,
    },
    /// What was written after the page that gave this cursor.
    After(LogCursor),
}

/// A position in a container's log.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum LogCursor {
    /// In a source that can only be read whole (an instance's console output, the simulated
    /// provider's log): how many lines were read.
    Line(usize),
    /// The source's own page token (CloudWatch Logs' forward token), and the `since` of the
    /// read that gave it: every later read is made with it too, as a token may count only the
    /// lines since then (moto's do).
    Token {
        token: String,
        since: Option<Timestamp>,
    },
}

/// One read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogPage {
    pub lines: Vec<LogLine>,
    /// Where the next read starts.
    pub next: LogCursor,
    /// The source holds more right now than this page: read `next` at once, not after a
    /// poll interval.
    pub more: bool,
}

impl LogPage {
    /// The page `start` selects from a source read whole (`lines`, oldest first). A cursor of
    /// another source, or past the end (the source's window slid), reads nothing new.
    pub fn of_whole(lines: Vec<LogLine>, start: &LogStart) -> LogPage {
        let read = lines.len();
        let since_filter = |since: &Option<Timestamp>, lines: Vec<LogLine>| -> Vec<LogLine> {
            match since {
                Some(since) => lines.into_iter().filter(|line| line.at >= *since).collect(),
                None => lines,
            }
        };
        let lines = match start {
            LogStart::Head { since } => since_filter(since, lines),
            LogStart::Tail { lines: tail, since } => {
                let mut selected = since_filter(since, lines);
                let keep = usize::try_from(*tail).unwrap_or(usize::MAX);
                selected.drain(..selected.len().saturating_sub(keep));
                selected
            }
            LogStart::After(LogCursor::Line(seen)) => {
                lines.into_iter().skip(*seen).collect::<Vec<_>>()
            }
            LogStart::After(LogCursor::Token { .. }) => Vec::new(),
        };
        let next = match start {
            LogStart::After(LogCursor::Line(seen)) => LogCursor::Line(read.max(*seen)),
            LogStart::After(cursor @ LogCursor::Token { .. }) => cursor.clone(),
            _ => LogCursor::Line(read),
        };
        LogPage {
            lines,
            next,
            more: false,
        }
    }
}

/// `2026-11-22T10:00:00Z text` lines (what a source that prints times writes) → timed lines.
/// A line without a time is kept, at the epoch.
pub fn timed_lines(text: &str) -> Vec<LogLine> {
    text.lines().map(split_timestamp).collect()
}

fn split_timestamp(line: &str) -> LogLine {
    line.split_once(' ')
        .and_then(|(time, rest)| Some(LogLine::new(time.parse().ok()?, rest)))
        .unwrap_or_else(|| LogLine::new(Timestamp::UNIX_EPOCH, line))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines() -> Vec<LogLine> {
        (0..5)
            .map(|i| {
                LogLine::new(
                    Timestamp::from_second(100 + i).unwrap(),
                    format!("line {i}"),
                )
            })
            .collect()
    }

    fn texts(page: &LogPage) -> Vec<&str> {
        page.lines.iter().map(|line| line.text.as_str()).collect()
    }

    #[test]
    fn a_whole_source_is_read_by_line_count() {
        let at = |second| Some(Timestamp::from_second(second).unwrap());
        for (start, expected, next) in [
            (
                LogStart::Head { since: None },
                vec!["line 0", "line 1", "line 2", "line 3", "line 4"],
                5,
            ),
            (
                LogStart::Head { since: at(103) },
                vec!["line 3", "line 4"],
                5,
            ),
            (
                LogStart::Tail {
                    lines: 2,
                    since: None,
                },
                vec!["line 3", "line 4"],
                5,
            ),
            (
                LogStart::Tail {
                    lines: 0,
                    since: None,
                },
                vec![],
                5,
            ),
            (
                LogStart::Tail {
                    lines: 9,
                    since: at(102),
                },
                vec!["line 2", "line 3", "line 4"],
                5,
            ),
            (
                LogStart::After(LogCursor::Line(3)),
                vec!["line 3", "line 4"],
                5,
            ),
            (LogStart::After(LogCursor::Line(5)), vec![], 5),
            // The window slid: nothing is taken for new, and the cursor does not go back.
            (LogStart::After(LogCursor::Line(7)), vec![], 7),
        ] {
            let page = LogPage::of_whole(lines(), &start);
            assert_eq!(texts(&page), expected, "{start:?}");
            assert_eq!(page.next, LogCursor::Line(next), "{start:?}");
            assert!(!page.more);
        }
        let token = LogCursor::Token {
            token: "f/1".to_owned(),
            since: None,
        };
        let page = LogPage::of_whole(lines(), &LogStart::After(token.clone()));
        assert_eq!((page.lines.len(), page.next), (0, token));
    }

    #[test]
    fn timestamps_are_split_off_and_untimed_lines_kept() {
        assert_eq!(
            timed_lines("2026-11-22T10:00:00Z hello world\nno time here\n"),
            vec![
                LogLine::new("2026-11-22T10:00:00Z".parse().unwrap(), "hello world"),
                LogLine::new(Timestamp::UNIX_EPOCH, "no time here"),
            ]
        );
    }
}
