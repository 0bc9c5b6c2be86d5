//! The node's conditions: Ready follows the provider's `ping`; the pressure conditions are
//! always False, since pods do not share this node's resources.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::NodeCondition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// The provider's health as last observed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderHealth {
    Ready,
    NotReady { message: String },
}

/// Remembers when Ready last changed, so `lastTransitionTime` only moves on a real transition.
#[derive(Debug, Clone)]
pub struct ReadyTracker {
    health: ProviderHealth,
    since: Timestamp,
    /// The pressure conditions never change; their transition time is when orca started.
    started: Timestamp,
}

impl ReadyTracker {
    pub fn new(health: ProviderHealth, since: Timestamp) -> ReadyTracker {
        ReadyTracker {
            health,
            since,
            started: since,
        }
    }

    /// Records a new observation; true when Ready's status changed.
    pub fn observe(&mut self, health: ProviderHealth, now: Timestamp) -> bool {
        let changed = std::mem::discriminant(&health) != std::mem::discriminant(&self.health);
        if changed {
            self.since = now;
        }
        let message_changed = health != self.health;
        self.health = health;
        changed || message_changed
    }

    pub fn health(&self) -> &ProviderHealth {
        &self.health
    }

    /// The full condition list for a heartbeat at `now`.
    pub fn conditions(&self, now: Timestamp) -> Vec<NodeCondition> {
        let (status, reason, message) = match &self.health {
            ProviderHealth::Ready => (
                "True",
                "OrcaProviderReady",
                "orca provider is ready".to_owned(),
            ),
            ProviderHealth::NotReady { message } => (
                "False",
                "OrcaProviderNotReady",
                format!("orca provider does not answer: {message}"),
            ),
        };
        let mut conditions = vec![condition(
            "Ready", status, reason, &message, now, self.since,
        )];
        for (type_, reason, message) in [
            (
                "MemoryPressure",
                "OrcaHasSufficientMemory",
                "each pod runs on its own instance",
            ),
            (
                "DiskPressure",
                "OrcaHasNoDiskPressure",
                "each pod runs on its own instance",
            ),
            (
                "PIDPressure",
                "OrcaHasSufficientPID",
                "each pod runs on its own instance",
            ),
            (
                "NetworkUnavailable",
                "OrcaRouteCreated",
                "instances use the VPC network",
            ),
        ] {
            conditions.push(condition(
                type_,
                "False",
                reason,
                message,
                now,
                self.started,
            ));
        }
        conditions
    }
}

fn condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    heartbeat: Timestamp,
    since: Timestamp,
) -> NodeCondition {
    NodeCondition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason: Some(reason.to_owned()),
        message: Some(message.to_owned()),
        last_heartbeat_time: Some(Time(heartbeat)),
        last_transition_time: Some(Time(since)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).unwrap()
    }

    #[test]
    fn transition_time_moves_only_when_ready_flips() {
        let mut tracker = ReadyTracker::new(ProviderHealth::Ready, at(10));
        assert!(!tracker.observe(ProviderHealth::Ready, at(20)));
        let ready = &tracker.conditions(at(20))[0];
        assert_eq!(ready.last_transition_time, Some(Time(at(10))));
        assert_eq!(ready.last_heartbeat_time, Some(Time(at(20))));

        assert!(tracker.observe(
            ProviderHealth::NotReady {
                message: "down".into()
            },
            at(30)
        ));
        let not_ready = &tracker.conditions(at(30))[0];
        assert_eq!(not_ready.status, "False");
        assert_eq!(not_ready.reason.as_deref(), Some("OrcaProviderNotReady"));
        assert!(not_ready.message.as_deref().unwrap().contains("down"));
        assert_eq!(not_ready.last_transition_time, Some(Time(at(30))));
    }
}
