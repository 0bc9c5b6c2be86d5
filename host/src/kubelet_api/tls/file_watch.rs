//! Noticing that files on disk changed, by polling their modification time and length.
//!
//! Polling rather than inotify: a mounted Secret or ConfigMap is updated by swapping a
//! `..data` symlink, which inotify on the file itself never reports, and a poll every few
//! seconds costs nothing next to a TLS handshake.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use tokio_util::sync::CancellationToken;

/// How often the certificate, key and client CA files are checked.
pub(crate) const POLL_INTERVAL: Duration = Duration::from_secs(15);

/// What a file looked like at one poll; `None` when it could not be read.
type Stamp = Option<(SystemTime, u64)>;

fn stamps(paths: &[PathBuf]) -> Vec<Stamp> {
    paths
        .iter()
        .map(|path| {
            // metadata follows symlinks, so a swapped `..data` link changes the stamp.
            let metadata = std::fs::metadata(path).ok()?;
            Some((metadata.modified().ok()?, metadata.len()))
        })
        .collect()
}

/// Calls `reload` each time any of `paths` changes, until `shutdown`. The files are stamped
/// when this is called (not when the future first runs), so a change made between the
/// caller's read and the task's start is not missed.
pub(crate) fn on_change(
    paths: Vec<PathBuf>,
    interval: Duration,
    shutdown: CancellationToken,
    mut reload: impl FnMut() + Send,
) -> impl Future<Output = ()> + Send {
    let mut last = stamps(&paths);
    async move {
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(interval) => {}
            }
            let now = stamps(&paths);
            if now != last {
                last = now;
                reload();
            }
        }
    }
}
