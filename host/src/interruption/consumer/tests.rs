//! The loop against an in-memory queue and sink, on tokio's paused clock: every wait is
//! simulated, so a minute of polling takes no real time.

use std::collections::VecDeque;
use std::sync::Mutex;

use prometheus_client::registry::Registry;

use super::super::queue::{QueueError, Received};
use super::super::samples;
use super::*;
use crate::errors::lock;
use crate::interruption::NoticeKind;

const OURS: &str = "i-0aaaaaaaaaaaaaaa1";
const OURS_TOO: &str = "i-0aaaaaaaaaaaaaaa2";
const THEIRS: &str = "i-0bbbbbbbbbbbbbbb1";

/// What the fakes saw, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Delivered(NoticeKind, String),
    Deleted(Vec<String>),
    HandedOn(Vec<String>, Duration),
}

type Steps = Arc<Mutex<Vec<Step>>>;

/// Answers receives from a script, then empty: at once, or after the full wait as SQS does.
struct FakeQueue {
    script: Mutex<VecDeque<Result<Vec<Received>, QueueError>>>,
    long_polls: bool,
    receives: Mutex<Vec<Instant>>,
    steps: Steps,
}

impl FakeQueue {
    fn new(steps: &Steps, long_polls: bool) -> FakeQueue {
        FakeQueue {
            script: Mutex::default(),
            long_polls,
            receives: Mutex::default(),
            steps: steps.clone(),
        }
    }

    fn then(self, answer: Result<Vec<Received>, QueueError>) -> FakeQueue {
        lock(&self.script).push_back(answer);
        self
    }

    /// Seconds since `start` of each receive.
    fn receive_times(&self, start: Instant) -> Vec<u64> {
        lock(&self.receives)
            .iter()
            .map(|at| (*at - start).as_secs())
            .collect()
    }
}

#[async_trait]
impl NoticeQueue for FakeQueue {
    async fn receive(&self, wait: Duration) -> Result<Vec<Received>, QueueError> {
        lock(&self.receives).push(Instant::now());
        let answer = lock(&self.script).pop_front();
        match answer {
            Some(answer) => answer,
            None => {
                if self.long_polls {
                    tokio::time::sleep(wait).await;
                }
                Ok(Vec::new())
            }
        }
    }

    async fn delete(&self, receipt_handles: &[String]) -> Result<(), QueueError> {
        lock(&self.steps).push(Step::Deleted(receipt_handles.to_vec()));
        Ok(())
    }

    async fn hand_on(&self, receipt_handles: &[String], after: Duration) -> Result<(), QueueError> {
        lock(&self.steps).push(Step::HandedOn(receipt_handles.to_vec(), after));
        Ok(())
    }
}

struct FakeSink {
    owned: Vec<&'static str>,
    /// Owned instances whose notices it cannot act on yet.
    again: Vec<&'static str>,
    /// Whether another replica serves a node this one shares.
    elsewhere: bool,
    steps: Steps,
}

#[async_trait]
impl NoticeSink for FakeSink {
    async fn owns(&self, instance_id: &str) -> bool {
        self.owned.contains(&instance_id)
    }

    async fn deliver(&self, notice: Notice) -> Delivery {
        let again = self.again.contains(&notice.instance_id.as_str());
        lock(&self.steps).push(Step::Delivered(notice.kind, notice.instance_id));
        if again {
            Delivery::Again
        } else {
            Delivery::Done
        }
    }

    fn shared_elsewhere(&self) -> bool {
        self.elsewhere
    }
}

fn message(handle: &str, body: impl Into<String>) -> Received {
    Received {
        receipt_handle: handle.to_owned(),
        body: body.into(),
    }
}

fn receive_error() -> QueueError {
    QueueError::ReceiveFailed {
        queue: "https://sqs.us-east-1.amazonaws.com/123456789012/orca".to_owned(),
        source: "dispatch failure: connection refused".into(),
    }
}

/// Runs the loop for `duration` of simulated time; what the fakes saw and the metrics' text.
async fn run(queue: Arc<FakeQueue>, duration: Duration) -> (Vec<Step>, String) {
    run_with(queue, duration, Vec::new()).await
}

/// As [`run`], with a sink that cannot act yet on notices for the instances in `again`.
async fn run_with(
    queue: Arc<FakeQueue>,
    duration: Duration,
    again: Vec<&'static str>,
) -> (Vec<Step>, String) {
    run_sharing(queue, duration, again, false).await
}

/// As [`run_with`], for a replica that shares its nodes (`elsewhere`: one is served by
/// another replica now).
async fn run_sharing(
    queue: Arc<FakeQueue>,
    duration: Duration,
    again: Vec<&'static str>,
    elsewhere: bool,
) -> (Vec<Step>, String) {
    let steps = queue.steps.clone();
    let sink = Arc::new(FakeSink {
        owned: vec![OURS, OURS_TOO],
        again,
        elsewhere,
        steps: steps.clone(),
    });
    let mut registry = Registry::default();
    let metrics = Arc::new(InterruptionMetrics::register(&mut registry));
    consume(queue, sink, metrics, tokio::time::sleep(duration)).await;
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    let steps = lock(&steps).clone();
    (steps, text)
}

fn assert_counted(metrics: &str, lines: &[&str]) {
    for line in lines {
        assert!(metrics.contains(line), "{line} missing from\n{metrics}");
    }
}

#[tokio::test(start_paused = true)]
async fn notices_for_our_instances_are_delivered_then_deleted() {
    let steps = Steps::default();
    let queue = Arc::new(FakeQueue::new(&steps, true).then(Ok(vec![
        message("h1", samples::spot(OURS)),
        message("h2", samples::scheduled(&[OURS, OURS_TOO])),
    ])));
    let (steps, metrics) = run(queue, Duration::from_secs(30)).await;
    assert_eq!(
        steps,
        [
            Step::Delivered(NoticeKind::SpotInterruption, OURS.to_owned()),
            Step::Delivered(NoticeKind::ScheduledChange, OURS.to_owned()),
            Step::Delivered(NoticeKind::ScheduledChange, OURS_TOO.to_owned()),
            Step::Deleted(vec!["h1".to_owned(), "h2".to_owned()]),
        ]
    );
    assert_counted(
        &metrics,
        &[
            "orca_interruptions_total{kind=\"spot-interruption\"} 1",
            "orca_interruptions_total{kind=\"scheduled-change\"} 2",
            "orca_interruption_messages_total{outcome=\"delivered\"} 2",
        ],
    );
}

/// A notice the sink could not act on yet (the pod cache not synced after a restart, a status
/// write that failed) must come back: its message stays on the queue.
#[tokio::test(start_paused = true)]
async fn a_notice_that_could_not_be_acted_on_is_left_to_come_back() {
    let steps = Steps::default();
    let queue = Arc::new(FakeQueue::new(&steps, true).then(Ok(vec![
        message("h1", samples::spot(OURS)),
        message("h2", samples::spot(OURS_TOO)),
    ])));
    let (steps, metrics) = run_with(queue, Duration::from_secs(30), vec![OURS_TOO]).await;
    assert_eq!(
        steps,
        [
            Step::Delivered(NoticeKind::SpotInterruption, OURS.to_owned()),
            Step::Delivered(NoticeKind::SpotInterruption, OURS_TOO.to_owned()),
            Step::Deleted(vec!["h1".to_owned()]),
        ]
    );
    assert_counted(
        &metrics,
        &[
            "orca_interruption_messages_total{outcome=\"delivered\"} 1",
            "orca_interruption_messages_total{outcome=\"retried\"} 1",
        ],
    );
}

#[tokio::test(start_paused = true)]
async fn notices_for_another_owners_instances_are_left_on_the_queue() {
    let steps = Steps::default();
    let queue =
        Arc::new(FakeQueue::new(&steps, true).then(Ok(vec![message("h1", samples::spot(THEIRS))])));
    let (steps, metrics) = run(queue, Duration::from_secs(30)).await;
    assert_eq!(steps, []);
    assert_counted(
        &metrics,
        &["orca_interruption_messages_total{outcome=\"foreign\"} 1"],
    );
}

#[tokio::test(start_paused = true)]
async fn a_message_orca_cannot_read_is_left_on_the_queue() {
    let steps = Steps::default();
    let queue = Arc::new(FakeQueue::new(&steps, true).then(Ok(vec![
        message("h1", "{\"hello\": \"world\"}"),
        message("h2", samples::spot(OURS).replace("aws.ec2", "aws.s3")),
    ])));
    let (steps, metrics) = run(queue, Duration::from_secs(30)).await;
    assert_eq!(steps, []);
    assert_counted(
        &metrics,
        &["orca_interruption_messages_total{outcome=\"unparsed\"} 2"],
    );
}

#[tokio::test(start_paused = true)]
async fn a_health_event_shared_with_another_owner_is_delivered_in_part_and_left() {
    let steps = Steps::default();
    let queue = Arc::new(
        FakeQueue::new(&steps, true)
            .then(Ok(vec![message("h1", samples::scheduled(&[THEIRS, OURS]))])),
    );
    let (steps, _) = run(queue, Duration::from_secs(30)).await;
    assert_eq!(
        steps,
        [Step::Delivered(
            NoticeKind::ScheduledChange,
            OURS.to_owned()
        )],
        "ours delivered, the message not deleted: the other owner still needs it"
    );
}

#[tokio::test(start_paused = true)]
async fn receive_errors_back_off_doubling_and_recover() {
    let steps = Steps::default();
    let queue = Arc::new(
        FakeQueue::new(&steps, true)
            .then(Err(receive_error()))
            .then(Err(receive_error()))
            .then(Err(receive_error()))
            .then(Ok(vec![message("h1", samples::spot(OURS))]))
            .then(Err(receive_error())),
    );
    let start = Instant::now();
    let (steps, metrics) = run(queue.clone(), Duration::from_secs(60)).await;
    // Failures at 0, 1, 3 s; success at 7 s resets the backoff, so the next failure waits 1 s;
    // then long polls of 20 s.
    assert_eq!(queue.receive_times(start), [0, 1, 3, 7, 7, 8, 28, 48]);
    assert_eq!(
        steps,
        [
            Step::Delivered(NoticeKind::SpotInterruption, OURS.to_owned()),
            Step::Deleted(vec!["h1".to_owned()]),
        ]
    );
    assert_counted(
        &metrics,
        &["orca_interruption_queue_errors_total{operation=\"receive\"} 4"],
    );
}

#[tokio::test(start_paused = true)]
async fn shutdown_ends_the_loop_during_a_long_poll() {
    let steps = Steps::default();
    let queue = Arc::new(FakeQueue::new(&steps, true));
    let start = Instant::now();
    run(queue.clone(), Duration::from_secs(5)).await;
    assert_eq!(start.elapsed(), Duration::from_secs(5));
    assert_eq!(queue.receive_times(start), [0]);
}

#[tokio::test(start_paused = true)]
async fn shutdown_ends_the_loop_during_a_backoff() {
    let steps = Steps::default();
    let queue = Arc::new(FakeQueue::new(&steps, false).then(Err(receive_error())));
    let start = Instant::now();
    run(queue, Duration::from_millis(500)).await;
    assert_eq!(start.elapsed(), Duration::from_millis(500));
}

#[tokio::test(start_paused = true)]
async fn an_empty_answer_that_came_back_early_does_not_spin() {
    let steps = Steps::default();
    let queue = Arc::new(FakeQueue::new(&steps, false));
    let start = Instant::now();
    run(queue.clone(), Duration::from_secs(60)).await;
    let receives = queue.receive_times(start).len();
    assert!(
        (55..=61).contains(&receives),
        "{receives} receives in a minute"
    );
}

#[tokio::test(start_paused = true)]
async fn a_long_poll_that_waited_is_followed_at_once() {
    let steps = Steps::default();
    let queue = Arc::new(FakeQueue::new(&steps, true));
    let start = Instant::now();
    // Not 60 s: a fourth poll due at the very instant the run ends may or may not start.
    run(queue.clone(), Duration::from_secs(50)).await;
    assert_eq!(queue.receive_times(start), [0, 20, 40]);
}

/// A standby replica (serving no node) must not read the queue: a message it received would
/// be hidden for the visibility timeout from the replica that acts on it.
#[tokio::test(start_paused = true)]
async fn the_queue_is_read_only_while_a_node_is_served_here() {
    let steps = Steps::default();
    let queue = Arc::new(FakeQueue::new(&steps, true));
    let sinks = Arc::new(crate::interruption::NodeSinks::default());
    let mut registry = Registry::default();
    let metrics = Arc::new(InterruptionMetrics::register(&mut registry));
    let start = Instant::now();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let consumer = tokio::spawn(consume(
        queue.clone(),
        sinks.clone(),
        metrics,
        shutdown.clone().cancelled_owned(),
    ));
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(
        queue.receive_times(start).is_empty(),
        "a standby read the queue"
    );
    let node = Arc::new(FakeSink {
        owned: vec![OURS],
        again: Vec::new(),
        elsewhere: false,
        steps: steps.clone(),
    });
    sinks.add("node-a", node);
    tokio::time::sleep(Duration::from_secs(45)).await;
    assert_eq!(queue.receive_times(start), [30, 50, 70]);
    sinks.remove("node-a");
    tokio::time::sleep(Duration::from_secs(60)).await;
    // The poll in flight when the node went is given up at once; none follows.
    assert_eq!(queue.receive_times(start), [30, 50, 70]);
    shutdown.cancel();
    consumer.await.unwrap();
}

#[test]
fn the_loop_can_be_spawned() {
    fn assert_send<T: Send + 'static>(_: &T) {}
    let steps = Steps::default();
    let mut registry = Registry::default();
    let future = consume(
        Arc::new(FakeQueue::new(&steps, true)),
        Arc::new(FakeSink {
            owned: Vec::new(),
            again: Vec::new(),
            elsewhere: false,
            steps,
        }),
        Arc::new(InterruptionMetrics::register(&mut registry)),
        tokio_util::sync::CancellationToken::new().cancelled_owned(),
    );
    assert_send(&future);
}

/// A replica that shares its nodes, while another replica serves one of them, hands a message
/// about an instance it does not own on at once (visible again to whoever polls next) rather
/// than hiding it from the owner for the visibility timeout; a few times, then it is left.
/// Alone, or serving every node, it leaves such a message as before.
#[tokio::test(start_paused = true)]
async fn a_notice_for_another_replicas_instance_is_handed_on_a_few_times_then_left() {
    let receipts = (HAND_ON_TIMES + 2) as usize;
    let script = |steps: &Steps| {
        let mut queue = FakeQueue::new(steps, true);
        for _ in 0..receipts {
            queue = queue.then(Ok(vec![
                message("theirs", samples::spot(THEIRS)),
                message("both", samples::scheduled(&[OURS, THEIRS])),
            ]));
        }
        Arc::new(queue)
    };
    let steps = Steps::default();
    let (seen, metrics) =
        run_sharing(script(&steps), Duration::from_secs(600), Vec::new(), true).await;
    let handed: Vec<&Step> = seen
        .iter()
        .filter(|step| matches!(step, Step::HandedOn(..)))
        .collect();
    assert_eq!(handed.len(), HAND_ON_TIMES as usize, "{seen:?}");
    let both_handed = Step::HandedOn(vec!["theirs".to_owned(), "both".to_owned()], HAND_ON_AFTER);
    assert!(handed.iter().all(|step| **step == both_handed), "{seen:?}");
    assert!(
        !seen.iter().any(|step| matches!(step, Step::Deleted(_))),
        "a message naming another's instance is never deleted: {seen:?}"
    );
    assert_eq!(
        seen.iter()
            .filter(|step| matches!(step, Step::Delivered(_, id) if id == OURS))
            .count(),
        receipts,
        "our part of the shared message is delivered each time"
    );
    assert_counted(
        &metrics,
        &[&format!(
            "orca_interruption_messages_total{{outcome=\"foreign\"}} {receipts}"
        )],
    );

    let steps = Steps::default();
    let (seen, _) = run_sharing(script(&steps), Duration::from_secs(600), Vec::new(), false).await;
    assert!(
        !seen.iter().any(|step| matches!(step, Step::HandedOn(..))),
        "nobody else serves: left for the visibility timeout: {seen:?}"
    );
}

/// A replica whose hold on the node ends while it delivers (it stalled past its Lease after
/// the delivery's own check): issue 39, case 2.
struct HoldEndsDuringDelivery {
    held: std::sync::atomic::AtomicBool,
    steps: Steps,
}

#[async_trait]
impl NoticeSink for HoldEndsDuringDelivery {
    async fn owns(&self, instance_id: &str) -> bool {
        instance_id == OURS && self.held.load(std::sync::atomic::Ordering::SeqCst)
    }

    async fn deliver(&self, notice: Notice) -> Delivery {
        lock(&self.steps).push(Step::Delivered(notice.kind, notice.instance_id));
        self.held.store(false, std::sync::atomic::Ordering::SeqCst);
        Delivery::Done
    }
}

/// Issue 39, case 2: a stalled replica's consumer deleted the spot warnings of the replica
/// serving the node now. Ownership is asked again right before the delete: a message whose
/// node stopped being served here meanwhile is handed on to the replica serving it, not deleted.
#[tokio::test(start_paused = true)]
async fn a_message_whose_node_stopped_being_served_here_during_delivery_is_handed_on_not_deleted() {
    let steps = Steps::default();
    let queue =
        Arc::new(FakeQueue::new(&steps, true).then(Ok(vec![message("h1", samples::spot(OURS))])));
    let sink = Arc::new(HoldEndsDuringDelivery {
        held: std::sync::atomic::AtomicBool::new(true),
        steps: steps.clone(),
    });
    let metrics = Arc::new(InterruptionMetrics::register(&mut Registry::default()));
    consume(
        queue,
        sink,
        metrics,
        tokio::time::sleep(Duration::from_secs(30)),
    )
    .await;
    assert_eq!(
        *lock(&steps),
        [
            Step::Delivered(NoticeKind::SpotInterruption, OURS.to_owned()),
            Step::HandedOn(vec!["h1".to_owned()], HAND_ON_AFTER),
        ]
    );
}
