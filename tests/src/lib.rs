//! Test support for orca's end-to-end tests: the local cluster harness (`tests/cluster/up`) seen
//! from Rust, the orca binary as a child process, orca in process over a model of EC2, and
//! helpers for waiting on real cluster state.

pub mod audit;
pub mod captured_log;
pub mod cluster;
pub mod config_schema;
pub mod container_logs;
pub mod cosign;
pub mod deploy;
pub mod doc_links;
pub mod ec2;
pub mod ec2_listing;
pub mod guest_plugins;
pub mod helm;
pub mod http;
pub mod iam;
pub mod imds;
pub mod inprocess;
pub mod journal;
pub mod kubelet_conn;
pub mod metric_store;
pub mod metrics;
pub mod metrics_server;
pub mod model_ec2;
pub mod model_queue;
pub mod names;
pub mod namespace;
pub mod node_reader;
pub mod nodes;
pub mod notices;
pub mod orca;
pub mod plugins;
pub mod pods;
pub mod procfs;
pub mod proxy;
pub mod registry;
pub mod registry_proxy;
pub mod replicas;
pub mod scenario;
pub mod spot_prices;
pub mod volumes;
pub mod wait;

pub use cluster::TestCluster;
pub use namespace::TestNamespace;
pub use orca::{OrcaProcess, aws_test_config, test_config, unique_node_name};
pub use scenario::Scenario;
