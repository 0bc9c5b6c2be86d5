//! An instance's console output: a stream of lines that reaches
//! `GetConsoleOutput` late, and always as a prefix (later lines never show
//! before earlier ones).

use jiff::Timestamp;

#[derive(Clone, Debug)]
struct Line {
    text: String,
    written_at: Timestamp,
    visible_at: Timestamp,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct ConsoleLog {
    /// In the order written.
    lines: Vec<Line>,
}

impl ConsoleLog {
    /// Appends a batch of lines written at `written_at`, all reaching the API
    /// at `visible_at`.
    pub fn write<S: AsRef<str>>(
        &mut self,
        lines: &[S],
        written_at: Timestamp,
        visible_at: Timestamp,
    ) {
        for text in lines {
            self.lines.push(Line {
                text: text.as_ref().to_owned(),
                written_at,
                visible_at: visible_at.max(written_at),
            });
        }
    }

    /// The output `GetConsoleOutput` answers at `at`; `None` if nothing has
    /// reached it yet.
    pub fn visible_at(&self, at: Timestamp) -> Option<String> {
        let mut output = String::new();
        for line in &self.lines {
            if line.visible_at > at {
                break;
            }
            output.push_str(&line.text);
            output.push('\n');
        }
        (!output.is_empty()).then_some(output)
    }

    /// Forgets lines scheduled to be written after `at`.
    pub fn cancel_after(&mut self, at: Timestamp) {
        self.lines.retain(|line| line.written_at <= at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::t;

    #[test]
    fn nothing_written_yet_answers_none() {
        let mut console = ConsoleLog::default();
        assert_eq!(console.visible_at(t(0)), None);
        console.write(&["booting"], t(1), t(3));
        assert_eq!(console.visible_at(t(2)), None);
        assert_eq!(console.visible_at(t(3)).as_deref(), Some("booting\n"));
    }

    #[test]
    fn a_later_batch_waits_for_an_earlier_slower_one() {
        let mut console = ConsoleLog::default();
        console.write(&["first"], t(0), t(10));
        console.write(&["second"], t(1), t(2));
        assert_eq!(console.visible_at(t(5)), None);
        assert_eq!(
            console.visible_at(t(10)).as_deref(),
            Some("first\nsecond\n")
        );
    }
}
