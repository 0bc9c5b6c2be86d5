//! One SQS message body, the EventBridge event a rule delivered, read into the notices it
//! carries for EC2 instances.
//!
//! Four events are notices (the queue's rules route exactly these; see
//! `docs/src/operations/interruption-queue.md`): a spot interruption warning, a rebalance recommendation, an AWS Health
//! scheduled change for EC2, and an instance state change. Everything else is a
//! [`NoticeError`]: an event orca does not know is reported, never guessed at. Every event says
//! which account and region it comes from ([`Origin`]); whether that is this orca's is the
//! consumer's to check.

use jiff::{SignedDuration, Timestamp};
use serde::Deserialize;

use crate::config::is_resource_id;

/// What EC2 or AWS Health announced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NoticeKind {
    /// EC2 reclaims a spot instance in two minutes (at once when it hibernates).
    SpotInterruption,
    /// A spot instance is at elevated risk of interruption: move off it early if possible.
    RebalanceRecommendation,
    /// AWS Health scheduled maintenance or retirement of an instance.
    ScheduledChange,
    /// The instance entered a new state (`pending`, `running`, `stopping`, …).
    StateChange,
}

impl NoticeKind {
    pub const ALL: [NoticeKind; 4] = [
        NoticeKind::SpotInterruption,
        NoticeKind::RebalanceRecommendation,
        NoticeKind::ScheduledChange,
        NoticeKind::StateChange,
    ];

    /// The kind as a metric label value and in log lines.
    pub fn as_str(self) -> &'static str {
        match self {
            NoticeKind::SpotInterruption => "spot-interruption",
            NoticeKind::RebalanceRecommendation => "rebalance-recommendation",
            NoticeKind::ScheduledChange => "scheduled-change",
            NoticeKind::StateChange => "state-change",
        }
    }
}

impl std::fmt::Display for NoticeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One instance's share of an event. An AWS Health event may name several instances and so
/// becomes several notices; the EC2 events name one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub kind: NoticeKind,
    pub instance_id: String,
    /// When the event was emitted (the event's `time`).
    pub time: Timestamp,
    /// When the announced change happens: for a spot interruption the event's time plus two
    /// minutes (the event itself carries no deadline; a hibernating instance has no warning
    /// time, so its deadline is the event's time); for a scheduled change the maintenance's
    /// `startTime` when the event has one.
    pub deadline: Option<Timestamp>,
    /// State-change only: the state the instance entered (`detail.state`).
    pub state: Option<String>,
    /// Spot interruption only: `terminate`, `stop` or `hibernate` (`detail.instance-action`).
    pub action: Option<String>,
    /// One line for a Kubernetes Event or a log line.
    pub description: String,
}

/// Where an event comes from: the account and region EventBridge names in every event (its
/// `account` and `region`), which for EC2's events are the instance's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// The 12-digit AWS account id.
    pub account: String,
    pub region: String,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "account {}, region {}", self.account, self.region)
    }
}

/// One message body read: where it comes from, and its notices (never none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed {
    pub origin: Origin,
    pub notices: Vec<Notice>,
}

/// Why a message body is not a notice orca acts on.
#[derive(Debug, thiserror::Error)]
pub enum NoticeError {
    #[error(
        "not an EventBridge event (JSON with source, detail-type, account, region, time and \
         detail)"
    )]
    NotAnEvent(#[source] serde_json::Error),
    #[error(
        "unexpected event: source {event_source:?}, detail-type {detail_type:?}; expected one of \
         aws.ec2 \"EC2 Spot Instance Interruption Warning\", aws.ec2 \"EC2 Instance Rebalance \
         Recommendation\", aws.health \"AWS Health Event\", aws.ec2 \"EC2 Instance State-change \
         Notification\""
    )]
    UnknownEvent {
        event_source: String,
        detail_type: String,
    },
    #[error(
        "AWS Health event for service {service:?}, category {category:?}; only service \"EC2\", \
         category \"scheduledChange\" is a notice"
    )]
    NotEc2ScheduledChange { service: String, category: String },
    #[error("{detail_type:?} event with a malformed detail")]
    MalformedDetail {
        detail_type: &'static str,
        #[source]
        source: serde_json::Error,
    },
    #[error(
        "invalid {field} {value:?}; expected an RFC 3339 time (2024-03-05T14:20:00Z) or an RFC \
         1123 one (Tue, 05 Mar 2024 14:20:00 GMT)"
    )]
    InvalidTime {
        field: &'static str,
        value: String,
        #[source]
        source: jiff::Error,
    },
    #[error("invalid {field} {value:?}; expected an EC2 instance id such as i-0123456789abcdef0")]
    InvalidInstanceId { field: &'static str, value: String },
    #[error(
        "AWS Health event {event_type:?} names no EC2 instance in resources or \
         detail.affectedEntities"
    )]
    NoInstance { event_type: String },
}

/// The events that are notices: EventBridge `source` and `detail-type`, as EC2 documents them
/// (User Guide: "Spot Instance interruption notices", "EC2 instance rebalance recommendations",
/// "Amazon EventBridge events for Amazon EC2 instance state changes") and AWS Health
/// ("Monitoring AWS Health events with Amazon EventBridge").
const EVENTS: [(&str, &str, NoticeKind); 4] = [
    (
        "aws.ec2",
        "EC2 Spot Instance Interruption Warning",
        NoticeKind::SpotInterruption,
    ),
    (
        "aws.ec2",
        "EC2 Instance Rebalance Recommendation",
        NoticeKind::RebalanceRecommendation,
    ),
    (
        "aws.health",
        "AWS Health Event",
        NoticeKind::ScheduledChange,
    ),
    (
        "aws.ec2",
        "EC2 Instance State-change Notification",
        NoticeKind::StateChange,
    ),
];

/// EC2 sends the interruption warning this long before it acts.
const SPOT_WARNING: SignedDuration = SignedDuration::from_secs(120);

/// The envelope every EventBridge event has; `detail` is read per kind.
#[derive(Deserialize)]
struct Event {
    source: String,
    #[serde(rename = "detail-type")]
    detail_type: String,
    account: String,
    region: String,
    time: String,
    #[serde(default)]
    resources: Vec<String>,
    detail: serde_json::Value,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct SpotDetail {
    instance_id: String,
    instance_action: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct RebalanceDetail {
    instance_id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct StateChangeDetail {
    instance_id: String,
    state: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct HealthDetail {
    service: String,
    event_type_category: String,
    #[serde(default)]
    event_type_code: String,
    start_time: Option<String>,
    #[serde(default)]
    affected_entities: Vec<AffectedEntity>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AffectedEntity {
    entity_value: String,
}

/// Reads one message body into where it comes from and its notices, one per instance named.
///
/// # Errors
/// [`NoticeError`] for anything but the four events above with well-formed instance ids and
/// times.
pub fn parse(body: &str) -> Result<Parsed, NoticeError> {
    let mut event: Event = serde_json::from_str(body).map_err(NoticeError::NotAnEvent)?;
    let origin = Origin {
        account: std::mem::take(&mut event.account),
        region: std::mem::take(&mut event.region),
    };
    Ok(Parsed {
        origin,
        notices: notices(event)?,
    })
}

/// The notices of one event.
fn notices(event: Event) -> Result<Vec<Notice>, NoticeError> {
    let Some(&(_, detail_type, kind)) = EVENTS.iter().find(|(source, detail_type, _)| {
        *source == event.source && *detail_type == event.detail_type
    }) else {
        return Err(NoticeError::UnknownEvent {
            event_source: event.source,
            detail_type: event.detail_type,
        });
    };
    let time = parse_time("time", &event.time)?;
    let detail = |source| NoticeError::MalformedDetail {
        detail_type,
        source,
    };
    match kind {
        NoticeKind::SpotInterruption => {
            let spot: SpotDetail = serde_json::from_value(event.detail).map_err(detail)?;
            Ok(vec![spot_interruption(time, &event.time, spot)?])
        }
        NoticeKind::RebalanceRecommendation => {
            let rebalance: RebalanceDetail =
                serde_json::from_value(event.detail).map_err(detail)?;
            Ok(vec![rebalance_recommendation(time, rebalance)?])
        }
        NoticeKind::StateChange => {
            let change: StateChangeDetail = serde_json::from_value(event.detail).map_err(detail)?;
            Ok(vec![state_change(time, change)?])
        }
        NoticeKind::ScheduledChange => {
            let health: HealthDetail = serde_json::from_value(event.detail).map_err(detail)?;
            scheduled_changes(time, &event.resources, health)
        }
    }
}

/// The notice of a spot interruption warning: its deadline two minutes after the event's
/// `time` (`event_time` as sent), or the event's time for a hibernation, which starts at once.
fn spot_interruption(
    time: Timestamp,
    event_time: &str,
    spot: SpotDetail,
) -> Result<Notice, NoticeError> {
    let instance_id = instance_id("detail.instance-id", spot.instance_id)?;
    let hibernates = spot.instance_action.as_deref() == Some("hibernate");
    let deadline = if hibernates {
        time
    } else {
        time.checked_add(SPOT_WARNING)
            .map_err(|source| NoticeError::InvalidTime {
                field: "time",
                value: event_time.to_owned(),
                source,
            })?
    };
    let description = match &spot.instance_action {
        Some(action) if hibernates => {
            format!("EC2 interrupts spot instance {instance_id} now ({action})")
        }
        Some(action) => format!("EC2 will {action} spot instance {instance_id} at {deadline}"),
        None => format!("EC2 will interrupt spot instance {instance_id} at {deadline}"),
    };
    Ok(Notice {
        kind: NoticeKind::SpotInterruption,
        instance_id,
        time,
        deadline: Some(deadline),
        state: None,
        action: spot.instance_action,
        description,
    })
}

/// The notice of a rebalance recommendation: a spot instance at elevated risk.
fn rebalance_recommendation(
    time: Timestamp,
    rebalance: RebalanceDetail,
) -> Result<Notice, NoticeError> {
    let instance_id = instance_id("detail.instance-id", rebalance.instance_id)?;
    let description = format!(
        "EC2 recommends rebalancing: spot instance {instance_id} is at elevated risk \
         of interruption"
    );
    Ok(Notice {
        kind: NoticeKind::RebalanceRecommendation,
        instance_id,
        time,
        deadline: None,
        state: None,
        action: None,
        description,
    })
}

/// The notice of an instance's state change, with the state it is now in.
fn state_change(time: Timestamp, change: StateChangeDetail) -> Result<Notice, NoticeError> {
    let instance_id = instance_id("detail.instance-id", change.instance_id)?;
    let description = format!("instance {instance_id} is now {}", change.state);
    Ok(Notice {
        kind: NoticeKind::StateChange,
        instance_id,
        time,
        deadline: None,
        state: Some(change.state),
        action: None,
        description,
    })
}

/// One notice per instance an AWS Health EC2 scheduled change names.
fn scheduled_changes(
    time: Timestamp,
    resources: &[String],
    health: HealthDetail,
) -> Result<Vec<Notice>, NoticeError> {
    if health.service != "EC2" || health.event_type_category != "scheduledChange" {
        return Err(NoticeError::NotEc2ScheduledChange {
            service: health.service,
            category: health.event_type_category,
        });
    }
    let deadline = health
        .start_time
        .as_deref()
        .map(|start| parse_time("detail.startTime", start))
        .transpose()?;
    // Health names instances in `resources`, in `affectedEntities`, or both; other entities
    // (volumes, hosts) are not orca's to act on.
    let mut ids: Vec<&str> = Vec::new();
    let named = resources.iter().map(String::as_str).chain(
        health
            .affected_entities
            .iter()
            .map(|e| e.entity_value.as_str()),
    );
    for name in named {
        let id = name.rsplit_once(":instance/").map_or(name, |(_, id)| id);
        if is_resource_id(id, "i-") && !ids.contains(&id) {
            ids.push(id);
        }
    }
    if ids.is_empty() {
        return Err(NoticeError::NoInstance {
            event_type: health.event_type_code,
        });
    }
    let what = if health.event_type_code.is_empty() {
        "scheduled change"
    } else {
        health.event_type_code.as_str()
    };
    Ok(ids
        .into_iter()
        .map(|id| Notice {
            kind: NoticeKind::ScheduledChange,
            instance_id: id.to_owned(),
            time,
            deadline,
            state: None,
            action: None,
            description: match deadline {
                Some(start) => format!("AWS Health: {what} for instance {id}, starting {start}"),
                None => format!("AWS Health: {what} for instance {id}"),
            },
        })
        .collect())
}

/// EventBridge's own times are RFC 3339; AWS Health writes its `startTime` in RFC 1123
/// (`Fri, 27 Jan 2023 06:02:51 GMT`) in its examples and ISO 8601 in others.
fn parse_time(field: &'static str, value: &str) -> Result<Timestamp, NoticeError> {
    static RFC_2822: jiff::fmt::rfc2822::DateTimeParser = jiff::fmt::rfc2822::DateTimeParser::new();
    let parsed = if value.starts_with(|c: char| c.is_ascii_alphabetic()) {
        RFC_2822.parse_timestamp(value)
    } else {
        value.parse::<Timestamp>()
    };
    parsed.map_err(|source| NoticeError::InvalidTime {
        field,
        value: value.to_owned(),
        source,
    })
}

fn instance_id(field: &'static str, value: String) -> Result<String, NoticeError> {
    if is_resource_id(&value, "i-") {
        Ok(value)
    } else {
        Err(NoticeError::InvalidInstanceId { field, value })
    }
}

#[cfg(test)]
mod tests;
