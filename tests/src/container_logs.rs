//! What an instance's `awslogs` log driver does, done by a test: lines put as events into a
//! container's stream in moto's CloudWatch Logs.

use anyhow::Result;
use aws_sdk_cloudwatchlogs::Client;
use aws_sdk_cloudwatchlogs::types::InputLogEvent;
use jiff::Timestamp;

/// The events PutLogEvents accepts at most in one call is 10,000; fewer keep a call small.
const PER_CALL: usize = 5_000;

/// Puts `lines` (time, text), oldest first, into `group`/`stream`.
///
/// # Errors
/// An event could not be built or moto refused a call.
pub async fn put_lines(
    logs: &Client,
    group: &str,
    stream: &str,
    lines: &[(Timestamp, String)],
) -> Result<()> {
    for batch in lines.chunks(PER_CALL) {
        let events = batch
            .iter()
            .map(|(at, message)| {
                InputLogEvent::builder()
                    .timestamp(at.as_millisecond())
                    .message(message)
                    .build()
            })
            .collect::<Result<Vec<_>, _>>()?;
        logs.put_log_events()
            .log_group_name(group)
            .log_stream_name(stream)
            .set_log_events(Some(events))
            .send()
            .await?;
    }
    Ok(())
}
