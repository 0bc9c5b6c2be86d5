//! `kubectl exec` as a provider sees it: one command, run to its end in one of a pod's
//! containers on the pod's instance, its output and exit code returned whole.

/// The most standard input a command is given, in bytes: all of it is read before the command
/// runs (Run Command, AWS's way in, takes input only as part of the command).
pub const MAX_STDIN_BYTES: usize = 24 * 1024;

/// A command to run in one of a pod's containers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecRequest {
    /// The container's name in the pod.
    pub container: String,
    /// The command and its arguments, each passed as one argument.
    pub command: Vec<String>,
    /// What the command reads on its standard input, all of it (the client closed it);
    /// `None`: the command gets no standard input.
    pub stdin: Option<Vec<u8>>,
}

/// What a command did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ExecOutcome {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// Its exit code: 0 for success.
    pub exit_code: i32,
}
