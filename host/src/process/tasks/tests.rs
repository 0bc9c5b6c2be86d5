use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::*;
use crate::support::testing::{cancelled, panicked};

/// A loop, how its handle answered, whether shutdown had been asked for, and the verdict.
type Case<'a> = (
    &'a ProcessLoop,
    Result<Result<(), StartError>, JoinError>,
    bool,
    &'static str,
);

/// The verdict, as a word for the table.
fn said(verdict: Verdict) -> String {
    match verdict {
        Verdict::Done => "done".to_owned(),
        Verdict::Failed(StartError::LoopEnded { task, how }) => format!("{task}: {how:?}"),
        Verdict::Failed(other) => format!("failed: {other}"),
    }
}

#[tokio::test]
async fn how_a_loop_ended_decides_whether_the_process_ends() {
    let sweep = ProcessLoop::StraySweep;
    let retry = ProcessLoop::EmbeddedRetry;
    let refused = || {
        Err(StartError::PluginWatchFailed {
            dir: "/plugins".to_owned(),
            source: notify::Error::generic("gone"),
        })
    };
    let cases: Vec<Case> = vec![
        (
            &sweep,
            Err(panicked().await),
            false,
            "the sweep for instances of undeclared nodes: Panicked",
        ),
        (
            &sweep,
            Err(panicked().await),
            true,
            "the sweep for instances of undeclared nodes: Panicked",
        ),
        (&sweep, Err(cancelled().await), false, "done"),
        (
            &sweep,
            Ok(Ok(())),
            false,
            "the sweep for instances of undeclared nodes: Returned",
        ),
        (&sweep, Ok(Ok(())), true, "done"),
        (
            &sweep,
            Ok(refused()),
            true,
            "failed: watching the plugins directory /plugins",
        ),
        (&retry, Ok(Ok(())), false, "done"),
        (
            &retry,
            Err(panicked().await),
            false,
            "the embedded plugins' retry: Panicked",
        ),
    ];
    for (task, joined, stopping, expected) in cases {
        let described = format!("{task} {joined:?} stopping={stopping}");
        assert_eq!(
            said(verdict(task, joined, stopping)),
            expected,
            "{described}"
        );
    }
}

#[tokio::test]
async fn a_loop_that_panics_ends_the_process_and_the_others_are_joined() {
    let shutdown = CancellationToken::new();
    let mut tasks = ProcessTasks::new(shutdown.clone());
    let stopped = Arc::new(AtomicBool::new(false));
    tasks.spawn_loop(ProcessLoop::Census, {
        let (shutdown, stopped) = (shutdown.clone(), stopped.clone());
        async move {
            shutdown.cancelled().await;
            stopped.store(true, Ordering::SeqCst);
        }
    });
    tasks.spawn_loop(ProcessLoop::StraySweep, async { panic!("a sweep bug") });
    let failure = tasks.until_shutdown().await;
    assert!(
        matches!(
            failure,
            Some(StartError::LoopEnded {
                task: ProcessLoop::StraySweep,
                how: Failure::Panicked
            })
        ),
        "{failure:?}"
    );
    assert!(
        shutdown.is_cancelled(),
        "the failure asks the process to stop"
    );
    assert!(
        tasks.join(Duration::from_secs(10)).await,
        "every loop ended in time"
    );
    assert!(
        stopped.load(Ordering::SeqCst),
        "the census was awaited, not dropped"
    );
}

#[tokio::test]
async fn a_loop_that_returns_before_shutdown_ends_the_process_and_one_that_may_finish_does_not() {
    let shutdown = CancellationToken::new();
    let mut tasks = ProcessTasks::new(shutdown.clone());
    tasks.spawn_loop(ProcessLoop::EmbeddedRetry, async {});
    tasks.spawn_loop(ProcessLoop::DaemonSetCheck, async {});
    tasks.spawn_loop(ProcessLoop::PodWatch("gpu".to_owned()), async {
        tokio::task::yield_now().await;
    });
    let failure = tasks.until_shutdown().await;
    assert!(
        matches!(
            &failure,
            Some(StartError::LoopEnded { task: ProcessLoop::PodWatch(node), how: Failure::Returned }) if node == "gpu"
        ),
        "{failure:?}"
    );
}

#[tokio::test]
async fn an_adopted_task_is_judged_as_one_spawned_here() {
    let shutdown = CancellationToken::new();
    let mut tasks = ProcessTasks::new(shutdown.clone());
    tasks.adopt(
        ProcessLoop::PluginWatch,
        tokio::spawn(async { panic!("a watcher bug") }),
    );
    let failure = tasks.until_shutdown().await;
    assert!(
        matches!(
            failure,
            Some(StartError::LoopEnded {
                task: ProcessLoop::PluginWatch,
                how: Failure::Panicked
            })
        ),
        "{failure:?}"
    );
}

#[tokio::test]
async fn shutdown_stops_the_wait_and_the_join_waits_for_every_loop() {
    let shutdown = CancellationToken::new();
    let mut tasks = ProcessTasks::new(shutdown.clone());
    let stopped = Arc::new(AtomicBool::new(false));
    tasks.spawn_loop(ProcessLoop::MetricsServer, {
        let (shutdown, stopped) = (shutdown.clone(), stopped.clone());
        async move {
            shutdown.cancelled().await;
            tokio::task::yield_now().await;
            stopped.store(true, Ordering::SeqCst);
        }
    });
    shutdown.cancel();
    assert!(tasks.until_shutdown().await.is_none());
    assert!(tasks.join(Duration::from_secs(10)).await);
    assert!(stopped.load(Ordering::SeqCst));
}

#[tokio::test]
async fn a_loop_that_does_not_stop_within_the_grace_period_is_aborted() {
    let shutdown = CancellationToken::new();
    let mut tasks = ProcessTasks::new(shutdown.clone());
    let dropped = Arc::new(AtomicBool::new(false));
    struct Flag(Arc<AtomicBool>);
    impl Drop for Flag {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    tasks.spawn_loop(ProcessLoop::LeaseWatch, {
        let flag = Flag(dropped.clone());
        async move {
            let _flag = flag;
            std::future::pending::<()>().await;
        }
    });
    shutdown.cancel();
    assert!(
        !tasks.join(Duration::from_millis(50)).await,
        "the loop did not end in time"
    );
    for _ in 0..100 {
        if dropped.load(Ordering::SeqCst) {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert!(dropped.load(Ordering::SeqCst), "the loop was aborted");
}
