//! orca's end-to-end tests: one test binary, one module per file of this folder (each was a
//! binary of its own before; one link now instead of 28). Each module's own documentation says
//! what it proves.
//!
//! Run them as tests/run does: `tests/lib/test-binaries --workspace --tests` runs each module
//! as a process of its own, side by side within ORCA_TEST_JOBS, and the modules
//! `tests/e2e/schedule.tsv` marks `alone` with nothing beside them (a module restarts what the
//! others use, or measures). `cargo test --test e2e` runs every module in one process at once,
//! the restarting ones beside the rest: give it a module instead, e.g.
//! `cargo test --test e2e aws::`.

mod apiserver_restart;
mod aws;
// The Helm chart (deploy/charts/orca): lint, render against deploy/base, install, and its
// dashboard's and alerts' metrics against orca's registry.
mod chart;
mod clusters;
// Cost per pod (issue 46, part 1): ended pods' cost on record on moto with a spot price history
// the test sets, and orca's cost counters summing to the records.
mod cost;
mod deploy;
// The book in docs/ builds with the pinned mdBook, and every link and anchor leads somewhere.
mod docs;
mod exec;
mod foundation;
mod guardrails;
mod iam;
// The container image built without an engine (deploy/image), pushed, pulled, run under chroot.
mod image;
mod kubelet_api;
mod kubernetes_versions;
mod languages;
mod oci;
mod pod_logs;
mod pod_metrics;
mod pod_top;
mod policy;
mod quickstart;
mod replica_faults;
mod replicas;
mod setup;
// Shadow plugins (issue 46, part 2): a candidate that would choose differently is recorded,
// counted with its price difference and never launched; `orca plugin replay` prints it.
mod shadow;
mod simulation;
mod virtual_node;
mod volumes;
