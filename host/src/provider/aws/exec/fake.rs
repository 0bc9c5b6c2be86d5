//! A Systems Manager that behaves as its documentation says, for tests: `SendCommand` refuses
//! an instance that is not managed (`InvalidInstanceId`), and each command's invocation is
//! first unknown to `GetCommandInvocation` (`InvocationDoesNotExist`), then goes through the
//! answers the test scripted (the last one repeating). Every call is recorded.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Mutex;

use async_trait::async_trait;

use super::{Invocation, InvocationStatus, RunCommand, SsmApi, SsmError};

#[derive(Default)]
pub struct FakeSsm {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    managed: HashSet<String>,
    /// The answers the next command's invocation gives, after it becomes visible.
    script: Vec<Result<Invocation, SsmError>>,
    /// How many polls of a new command answer `InvocationDoesNotExist` first.
    unseen_polls: usize,
    commands: Vec<RunCommand>,
    answers: HashMap<String, (usize, VecDeque<Result<Invocation, SsmError>>)>,
    polls: usize,
    cancelled: Vec<(String, String)>,
}

impl FakeSsm {
    /// A Systems Manager where `instance_id` runs a registered agent.
    pub fn managing(instance_id: &str) -> FakeSsm {
        let fake = FakeSsm::default();
        fake.state().managed.insert(instance_id.to_owned());
        fake.state().unseen_polls = 1;
        fake
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("fake SSM lock")
    }

    /// What the next command's invocation answers once SSM shows it, in order.
    pub fn script(&self, answers: Vec<Result<Invocation, SsmError>>) {
        self.state().script = answers;
    }

    /// How many polls of a new command find no invocation yet.
    pub fn unseen_for(&self, polls: usize) {
        self.state().unseen_polls = polls;
    }

    pub fn commands(&self) -> Vec<RunCommand> {
        self.state().commands.clone()
    }

    pub fn polls(&self) -> usize {
        self.state().polls
    }

    /// `(command id, instance id)` of each `CancelCommand`.
    pub fn cancelled(&self) -> Vec<(String, String)> {
        self.state().cancelled.clone()
    }
}

/// An invocation in `status` with `details`, exit code and output.
pub fn invocation(
    status: InvocationStatus,
    details: &str,
    response_code: i32,
    stdout: &str,
    stderr: &str,
) -> Invocation {
    Invocation {
        status,
        status_details: details.to_owned(),
        response_code,
        stdout: stdout.to_owned(),
        stderr: stderr.to_owned(),
    }
}

/// A running invocation, as SSM shows it while the script runs.
pub fn in_progress() -> Invocation {
    invocation(InvocationStatus::InProgress, "InProgress", -1, "", "")
}

#[async_trait]
impl SsmApi for FakeSsm {
    async fn send_command(&self, command: &RunCommand) -> Result<String, SsmError> {
        let mut state = self.state();
        if !state.managed.contains(&command.instance_id) {
            return Err(SsmError::NotManaged(format!(
                "Instances [[{}]] not in a valid state for account 123456789012",
                command.instance_id
            )));
        }
        state.commands.push(command.clone());
        let id = format!("command-{}", state.commands.len());
        let script = state.script.drain(..).collect();
        let unseen = state.unseen_polls;
        state.answers.insert(id.clone(), (unseen, script));
        Ok(id)
    }

    async fn get_command_invocation(
        &self,
        command_id: &str,
        instance_id: &str,
    ) -> Result<Invocation, SsmError> {
        let mut state = self.state();
        state.polls += 1;
        let not_found = || SsmError::NoInvocation(format!("{command_id} on {instance_id}"));
        let known = state
            .commands
            .iter()
            .any(|command| command.instance_id == instance_id);
        let Some((unseen, answers)) = state.answers.get_mut(command_id) else {
            return Err(not_found());
        };
        if !known {
            return Err(not_found());
        }
        if *unseen > 0 {
            *unseen -= 1;
            return Err(not_found());
        }
        match answers.len() {
            0 => Err(not_found()),
            1 => answers[0].clone(),
            _ => answers.pop_front().expect("an answer"),
        }
    }

    async fn cancel_command(&self, command_id: &str, instance_id: &str) -> Result<(), SsmError> {
        self.state()
            .cancelled
            .push((command_id.to_owned(), instance_id.to_owned()));
        Ok(())
    }
}
