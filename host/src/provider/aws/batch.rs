//! Coalescing per-pod requests into one EC2 call: requests that arrive within a short window
//! (or until a batch is full) are answered by a single flush, so a thousand pod deletions cost
//! a handful of `TerminateInstances` calls, not a thousand.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::hash::Hash;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use super::api::ApiError;

type Flush<K, R> = Arc<
    dyn Fn(Vec<K>) -> Pin<Box<dyn Future<Output = Result<HashMap<K, R>, ApiError>> + Send>>
        + Send
        + Sync,
>;

type Request<K, R> = (K, oneshot::Sender<Result<Option<R>, ApiError>>);

/// Answers `call(key)` from batched flushes. A key the flush's map lacks is answered `None`.
pub struct Batcher<K, R> {
    requests: mpsc::UnboundedSender<Request<K, R>>,
}

impl<K, R> Batcher<K, R>
where
    K: Eq + Hash + Clone + Send + 'static,
    R: Clone + Send + 'static,
{
    /// Spawns the batching task on the current tokio runtime; it ends when the batcher is
    /// dropped.
    pub fn spawn<F, Fut>(window: Duration, max_batch: usize, flush: F) -> Batcher<K, R>
    where
        F: Fn(Vec<K>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<HashMap<K, R>, ApiError>> + Send + 'static,
    {
        let flush: Flush<K, R> = Arc::new(move |keys| Box::pin(flush(keys)));
        let (requests, mut incoming) = mpsc::unbounded_channel::<Request<K, R>>();
        tokio::spawn(async move {
            while let Some(first) = incoming.recv().await {
                let mut batch = vec![first];
                let deadline = tokio::time::Instant::now() + window;
                while batch.len() < max_batch {
                    match tokio::time::timeout_at(deadline, incoming.recv()).await {
                        Ok(Some(request)) => batch.push(request),
                        Ok(None) | Err(_) => break,
                    }
                }
                let mut seen = HashSet::new();
                let keys: Vec<K> = batch
                    .iter()
                    .map(|(key, _)| key.clone())
                    .filter(|key| seen.insert(key.clone()))
                    .collect();
                let answer = flush(keys).await;
                for (key, reply) in batch {
                    let _ = reply.send(match &answer {
                        Ok(found) => Ok(found.get(&key).cloned()),
                        Err(error) => Err(error.clone()),
                    });
                }
            }
        });
        Batcher { requests }
    }

    /// # Errors
    /// The flush's error, shared by every request in the batch.
    pub async fn call(&self, key: K) -> Result<Option<R>, ApiError> {
        let (reply, answer) = oneshot::channel();
        self.requests
            .send((key, reply))
            .map_err(|_| ApiError::transport("the batching task has stopped"))?;
        answer
            .await
            .map_err(|_| ApiError::transport("the batching task dropped a request"))?
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn concurrent_requests_share_one_flush_and_each_gets_its_answer() {
        let flushes = Arc::new(AtomicUsize::new(0));
        let counter = flushes.clone();
        let batcher = Batcher::spawn(Duration::from_millis(20), 100, move |keys: Vec<u32>| {
            counter.fetch_add(1, Ordering::SeqCst);
            async move {
                Ok(keys
                    .into_iter()
                    .filter(|k| k % 2 == 0)
                    .map(|k| (k, k * 10))
                    .collect())
            }
        });
        let answers = futures::future::join_all((0..50u32).map(|k| batcher.call(k))).await;
        assert_eq!(flushes.load(Ordering::SeqCst), 1);
        assert_eq!(answers[4], Ok(Some(40)));
        assert_eq!(answers[5], Ok(None));
    }

    #[tokio::test]
    async fn a_failed_flush_fails_every_request_in_it() {
        let batcher = Batcher::spawn(Duration::from_millis(5), 10, |_keys: Vec<u32>| async {
            Err::<HashMap<u32, u32>, _>(ApiError::service("RequestLimitExceeded", "slow down"))
        });
        let answers = futures::future::join_all((0..3u32).map(|k| batcher.call(k))).await;
        assert!(
            answers
                .iter()
                .all(|a| a.as_ref().unwrap_err().code == "RequestLimitExceeded")
        );
    }

    #[tokio::test]
    async fn a_full_batch_is_flushed_without_waiting_for_the_window() {
        let batcher = Batcher::spawn(Duration::from_secs(60), 2, |keys: Vec<u32>| async move {
            Ok(keys.into_iter().map(|k| (k, k)).collect())
        });
        let answers = tokio::time::timeout(
            Duration::from_secs(5),
            futures::future::join_all((0..2u32).map(|k| batcher.call(k))),
        )
        .await
        .unwrap();
        assert_eq!(answers, vec![Ok(Some(0)), Ok(Some(1))]);
    }
}
