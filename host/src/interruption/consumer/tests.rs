//! The loop against an in-memory queue and sink, on tokio's paused clock: every wait is
//! simulated, so a minute of polling takes no real time.

use std::collections::VecDeque;
use std::sync::Mutex;

use async_trait::async_trait;
use prometheus_client::registry::Registry;

use super::super::owners::OwnersError;
use super::super::queue::{QueueError, Received};
use super::super::samples;
use super::*;
use crate::interruption::NoticeKind;
use crate::provider::aws::api::ApiError;
use crate::support::errors::lock;

const OURS: &str = "i-0aaaaaaaaaaaaaaa1";
const OURS_TOO: &str = "i-0aaaaaaaaaaaaaaa2";
const THEIRS: &str = "i-0bbbbbbbbbbbbbbb1";
/// An instance of this orca that no node served here lists (another replica serves its node).
const ELSEWHERE: &str = "i-0ccccccccccccccc1";

/// What the fakes saw, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Delivered(NoticeKind, String),
    Deleted(Vec<String>),
    HandedOn(Vec<String>, Duration),
    /// EC2 answered whose these instances are.
    Asked(Vec<String>),
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

/// Says which instances are this orca's ([`ELSEWHERE`]), after `delay`; or fails.
struct FakeOwners {
    delay: Duration,
    fails: bool,
    steps: Steps,
}

#[async_trait]
impl InstanceOwners for FakeOwners {
    async fn ours(&self, asked: &[Asked]) -> Result<HashSet<String>, OwnersError> {
        tokio::time::sleep(self.delay).await;
        let ids: Vec<String> = asked.iter().map(|a| a.instance_id.clone()).collect();
        lock(&self.steps).push(Step::Asked(ids.clone()));
        if self.fails {
            return Err(OwnersError::DescribeFailed {
                count: ids.len(),
                source: ApiError::transport("connection refused"),
            });
        }
        Ok(ids.into_iter().filter(|id| id == ELSEWHERE).collect())
    }
}

/// How a run's fakes behave besides the script.
#[derive(Default)]
struct Setup {
    /// Owned instances whose notices the sink cannot act on yet.
    again: Vec<&'static str>,
    /// Whether another replica serves a node this one shares.
    elsewhere: bool,
    /// How long EC2 takes to say whose instances are.
    lookup_delay: Duration,
    lookup_fails: bool,
}

/// The account and region of the samples' notices.
fn origin() -> Origin {
    Origin {
        account: "123456789012".to_owned(),
        region: "us-east-2".to_owned(),
    }
}

fn parts(
    queue: Arc<dyn NoticeQueue>,
    sink: Arc<dyn NoticeSink>,
    setup: &Setup,
    steps: &Steps,
    registry: &mut Registry,
) -> ConsumerParts {
    ConsumerParts {
        queue,
        sink,
        owners: Arc::new(FakeOwners {
            delay: setup.lookup_delay,
            fails: setup.lookup_fails,
            steps: steps.clone(),
        }),
        origin: origin(),
        metrics: Arc::new(InterruptionMetrics::register(registry)),
    }
}

/// Runs the loop for `duration` of simulated time; what the fakes saw and the metrics' text.
async fn run(queue: Arc<FakeQueue>, duration: Duration) -> (Vec<Step>, String) {
    run_with(queue, duration, Setup::default()).await
}

/// As [`run`], with the fakes set up as `setup` says.
async fn run_with(queue: Arc<FakeQueue>, duration: Duration, setup: Setup) -> (Vec<Step>, String) {
    let steps = queue.steps.clone();
    let sink = Arc::new(FakeSink {
        owned: vec![OURS, OURS_TOO],
        again: setup.again.clone(),
        elsewhere: setup.elsewhere,
        steps: steps.clone(),
    });
    let mut registry = Registry::default();
    let parts = parts(queue, sink, &setup, &steps, &mut registry);
    consume(parts, tokio::time::sleep(duration)).await;
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
    let setup = Setup {
        again: vec![OURS_TOO],
        ..Setup::default()
    };
    let (steps, metrics) = run_with(queue, Duration::from_secs(30), setup).await;
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

/// Issue 39, case 7: a message about an instance that is not this orca's was left on the queue
/// until its retention dropped it, coming back after every visibility timeout ahead of real
/// warnings. EC2 is asked whose the instance is, and the message deleted.
#[tokio::test(start_paused = true)]
async fn notices_for_instances_that_are_not_this_orcas_are_deleted() {
    let steps = Steps::default();
    let queue = Arc::new(FakeQueue::new(&steps, true).then(Ok(vec![
        message("h1", samples::spot(THEIRS)),
        message("h2", samples::scheduled(&[THEIRS, "i-0bbbbbbbbbbbbbbb2"])),
    ])));
    let (steps, metrics) = run(queue, Duration::from_secs(30)).await;
    assert_eq!(
        steps,
        [
            Step::Asked(vec![
                THEIRS.to_owned(),
                THEIRS.to_owned(),
                "i-0bbbbbbbbbbbbbbb2".to_owned()
            ]),
            Step::Deleted(vec!["h1".to_owned(), "h2".to_owned()]),
        ]
    );
    assert_counted(
        &metrics,
        &["orca_interruption_messages_total{outcome=\"foreign\"} 2"],
    );
}

/// Issue 39, case 7: an unreadable message was left on the queue to come back until its
/// retention dropped it.
#[tokio::test(start_paused = true)]
async fn a_message_orca_cannot_read_is_deleted() {
    let steps = Steps::default();
    let queue = Arc::new(FakeQueue::new(&steps, true).then(Ok(vec![
        message("h1", "{\"hello\": \"world\"}"),
        message("h2", samples::spot(OURS).replace("aws.ec2", "aws.s3")),
    ])));
    let (steps, metrics) = run(queue, Duration::from_secs(30)).await;
    assert_eq!(
        steps,
        [Step::Deleted(vec!["h1".to_owned(), "h2".to_owned()])]
    );
    assert_counted(
        &metrics,
        &["orca_interruption_messages_total{outcome=\"unparsed\"} 2"],
    );
}

/// Issue 39, case 7: a spot warning naming this node's instance was acted on whatever account
/// and region it came from, so any account's rule that could send to the queue could end pods
/// `SpotInterrupted`. Another account's or region's notice is deleted, never delivered.
#[tokio::test(start_paused = true)]
async fn a_notice_from_another_account_or_region_is_deleted_and_never_acted_on() {
    let steps = Steps::default();
    let forged = samples::spot(OURS).replace("123456789012", "210987654321");
    let elsewhere = samples::spot(OURS).replace("us-east-2", "eu-west-1");
    let queue = Arc::new(FakeQueue::new(&steps, true).then(Ok(vec![
        message("h1", forged),
        message("h2", elsewhere),
        message("h3", samples::spot(OURS_TOO)),
    ])));
    let (steps, metrics) = run(queue, Duration::from_secs(30)).await;
    assert_eq!(
        steps,
        [
            Step::Delivered(NoticeKind::SpotInterruption, OURS_TOO.to_owned()),
            Step::Deleted(vec!["h1".to_owned(), "h2".to_owned(), "h3".to_owned()]),
        ],
        "only the notice from this orca's account and region is acted on"
    );
    assert_counted(
        &metrics,
        &[
            "orca_interruption_messages_total{outcome=\"other-account\"} 1",
            "orca_interruption_messages_total{outcome=\"other-region\"} 1",
            "orca_interruption_messages_total{outcome=\"delivered\"} 1",
        ],
    );
}

/// An instance of this orca that no node served here lists (another replica serves its node,
/// or the listing has not caught up): its message is kept for whoever acts on it.
#[tokio::test(start_paused = true)]
async fn a_notice_for_this_orcas_instance_not_listed_here_is_kept() {
    let steps = Steps::default();
    let queue = Arc::new(FakeQueue::new(&steps, true).then(Ok(vec![
        message("h1", samples::spot(ELSEWHERE)),
        message("h2", samples::scheduled(&[ELSEWHERE, OURS])),
        message("h3", samples::scheduled(&[THEIRS, OURS_TOO])),
    ])));
    let (steps, metrics) = run(queue, Duration::from_secs(30)).await;
    assert_eq!(
        steps,
        [
            Step::Delivered(NoticeKind::ScheduledChange, OURS.to_owned()),
            Step::Delivered(NoticeKind::ScheduledChange, OURS_TOO.to_owned()),
            Step::Asked(vec![
                ELSEWHERE.to_owned(),
                ELSEWHERE.to_owned(),
                THEIRS.to_owned()
            ]),
            Step::Deleted(vec!["h3".to_owned()]),
        ],
        "ours delivered; kept while it names this orca's instance, deleted when the rest is \
         not this orca's"
    );
    assert_counted(
        &metrics,
        &[
            "orca_interruption_messages_total{outcome=\"elsewhere\"} 1",
            "orca_interruption_messages_total{outcome=\"delivered\"} 2",
        ],
    );
}

/// EC2 could not say whose an instance is: its message is kept, as it may be this orca's; a
/// state change is never worth asking about (the next listing shows it).
#[tokio::test(start_paused = true)]
async fn when_ec2_cannot_say_whose_an_instance_is_its_message_is_kept() {
    let steps = Steps::default();
    let state_change = samples::STATE_CHANGE
        .replace("i-abcd1111", THEIRS)
        .replace("us-east-1", "us-east-2");
    let queue = Arc::new(FakeQueue::new(&steps, true).then(Ok(vec![
        message("h1", samples::spot(THEIRS)),
        message("h2", state_change),
    ])));
    let setup = Setup {
        lookup_fails: true,
        ..Setup::default()
    };
    let (steps, _) = run_with(queue, Duration::from_secs(30), setup).await;
    assert_eq!(
        steps,
        [
            Step::Asked(vec![THEIRS.to_owned()]),
            Step::Deleted(vec!["h2".to_owned()]),
        ]
    );
}

/// Asking EC2 about other instances does not hold up this node's own warnings.
#[tokio::test(start_paused = true)]
async fn our_notices_are_acted_on_while_ec2_is_asked_about_the_others() {
    let steps = Steps::default();
    let queue = Arc::new(FakeQueue::new(&steps, true).then(Ok(vec![
        message("h1", samples::spot(THEIRS)),
        message("h2", samples::spot(OURS)),
    ])));
    let setup = Setup {
        lookup_delay: Duration::from_secs(5),
        ..Setup::default()
    };
    let (steps, _) = run_with(queue, Duration::from_secs(30), setup).await;
    assert_eq!(
        steps,
        [
            Step::Delivered(NoticeKind::SpotInterruption, OURS.to_owned()),
            Step::Asked(vec![THEIRS.to_owned()]),
            Step::Deleted(vec!["h1".to_owned(), "h2".to_owned()]),
        ]
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
    let parts = parts(
        queue.clone(),
        sinks.clone(),
        &Setup::default(),
        &steps,
        &mut registry,
    );
    let start = Instant::now();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let consumer = tokio::spawn(consume(parts, shutdown.clone().cancelled_owned()));
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
    let sink = Arc::new(FakeSink {
        owned: Vec::new(),
        again: Vec::new(),
        elsewhere: false,
        steps: steps.clone(),
    });
    let parts = parts(
        Arc::new(FakeQueue::new(&steps, true)),
        sink,
        &Setup::default(),
        &steps,
        &mut registry,
    );
    let future = consume(
        parts,
        tokio_util::sync::CancellationToken::new().cancelled_owned(),
    );
    assert_send(&future);
}

/// A replica that shares its nodes, while another replica serves one of them, hands a message
/// about this orca's instance it does not list on at once (visible again to whoever polls
/// next) rather than hiding it from the owner for the visibility timeout; a few times, then it
/// is left. Alone, or serving every node, it leaves such a message as before.
#[tokio::test(start_paused = true)]
async fn a_notice_for_another_replicas_instance_is_handed_on_a_few_times_then_left() {
    let receipts = (HAND_ON_TIMES + 2) as usize;
    let script = |steps: &Steps| {
        let mut queue = FakeQueue::new(steps, true);
        for _ in 0..receipts {
            queue = queue.then(Ok(vec![
                message("theirs", samples::spot(ELSEWHERE)),
                message("both", samples::scheduled(&[OURS, ELSEWHERE])),
            ]));
        }
        Arc::new(queue)
    };
    let sharing = |elsewhere| Setup {
        elsewhere,
        ..Setup::default()
    };
    let steps = Steps::default();
    let (seen, metrics) = run_with(script(&steps), Duration::from_secs(600), sharing(true)).await;
    let handed: Vec<&Step> = seen
        .iter()
        .filter(|step| matches!(step, Step::HandedOn(..)))
        .collect();
    assert_eq!(handed.len(), HAND_ON_TIMES as usize, "{seen:?}");
    let both_handed = Step::HandedOn(vec!["theirs".to_owned(), "both".to_owned()], HAND_ON_AFTER);
    assert!(handed.iter().all(|step| **step == both_handed), "{seen:?}");
    assert!(
        !seen.iter().any(|step| matches!(step, Step::Deleted(_))),
        "a message naming another replica's instance is never deleted: {seen:?}"
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
            "orca_interruption_messages_total{{outcome=\"elsewhere\"}} {receipts}"
        )],
    );

    let steps = Steps::default();
    let (seen, _) = run_with(script(&steps), Duration::from_secs(600), sharing(false)).await;
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
    let mut registry = Registry::default();
    let parts = parts(queue, sink, &Setup::default(), &steps, &mut registry);
    consume(parts, tokio::time::sleep(Duration::from_secs(30))).await;
    assert_eq!(
        *lock(&steps),
        [
            Step::Delivered(NoticeKind::SpotInterruption, OURS.to_owned()),
            Step::HandedOn(vec!["h1".to_owned()], HAND_ON_AFTER),
        ]
    );
}
