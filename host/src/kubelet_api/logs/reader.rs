//! One `kubectl logs` answer as a stream of chunks: the first page (read by the handler, so a
//! failure there is an HTTP error), the head's further pages at once, then with `follow` what
//! was written after, one read per poll interval shared by every follower at the same cursor
//! ([`super::polls`]). A follow ends once the pod can write no more and a read after that
//! found nothing further; any answer ends when `limitBytes` is spent or the client hangs up
//! (the stream is dropped).

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use k8s_openapi::api::core::v1::Pod;

use super::polls::LogPolls;
use super::render::{Budget, format};
use crate::provider::{LogCursor, LogPage, LogStart, PodKey, Provider};

/// A follower whose reads fail (throttling, an outage) waits longer each time, up to this.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Whose log, and how it is printed.
pub struct Source {
    pub provider: Arc<dyn Provider>,
    pub pod: PodKey,
    pub container: String,
    pub timestamps: bool,
    pub budget: Budget,
}

/// With `follow`: the shared reads, the poll interval, and whether the pod can still write
/// (not finished, not being deleted, still served here).
pub struct Follow {
    polls: Arc<LogPolls>,
    interval: Duration,
    /// The wait before the next read: the interval, doubled after each failed read.
    wait: Duration,
    can_write: Box<dyn Fn() -> bool + Send + Sync>,
}

impl Follow {
    pub fn new(
        polls: Arc<LogPolls>,
        interval: Duration,
        can_write: Box<dyn Fn() -> bool + Send + Sync>,
    ) -> Follow {
        Follow {
            polls,
            interval,
            wait: interval,
            can_write,
        }
    }
}

pub struct Reader {
    source: Source,
    first: Option<LogPage>,
    cursor: LogCursor,
    /// The source had more at the last read: read again at once.
    more: bool,
    follow: Option<Follow>,
    done: bool,
}

impl Reader {
    pub fn new(source: Source, first: LogPage, follow: Option<Follow>) -> Reader {
        Reader {
            source,
            cursor: first.next.clone(),
            more: first.more,
            first: Some(first),
            follow,
            done: false,
        }
    }

    pub fn stream(self) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> + Send {
        futures::stream::unfold(self, |mut reader| async move {
            let chunk = reader.next_chunk().await?;
            Some((Ok(chunk), reader))
        })
    }

    async fn next_chunk(&mut self) -> Option<Bytes> {
        if let Some(first) = self.first.take()
            && let Some(chunk) = self.emit(&first)
        {
            return Some(chunk);
        }
        loop {
            if self.done || self.source.budget.spent() {
                return None;
            }
            let finished = match &self.follow {
                None if !self.more => return None,
                None => false,
                Some(follow) => {
                    if !self.more {
                        tokio::time::sleep(follow.wait).await;
                    }
                    // Looked at before the read: if the pod had finished, this read has all
                    // it wrote.
                    !(follow.can_write)()
                }
            };
            let source = &self.source;
            let read = match &self.follow {
                Some(follow) => {
                    follow
                        .polls
                        .after(
                            source.provider.as_ref(),
                            &source.pod,
                            &source.container,
                            &self.cursor,
                        )
                        .await
                }
                None => {
                    source
                        .provider
                        .log_page(
                            &source.pod,
                            &source.container,
                            &LogStart::After(self.cursor.clone()),
                        )
                        .await
                }
            };
            let page = match read {
                Ok(page) => page,
                Err(error) => {
                    let Some(follow) = self.follow.as_mut() else {
                        tracing::warn!(pod = %self.source.pod, %error, "reading further pages of a log failed; the answer ends here");
                        return None;
                    };
                    follow.wait = (follow.wait * 2).min(MAX_BACKOFF);
                    tracing::debug!(pod = %self.source.pod, %error, wait = ?follow.wait, "a log follow read failed; backing off");
                    if finished {
                        return None;
                    }
                    self.more = false;
                    continue;
                }
            };
            if let Some(follow) = self.follow.as_mut() {
                follow.wait = follow.interval;
            }
            self.cursor = page.next.clone();
            self.more = page.more;
            if finished && !page.more {
                self.done = true;
            }
            if let Some(chunk) = self.emit(&page) {
                return Some(chunk);
            }
        }
    }

    /// The page's lines as printed, within the budget; `None` for a page without lines.
    fn emit(&mut self, page: &LogPage) -> Option<Bytes> {
        if page.lines.is_empty() {
            return None;
        }
        let (chunk, spent) = self
            .source
            .budget
            .spend(format(&page.lines, self.source.timestamps));
        if spent {
            self.done = true;
        }
        Some(Bytes::from(chunk))
    }
}

pub fn can_still_write(pod: &Pod) -> bool {
    let phase = pod
        .status
        .as_ref()
        .and_then(|status| status.phase.as_deref());
    pod.metadata.deletion_timestamp.is_none() && !matches!(phase, Some("Succeeded" | "Failed"))
}
