//! Instance states and state reasons, with EC2's names.

use std::fmt;

/// An instance's lifecycle state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum State {
    Pending,
    Running,
    ShuttingDown,
    Terminated,
    Stopping,
    Stopped,
}

impl State {
    pub const ALL: [State; 6] = [
        State::Pending,
        State::Running,
        State::ShuttingDown,
        State::Terminated,
        State::Stopping,
        State::Stopped,
    ];

    /// EC2's name, as in `instance-state-name`.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Pending => "pending",
            State::Running => "running",
            State::ShuttingDown => "shutting-down",
            State::Terminated => "terminated",
            State::Stopping => "stopping",
            State::Stopped => "stopped",
        }
    }

    /// EC2's numeric state code (the low byte of `InstanceState.Code`).
    pub fn code(self) -> u16 {
        match self {
            State::Pending => 0,
            State::Running => 16,
            State::ShuttingDown => 32,
            State::Terminated => 48,
            State::Stopping => 64,
            State::Stopped => 80,
        }
    }

    /// The state EC2 calls `name`, if any.
    pub fn from_name(name: &str) -> Option<State> {
        State::ALL.into_iter().find(|state| state.as_str() == name)
    }

    /// `shutting-down` or `terminated`: the instance is on its way out for good.
    pub fn is_gone_or_going(self) -> bool {
        matches!(self, State::ShuttingDown | State::Terminated)
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why an instance changed state, as in EC2's `StateReason`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct StateReason {
    pub code: String,
    pub message: String,
}

impl StateReason {
    fn new(code: &str, message: &str) -> StateReason {
        StateReason {
            code: code.to_owned(),
            message: format!("{code}: {message}"),
        }
    }

    /// A client (TerminateInstances, StopInstances) shut the instance down.
    pub fn user_initiated_shutdown() -> StateReason {
        StateReason::new("Client.UserInitiatedShutdown", "User initiated shutdown")
    }

    /// The instance shut itself down (the OS halted).
    pub fn instance_initiated_shutdown() -> StateReason {
        StateReason::new(
            "Client.InstanceInitiatedShutdown",
            "Instance initiated shutdown",
        )
    }

    /// EC2 reclaimed the spot instance.
    pub fn spot_instance_termination() -> StateReason {
        StateReason::new(
            "Server.SpotInstanceTermination",
            "Spot instance termination",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_round_trips_through_its_ec2_name() {
        for state in State::ALL {
            assert_eq!(State::from_name(state.as_str()), Some(state));
        }
        assert_eq!(State::ShuttingDown.as_str(), "shutting-down");
        assert_eq!(State::from_name("Running"), None);
    }

    #[test]
    fn a_state_reason_message_repeats_its_code_as_ec2_does() {
        let reason = StateReason::user_initiated_shutdown();
        assert_eq!(reason.code, "Client.UserInitiatedShutdown");
        assert_eq!(
            reason.message,
            "Client.UserInitiatedShutdown: User initiated shutdown"
        );
    }
}
