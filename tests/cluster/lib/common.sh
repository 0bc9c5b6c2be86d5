# Shared settings for the cluster harness scripts. Sourced, never executed.

HARNESS_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=../versions.env
. "$HARNESS_DIR/versions.env"

# Everything built or downloaded is cached here, keyed by version, so a warm `up` takes seconds.
ORCA_CACHE="${ORCA_CACHE:-$HOME/.cache/orca}"
# Go's module and build caches live under $HOME/.cache too, so a CI rerun on the same machine is quick.
export GOMODCACHE="${GOMODCACHE_ORCA:-$ORCA_CACHE/go/mod}"
export GOCACHE="${GOCACHE:-$HOME/.cache/go-build}"
export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0

K8S_BIN="$ORCA_CACHE/controlplane/kubernetes-$K8S_VERSION"
ETCD_BIN="$ORCA_CACHE/controlplane/etcd-$ETCD_VERSION"
MOTO_VENV="$ORCA_CACHE/venv/moto-$MOTO_VERSION"

# Runtime state of one running cluster (certificates, data, logs, pids). `down` removes it.
STATE_DIR="${ORCA_CLUSTER_STATE:-${TMPDIR:-/tmp}/orca-cluster-$(id -u)}"

log() { printf '[cluster] %s\n' "$*" >&2; }
die() { printf '[cluster] error: %s\n' "$*" >&2; exit 1; }
