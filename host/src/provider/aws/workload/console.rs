//! Reading the bootstrap's lines back from the serial console (`GetConsoleOutput`), among the
//! kernel's and cloud-init's.
//!
//! The bootstrap writes, one per line:
//!
//! | line | meaning |
//! |---|---|
//! | `orca[<container>] <RFC 3339 timestamp> <text>` | a line of a container's output |
//! | `orca-exit[<container>]=<N>` | one run of the container ended with exit code N |
//! | `orca-exit-code=<N>` | the pod ended with exit code N |
//!
//! [`console_line`] formats the first kind as the bootstrap does.
//!
//! # Caveats
//! EC2 keeps only the last 64 KiB of an instance's console output, shared by all containers,
//! so `kubectl logs` sees the tail of a chatty workload, not all of it.

use std::collections::BTreeMap;

use jiff::Timestamp;

/// How a container's output line starts on the console: `orca[<container>] `.
pub const CONSOLE_PREFIX: &str = "orca[";
/// The marker of the pod's exit code: `orca-exit-code=<N>`.
pub const EXIT_CODE_MARKER: &str = "orca-exit-code=";
/// The marker of one container run's exit code: `orca-exit[<container>]=<N>`.
pub const CONTAINER_EXIT_MARKER: &str = "orca-exit[";

/// A container's output line as the bootstrap writes it to the console.
pub fn console_line(container: &str, at: Timestamp, text: &str) -> String {
    format!("{CONSOLE_PREFIX}{container}] {at} {text}")
}

/// The output lines of `container` (`None`: the first container that wrote any), in console
/// order, with their times.
///
/// A line whose timestamp does not parse (the console can garble bytes) is kept, at the time
/// of the line before it from the same container, else of the first good line after it, else
/// the Unix epoch.
pub fn container_lines(console: &str, container: Option<&str>) -> Vec<(Timestamp, String)> {
    let mut wanted = container.map(str::to_owned);
    let mut lines: Vec<(Option<Timestamp>, String)> = Vec::new();
    for line in console_lines(console) {
        let Some((name, rest)) = output_line(line) else {
            continue;
        };
        if wanted.get_or_insert_with(|| name.to_owned()) != name {
            continue;
        }
        let (stamp, text) = rest.split_once(' ').unwrap_or((rest, ""));
        lines.push((stamp.parse().ok(), text.to_owned()));
    }
    let first_good = lines
        .iter()
        .find_map(|(at, _)| *at)
        .unwrap_or(Timestamp::UNIX_EPOCH);
    let mut last = first_good;
    lines
        .into_iter()
        .map(|(at, text)| {
            last = at.unwrap_or(last);
            (last, text)
        })
        .collect()
}

/// The console as it is, when orca's bootstrap has written nothing to it yet: the boot log is
/// what explains an instance whose workload never started (a custom AMI without cloud-init,
/// a kernel panic). `None` once any container output is there. Lines are stamped `at` (the
/// launch time), as the console carries no times of its own.
pub fn boot_lines(console: &str, at: Timestamp) -> Option<Vec<(Timestamp, String)>> {
    if console_lines(console).any(|line| output_line(line).is_some()) {
        return None;
    }
    let lines: Vec<(Timestamp, String)> = console_lines(console)
        .filter(|line| !line.is_empty())
        .map(|line| (at, line.to_owned()))
        .collect();
    Some(lines)
}

/// The pod's exit code: the last `orca-exit-code=N` on the console.
pub fn exit_code(console: &str) -> Option<i32> {
    console_lines(console)
        .filter_map(|line| line.strip_prefix(EXIT_CODE_MARKER)?.trim().parse().ok())
        .last()
}

/// Each container's latest exit code on the console (a restarted container reports each run).
pub fn container_exit_codes(console: &str) -> BTreeMap<String, i32> {
    let mut codes = BTreeMap::new();
    for line in console_lines(console) {
        let Some((name, code)) = line
            .strip_prefix(CONTAINER_EXIT_MARKER)
            .and_then(|rest| rest.split_once("]="))
        else {
            continue;
        };
        if let (true, Ok(code)) = (is_container_name(name), code.trim().parse()) {
            codes.insert(name.to_owned(), code);
        }
    }
    codes
}

/// Console lines without `\r` line ends or stray leading control bytes.
fn console_lines(console: &str) -> impl Iterator<Item = &str> {
    console.split('\n').map(|line| {
        line.strip_suffix('\r')
            .unwrap_or(line)
            .trim_start_matches(['\r', '\0'])
    })
}

/// `(container, rest)` of an output line.
fn output_line(line: &str) -> Option<(&str, &str)> {
    let (name, rest) = line.strip_prefix(CONSOLE_PREFIX)?.split_once("] ")?;
    is_container_name(name).then_some((name, rest))
}

fn is_container_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_boot_log_shows_until_the_bootstrap_writes() {
        let at = Timestamp::from_second(1_000).unwrap();
        let boot = "Linux version 6.1\r\n\r\nKernel command line: ro\n";
        assert_eq!(
            boot_lines(boot, at),
            Some(vec![
                (at, "Linux version 6.1".to_owned()),
                (at, "Kernel command line: ro".to_owned())
            ])
        );
        let started = format!("{boot}orca[main] 2026-11-22T10:00:00Z hello\n");
        assert_eq!(boot_lines(&started, at), None);
    }
    use crate::provider::{LogLine, LogPage, LogStart};

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(1_714_557_600 + second).unwrap()
    }

    fn console() -> String {
        [
            "[    0.000000] Linux version 6.1.0 (builder@amazon)".to_owned(),
            "cloud-init[1042]: orca: trainer: pulling".to_owned(),
            console_line("setup", at(0), "fetching data"),
            "orca-exit[setup]=0".to_owned(),
            console_line("trainer", at(1), "epoch 1 loss=0.9"),
            console_line("eval", at(1), "waiting"),
            console_line("trainer", at(2), ""),
            console_line("trainer", at(3), "  indented  with trailing space "),
            "orca-exit[trainer]=3".to_owned(),
            "orca-exit[eval]=0".to_owned(),
            "orca-exit-code=3".to_owned(),
        ]
        .join("\r\n")
    }

    #[test]
    fn lines_round_trip_per_container_among_console_noise() {
        assert_eq!(
            container_lines(&console(), Some("trainer")),
            [
                (at(1), "epoch 1 loss=0.9".to_owned()),
                (at(2), String::new()),
                (at(3), "  indented  with trailing space ".to_owned()),
            ]
        );
        assert_eq!(
            container_lines(&console(), Some("eval")),
            [(at(1), "waiting".to_owned())]
        );
        assert!(container_lines(&console(), Some("absent")).is_empty());
    }

    #[test]
    fn no_container_means_the_first_that_wrote() {
        assert_eq!(
            container_lines(&console(), None),
            [(at(0), "fetching data".to_owned())]
        );
        assert!(container_lines("kernel noise only\n", None).is_empty());
    }

    #[test]
    fn docker_nanosecond_timestamps_parse() {
        let console = "orca[trainer] 2024-05-01T10:00:00.123456789Z hello\n";
        let lines = container_lines(console, None);
        assert_eq!(lines[0].0.subsec_nanosecond(), 123_456_789);
        assert_eq!(lines[0].1, "hello");
    }

    #[test]
    fn a_garbled_timestamp_keeps_the_line_at_a_neighbour_time() {
        let console = [
            "orca[trainer] 2024-05-0#T10:00:00Z first".to_owned(),
            console_line("trainer", at(5), "second"),
            "orca[trainer] garbage third".to_owned(),
            "orca[trainer]".to_owned(),
        ]
        .join("\n");
        assert_eq!(
            container_lines(&console, Some("trainer")),
            [
                (at(5), "first".to_owned()),
                (at(5), "second".to_owned()),
                (at(5), "third".to_owned()),
            ]
        );
        assert_eq!(
            container_lines("orca[x] nonsense line\n", None),
            [(Timestamp::UNIX_EPOCH, "line".to_owned())]
        );
    }

    #[test]
    fn the_last_exit_code_wins_and_garbage_is_ignored() {
        assert_eq!(exit_code(&console()), Some(3));
        assert_eq!(exit_code("orca-exit-code=1\norca-exit-code=0\r\n"), Some(0));
        assert_eq!(exit_code("orca-exit-code=x\nsay orca-exit-code=2\n"), None);
        assert_eq!(exit_code(""), None);
    }

    #[test]
    fn container_exit_codes_keep_each_containers_last_run() {
        let console = console() + "\norca-exit[trainer]=0\norca-exit[bad name]=1\n";
        assert_eq!(
            container_exit_codes(&console),
            BTreeMap::from([
                ("eval".to_owned(), 0),
                ("setup".to_owned(), 0),
                ("trainer".to_owned(), 0),
            ])
        );
    }

    #[test]
    fn parsed_lines_are_paged_as_a_whole_source() {
        let lines = container_lines(&console(), Some("trainer"))
            .into_iter()
            .map(LogLine::from)
            .collect();
        let page = LogPage::of_whole(
            lines,
            &LogStart::Tail {
                lines: 2,
                since: None,
            },
        );
        assert_eq!(
            page.lines,
            vec![
                LogLine::new(at(2), ""),
                LogLine::new(at(3), "  indented  with trailing space "),
            ]
        );
    }
}
