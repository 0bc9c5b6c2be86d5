//! Test support for orca's end-to-end tests: the local cluster harness (`tests/cluster/up`) seen
//! from Rust, and small helpers for waiting on real cluster state.

pub mod cluster;
pub mod namespace;
pub mod wait;

pub use cluster::TestCluster;
pub use namespace::TestNamespace;
