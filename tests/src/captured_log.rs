//! orca's log, kept in memory while in-process replicas run, so a failing run can show what
//! orca did next to what the driver did. The in-process replicas share the test process's
//! global subscriber; each line names its replica through the fields orca logs
//! (`identity`, `node`) where they matter.

use std::collections::VecDeque;
use std::io::Write;
use std::sync::{Arc, Mutex, MutexGuard};

use anyhow::Result;
use tracing_subscriber::fmt::MakeWriter;

/// At most this many lines are kept: the newest.
const KEEP: usize = 5_000;

/// The captured lines, newest last.
#[derive(Clone, Default)]
pub struct CapturedLog {
    lines: Arc<Mutex<VecDeque<String>>>,
}

impl CapturedLog {
    /// Installs the process's subscriber with `filter` (a tracing filter such as `info` or
    /// `orca=debug,info`), writing into the returned log.
    ///
    /// # Errors
    /// `filter` is not a tracing filter, or a subscriber is already installed.
    pub fn install(filter: &str) -> Result<CapturedLog> {
        let log = CapturedLog::default();
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::try_new(filter)?)
            .with_ansi(false)
            .with_writer(log.clone())
            .try_init()
            .map_err(|error| anyhow::anyhow!("installing the log capture: {error}"))?;
        Ok(log)
    }

    fn locked(&self) -> MutexGuard<'_, VecDeque<String>> {
        self.lines
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Forgets every line captured so far.
    pub fn clear(&self) {
        self.locked().clear();
    }

    /// The newest `count` lines, oldest first.
    pub fn last(&self, count: usize) -> Vec<String> {
        let lines = self.locked();
        lines
            .iter()
            .skip(lines.len().saturating_sub(count))
            .cloned()
            .collect()
    }
}

/// One event's bytes, added to the log as lines when the subscriber is done with it.
pub struct EventWriter {
    log: CapturedLog,
    bytes: Vec<u8>,
}

impl Write for EventWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.bytes.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for EventWriter {
    fn drop(&mut self) {
        let text = String::from_utf8_lossy(&self.bytes);
        let mut lines = self.log.locked();
        for line in text.lines().filter(|line| !line.is_empty()) {
            if lines.len() == KEEP {
                lines.pop_front();
            }
            lines.push_back(line.to_owned());
        }
    }
}

impl<'a> MakeWriter<'a> for CapturedLog {
    type Writer = EventWriter;

    fn make_writer(&'a self) -> EventWriter {
        EventWriter {
            log: self.clone(),
            bytes: Vec::new(),
        }
    }
}
