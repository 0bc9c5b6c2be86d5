# Sourced by tests/quickstart, tests/run and tests/versions after tests/setup (which installs
# clippy): every cargo call of the run, and those its tests make, compiles the workspace's own
# crates with clippy's lints, warnings as errors (tests/lib/clippy-rustc). So the build the tests
# run is also the clippy check: `cargo clippy` would check the whole dependency tree a second
# time in a target dir of its own (check builds share nothing with the build's; on a brand-new
# machine that took 999 s in the foreground, beside the version matrix's Go builds). Cargo
# hashes the wrapper into the crates' file names: a `cargo build` without it (an editor's) keeps
# its own files, and neither rebuilds the other's; the quickstart's build of orca, with it, is
# the one the tests' build reuses.
# tests/run builds every target `cargo clippy --all-targets` checks: `--lib --bins --tests
# --benches` of the workspace (it has no examples).
export RUSTC_WORKSPACE_WRAPPER
RUSTC_WORKSPACE_WRAPPER="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/clippy-rustc"
