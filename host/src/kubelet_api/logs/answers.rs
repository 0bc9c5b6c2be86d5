//! The answer of `kubectl logs` over a stream that pages as CloudWatch does (the fake behind
//! the aws provider's reader): page by page, followed, cut by `limitBytes`, shared between
//! followers, backing off when throttled.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;

use super::polls::LogPolls;
use super::reader::{Follow, MAX_BACKOFF, Reader, Source};
use super::render::Budget;
use crate::provider::aws::logs::fake::FakeLogs;
use crate::provider::aws::logs::read::StreamLog;
use crate::provider::aws::logs::{LogsError, PageStart};
use crate::provider::{
    InstanceStatus, LaunchFailed, LaunchRequest, Launched, LogPage, LogStart, PodKey, Provider,
    ProviderError, Termination, WorkloadExit,
};

const GROUP: &str = "/orca/pods";
const STREAM: &str = "u-1/main";
const INTERVAL: Duration = Duration::from_millis(100);

/// A provider whose logs are a stream in the fake CloudWatch Logs, and nothing else.
struct Streamed(StreamLog);

#[async_trait]
impl Provider for Streamed {
    async fn create(&self, _request: &LaunchRequest) -> Result<Launched, LaunchFailed> {
        Err(ProviderError::permanent("NotInTest", "logs only").into())
    }
    async fn terminate(&self, _instance_id: &str) -> Result<Termination, ProviderError> {
        Err(ProviderError::permanent("NotInTest", "logs only"))
    }
    async fn lookup(
        &self,
        _pod: &PodKey,
        _instance_id: &str,
    ) -> Result<Option<InstanceStatus>, ProviderError> {
        Err(ProviderError::permanent("NotInTest", "logs only"))
    }
    async fn workload_exit(
        &self,
        _instance: &InstanceStatus,
    ) -> Result<Option<WorkloadExit>, ProviderError> {
        Err(ProviderError::permanent("NotInTest", "logs only"))
    }
    async fn statuses(&self) -> Result<Vec<InstanceStatus>, ProviderError> {
        Err(ProviderError::permanent("NotInTest", "logs only"))
    }
    async fn log_page(
        &self,
        _pod: &PodKey,
        _container: &str,
        start: &LogStart,
    ) -> Result<LogPage, ProviderError> {
        self.0.page(start).await.map_err(|error| match error {
            LogsError::Throttled { code, message } => ProviderError::transient(code, message),
            other => ProviderError::permanent(other.code(), other.to_string()),
        })
    }
    async fn ping(&self) -> Result<(), ProviderError> {
        Ok(())
    }
}

fn write(fake: &FakeLogs, range: std::ops::Range<i64>) {
    fake.write_numbered(GROUP, STREAM, range);
}

fn numbered(range: std::ops::Range<i64>) -> String {
    range.map(|i| format!("line {i}\n")).collect()
}

fn provider(fake: &Arc<FakeLogs>) -> Arc<dyn Provider> {
    Arc::new(Streamed(StreamLog {
        api: fake.clone(),
        group: GROUP.to_owned(),
        stream: STREAM.to_owned(),
    }))
}

fn pod() -> PodKey {
    PodKey {
        namespace: "ml".to_owned(),
        name: "train".to_owned(),
        uid: "u-1".to_owned(),
    }
}

/// The answer for `start`, read as the handler does: the first page, then the reader.
async fn reader(
    provider: Arc<dyn Provider>,
    start: LogStart,
    limit_bytes: Option<u64>,
    follow: Option<Follow>,
) -> Reader {
    let first = provider.log_page(&pod(), "main", &start).await.unwrap();
    let source = Source {
        provider,
        pod: pod(),
        container: "main".to_owned(),
        timestamps: false,
        budget: Budget::new(limit_bytes),
    };
    Reader::new(source, first, follow)
}

async fn collect(reader: Reader) -> (String, usize) {
    let chunks: Vec<_> = reader.stream().collect().await;
    let text = chunks
        .iter()
        .map(|chunk| String::from_utf8_lossy(chunk.as_ref().unwrap()).into_owned())
        .collect();
    (text, chunks.len())
}

/// A follower from the last `lines` lines, of a pod that can write until `finished` is set.
async fn follower_from_tail(
    fake: &Arc<FakeLogs>,
    polls: &Arc<LogPolls>,
    finished: &Arc<AtomicBool>,
    lines: u64,
) -> Reader {
    let start = LogStart::Tail { lines, since: None };
    reader(provider(fake), start, None, Some(follow(polls, finished))).await
}

/// A pod that can write until `finished` is set.
fn follow(polls: &Arc<LogPolls>, finished: &Arc<AtomicBool>) -> Follow {
    let finished = finished.clone();
    Follow::new(
        polls.clone(),
        INTERVAL,
        Box::new(move || !finished.load(Ordering::SeqCst)),
    )
}

#[tokio::test]
async fn a_log_longer_than_a_page_is_sent_page_by_page_and_the_answer_ends() {
    let fake = Arc::new(FakeLogs::with_page_cap(4));
    write(&fake, 0..10);
    let reader = reader(provider(&fake), LogStart::Head { since: None }, None, None).await;
    let (text, chunks) = collect(reader).await;
    assert_eq!(text, numbered(0..10));
    assert_eq!(chunks, 3, "a chunk per page, none held back");
    // Pages of 4, 4, 2, then one that finds the end.
    assert_eq!(fake.reads(), 4);
}

#[tokio::test]
async fn limit_bytes_sends_the_first_bytes_and_stops_reading() {
    let fake = Arc::new(FakeLogs::with_page_cap(2));
    write(&fake, 0..10);
    let reader = reader(
        provider(&fake),
        LogStart::Head { since: None },
        Some(10),
        None,
    )
    .await;
    let (text, _) = collect(reader).await;
    assert_eq!(text, "line 0\nlin");
    assert_eq!(fake.reads(), 1, "no page is read past the limit");
}

#[tokio::test]
async fn a_follow_gets_lines_written_after_it_started_and_ends_once_the_pod_has_finished() {
    let fake = Arc::new(FakeLogs::default());
    write(&fake, 0..3);
    let polls = Arc::new(LogPolls::new(INTERVAL));
    let finished = Arc::new(AtomicBool::new(false));
    let reader = follower_from_tail(&fake, &polls, &finished, 1).await;
    let writer = {
        let fake = fake.clone();
        let finished = finished.clone();
        tokio::spawn(async move {
            for i in 3..6 {
                tokio::time::sleep(INTERVAL * 2).await;
                write(&fake, i..i + 1);
            }
            tokio::time::sleep(INTERVAL * 2).await;
            finished.store(true, Ordering::SeqCst);
        })
    };
    let (text, chunks) = tokio::time::timeout(Duration::from_secs(10), collect(reader))
        .await
        .expect("the follow ends after the pod finished");
    writer.await.unwrap();
    assert_eq!(text, numbered(2..6));
    assert_eq!(chunks, 4, "the tail, then each new line as it came");
}

#[tokio::test]
async fn a_hundred_followers_of_one_stream_share_one_read_per_interval() {
    let fake = Arc::new(FakeLogs::default());
    write(&fake, 0..3);
    let polls = Arc::new(LogPolls::new(INTERVAL));
    let finished = Arc::new(AtomicBool::new(false));
    let mut followers = Vec::new();
    for _ in 0..100 {
        let reader = follower_from_tail(&fake, &polls, &finished, 0).await;
        followers.push(tokio::spawn(collect(reader)));
    }
    let first_reads = fake.reads();
    tokio::time::sleep(INTERVAL * 10).await;
    write(&fake, 3..4);
    tokio::time::sleep(INTERVAL * 3).await;
    finished.store(true, Ordering::SeqCst);
    for follower in followers {
        let (text, _) = follower.await.unwrap();
        assert_eq!(text, numbered(3..4));
    }
    let polls_made = fake.reads() - first_reads;
    // About 15 intervals went by: one read each (two where a read straddles an interval's
    // end), not one per follower.
    assert!(
        (5..=40).contains(&polls_made),
        "100 followers over ~15 intervals made {polls_made} reads"
    );
}

#[tokio::test(start_paused = true)]
async fn a_throttled_follower_backs_off_and_recovers() {
    let fake = Arc::new(FakeLogs::default());
    write(&fake, 0..1);
    let polls = Arc::new(LogPolls::new(INTERVAL));
    let finished = Arc::new(AtomicBool::new(false));
    let reader = follower_from_tail(&fake, &polls, &finished, 1).await;
    for _ in 0..12 {
        fake.throttle_next();
    }
    let started = tokio::time::Instant::now();
    let stream = tokio::spawn(collect(reader));
    // Twelve refusals, waited out at 100 ms doubling to the 30 s cap: well over the 1.2 s
    // that reads at the interval would take.
    while fake.reads() < 1 + 13 {
        tokio::time::sleep(INTERVAL).await;
    }
    let waited = started.elapsed();
    assert!(waited > MAX_BACKOFF, "backed off for {waited:?}");
    write(&fake, 1..2);
    tokio::time::sleep(MAX_BACKOFF).await;
    finished.store(true, Ordering::SeqCst);
    let (text, _) = stream.await.unwrap();
    assert_eq!(
        text,
        numbered(0..2),
        "the line written after the refusals arrives"
    );
    let tokens: Vec<_> = fake
        .calls()
        .into_iter()
        .filter_map(|call| match call {
            crate::provider::aws::logs::fake::Call::GetLogEvents(request) => Some(request.from),
            _ => None,
        })
        .collect();
    assert!(matches!(tokens[0], PageStart::Tail));
    assert!(
        tokens[1..]
            .iter()
            .all(|from| matches!(from, PageStart::Forward(_)))
    );
}
