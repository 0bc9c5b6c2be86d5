//! The two queue calls the consumer makes: the seam between it and SQS, so the loop is tested
//! against an in-memory queue.

use std::time::Duration;

use async_trait::async_trait;

use crate::support::BoxError;

/// One message as received: its body, and the handle that deletes this receipt of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    pub receipt_handle: String,
    pub body: String,
}

/// A queue of interruption notices.
#[async_trait]
pub trait NoticeQueue: Send + Sync + 'static {
    /// One long poll: up to 10 messages, waiting up to `wait` for the first.
    ///
    /// # Errors
    /// [`QueueError::ReceiveFailed`] when the queue did not answer (after the client's own
    /// retries).
    async fn receive(&self, wait: Duration) -> Result<Vec<Received>, QueueError>;

    /// Deletes the messages received with these handles, in batches of 10.
    ///
    /// # Errors
    /// [`QueueError::DeleteFailed`] when a batch call failed (later batches are not tried:
    /// their messages come back after the visibility timeout, and delivery is idempotent);
    /// [`QueueError::NotDeleted`] naming each message the queue refused to delete.
    async fn delete(&self, receipt_handles: &[String]) -> Result<(), QueueError>;

    /// Makes the messages received with these handles visible again `after` from now rather
    /// than after the queue's visibility timeout (ChangeMessageVisibilityBatch, in batches of
    /// 10): for messages about instances another replica of this orca serves.
    ///
    /// # Errors
    /// [`QueueError::HandOnFailed`] when a batch call failed; [`QueueError::NotHandedOn`]
    /// naming each message the queue refused. Either way those messages come back after the
    /// visibility timeout, as they would have without this call.
    async fn hand_on(&self, receipt_handles: &[String], after: Duration) -> Result<(), QueueError>;
}

/// Why a queue call did not do what was asked; the cause, from the SDK or a fake, kept for the
/// log line.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    #[error("ReceiveMessage on {queue} failed")]
    ReceiveFailed {
        queue: String,
        #[source]
        source: BoxError,
    },
    #[error("DeleteMessageBatch on {queue} failed")]
    DeleteFailed {
        queue: String,
        #[source]
        source: BoxError,
    },
    #[error(
        "DeleteMessageBatch on {queue} did not delete {} message(s): {}",
        .entries.len(),
        describe(.entries)
    )]
    NotDeleted {
        queue: String,
        entries: Vec<RefusedEntry>,
    },
    #[error("ChangeMessageVisibilityBatch on {queue} failed")]
    HandOnFailed {
        queue: String,
        #[source]
        source: BoxError,
    },
    #[error(
        "ChangeMessageVisibilityBatch on {queue} did not hand on {} message(s): {}",
        .entries.len(),
        describe(.entries)
    )]
    NotHandedOn {
        queue: String,
        entries: Vec<RefusedEntry>,
    },
}

/// One message the queue refused in a batch call (delete, change visibility), with its reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusedEntry {
    pub receipt_handle: String,
    /// SQS's code, e.g. `ReceiptHandleIsInvalid`.
    pub code: String,
    pub message: String,
}

/// Receipt handles run to hundreds of characters; their start tells them apart in a log line.
const HANDLE_SHOWN: usize = 16;

fn describe(entries: &[RefusedEntry]) -> String {
    let shown: Vec<String> = entries
        .iter()
        .map(|entry| {
            let handle = match entry.receipt_handle.char_indices().nth(HANDLE_SHOWN) {
                Some((end, _)) => format!("{}…", &entry.receipt_handle[..end]),
                None => entry.receipt_handle.clone(),
            };
            if entry.message.is_empty() {
                format!("{handle} ({})", entry.code)
            } else {
                format!("{handle} ({}: {})", entry.code, entry.message)
            }
        })
        .collect();
    shown.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_deletes_are_named_by_the_start_of_their_handle_and_sqs_code() {
        let error = QueueError::NotDeleted {
            queue: "https://sqs.us-east-1.amazonaws.com/123456789012/orca".to_owned(),
            entries: vec![
                RefusedEntry {
                    receipt_handle: "AQEBzbVv2example3o0TPBHTeAdWdYqkq4T8".to_owned(),
                    code: "ReceiptHandleIsInvalid".to_owned(),
                    message: "The receipt handle is not valid".to_owned(),
                },
                RefusedEntry {
                    receipt_handle: "short".to_owned(),
                    code: "InternalError".to_owned(),
                    message: String::new(),
                },
            ],
        };
        assert_eq!(
            error.to_string(),
            "DeleteMessageBatch on https://sqs.us-east-1.amazonaws.com/123456789012/orca did \
             not delete 2 message(s): AQEBzbVv2example… (ReceiptHandleIsInvalid: The receipt \
             handle is not valid), short (InternalError)"
        );
    }
}
