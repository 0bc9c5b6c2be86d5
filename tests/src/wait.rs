//! Waiting on real cluster state with a deadline, reporting what was last seen on timeout.

use std::fmt::Debug;
use std::future::Future;
use std::time::Duration;

use anyhow::{Result, bail};

/// Polls `probe` every `interval` until it returns `Ok(Some(value))`, or fails after `timeout`
/// with `what` and the last probe result in the message. Probe errors are retried: a test cluster
/// briefly refusing (for example right after an apiserver restart) is not a test failure.
pub async fn poll_until<T, F, Fut>(
    what: &str,
    timeout: Duration,
    interval: Duration,
    mut probe: F,
) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>>>,
    T: Debug,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let last = match probe().await {
            Ok(Some(value)) => return Ok(value),
            Ok(None) => "condition not met yet".to_owned(),
            Err(err) => format!("{err:#}"),
        };
        if tokio::time::Instant::now() >= deadline {
            bail!("timed out after {timeout:?} waiting for {what}; last: {last}");
        }
        tokio::time::sleep(interval).await;
    }
}
