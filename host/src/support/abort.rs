//! A task that ends with its owner.

use tokio::task::AbortHandle;

/// Aborts a task when dropped: the task never outlives what holds this.
pub struct AbortOnDrop(pub AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
