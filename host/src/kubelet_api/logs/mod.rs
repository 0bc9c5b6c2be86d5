//! `GET /containerLogs/{namespace}/{pod}/{container}`: what `kubectl logs` reaches through the
//! apiserver. The query is the kubelet's (`tailLines`, `limitBytes`, `timestamps`,
//! `sinceSeconds`, `sinceTime`, `follow`, `previous`); answers and refusals read like its.

use std::sync::Arc;

use axum::Extension;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use jiff::{SignedDuration, Timestamp};
use serde::Deserialize;

#[cfg(test)]
mod answers;
mod polls;
mod reader;
mod render;

pub use polls::LogPolls;
use reader::{Follow, Reader, Source, can_still_write};
use render::Budget;

use super::state::{Admitted, ApiState};
use crate::process::served_nodes::FoundPod;
use crate::provider::{LogStart, PodKey};

/// Which part of the log a query selects, as the kubelet reads its query.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogOptions {
    pub container: Option<String>,
    /// Only the last N lines.
    pub tail_lines: Option<u64>,
    /// At most this many bytes: the first ones.
    pub limit_bytes: Option<u64>,
    /// Each line prefixed with its RFC 3339 time.
    pub timestamps: bool,
    /// Only lines of the last N seconds.
    pub since_seconds: Option<u64>,
}

/// The query as sent; numbers stay text so a bad one gets the kubelet's kind of message
/// rather than a generic deserialization error.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LogQuery {
    tail_lines: Option<String>,
    limit_bytes: Option<String>,
    timestamps: Option<String>,
    since_seconds: Option<String>,
    since_time: Option<String>,
    follow: Option<String>,
    previous: Option<String>,
}

/// A validated request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRequest {
    pub options: LogOptions,
    pub follow: bool,
}

/// Why a log query is refused: each is a 400 whose message names the parameter, as the
/// kubelet's do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LogQueryError {
    #[error(
        "previous terminated container {container:?} not found: a pod runs once, on its own instance"
    )]
    NoPreviousContainer { container: String },
    #[error("at most one of sinceTime or sinceSeconds may be specified")]
    BothSinceParameters,
    #[error("sinceTime {text:?} is not an RFC 3339 time: {reason}")]
    NotATime { text: String, reason: String },
    #[error("{parameter} must be true or false, not {text:?}")]
    NotAFlag {
        parameter: &'static str,
        text: String,
    },
    #[error("{parameter} must be a whole number of at least 0, not {text:?}")]
    NotANonNegativeNumber {
        parameter: &'static str,
        text: String,
    },
    #[error("{parameter} must be a whole number greater than 0, not {text:?}")]
    NotAPositiveNumber {
        parameter: &'static str,
        text: String,
    },
}

impl LogQuery {
    /// # Errors
    /// A refusal naming the bad parameter.
    pub fn validate(&self, container: &str, now: Timestamp) -> Result<LogRequest, LogQueryError> {
        if flag("previous", self.previous.as_deref())? {
            return Err(LogQueryError::NoPreviousContainer {
                container: container.to_owned(),
            });
        }
        let since_seconds = match (&self.since_seconds, &self.since_time) {
            (Some(_), Some(_)) => return Err(LogQueryError::BothSinceParameters),
            (Some(seconds), None) => Some(positive("sinceSeconds", seconds)?),
            (None, Some(time)) => {
                let since: Timestamp =
                    time.parse()
                        .map_err(|error: jiff::Error| LogQueryError::NotATime {
                            text: time.clone(),
                            reason: error.to_string(),
                        })?;
                let elapsed = (now - since).get_seconds().max(0);
                Some(u64::try_from(elapsed).unwrap_or(0))
            }
            (None, None) => None,
        };
        let tail_lines = match &self.tail_lines {
            Some(text) => Some(non_negative("tailLines", text)?),
            None => None,
        };
        let limit_bytes = match &self.limit_bytes {
            Some(text) => Some(positive("limitBytes", text)?),
            None => None,
        };
        Ok(LogRequest {
            options: LogOptions {
                container: Some(container.to_owned()),
                tail_lines,
                limit_bytes,
                timestamps: flag("timestamps", self.timestamps.as_deref())?,
                since_seconds,
            },
            follow: flag("follow", self.follow.as_deref())?,
        })
    }
}

fn flag(parameter: &'static str, value: Option<&str>) -> Result<bool, LogQueryError> {
    match value {
        None | Some("" | "false" | "0") => Ok(false),
        Some("true" | "1") => Ok(true),
        Some(other) => Err(LogQueryError::NotAFlag {
            parameter,
            text: other.to_owned(),
        }),
    }
}

fn non_negative(parameter: &'static str, text: &str) -> Result<u64, LogQueryError> {
    text.parse::<u64>()
        .map_err(|_| LogQueryError::NotANonNegativeNumber {
            parameter,
            text: text.to_owned(),
        })
}

fn positive(parameter: &'static str, text: &str) -> Result<u64, LogQueryError> {
    match text.parse::<u64>() {
        Ok(value) if value > 0 => Ok(value),
        _ => Err(LogQueryError::NotAPositiveNumber {
            parameter,
            text: text.to_owned(),
        }),
    }
}

/// Serves the pod the request was authorized for, never one looked up again: the pod
/// `admit` found for the decoded path, and only if it is the one the route
/// decoded too.
pub async fn container_logs(
    State(state): State<Arc<ApiState>>,
    Path((namespace, name, container)): Path<(String, String, String)>,
    Query(query): Query<LogQuery>,
    admitted: Option<Extension<Admitted>>,
) -> Response {
    let admitted_pod =
        admitted.and_then(|Extension(admitted)| admitted.pod_named(&namespace, &name));
    let Some(FoundPod { pod, provider, .. }) = admitted_pod else {
        return refuse(StatusCode::NOT_FOUND, state.not_served(&namespace, &name));
    };
    let in_spec = pod
        .spec
        .as_ref()
        .is_some_and(|spec| spec.containers.iter().any(|c| c.name == container));
    if !in_spec {
        return refuse(
            StatusCode::BAD_REQUEST,
            format!("container {container:?} is not valid for pod {name:?}"),
        );
    }
    let request = match query.validate(&container, Timestamp::now()) {
        Ok(request) => request,
        Err(error) => return refuse(StatusCode::BAD_REQUEST, error.to_string()),
    };
    let Some(key) = PodKey::of(&pod) else {
        return refuse(
            StatusCode::NOT_FOUND,
            format!("pod {namespace}/{name} has no UID yet"),
        );
    };
    let options = &request.options;
    let since = options.since_seconds.map(|seconds| {
        Timestamp::now() - SignedDuration::from_secs(i64::try_from(seconds).unwrap_or(i64::MAX))
    });
    let start = match options.tail_lines {
        Some(lines) => LogStart::Tail { lines, since },
        None => LogStart::Head { since },
    };
    let first = match provider.log_page(&key, &container, &start).await {
        Ok(page) => page,
        Err(error) if error.code == "InstanceNotFound" => {
            return refuse(
                StatusCode::BAD_REQUEST,
                format!(
                    "container {container:?} in pod {name:?} is waiting to start: its instance is not launched yet"
                ),
            );
        }
        Err(error) => {
            return refuse(
                StatusCode::BAD_REQUEST,
                format!("reading the logs of pod {key}: {error}"),
            );
        }
    };
    let source = Source {
        provider,
        pod: key,
        container,
        timestamps: options.timestamps,
        budget: Budget::new(options.limit_bytes),
    };
    let follow = request.follow.then(|| {
        let (polls, interval) = (state.log_polls.clone(), state.follow_poll_interval);
        let can_write = move || {
            state
                .pod(&namespace, &name)
                .is_some_and(|found| can_still_write(&found.pod))
        };
        Follow::new(polls, interval, Box::new(can_write))
    });
    text(
        StatusCode::OK,
        Body::from_stream(Reader::new(source, first, follow).stream()),
    )
}

fn text(status: StatusCode, body: Body) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        body,
    )
        .into_response()
}

pub(super) fn refuse(status: StatusCode, message: String) -> Response {
    text(status, Body::from(message))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(pairs: &[(&str, &str)]) -> LogQuery {
        let text: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
        serde_urlencoded_like(&text.join("&"))
    }

    fn serde_urlencoded_like(text: &str) -> LogQuery {
        let uri: axum::http::Uri = format!("/x?{text}").parse().unwrap();
        Query::<LogQuery>::try_from_uri(&uri).unwrap().0
    }

    #[test]
    fn the_kubelet_query_is_read() {
        let now = Timestamp::from_second(1_000).unwrap();
        let request = query(&[
            ("tailLines", "5"),
            ("limitBytes", "100"),
            ("timestamps", "true"),
            ("sinceSeconds", "30"),
            ("follow", "true"),
        ])
        .validate("main", now)
        .unwrap();
        assert_eq!(
            request,
            LogRequest {
                options: LogOptions {
                    container: Some("main".to_owned()),
                    tail_lines: Some(5),
                    limit_bytes: Some(100),
                    timestamps: true,
                    since_seconds: Some(30),
                },
                follow: true,
            }
        );
        let since = query(&[("sinceTime", "1970-01-01T00:16:00Z")])
            .validate("main", now)
            .unwrap();
        assert_eq!(since.options.since_seconds, Some(40));
        assert_eq!(
            query(&[("tailLines", "0")])
                .validate("main", now)
                .unwrap()
                .options
                .tail_lines,
            Some(0)
        );
    }

    #[test]
    fn bad_parameters_are_named() {
        let now = Timestamp::from_second(1_000).unwrap();
        let text = |text: &str| text.to_owned();
        for (pairs, expected, named) in [
            (
                vec![("tailLines", "-1")],
                LogQueryError::NotANonNegativeNumber {
                    parameter: "tailLines",
                    text: text("-1"),
                },
                "tailLines",
            ),
            (
                vec![("limitBytes", "0")],
                LogQueryError::NotAPositiveNumber {
                    parameter: "limitBytes",
                    text: text("0"),
                },
                "limitBytes",
            ),
            (
                vec![("sinceSeconds", "abc")],
                LogQueryError::NotAPositiveNumber {
                    parameter: "sinceSeconds",
                    text: text("abc"),
                },
                "sinceSeconds",
            ),
            (
                vec![("sinceSeconds", "5"), ("sinceTime", "1970-01-01T00:00:00Z")],
                LogQueryError::BothSinceParameters,
                "at most one",
            ),
            (
                vec![("follow", "maybe")],
                LogQueryError::NotAFlag {
                    parameter: "follow",
                    text: text("maybe"),
                },
                "follow",
            ),
            (
                vec![("previous", "true")],
                LogQueryError::NoPreviousContainer {
                    container: text("main"),
                },
                "previous terminated container",
            ),
        ] {
            let error = query(&pairs).validate("main", now).unwrap_err();
            assert_eq!(error, expected, "{pairs:?}");
            assert!(error.to_string().contains(named), "{pairs:?}: {error}");
        }
        let error = query(&[("sinceTime", "yesterday")])
            .validate("main", now)
            .unwrap_err();
        assert!(
            matches!(&error, LogQueryError::NotATime { text, .. } if text == "yesterday"),
            "{error:?}"
        );
        assert!(
            error.to_string().starts_with("sinceTime \"yesterday\""),
            "{error}"
        );
    }
}
