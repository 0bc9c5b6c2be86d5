//! Small helpers for errors and locks shared across modules.

use std::sync::{Mutex, MutexGuard};

/// An error with its causes, `a: b: c`, for log lines and startup messages.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Locks a std mutex, ignoring poisoning: every critical section in orca is a single map
/// insert, remove or read, which a panic cannot leave half done.
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
