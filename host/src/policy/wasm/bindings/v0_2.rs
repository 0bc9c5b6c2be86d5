//! Host bindings for `orca:policy@0.2.0` (the frozen `since_v0.2.0` folder), and the
//! conversions between its values and the host's (0.3.0) at the plugin boundary. 0.3.0 added
//! fields only: going down they are dropped (a 0.2.0 plugin never sees zones), coming up they
//! take their documented defaults (the configured allocation strategy, no mark on rebalance,
//! every zone).

use super::v0_3::orca::policy::{host as new_host, types as new};

wasmtime::component::bindgen!({
    path: "../plugin-sdk/wit/since_v0.2.0",
    world: "plugin",
});

use self::orca::policy::{host as old_host, types as old};

super::step_conversions! {
    new_market_fields: { allocation_strategy: None, mark_on_rebalance: false },
    new_query_fields: { zones: Vec::new() },
    old_error_cases: { Declined },
}
