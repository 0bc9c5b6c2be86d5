//! [`NoticeQueue`] over aws-sdk-sqs, with the credentials and region of the EC2 client
//! ([`crate::support::aws_config::load_for`]), the SDK's standard retries, and timeouts that let a long
//! poll run its full wait.

use std::time::Duration;

use async_trait::async_trait;
use aws_config::timeout::TimeoutConfig;
use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::{
    BatchResultErrorEntry, ChangeMessageVisibilityBatchRequestEntry, DeleteMessageBatchRequestEntry,
};

use super::queue::{NoticeQueue, QueueError, Received, RefusedEntry};
use crate::support::BoxError;
use crate::support::aws_config::{ClientSettings, load_for};

/// Attempts per call, the first included; the SDK backs off between them.
const MAX_ATTEMPTS: u32 = 4;
/// For calls that answer at once (DeleteMessageBatch, ChangeMessageVisibilityBatch).
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// SQS waits at most 20 s for a message (`WaitTimeSeconds`).
const LONGEST_POLL: Duration = Duration::from_secs(20);
/// SQS answers at most 10 messages per receive and deletes at most 10 per batch.
const BATCH: usize = 10;

/// The interruption queue, reached with aws-sdk-sqs.
pub struct SqsQueue {
    client: Client,
    queue_url: String,
}

impl SqsQueue {
    /// A client for the queue at `queue_url` in `region`, optionally at another endpoint
    /// (LocalStack, a VPC endpoint). Credentials are resolved on the first call.
    pub async fn connect(queue_url: &str, region: &str, endpoint_url: Option<&str>) -> SqsQueue {
        let settings = ClientSettings {
            max_attempts: MAX_ATTEMPTS,
            attempt_timeout: ATTEMPT_TIMEOUT,
            call_timeout: CALL_TIMEOUT,
        };
        let mut config = aws_sdk_sqs::config::Builder::from(&load_for(region, &settings).await);
        if let Some(url) = endpoint_url {
            config = config.endpoint_url(url);
        }
        SqsQueue::with_client(Client::from_conf(config.build()), queue_url)
    }

    /// The queue at `queue_url` through a client configured elsewhere.
    pub fn with_client(client: Client, queue_url: &str) -> SqsQueue {
        SqsQueue {
            client,
            queue_url: queue_url.to_owned(),
        }
    }
}

fn timeouts(attempt: Duration, call: Duration) -> TimeoutConfig {
    TimeoutConfig::builder()
        .operation_attempt_timeout(attempt)
        .operation_timeout(call)
        .build()
}

#[async_trait]
impl NoticeQueue for SqsQueue {
    async fn receive(&self, wait: Duration) -> Result<Vec<Received>, QueueError> {
        let wait = wait.min(LONGEST_POLL);
        let wait_seconds = i32::try_from(wait.as_secs()).unwrap_or(20);
        // An attempt must outlast the poll, or every quiet poll would time out and retry.
        let receive_timeouts = timeouts(wait + ATTEMPT_TIMEOUT, wait + CALL_TIMEOUT);
        let output = self
            .client
            .receive_message()
            .queue_url(&self.queue_url)
            .max_number_of_messages(BATCH as i32)
            .wait_time_seconds(wait_seconds)
            .customize()
            .config_override(
                aws_sdk_sqs::config::Builder::default().timeout_config(receive_timeouts),
            )
            .send()
            .await
            .map_err(|source| QueueError::ReceiveFailed {
                queue: self.queue_url.clone(),
                source: source.into(),
            })?;
        let mut received = Vec::new();
        for message in output.messages() {
            // SQS always sends both; without a handle a message could never be deleted, so
            // it is left for its visibility timeout.
            let Some(receipt_handle) = message.receipt_handle() else {
                tracing::warn!(
                    message_id = message.message_id().unwrap_or_default(),
                    "SQS message without a receipt handle; skipped"
                );
                continue;
            };
            received.push(Received {
                receipt_handle: receipt_handle.to_owned(),
                body: message.body().unwrap_or_default().to_owned(),
            });
        }
        Ok(received)
    }

    async fn delete(&self, receipt_handles: &[String]) -> Result<(), QueueError> {
        let refused = in_batches(
            receipt_handles,
            |id, handle| {
                DeleteMessageBatchRequestEntry::builder()
                    .id(id)
                    .receipt_handle(handle)
                    .build()
            },
            |entries| {
                let call = self
                    .client
                    .delete_message_batch()
                    .queue_url(&self.queue_url)
                    .set_entries(Some(entries));
                async move { Ok(call.send().await?.failed().to_vec()) }
            },
        )
        .await
        .map_err(|source| QueueError::DeleteFailed {
            queue: self.queue_url.clone(),
            source,
        })?;
        if refused.is_empty() {
            Ok(())
        } else {
            Err(QueueError::NotDeleted {
                queue: self.queue_url.clone(),
                entries: refused,
            })
        }
    }

    async fn hand_on(&self, receipt_handles: &[String], after: Duration) -> Result<(), QueueError> {
        let visibility = i32::try_from(after.as_secs()).unwrap_or(0);
        let refused = in_batches(
            receipt_handles,
            |id, handle| {
                ChangeMessageVisibilityBatchRequestEntry::builder()
                    .id(id)
                    .receipt_handle(handle)
                    .visibility_timeout(visibility)
                    .build()
            },
            |entries| {
                let call = self
                    .client
                    .change_message_visibility_batch()
                    .queue_url(&self.queue_url)
                    .set_entries(Some(entries));
                async move { Ok(call.send().await?.failed().to_vec()) }
            },
        )
        .await
        .map_err(|source| QueueError::HandOnFailed {
            queue: self.queue_url.clone(),
            source,
        })?;
        if refused.is_empty() {
            Ok(())
        } else {
            Err(QueueError::NotHandedOn {
                queue: self.queue_url.clone(),
                entries: refused,
            })
        }
    }
}

/// One batch call per [`BATCH`] handles: `entry` builds the entry for a handle (its id is its
/// index in the batch), `send` makes the call and answers the entries SQS refused. Answers
/// every refused entry by its handle, or the first call that failed (later batches are not
/// tried: their messages come back after the visibility timeout).
async fn in_batches<E, Fut>(
    receipt_handles: &[String],
    entry: impl Fn(String, &str) -> Result<E, aws_sdk_sqs::error::BuildError>,
    send: impl Fn(Vec<E>) -> Fut,
) -> Result<Vec<RefusedEntry>, BoxError>
where
    Fut: Future<Output = Result<Vec<BatchResultErrorEntry>, BoxError>>,
{
    let mut refused = Vec::new();
    for chunk in receipt_handles.chunks(BATCH) {
        let entries = chunk
            .iter()
            .enumerate()
            .map(|(index, handle)| entry(index.to_string(), handle))
            .collect::<Result<Vec<_>, _>>()?;
        let failed = send(entries).await?;
        refused.extend(refused_entries(chunk, &failed));
    }
    Ok(refused)
}

/// The entries of one batch call (`chunk`) that SQS refused, by the handle each named.
fn refused_entries(chunk: &[String], failed: &[BatchResultErrorEntry]) -> Vec<RefusedEntry> {
    failed
        .iter()
        .map(|failed| {
            // Entry ids are indexes into this chunk.
            let receipt_handle = failed
                .id()
                .parse::<usize>()
                .ok()
                .and_then(|index| chunk.get(index))
                .cloned()
                .unwrap_or_else(|| format!("entry {}", failed.id()));
            RefusedEntry {
                receipt_handle,
                code: failed.code().to_owned(),
                message: failed.message().unwrap_or_default().to_owned(),
            }
        })
        .collect()
}
