//! The guest SDK for orca policy plugins.
//!
//! Plugin authors depend only on this crate. It builds for `wasm32-wasip2` (plugins) and for the
//! host target (orca itself shares its helpers, so host and guests read pods the same way).

pub mod quantity;

pub use quantity::{Quantity, QuantityError};
