//! The exception that ended a plugin's call, in its language's own words: read from what the
//! call wrote, so a failed call says `TypeError: ... (app.py:15, in instance_type_for)` rather
//! than a wasm backtrace of the interpreter that ran the plugin.
//!
//! Each language's runtime tells an uncaught exception its own way before it traps:
//!
//! | language | where | what |
//! |---|---|---|
//! | Python (componentize-py) | stderr | CPython's traceback: `Traceback (most recent call last):`, a `File "…", line N, in f` line per frame, innermost last, then `TypeError: message` |
//! | TypeScript (the SDK's `exportPolicy`) | the host `log`, at level error | `select-instance: uncaught TypeError: message`, then SpiderMonkey's stack, a `function@file:line:column` line per frame, innermost first |
//! | Rust (std's panic hook) | stderr | `thread '…' panicked at src/lib.rs:12:5:` then the message |
//!
//! The frame shown is the innermost one in the plugin's own code, not the SDK's or the
//! language's library: that is the line its author can change. A JavaScript frame of the bundle
//! is told as the TypeScript line it was built from, through the plugin's source map.
//!
//! A plugin writes what it likes: everything read here is bounded, and what does not parse is
//! no exception (the call's error then says what the runtime said).

use std::fmt;

use wasmtime::Trap;

use super::source_map::SourceMap;
use crate::policy::plugin_text::prefix;

/// The end of stderr that is read: a traceback is the last thing a call writes.
pub const STDERR_TAIL_BYTES: usize = 16 << 10;
/// The longest exception text kept (the pod's message is bounded again, to 1 KiB).
pub const MAX_EXCEPTION_BYTES: usize = 512;
/// The longest file or function name kept.
pub const MAX_NAME_BYTES: usize = 160;

/// An exception a plugin's language raised and nothing caught.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestException {
    /// The exception as the language prints it: `TypeError: message`.
    pub exception: String,
    /// Where it was raised in the plugin's own code, when the runtime said.
    pub at: Option<SourceLine>,
}

/// A line of a plugin's source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceLine {
    pub file: String,
    pub line: u32,
    pub function: Option<String>,
}

impl fmt::Display for GuestException {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.exception)?;
        match &self.at {
            Some(SourceLine {
                file,
                line,
                function: Some(function),
            }) => write!(f, " ({file}:{line}, in {function})"),
            Some(SourceLine {
                file,
                line,
                function: None,
            }) => write!(f, " ({file}:{line})"),
            None => Ok(()),
        }
    }
}

/// What a failed call left behind to read.
#[derive(Debug, Clone, Copy, Default)]
pub struct CallLeftovers<'a> {
    /// Everything the call wrote to stderr (only its end is read).
    pub stderr: &'a [u8],
    /// The last message the call logged at level error, if any.
    pub error_logged: Option<&'a str>,
    /// The plugin's source map, if it carries one.
    pub source_map: Option<&'a SourceMap>,
}

impl GuestException {
    /// Whether a call that ended in `trap` may have ended for an exception its runtime told of:
    /// a runtime aborts on an uncaught exception or panic with `unreachable`. Any other trap
    /// (a time limit, a memory budget, an out-of-bounds access) is told by wasmtime, whatever
    /// the call wrote before it.
    pub fn may_explain(trap: Trap) -> bool {
        trap == Trap::UnreachableCodeReached
    }

    /// The exception the call's runtime told of, if it told of one: the TypeScript SDK's
    /// record first (it is logged before the trap), then a Python traceback or a Rust panic at
    /// the end of stderr.
    pub fn told_by(left: CallLeftovers<'_>) -> Option<GuestException> {
        if let Some(exception) = left
            .error_logged
            .and_then(|logged| javascript(logged, left.source_map))
        {
            return Some(exception);
        }
        let tail = tail(left.stderr);
        python(&tail).or_else(|| rust_panic(&tail))
    }
}

/// The last [`STDERR_TAIL_BYTES`] of `stderr`, as text.
fn tail(stderr: &[u8]) -> String {
    let start = stderr.len().saturating_sub(STDERR_TAIL_BYTES);
    String::from_utf8_lossy(&stderr[start..]).into_owned()
}

/// `text` cut to `max` bytes at a character boundary, with `…` where it was cut.
fn bounded(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    format!("{}…", prefix(text, max))
}

/// An exception's name as Python and JavaScript print it: `TypeError`, `json.JSONDecodeError`.
fn is_exception_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_BYTES
        && name
            .split('.')
            .all(|part| part.starts_with(|c: char| c.is_alphabetic() || c == '_'))
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '.')
}

/// `Name: message` (or a bare `Name`), bounded, when `line` starts with an exception's name.
fn exception_line<'l>(line: &'l str, more: impl Iterator<Item = &'l str>) -> Option<String> {
    let (name, message) = match line.split_once(':') {
        Some((name, message)) => (name, Some(message.trim())),
        None => (line.trim_end(), None),
    };
    if !is_exception_name(name) {
        return None;
    }
    let mut text = match message {
        Some(message) if !message.is_empty() => format!("{name}: {message}"),
        _ => name.to_owned(),
    };
    // A message of several lines: its lines, as printed.
    for line in more {
        if text.len() > MAX_EXCEPTION_BYTES {
            break;
        }
        text.push('\n');
        text.push_str(line);
    }
    Some(bounded(&text, MAX_EXCEPTION_BYTES))
}

// ---- Python ----

/// `  File "/app/app.py", line 15, in instance_type_for`.
fn python_frame(line: &str) -> Option<SourceLine> {
    let rest = line.strip_prefix("  File \"")?;
    let (file, rest) = rest.rsplit_once("\", line ")?;
    let (number, function) = match rest.split_once(", in ") {
        Some((number, function)) => (number, Some(function)),
        None => (rest, None),
    };
    Some(SourceLine {
        file: bounded(file, MAX_NAME_BYTES),
        line: number.trim().parse().ok()?,
        function: function.map(|f| bounded(f.trim(), MAX_NAME_BYTES)),
    })
}

/// Whether a Python frame is in the plugin's own code: not the SDK's (`orca_plugin/`), nor the
/// interpreter's library (componentize-py's is under `/python/`), nor an installed package's,
/// nor code made at run time (`<string>`, `<frozen …>`).
fn python_own_code(file: &str) -> bool {
    !(file.contains("/orca_plugin/")
        || file.starts_with("/python/")
        || file.contains("/site-packages/")
        || file.starts_with('<'))
}

/// The last traceback at the end of stderr.
fn python(tail: &str) -> Option<GuestException> {
    let lines: Vec<&str> = tail.lines().collect();
    // The last traceback: after a chained exception's "During handling …", the one that ended
    // the call. Its header may have been cut off the tail: then its frames start the tail.
    let start = lines
        .iter()
        .rposition(|line| line.trim_end() == "Traceback (most recent call last):")
        .map_or(0, |header| header + 1);
    let traceback = &lines[start..];
    let frames: Vec<(usize, SourceLine)> = traceback
        .iter()
        .enumerate()
        .filter_map(|(index, line)| python_frame(line).map(|frame| (index, frame)))
        .collect();
    let (last_frame, _) = frames.last()?;
    // After the innermost frame, its source line and markers (indented), then the exception.
    let mut after = traceback[last_frame + 1..]
        .iter()
        .copied()
        .skip_while(|line| line.starts_with(' ') || line.trim().is_empty());
    let header = after.next()?;
    // The message's further lines, up to a blank line or the runtime's own panic (which
    // componentize-py writes after the traceback).
    let more = after.take_while(|line| !line.trim().is_empty() && !line.starts_with("thread '"));
    let exception = exception_line(header, more)?;
    let at = frames
        .iter()
        .rev()
        .map(|(_, frame)| frame)
        .find(|frame| python_own_code(&frame.file))
        .or_else(|| frames.last().map(|(_, frame)| frame))
        .cloned()
        .map(|frame| SourceLine {
            file: python_file(&frame.file),
            ..frame
        });
    Some(GuestException { exception, at })
}

/// A Python file as its author knows it: relative to the folder `build` packed. componentize-py
/// names each folder it packs by its place on the command line (`/0/app.py` is the plugin's
/// `app.py`, `/1/orca_plugin/…` the SDK's).
fn python_file(file: &str) -> String {
    file.strip_prefix('/')
        .and_then(|rest| rest.split_once('/'))
        .filter(|(folder, _)| !folder.is_empty() && folder.bytes().all(|b| b.is_ascii_digit()))
        .map_or(file, |(_, path)| path)
        .to_owned()
}

// ---- JavaScript ----

/// The marker the TypeScript SDK's `exportPolicy` logs an uncaught exception with.
const UNCAUGHT: &str = ": uncaught ";

/// `instanceTypeFor@component.js:12:10` (SpiderMonkey's frame: function, `@`, file, line,
/// column; the function is empty for top-level code).
fn javascript_frame(line: &str) -> Option<(Option<&str>, &str, u32, u32)> {
    let (function, location) = line.trim().rsplit_once('@')?;
    let (rest, column) = location.rsplit_once(':')?;
    let (file, number) = rest.rsplit_once(':')?;
    let function = (!function.is_empty()).then_some(function);
    Some((function, file, number.parse().ok()?, column.parse().ok()?))
}

/// The SDK's record of an uncaught exception: the exception, then its stack.
fn javascript(logged: &str, source_map: Option<&SourceMap>) -> Option<GuestException> {
    let (_hook, rest) = logged.split_once(UNCAUGHT)?;
    let mut lines = rest.lines();
    let header = lines.next()?;
    let rest: Vec<&str> = lines.collect();
    let first_frame = rest
        .iter()
        .position(|line| javascript_frame(line).is_some())
        .unwrap_or(rest.len());
    let exception = exception_line(header, rest[..first_frame].iter().copied())?;
    let frames: Vec<SourceLine> = rest[first_frame..]
        .iter()
        .filter_map(|line| javascript_frame(line))
        .map(|(function, file, line, column)| {
            let original = source_map
                .filter(|map| !map.file.is_empty() && file.ends_with(map.file.as_str()))
                .and_then(|map| map.original(line, column));
            let (file, line) = match original {
                Some(position) => (position.source, position.line),
                None => (file, line),
            };
            SourceLine {
                file: bounded(file, MAX_NAME_BYTES),
                line,
                function: function.map(|f| bounded(f, MAX_NAME_BYTES)),
            }
        })
        .collect();
    // Innermost first: the first frame of the plugin's own code, else the innermost.
    let at = frames
        .iter()
        .find(|frame| javascript_own_code(&frame.file))
        .or(frames.first())
        .cloned();
    Some(GuestException { exception, at })
}

/// Whether a (mapped) JavaScript frame is in the plugin's own code: not the SDK's
/// (`orca-plugin/…`) nor a dependency's (`node_modules/`).
fn javascript_own_code(file: &str) -> bool {
    !(file.starts_with("orca-plugin/") || file.contains("node_modules/"))
}

// ---- Rust ----

/// std's panic message: `thread '<unnamed>' panicked at src/lib.rs:12:5:` (newer Rust puts the
/// thread's id after its name: `'<unnamed>' (1) panicked at`) then the message's lines, then
/// (often) a `note: run with RUST_BACKTRACE=1 …` line.
fn rust_panic(tail: &str) -> Option<GuestException> {
    let lines: Vec<&str> = tail.lines().collect();
    let (index, location) = lines.iter().enumerate().rev().find_map(|(index, line)| {
        let rest = line.strip_prefix("thread '")?;
        let (_, location) = rest.split_once(" panicked at ")?;
        Some((index, location.strip_suffix(':')?))
    })?;
    let (rest, _column) = location.rsplit_once(':')?;
    let (file, number) = rest.rsplit_once(':')?;
    let message: Vec<&str> = lines[index + 1..]
        .iter()
        .copied()
        .take_while(|line| !line.starts_with("note: "))
        .collect();
    Some(GuestException {
        exception: bounded(
            &format!("panic: {}", message.join("\n")),
            MAX_EXCEPTION_BYTES,
        ),
        at: Some(SourceLine {
            file: bounded(file, MAX_NAME_BYTES),
            line: number.parse().ok()?,
            function: None,
        }),
    })
}

#[cfg(test)]
mod tests;
