# What rust-toolchain.toml pins, read without a TOML parser (the file is flat). Sourced by
# tests/setup and .ci/run, never executed.
#   toolchain_value KEY   a string field: toolchain_value channel -> 1.95.0
#   toolchain_list KEY    a list field, space-separated: toolchain_list targets -> wasm32-wasip2
TOOLCHAIN_FILE="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/rust-toolchain.toml"
toolchain_value() { sed -nE "s/^$1[[:space:]]*=[[:space:]]*\"([^\"]*)\".*/\1/p" "$TOOLCHAIN_FILE"; }
toolchain_list() { sed -nE "s/^$1[[:space:]]*=[[:space:]]*\[(.*)\].*/\1/p" "$TOOLCHAIN_FILE" | tr -d '" ' | tr ',' ' '; }
