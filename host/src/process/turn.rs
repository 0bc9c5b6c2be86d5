//! A turn of serving a node (from taking it up to giving it up), and how it ended: a turn
//! whose task ends when nothing asked it to (a panic in the pod controller, a sync loop that
//! returned) must not leave the node "served" with nothing serving it. See
//! `NodeRuntime::serve`, which ends the turn, and its owners, which end the hold (replicas
//! sharing the nodes) or the process (one replica).

use std::fmt;

use tokio::task::JoinError;

use crate::replicas::TenureError;

/// The tasks a node's serving runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ServingTask {
    /// The Node's registration, heartbeat and status.
    NodeController,
    /// The pods' reconciles.
    PodController,
    /// The listing of the node's instances and the collection of orphans.
    StatusSync,
    /// A whole turn (the task that starts and stops the others).
    Turn,
    /// The loop that takes and renews the node's Lease (replicas sharing the nodes).
    LeaseLoop,
}

impl ServingTask {
    pub fn as_str(self) -> &'static str {
        match self {
            ServingTask::NodeController => "node_controller",
            ServingTask::PodController => "pod_controller",
            ServingTask::StatusSync => "status_sync",
            ServingTask::Turn => "turn",
            ServingTask::LeaseLoop => "lease_loop",
        }
    }
}

/// How a task ended that nothing asked to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Failure {
    Panicked,
    /// Returned as if asked to stop (a stream that ended, a loop that broke).
    Returned,
}

impl Failure {
    pub fn as_str(self) -> &'static str {
        match self {
            Failure::Panicked => "panicked",
            Failure::Returned => "returned",
        }
    }
}

/// Why a turn of serving ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TurnEnd {
    /// Asked to stop: shutdown, or the Lease lost as the lock saw it.
    Stopped,
    /// The hold's deadline passed before a renewal moved it on (see `replicas::tenure`).
    Lapsed,
    /// The Lease was taken by another replica, or this replica's write of it refused: the
    /// hold ended before its deadline.
    Lost,
    /// A task of the turn ended by itself.
    Failed { task: ServingTask, how: Failure },
}

impl fmt::Display for TurnEnd {
    /// The `reason` label of `orca_node_serving_ended_total`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TurnEnd::Stopped => f.write_str("stopped"),
            TurnEnd::Lapsed => f.write_str("hold_lapsed"),
            TurnEnd::Lost => f.write_str("lease_lost"),
            TurnEnd::Failed { task, how } => write!(f, "{}_{}", task.as_str(), how.as_str()),
        }
    }
}

/// How `task` ended, from what its handle answered: a panic, a task whose tenure lapsed, or
/// the turn end it returned. An end it returned while not `stopping` is a failure: nothing
/// asked it to stop. A task cancelled by the runtime (the runtime is shutting down) stopped.
pub fn end_of(
    task: ServingTask,
    joined: Result<Result<TurnEnd, TenureError>, JoinError>,
    stopping: bool,
) -> TurnEnd {
    match joined {
        Err(error) if error.is_panic() => TurnEnd::Failed {
            task,
            how: Failure::Panicked,
        },
        Err(_) => TurnEnd::Stopped,
        Ok(Err(TenureError::Lapsed)) => TurnEnd::Lapsed,
        Ok(Ok(TurnEnd::Stopped)) if !stopping => TurnEnd::Failed {
            task,
            how: Failure::Returned,
        },
        Ok(Ok(end)) => end,
    }
}

/// Of two ends of one turn (its first task's, then the others' once stopped), the one that
/// says why the turn ended: anything but [`TurnEnd::Stopped`], the first first.
pub fn first_cause(first: TurnEnd, then: TurnEnd) -> TurnEnd {
    if first == TurnEnd::Stopped {
        then
    } else {
        first
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::support::testing::{cancelled, panicked};

    #[tokio::test]
    async fn how_a_task_ended() {
        use ServingTask::PodController as Pods;
        let failed = |how| TurnEnd::Failed { task: Pods, how };
        let cases = [
            (Err(panicked().await), false, failed(Failure::Panicked)),
            (Err(panicked().await), true, failed(Failure::Panicked)),
            (Err(cancelled().await), false, TurnEnd::Stopped),
            (Ok(Err(TenureError::Lapsed)), false, TurnEnd::Lapsed),
            (Ok(Ok(TurnEnd::Stopped)), false, failed(Failure::Returned)),
            (Ok(Ok(TurnEnd::Stopped)), true, TurnEnd::Stopped),
            (
                Ok(Ok(TurnEnd::Failed {
                    task: ServingTask::StatusSync,
                    how: Failure::Panicked,
                })),
                true,
                TurnEnd::Failed {
                    task: ServingTask::StatusSync,
                    how: Failure::Panicked,
                },
            ),
        ];
        for (joined, stopping, expected) in cases {
            let described = format!("{joined:?} stopping={stopping}");
            assert_eq!(end_of(Pods, joined, stopping), expected, "{described}");
        }
    }

    #[test]
    fn the_first_end_that_is_not_a_stop_says_why_the_turn_ended() {
        let sync_panicked = TurnEnd::Failed {
            task: ServingTask::StatusSync,
            how: Failure::Panicked,
        };
        assert_eq!(
            first_cause(TurnEnd::Stopped, TurnEnd::Lapsed),
            TurnEnd::Lapsed
        );
        assert_eq!(first_cause(sync_panicked, TurnEnd::Lapsed), sync_panicked);
        assert_eq!(
            first_cause(TurnEnd::Lapsed, TurnEnd::Stopped),
            TurnEnd::Lapsed
        );
    }

    #[test]
    fn reasons_are_labels() {
        let reasons: Vec<String> = [
            TurnEnd::Lapsed,
            TurnEnd::Failed {
                task: ServingTask::StatusSync,
                how: Failure::Panicked,
            },
            TurnEnd::Failed {
                task: ServingTask::NodeController,
                how: Failure::Returned,
            },
        ]
        .iter()
        .map(ToString::to_string)
        .collect();
        assert_eq!(
            reasons,
            [
                "hold_lapsed",
                "status_sync_panicked",
                "node_controller_returned"
            ]
        );
    }
}
