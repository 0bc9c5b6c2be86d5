//! Small building blocks shared by the modules: one [`Backoff`], one [`BoxError`].

pub mod backoff;

pub use backoff::Backoff;

/// Any error, boxed, for a seam whose implementations fail in ways of their own (a fake in
/// tests, an SDK in production) and whose callers only report or chain it.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
