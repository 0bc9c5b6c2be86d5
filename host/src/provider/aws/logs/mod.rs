//! Containers' output in CloudWatch Logs: the API orca needs of it (create the group, read a
//! stream's events a page at a time), the SDK client behind it, and reading pages for
//! `kubectl logs` ([`read`]). The instances write (Docker's `awslogs` driver, see
//! [`super::workload::LogShipping`]); orca only creates the group and reads.

pub mod group;
pub mod read;
pub mod sdk;

#[cfg(test)]
pub(crate) mod fake;

use async_trait::async_trait;
use jiff::Timestamp;

/// The CloudWatch Logs calls orca makes.
#[async_trait]
pub trait LogsApi: Send + Sync + 'static {
    /// `CreateLogGroup`.
    async fn create_log_group(&self, group: &str) -> Result<GroupCreation, LogsError>;
    /// `PutRetentionPolicy`.
    async fn put_retention_policy(&self, group: &str, days: u32) -> Result<(), LogsError>;
    /// `GetLogEvents`: one page of a stream.
    async fn get_log_events(&self, request: &EventsRequest) -> Result<EventsPage, LogsError>;
}

/// What `CreateLogGroup` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupCreation {
    Created,
    /// `ResourceAlreadyExistsException`: someone made it before (an earlier orca, Terraform).
    Existed,
}

/// One `GetLogEvents` call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventsRequest {
    pub group: String,
    pub stream: String,
    pub from: PageStart,
    /// Only events at or after this time.
    pub start_time: Option<Timestamp>,
    /// At most this many events (CloudWatch's own cap is 10,000 or 1 MB).
    pub limit: Option<u32>,
}

/// Which page of a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PageStart {
    /// The oldest events (`startFromHead`).
    Head,
    /// The newest events.
    Tail,
    /// After an earlier page: its `nextForwardToken`.
    Forward(String),
    /// Before an earlier page: its `nextBackwardToken`.
    Backward(String),
}

/// One event: one line a container wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub at: Timestamp,
    pub message: String,
}

/// A page of events, oldest first, and the tokens around it. At the end of a stream
/// CloudWatch hands back the forward token it was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventsPage {
    pub events: Vec<Event>,
    pub forward: String,
    pub backward: String,
}

/// Why a CloudWatch Logs call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LogsError {
    /// `ResourceNotFoundException`: no such group or stream (a stream appears when its
    /// container first runs).
    #[error("ResourceNotFoundException: {0}")]
    NotFound(String),
    /// `ThrottlingException` and kin: ask again later.
    #[error("{code}: {message}")]
    Throttled { code: String, message: String },
    /// `AccessDeniedException`: the role lacks the permission named.
    #[error("AccessDeniedException: {0}")]
    AccessDenied(String),
    #[error("{code}: {message}")]
    Failed { code: String, message: String },
}

impl LogsError {
    pub fn code(&self) -> &str {
        match self {
            LogsError::NotFound(_) => "ResourceNotFoundException",
            LogsError::AccessDenied(_) => "AccessDeniedException",
            LogsError::Throttled { code, .. } | LogsError::Failed { code, .. } => code,
        }
    }
}

/// The error for `code` and `message` as CloudWatch Logs answers them.
pub fn classify(code: &str, message: &str) -> LogsError {
    match code {
        "ResourceNotFoundException" => LogsError::NotFound(message.to_owned()),
        "AccessDeniedException" | "UnrecognizedClientException" => {
            LogsError::AccessDenied(format!("{code}: {message}"))
        }
        "ThrottlingException"
        | "Throttling"
        | "LimitExceededException"
        | "ServiceUnavailableException"
        | "RequestLimitExceeded" => LogsError::Throttled {
            code: code.to_owned(),
            message: message.to_owned(),
        },
        _ => LogsError::Failed {
            code: code.to_owned(),
            message: message.to_owned(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_sorted_into_what_a_reader_does_about_them() {
        for (code, expected) in [
            ("ResourceNotFoundException", "NotFound"),
            ("AccessDeniedException", "AccessDenied"),
            ("ThrottlingException", "Throttled"),
            ("ServiceUnavailableException", "Throttled"),
            ("LimitExceededException", "Throttled"),
            ("InvalidParameterException", "Failed"),
        ] {
            let error = classify(code, "m");
            let kind = format!("{error:?}");
            assert!(kind.starts_with(expected), "{code}: {kind}");
            assert_eq!(error.code(), code, "{code}");
        }
    }
}
