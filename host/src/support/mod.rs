//! Small building blocks shared by the modules: one [`Backoff`], one [`BoxError`], the error
//! chain and lock helpers ([`errors`]), the AWS clients' shared settings ([`aws_config`]), the
//! process-wide TLS backend ([`tls`]) and heap trimming ([`heap`]).

pub mod abort;
pub mod aws_config;
pub mod backoff;
pub mod errors;
pub mod heap;
#[cfg(test)]
pub mod testing;
pub mod tls;

pub use abort::AbortOnDrop;
pub use backoff::Backoff;

/// Any error, boxed, for a seam whose implementations fail in ways of their own (a fake in
/// tests, an SDK in production) and whose callers only report or chain it.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
