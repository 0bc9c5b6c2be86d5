//! Host bindings for `orca:policy@0.2.0` (the frozen `since_v0.2.0` folder): the host's own
//! types.

wasmtime::component::bindgen!({
    path: "../plugin-sdk/wit/since_v0.2.0",
    world: "plugin",
});
