//! `kubectl exec` through AWS Systems Manager's Run Command: the pod's instance runs
//! `docker exec` in the container with the `AWS-RunShellScript` document, and orca polls the
//! invocation until it ends, as SSM documents
//! (<https://docs.aws.amazon.com/systems-manager/latest/APIReference/API_GetCommandInvocation.html>).
//!
//! - The command reaches the instance as one shell line in which every argument is quoted, so
//!   nothing in it is interpreted by the instance's shell.
//! - Standard input, when the client sends any, travels base64-encoded in that line (at most
//!   [`MAX_STDIN_BYTES`]).
//! - An invocation SSM does not show yet (`InvocationDoesNotExist` just after `SendCommand`) is
//!   asked for again; a client that goes away cancels the command.
//!
//! # Caveats
//! Run Command has no terminal and no live streams: the output arrives whole when the command
//! ends, and SSM returns at most the first 24,000 characters of standard output and 8,000 of
//! standard error (a note on standard error says when it may have cut). Interactive sessions
//! need Session Manager's data channel, which orca does not speak.

pub mod sdk;

#[cfg(test)]
pub(crate) mod fake;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use base64::Engine as _;

use super::workload::{container_name, quote};
use crate::provider::{ExecOutcome, ExecRequest, MAX_STDIN_BYTES, ProviderError};

/// The Run Command document orca runs: a shell script, on Linux.
pub const DOCUMENT: &str = "AWS-RunShellScript";
/// How many characters of standard output and error SSM returns at most.
pub const STDOUT_LIMIT: usize = 24_000;
pub const STDERR_LIMIT: usize = 8_000;
/// How long SSM may take to deliver the command before it gives up (`TimeoutSeconds`; SSM's
/// minimum is 30).
pub const DELIVERY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long an invocation may stay unknown to `GetCommandInvocation` after `SendCommand`.
const INVOCATION_VISIBILITY: Duration = Duration::from_secs(30);
/// The first wait between polls, doubled up to [`MAX_POLL_INTERVAL`].
const FIRST_POLL_INTERVAL: Duration = Duration::from_millis(250);
const MAX_POLL_INTERVAL: Duration = Duration::from_secs(2);

/// The Systems Manager calls exec makes.
#[async_trait]
pub trait SsmApi: Send + Sync + 'static {
    /// `SendCommand` of [`DOCUMENT`] to one instance; the command's id.
    async fn send_command(&self, command: &RunCommand) -> Result<String, SsmError>;
    /// `GetCommandInvocation` of a command on an instance.
    async fn get_command_invocation(
        &self,
        command_id: &str,
        instance_id: &str,
    ) -> Result<Invocation, SsmError>;
    /// `CancelCommand` on an instance.
    async fn cancel_command(&self, command_id: &str, instance_id: &str) -> Result<(), SsmError>;
}

/// One `SendCommand`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunCommand {
    pub instance_id: String,
    /// The script's lines (the document's `commands` parameter).
    pub commands: Vec<String>,
    /// How long the script may run (the document's `executionTimeout`).
    pub execution_timeout: Duration,
    /// What the command is for, in SSM's command history (at most 100 characters).
    pub comment: String,
}

/// One `GetCommandInvocation` answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    pub status: InvocationStatus,
    /// SSM's finer status (`Undeliverable`, `ExecutionTimedOut`, `Terminated`, …).
    pub status_details: String,
    /// The script's exit code; -1 when it did not run.
    pub response_code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// An invocation's status, as SSM names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InvocationStatus {
    Pending,
    InProgress,
    Delayed,
    Success,
    Cancelled,
    Cancelling,
    TimedOut,
    Failed,
    /// A status this orca does not know; treated as not ended.
    Other(String),
}

/// Why an SSM call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SsmError {
    /// `InvalidInstanceId`: the instance is not a managed instance (no SSM agent running, no
    /// instance profile allowing it to register, or not running).
    #[error("InvalidInstanceId: {0}")]
    NotManaged(String),
    /// `InvocationDoesNotExist`: SSM does not show the invocation (yet).
    #[error("InvocationDoesNotExist: {0}")]
    NoInvocation(String),
    /// Throttled or unreachable: worth another try.
    #[error("{code}: {message}")]
    Transient { code: String, message: String },
    #[error("{code}: {message}")]
    Failed { code: String, message: String },
}

impl SsmError {
    /// Sorts a service error by its code.
    pub fn classify(code: &str, message: &str) -> SsmError {
        match code {
            "InvalidInstanceId" => SsmError::NotManaged(message.to_owned()),
            "InvocationDoesNotExist" => SsmError::NoInvocation(message.to_owned()),
            "ThrottlingException" | "Throttling" | "InternalServerError" => SsmError::Transient {
                code: code.to_owned(),
                message: message.to_owned(),
            },
            _ => SsmError::Failed {
                code: code.to_owned(),
                message: message.to_owned(),
            },
        }
    }
}

/// Why a request cannot be turned into a command line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommandRefusal {
    #[error("no command to run")]
    Empty,
    #[error("{place} contains a NUL byte, which cannot be passed to a command")]
    NulByte { place: String },
    #[error(
        "the command's standard input is {bytes} bytes; orca passes at most {MAX_STDIN_BYTES} \
         through Systems Manager's Run Command"
    )]
    InputTooLarge { bytes: usize },
}

/// The script line that runs `request` in its container: `docker exec`, with `-i` and the
/// input decoded into it when there is input. Every argument is one quoted word.
///
/// # Errors
/// [`CommandRefusal`] for an empty command, a NUL byte (bash cannot carry it) or too much input.
pub fn command_line(request: &ExecRequest) -> Result<String, CommandRefusal> {
    if request.command.is_empty() {
        return Err(CommandRefusal::Empty);
    }
    for (index, argument) in request.command.iter().enumerate() {
        if argument.contains('\0') {
            return Err(CommandRefusal::NulByte {
                place: format!("argument {index} of the command"),
            });
        }
    }
    let words: Vec<String> = request.command.iter().map(|word| quote(word)).collect();
    let container = quote(&container_name(&request.container));
    match &request.stdin {
        None => Ok(format!("docker exec {container} {}", words.join(" "))),
        Some(input) if input.len() > MAX_STDIN_BYTES => {
            Err(CommandRefusal::InputTooLarge { bytes: input.len() })
        }
        Some(input) => {
            let encoded = base64::engine::general_purpose::STANDARD.encode(input);
            Ok(format!(
                "printf %s {encoded} | base64 -d | docker exec -i {container} {}",
                words.join(" ")
            ))
        }
    }
}

/// What one poll of an invocation means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Poll {
    /// Not ended: ask again.
    Wait,
    /// The command ran to its end.
    Ended(ExecOutcome),
    /// It did not run, or did not end by itself.
    Failed(ProviderError),
}

/// The meaning of an invocation SSM returned.
pub fn poll(invocation: &Invocation, execution_timeout: Duration) -> Poll {
    let details = invocation.status_details.as_str();
    match &invocation.status {
        InvocationStatus::Success => Poll::Ended(outcome(invocation)),
        // A script that ran and exited non-zero: its exit code is the command's.
        InvocationStatus::Failed if invocation.response_code >= 0 && details == "Failed" => {
            Poll::Ended(outcome(invocation))
        }
        InvocationStatus::Failed => Poll::Failed(ProviderError::permanent(
            "CommandNotRun",
            format!(
                "Systems Manager could not run the command on the instance ({details}{}): its \
                 SSM agent must be running and able to reach Systems Manager",
                stderr_hint(invocation)
            ),
        )),
        InvocationStatus::TimedOut => Poll::Failed(ProviderError::permanent(
            "CommandTimedOut",
            format!(
                "the command did not end within {} s (provider.aws.execTimeout); Systems \
                 Manager stopped it ({details})",
                execution_timeout.as_secs()
            ),
        )),
        InvocationStatus::Cancelled => Poll::Failed(ProviderError::permanent(
            "CommandCancelled",
            format!("the command was cancelled in Systems Manager ({details})"),
        )),
        InvocationStatus::Pending
        | InvocationStatus::InProgress
        | InvocationStatus::Delayed
        | InvocationStatus::Cancelling
        | InvocationStatus::Other(_) => Poll::Wait,
    }
}

fn stderr_hint(invocation: &Invocation) -> String {
    let text = invocation.stderr.trim();
    if text.is_empty() {
        String::new()
    } else {
        format!("; {text}")
    }
}

/// The outcome of an ended invocation, with a note on standard error where SSM may have cut
/// the output.
fn outcome(invocation: &Invocation) -> ExecOutcome {
    let mut stderr = invocation.stderr.clone().into_bytes();
    for (name, text, limit) in [
        ("output", &invocation.stdout, STDOUT_LIMIT),
        ("error output", &invocation.stderr, STDERR_LIMIT),
    ] {
        if text.chars().count() >= limit {
            stderr.extend_from_slice(
                format!(
                    "\norca: Systems Manager returns only the first {limit} characters of a \
                     command's standard {name}; the rest may be cut\n"
                )
                .as_bytes(),
            );
        }
    }
    ExecOutcome {
        stdout: invocation.stdout.clone().into_bytes(),
        stderr,
        exit_code: invocation.response_code,
    }
}

/// The error a failed SSM call is for exec.
fn exec_error(error: SsmError, instance_id: &str) -> ProviderError {
    match error {
        SsmError::NotManaged(message) => ProviderError::permanent(
            "InstanceNotManaged",
            format!(
                "instance {instance_id} is not managed by Systems Manager ({message}): its AMI \
                 must run the SSM agent, and its instance profile must let it register (e.g. \
                 AmazonSSMManagedInstanceCore)"
            ),
        ),
        SsmError::NoInvocation(message) => ProviderError::transient(
            "InvocationDoesNotExist",
            format!(
                "Systems Manager did not show the command on instance {instance_id} within {} s: \
                 {message}",
                INVOCATION_VISIBILITY.as_secs()
            ),
        ),
        SsmError::Transient { code, message } => ProviderError::transient(code, message),
        SsmError::Failed { code, message } => ProviderError::permanent(code, message),
    }
}

/// Runs `request` on `instance_id` and waits for it to end, polling with backoff. Dropping the
/// future (the client went away) cancels the command in SSM.
///
/// # Errors
/// The command could not be built or sent, did not run, or did not end within
/// `execution_timeout` and [`DELIVERY_TIMEOUT`].
pub async fn run(
    api: Arc<dyn SsmApi>,
    instance_id: &str,
    request: &ExecRequest,
    execution_timeout: Duration,
) -> Result<ExecOutcome, ProviderError> {
    let line = command_line(request)
        .map_err(|refusal| ProviderError::permanent("InvalidCommand", refusal.to_string()))?;
    let command = RunCommand {
        instance_id: instance_id.to_owned(),
        commands: vec![line],
        execution_timeout,
        comment: comment(request),
    };
    let command_id = api
        .send_command(&command)
        .await
        .map_err(|error| exec_error(error, instance_id))?;
    let mut guard = CancelOnDrop {
        api: api.clone(),
        command_id: command_id.clone(),
        instance_id: instance_id.to_owned(),
        armed: true,
    };
    let started = tokio::time::Instant::now();
    let deadline = started + execution_timeout + DELIVERY_TIMEOUT;
    let mut interval = FIRST_POLL_INTERVAL;
    loop {
        tokio::time::sleep(interval).await;
        interval = (interval * 2).min(MAX_POLL_INTERVAL);
        let answer = match api.get_command_invocation(&command_id, instance_id).await {
            Ok(invocation) => poll(&invocation, execution_timeout),
            Err(SsmError::NoInvocation(_)) if started.elapsed() < INVOCATION_VISIBILITY => {
                Poll::Wait
            }
            Err(SsmError::Transient { .. }) => Poll::Wait,
            // Still running for all orca knows: the guard cancels it.
            Err(error) => return Err(exec_error(error, instance_id)),
        };
        match answer {
            Poll::Wait if tokio::time::Instant::now() < deadline => {}
            Poll::Wait => {
                return Err(ProviderError::permanent(
                    "CommandTimedOut",
                    format!(
                        "command {command_id} did not end within {} s; it was cancelled",
                        (execution_timeout + DELIVERY_TIMEOUT).as_secs()
                    ),
                ));
            }
            Poll::Ended(outcome) => {
                guard.armed = false;
                return Ok(outcome);
            }
            Poll::Failed(error) => {
                // Ended (or never ran) in SSM: nothing to cancel.
                guard.armed = false;
                return Err(error);
            }
        }
    }
}

/// SSM's comment for the command: what ran where, cut to its 100 characters.
fn comment(request: &ExecRequest) -> String {
    let text = format!(
        "orca exec in {}: {}",
        request.container,
        request.command.join(" ")
    );
    text.chars().take(100).collect()
}

/// Cancels a command still running when its caller stops waiting.
struct CancelOnDrop {
    api: Arc<dyn SsmApi>,
    command_id: String,
    instance_id: String,
    armed: bool,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let (api, command_id, instance_id) = (
            self.api.clone(),
            self.command_id.clone(),
            self.instance_id.clone(),
        );
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            if let Err(error) = api.cancel_command(&command_id, &instance_id).await {
                tracing::warn!(%command_id, %instance_id, %error, "cancelling an exec command failed");
            }
        });
    }
}
