//! An in-memory CloudWatch Logs that pages as the service documents `GetLogEvents`: at most
//! 10,000 events a page (fewer with [`FakeLogs::with_page_cap`]), a forward token that comes
//! back unchanged at the end of a stream, a backward token that pages toward the oldest, and
//! `ResourceNotFoundException` for a group or stream that does not exist.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

use async_trait::async_trait;
use jiff::Timestamp;

use super::{Event, EventsPage, EventsRequest, GroupCreation, LogsApi, LogsError, PageStart};

/// CloudWatch's cap on events per page.
const SERVICE_PAGE_CAP: usize = 10_000;

#[derive(Default)]
struct Group {
    retention: Option<u32>,
    streams: BTreeMap<String, Vec<Event>>,
}

/// One call, as the fake saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    CreateLogGroup { group: String },
    PutRetentionPolicy { group: String, days: u32 },
    GetLogEvents(EventsRequest),
}

#[derive(Default)]
struct State {
    groups: BTreeMap<String, Group>,
    calls: Vec<Call>,
    refusals: VecDeque<LogsError>,
}

#[derive(Default)]
pub struct FakeLogs {
    state: Mutex<State>,
    page_cap: Option<usize>,
}

impl FakeLogs {
    /// Pages of at most `cap` events (CloudWatch's cap is 10,000 or 1 MB).
    pub fn with_page_cap(cap: usize) -> FakeLogs {
        FakeLogs {
            page_cap: Some(cap),
            ..FakeLogs::default()
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// What an instance's log driver does: events appended to a stream (created with the
    /// group if needed).
    pub fn write(&self, group: &str, stream: &str, lines: &[(Timestamp, &str)]) {
        let mut state = self.state();
        let events = state
            .groups
            .entry(group.to_owned())
            .or_default()
            .streams
            .entry(stream.to_owned())
            .or_default();
        events.extend(lines.iter().map(|(at, message)| Event {
            at: *at,
            message: (*message).to_owned(),
        }));
    }

    /// `line I` for each I of `range`, written at [`numbered_at`]`(I)`: the log the readers'
    /// tests page through.
    pub fn write_numbered(&self, group: &str, stream: &str, range: std::ops::Range<i64>) {
        let texts: Vec<String> = range.clone().map(|i| format!("line {i}")).collect();
        let lines: Vec<(Timestamp, &str)> = range
            .zip(&texts)
            .map(|(i, text)| (numbered_at(i), text.as_str()))
            .collect();
        self.write(group, stream, &lines);
    }

    /// The next call fails with `error`.
    pub fn refuse_next(&self, error: LogsError) {
        self.state().refusals.push_back(error);
    }

    /// The next call is throttled.
    pub fn throttle_next(&self) {
        self.refuse_next(LogsError::Throttled {
            code: "ThrottlingException".to_owned(),
            message: "Rate exceeded".to_owned(),
        });
    }

    pub fn calls(&self) -> Vec<Call> {
        self.state().calls.clone()
    }

    pub fn reads(&self) -> usize {
        self.calls()
            .iter()
            .filter(|call| matches!(call, Call::GetLogEvents(_)))
            .count()
    }

    pub fn retention(&self, group: &str) -> Option<u32> {
        self.state().groups.get(group)?.retention
    }

    fn call(&self, call: Call) -> Result<std::sync::MutexGuard<'_, State>, LogsError> {
        let mut state = self.state();
        state.calls.push(call);
        match state.refusals.pop_front() {
            Some(error) => Err(error),
            None => Ok(state),
        }
    }
}

/// When [`FakeLogs::write_numbered`] writes line `i`: second 1,800,000,000 + `i`.
pub fn numbered_at(i: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + i).unwrap_or(Timestamp::UNIX_EPOCH)
}

fn invalid(message: String) -> LogsError {
    LogsError::Failed {
        code: "InvalidParameterException".to_owned(),
        message,
    }
}

/// `f/N` or `b/N` → N.
fn position(token: &str, prefix: &str) -> Result<usize, LogsError> {
    token
        .strip_prefix(prefix)
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| invalid(format!("The specified nextToken is invalid: {token}")))
}

#[async_trait]
impl LogsApi for FakeLogs {
    async fn create_log_group(&self, group: &str) -> Result<GroupCreation, LogsError> {
        let mut state = self.call(Call::CreateLogGroup {
            group: group.to_owned(),
        })?;
        if state.groups.contains_key(group) {
            return Ok(GroupCreation::Existed);
        }
        state.groups.insert(group.to_owned(), Group::default());
        Ok(GroupCreation::Created)
    }

    async fn put_retention_policy(&self, group: &str, days: u32) -> Result<(), LogsError> {
        let mut state = self.call(Call::PutRetentionPolicy {
            group: group.to_owned(),
            days,
        })?;
        let found = state.groups.get_mut(group).ok_or_else(|| {
            LogsError::NotFound("The specified log group does not exist.".to_owned())
        })?;
        found.retention = Some(days);
        Ok(())
    }

    async fn get_log_events(&self, request: &EventsRequest) -> Result<EventsPage, LogsError> {
        let state = self.call(Call::GetLogEvents(request.clone()))?;
        let events = state
            .groups
            .get(&request.group)
            .and_then(|group| group.streams.get(&request.stream))
            .ok_or_else(|| {
                LogsError::NotFound("The specified log stream does not exist.".to_owned())
            })?;
        let cap = request
            .limit
            .map_or(SERVICE_PAGE_CAP, |n| {
                usize::try_from(n).unwrap_or(SERVICE_PAGE_CAP)
            })
            .min(SERVICE_PAGE_CAP)
            .min(self.page_cap.unwrap_or(SERVICE_PAGE_CAP));
        // Positions of the events the time filter lets through.
        let wanted: Vec<usize> = (0..events.len())
            .filter(|&i| request.start_time.is_none_or(|since| events[i].at >= since))
            .collect();
        let (selected, forward, backward) = match &request.from {
            PageStart::Head => {
                let page: Vec<usize> = wanted.iter().copied().take(cap).collect();
                let end = page.last().map_or(events.len(), |&i| i + 1);
                let start = page.first().copied().unwrap_or(events.len());
                (page, format!("f/{end}"), format!("b/{start}"))
            }
            PageStart::Tail => {
                let page: Vec<usize> = wanted[wanted.len().saturating_sub(cap)..].to_vec();
                let start = page.first().copied().unwrap_or(events.len());
                (page, format!("f/{}", events.len()), format!("b/{start}"))
            }
            PageStart::Forward(token) => {
                let from = position(token, "f/")?;
                let page: Vec<usize> = wanted
                    .iter()
                    .copied()
                    .filter(|&i| i >= from)
                    .take(cap)
                    .collect();
                // At the end, CloudWatch answers the token it was given.
                let forward = page
                    .last()
                    .map_or_else(|| token.clone(), |&i| format!("f/{}", i + 1));
                (page, forward, format!("b/{from}"))
            }
            PageStart::Backward(token) => {
                let before = position(token, "b/")?;
                let earlier: Vec<usize> = wanted.iter().copied().filter(|&i| i < before).collect();
                let page = earlier[earlier.len().saturating_sub(cap)..].to_vec();
                let backward = page
                    .first()
                    .map_or_else(|| token.clone(), |&i| format!("b/{i}"));
                (page, format!("f/{before}"), backward)
            }
        };
        Ok(EventsPage {
            events: selected.into_iter().map(|i| events[i].clone()).collect(),
            forward,
            backward,
        })
    }
}
