//! Followers of one stream share their reads: a read from a cursor is made once per poll
//! interval, whoever asks, and every follower at that cursor gets its answer (or its error,
//! so a throttled stream is not asked again by the next follower either). A hundred
//! `kubectl logs -f` of one pod cost what one does.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::OnceCell;
use tokio::time::Instant;

use crate::provider::{LogCursor, LogPage, LogStart, PodKey, Provider, ProviderError};

type Answer = Result<LogPage, ProviderError>;
/// Whose log, and from where: pod UID, container, cursor.
type ReadKey = (String, String, LogCursor);
/// When the read was made, and its answer once it has one.
type Read = (Instant, Arc<OnceCell<Answer>>);

/// A read in flight or just made, by pod UID, container and cursor.
pub struct LogPolls {
    /// How long an answer is handed out: the poll interval.
    keep: Duration,
    reads: Mutex<HashMap<ReadKey, Read>>,
}

impl LogPolls {
    pub fn new(keep: Duration) -> LogPolls {
        LogPolls {
            keep,
            reads: Mutex::new(HashMap::new()),
        }
    }

    /// What follows `cursor` in `container`'s log: the answer of a read from the same cursor
    /// made less than a poll interval ago (or still in flight), else a new read.
    pub async fn after(
        &self,
        provider: &dyn Provider,
        pod: &PodKey,
        container: &str,
        cursor: &LogCursor,
    ) -> Answer {
        let cell = {
            let mut reads = self
                .reads
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let now = Instant::now();
            reads.retain(|_, (made, _)| now.duration_since(*made) < self.keep);
            reads
                .entry((pod.uid.clone(), container.to_owned(), cursor.clone()))
                .or_insert_with(|| (now, Arc::new(OnceCell::new())))
                .1
                .clone()
        };
        cell.get_or_init(|| async {
            provider
                .log_page(pod, container, &LogStart::After(cursor.clone()))
                .await
        })
        .await
        .clone()
    }

    /// Reads remembered now (in flight or answered within the interval).
    #[cfg(test)]
    pub fn remembered(&self) -> usize {
        self.reads.lock().map_or(0, |reads| reads.len())
    }
}
