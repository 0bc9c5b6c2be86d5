# Sourced by tests/run and tests/versions after tests/setup (which installs clippy): every cargo
# call of the run, and those its tests make, compiles the workspace's own crates with clippy's
# lints, warnings as errors (tests/lib/clippy-rustc). So the build the tests run is also the
# clippy check: `cargo clippy` would check the whole dependency tree a second time in a target
# dir of its own (check builds share nothing with the build's), 10 CPU-minutes on a brand-new
# machine. Cargo hashes the wrapper into the crates' file names: a `cargo build` without it
# (tests/quickstart, an editor's) keeps its own files, and neither rebuilds the other's.
# The selection tests/run builds (`--lib --bins --tests` of the workspace) is every target
# `cargo clippy --all-targets` checks: the workspace has no examples or benches.
export RUSTC_WORKSPACE_WRAPPER
RUSTC_WORKSPACE_WRAPPER="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/clippy-rustc"
