//! The owner of the process's loops. Every loop `Orca::run` starts is spawned here, so none is
//! detached: each is awaited at shutdown (within the shutdown grace period), and a loop that
//! ends when nothing asked it to (a panic, a loop that returned, a failure it answers) is
//! reported and ends the process, which is then restarted, rather than leave orca running
//! without it.
//!
//! What counts as an unexpected end is [`verdict`], a pure function with a table test.

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use tokio::task::{JoinError, JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

use super::error::StartError;
pub use super::loops::ProcessLoop;
use super::turn::Failure;
use crate::support::AbortOnDrop;

/// What an ended loop means for the process.
#[derive(Debug)]
pub enum Verdict {
    /// It ended as it should: asked to stop, or finished its work.
    Done,
    /// It ended when nothing asked it to; the process ends with this error.
    Failed(StartError),
}

/// Judges how `task` ended, from what its handle answered, `stopping` when shutdown had been
/// asked for by then. A panic is always a failure; an error the loop answered is one too
/// (it says why); a loop that returned before shutdown is one unless it
/// [may finish](ProcessLoop::may_finish); a task the runtime cancelled stopped.
pub fn verdict(
    task: &ProcessLoop,
    joined: Result<Result<(), StartError>, JoinError>,
    stopping: bool,
) -> Verdict {
    match joined {
        Err(error) if error.is_panic() => Verdict::Failed(StartError::LoopEnded {
            task: task.clone(),
            how: Failure::Panicked,
        }),
        Err(_) => Verdict::Done,
        Ok(Err(error)) => Verdict::Failed(error),
        Ok(Ok(())) if stopping || task.may_finish() => Verdict::Done,
        Ok(Ok(())) => Verdict::Failed(StartError::LoopEnded {
            task: task.clone(),
            how: Failure::Returned,
        }),
    }
}

/// The process's loops, owned: spawned here, judged as each ends, joined at shutdown.
pub struct ProcessTasks {
    set: JoinSet<Result<(), StartError>>,
    /// Which loop each task runs, by its task id (a panicked task answers only its id).
    names: HashMap<tokio::task::Id, ProcessLoop>,
    shutdown: CancellationToken,
}

impl ProcessTasks {
    /// An owner whose loops stop at `shutdown`; it cancels `shutdown` itself when a loop
    /// fails.
    pub fn new(shutdown: CancellationToken) -> ProcessTasks {
        ProcessTasks {
            set: JoinSet::new(),
            names: HashMap::new(),
            shutdown,
        }
    }

    /// Runs `task` as the loop `which`.
    pub fn spawn<F>(&mut self, which: ProcessLoop, task: F)
    where
        F: Future<Output = Result<(), StartError>> + Send + 'static,
    {
        let handle = self.set.spawn(task);
        self.names.insert(handle.id(), which);
    }

    /// Runs `task`, a loop that ends by itself only when it is done or asked to stop.
    pub fn spawn_loop<F>(&mut self, which: ProcessLoop, task: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.spawn(which, async move {
            task.await;
            Ok(())
        });
    }

    /// Takes over a loop another module spawned: it is judged and joined as if spawned here,
    /// and aborted with its owner.
    pub fn adopt<T: Send + 'static>(&mut self, which: ProcessLoop, handle: JoinHandle<T>) {
        let abort = AbortOnDrop(handle.abort_handle());
        self.spawn(which, async move {
            let _abort = abort;
            match handle.await {
                Ok(_) => Ok(()),
                // Re-raised here, so the panic is judged as this task's.
                Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
                Err(_) => Ok(()),
            }
        });
    }

    /// Waits until shutdown is asked for, or until a loop fails: then it is reported, and
    /// shutdown is asked for. Answers the failure, the first one only.
    pub async fn until_shutdown(&mut self) -> Option<StartError> {
        loop {
            let joined = tokio::select! {
                () = self.shutdown.cancelled() => return None,
                Some(joined) = self.set.join_next_with_id() => joined,
                else => {
                    // Nothing left to run: nothing serves, so the process stops.
                    self.shutdown.cancel();
                    return None;
                }
            };
            if let Some(failure) = self.judge(joined) {
                tracing::error!(error = %crate::support::errors::error_chain(&failure), "a loop of the process ended by itself; shutting down to be restarted");
                self.shutdown.cancel();
                return Some(failure);
            }
        }
    }

    /// After shutdown was asked for: waits for every loop to end, at most `grace`, then
    /// aborts what is left. Failures while stopping are logged. Answers whether every loop
    /// ended in time.
    pub async fn join(mut self, grace: Duration) -> bool {
        let drained = tokio::time::timeout(grace, async {
            while let Some(joined) = self.set.join_next_with_id().await {
                if let Some(failure) = self.judge(joined) {
                    tracing::error!(error = %crate::support::errors::error_chain(&failure), "a loop of the process failed while stopping");
                }
            }
        })
        .await;
        if drained.is_err() {
            let left: Vec<String> = self.names.values().map(ToString::to_string).collect();
            tracing::warn!(?grace, left = %left.join(", "), "shutdown grace period elapsed with work in flight; exiting anyway");
            self.set.abort_all();
        }
        drained.is_ok()
    }

    /// The verdict on one ended task, forgetting its name.
    fn judge(
        &mut self,
        joined: Result<(tokio::task::Id, Result<(), StartError>), JoinError>,
    ) -> Option<StartError> {
        let (id, joined) = match joined {
            Ok((id, answer)) => (id, Ok(answer)),
            Err(error) => (error.id(), Err(error)),
        };
        let which = self.names.remove(&id)?;
        match verdict(&which, joined, self.shutdown.is_cancelled()) {
            Verdict::Done => None,
            Verdict::Failed(failure) => Some(failure),
        }
    }
}

#[cfg(test)]
mod tests;
