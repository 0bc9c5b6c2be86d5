//! One container's stream as pages of lines ([`LogPage`]), for `kubectl logs`: the head read
//! forward a page at a time, the last N lines gathered backward, and new lines after a
//! forward token, which is how `-f` follows a log of any length at one call per poll.

use std::sync::Arc;

use jiff::Timestamp;

use super::{EventsPage, EventsRequest, LogsApi, LogsError, PageStart};
use crate::provider::{LogCursor, LogLine, LogPage, LogStart};

/// CloudWatch's cap on events per `GetLogEvents` page.
const EVENTS_PER_PAGE: u64 = 10_000;
/// A tail gathers at most this much text, whatever `tailLines` asks: the answer is held
/// whole before it is sent (a head is sent page by page instead).
pub const MAX_TAIL_BYTES: usize = 16 << 20;
/// And reads at most this many pages (CloudWatch may answer partly full or empty pages).
const MAX_TAIL_PAGES: usize = 200;

/// A container's log stream: `UID/CONTAINER` in the configured group.
#[derive(Clone)]
pub struct StreamLog {
    pub api: Arc<dyn LogsApi>,
    pub group: String,
    pub stream: String,
}

impl StreamLog {
    fn request(
        &self,
        from: PageStart,
        since: Option<Timestamp>,
        limit: Option<u64>,
    ) -> EventsRequest {
        EventsRequest {
            group: self.group.clone(),
            stream: self.stream.clone(),
            from,
            start_time: since,
            limit: limit.map(|n| u32::try_from(n.clamp(1, EVENTS_PER_PAGE)).unwrap_or(1)),
        }
    }

    /// The page `start` selects. A [`LogCursor::Line`] (a position in the console, read
    /// before the stream existed) reads the stream from its head.
    ///
    /// # Errors
    /// [`LogsError::NotFound`] while the stream does not exist (its container has not run).
    pub async fn page(&self, start: &LogStart) -> Result<LogPage, LogsError> {
        match start {
            LogStart::Head { since } => self.head(*since).await,
            LogStart::After(LogCursor::Line(_)) => self.head(None).await,
            LogStart::After(LogCursor::Token { token, since }) => {
                let page = self
                    .api
                    .get_log_events(&self.request(PageStart::Forward(token.clone()), *since, None))
                    .await?;
                // CloudWatch: a page may be partly full or empty with more to come; the end is
                // the token it was given coming back.
                Ok(LogPage {
                    more: page.forward != *token,
                    next: cursor(&page, *since),
                    lines: lines_of(page),
                })
            }
            LogStart::Tail { lines, since } => self.tail(*lines, *since).await,
        }
    }

    /// The first page from the oldest event at or after `since`.
    async fn head(&self, since: Option<Timestamp>) -> Result<LogPage, LogsError> {
        let page = self
            .api
            .get_log_events(&self.request(PageStart::Head, since, None))
            .await?;
        // Only a read from its token can tell the end (see `page`).
        Ok(LogPage {
            more: true,
            next: cursor(&page, since),
            lines: lines_of(page),
        })
    }

    /// The last `wanted` lines (at most [`MAX_TAIL_BYTES`]), gathered backward from the
    /// newest page; the cursor follows the newest.
    async fn tail(&self, wanted: u64, since: Option<Timestamp>) -> Result<LogPage, LogsError> {
        let newest = self
            .api
            .get_log_events(&self.request(PageStart::Tail, since, Some(wanted)))
            .await?;
        let next = cursor(&newest, since);
        let mut backward = newest.backward.clone();
        let mut gathered = if wanted == 0 {
            Vec::new()
        } else {
            lines_of(newest)
        };
        let mut bytes: usize = gathered.iter().map(|line| line.text.len()).sum();
        let target = usize::try_from(wanted).unwrap_or(usize::MAX);
        let mut pages = 1;
        while gathered.len() < target && bytes < MAX_TAIL_BYTES && pages < MAX_TAIL_PAGES {
            pages += 1;
            let remaining = u64::try_from(target - gathered.len()).unwrap_or(u64::MAX);
            let earlier = self
                .api
                .get_log_events(&self.request(
                    PageStart::Backward(backward.clone()),
                    since,
                    Some(remaining),
                ))
                .await?;
            // The oldest page hands back the token it was given (an empty page before that
            // may still have older ones behind it).
            if earlier.backward == backward {
                break;
            }
            backward = earlier.backward.clone();
            let mut lines = lines_of(earlier);
            bytes += lines.iter().map(|line| line.text.len()).sum::<usize>();
            lines.append(&mut gathered);
            gathered = lines;
        }
        gathered.drain(..gathered.len().saturating_sub(target));
        Ok(LogPage {
            lines: gathered,
            next,
            more: false,
        })
    }
}

/// Where the read after `page` starts.
fn cursor(page: &EventsPage, since: Option<Timestamp>) -> LogCursor {
    LogCursor::Token {
        token: page.forward.clone(),
        since,
    }
}

/// An event is a line as the log driver cut it; one that holds line breaks is several.
fn lines_of(page: EventsPage) -> Vec<LogLine> {
    let mut lines = Vec::with_capacity(page.events.len());
    for event in page.events {
        let text = event.message.strip_suffix('\n').unwrap_or(&event.message);
        lines.extend(text.split('\n').map(|part| LogLine::new(event.at, part)));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::aws::logs::fake::{FakeLogs, numbered_at};

    fn at(second: i64) -> Timestamp {
        numbered_at(second)
    }

    fn stream(fake: &Arc<FakeLogs>) -> StreamLog {
        StreamLog {
            api: fake.clone(),
            group: "/orca/pods".to_owned(),
            stream: "u-1/main".to_owned(),
        }
    }

    fn write(fake: &FakeLogs, range: std::ops::Range<i64>) {
        fake.write_numbered("/orca/pods", "u-1/main", range);
    }

    fn texts(page: &LogPage) -> Vec<String> {
        page.lines.iter().map(|line| line.text.clone()).collect()
    }

    fn numbered(range: std::ops::Range<i64>) -> Vec<String> {
        range.map(|i| format!("line {i}")).collect()
    }

    #[tokio::test]
    async fn the_head_is_read_a_page_at_a_time_until_a_page_is_empty() {
        let fake = Arc::new(FakeLogs::with_page_cap(4));
        write(&fake, 0..10);
        let log = stream(&fake);
        let mut start = LogStart::Head { since: None };
        let mut read = Vec::new();
        loop {
            let page = log.page(&start).await.unwrap();
            read.extend(texts(&page));
            start = LogStart::After(page.next.clone());
            if !page.more {
                break;
            }
        }
        assert_eq!(read, numbered(0..10));
        // Followed: nothing new is nothing, then new lines arrive after the same cursor.
        let quiet = log.page(&start).await.unwrap();
        assert!(quiet.lines.is_empty() && !quiet.more);
        write(&fake, 10..12);
        let new = log.page(&start).await.unwrap();
        assert_eq!(texts(&new), numbered(10..12));
    }

    #[tokio::test]
    async fn since_skips_older_events_and_the_cursor_still_follows() {
        let fake = Arc::new(FakeLogs::default());
        write(&fake, 0..6);
        let log = stream(&fake);
        let page = log
            .page(&LogStart::Head { since: Some(at(4)) })
            .await
            .unwrap();
        assert_eq!(texts(&page), numbered(4..6));
        let tail = log
            .page(&LogStart::Tail {
                lines: 10,
                since: Some(at(3)),
            })
            .await
            .unwrap();
        assert_eq!(texts(&tail), numbered(3..6));
        write(&fake, 6..7);
        let after = log.page(&LogStart::After(tail.next)).await.unwrap();
        assert_eq!(texts(&after), numbered(6..7));
    }

    #[tokio::test]
    async fn a_tail_longer_than_a_page_is_gathered_backward() {
        let fake = Arc::new(FakeLogs::with_page_cap(3));
        write(&fake, 0..10);
        let log = stream(&fake);
        for (wanted, expected) in [
            (2, numbered(8..10)),
            (7, numbered(3..10)),
            (50, numbered(0..10)),
        ] {
            let page = log
                .page(&LogStart::Tail {
                    lines: wanted,
                    since: None,
                })
                .await
                .unwrap();
            assert_eq!(texts(&page), expected, "tail {wanted}");
            assert!(!page.more);
        }
        let none = log
            .page(&LogStart::Tail {
                lines: 0,
                since: None,
            })
            .await
            .unwrap();
        assert!(none.lines.is_empty());
        write(&fake, 10..11);
        let after = log.page(&LogStart::After(none.next)).await.unwrap();
        assert_eq!(texts(&after), numbered(10..11), "tail 0 still follows");
    }

    #[tokio::test]
    async fn a_stream_that_does_not_exist_yet_is_not_found_and_a_console_cursor_reads_its_head() {
        let fake = Arc::new(FakeLogs::default());
        let log = stream(&fake);
        let missing = log.page(&LogStart::Head { since: None }).await.unwrap_err();
        assert!(matches!(missing, LogsError::NotFound(_)), "{missing:?}");
        write(&fake, 0..2);
        let switched = log
            .page(&LogStart::After(LogCursor::Line(7)))
            .await
            .unwrap();
        assert_eq!(texts(&switched), numbered(0..2));
        assert!(matches!(switched.next, LogCursor::Token { .. }));
    }

    #[test]
    fn an_event_with_line_breaks_is_several_lines() {
        let page = EventsPage {
            events: vec![super::super::Event {
                at: at(0),
                message: "a\nb\n".to_owned(),
            }],
            forward: "f/1".to_owned(),
            backward: "b/0".to_owned(),
        };
        assert_eq!(
            lines_of(page),
            vec![LogLine::new(at(0), "a"), LogLine::new(at(0), "b")]
        );
    }
}
