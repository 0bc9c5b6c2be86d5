//! What each pod costs. One pod is one instance, so its cost is its instance's: the hourly
//! price of what was launched (on demand, the catalogue's price for the type; spot, the price
//! of the pool launched into, its type in its zone, from `DescribeSpotPriceHistory`),
//! integrated from EC2's `LaunchTime` to the instance's end.
//!
//! - [`integrate`]: the price over time, piecewise, integrated over a span.
//! - [`pools`]: each spot pool's price history, cached with a TTL and asked in one batched
//!   call for every pool due.
//! - [`record`]: the `orca.research/cost` annotation, and how an instance is priced (with the
//!   fallbacks when a history cannot be read).
//! - [`ledger`]: one turn of the bookkeeping as a pure function (counters, live spend, the
//!   records of instances that ended).
//! - [`run`]: the loop that lists, asks, counts and records (the aws provider only: the
//!   simulated one has no instances to bill).
//! - [`launch_price`]: the price per hour the decision record shows for what was launched.

pub mod integrate;
pub mod launch_price;
pub mod ledger;
pub mod pools;
pub mod record;
pub mod run;

use std::time::Duration;

pub use launch_price::LaunchPrices;
pub use ledger::{CostLedger, Series};
pub use record::{COST_ANNOTATION, CostRecord, PriceSource};
pub use run::CostLoop;

/// How long a pool's spot price history is used before it is asked again while instances run
/// in it. EC2 publishes a pool's price changes as they happen, a few times a day at most.
pub const SPOT_HISTORY_TTL: Duration = Duration::from_secs(300);
