//! Host bindings for `orca:policy@0.3.0` (the frozen `since_v0.3.0` folder): the host's own
//! types.

wasmtime::component::bindgen!({
    path: "../plugin-sdk/wit/since_v0.3.0",
    world: "plugin",
});
