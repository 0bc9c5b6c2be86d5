//! Host bindings for `orca:policy@0.1.0` (the frozen `since_v0.1.0` folder), and the
//! conversions between its values and 0.2.0's at the plugin boundary (0.2.0's own convert on to
//! the host's): the pod and context go down, answers come up. 0.2.0 only added a case
//! (`declined`) that a 0.1.0 plugin cannot return, so every conversion is total.

use super::v0_2::orca::policy::{host as new_host, types as new};

wasmtime::component::bindgen!({
    path: "../plugin-sdk/wit/since_v0.1.0",
    world: "plugin",
});

use self::orca::policy::{host as old_host, types as old};

super::step_conversions! {
    new_market_fields: {},
    new_query_fields: {},
    old_error_cases: {},
}
