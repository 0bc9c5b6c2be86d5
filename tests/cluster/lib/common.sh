# Shared settings for the cluster harness scripts. Sourced, never executed.

HARNESS_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=../versions.env
. "$HARNESS_DIR/versions.env"

# Everything built or downloaded is cached here, keyed by version, so a warm `up` takes seconds.
ORCA_CACHE="${ORCA_CACHE:-$HOME/.cache/orca}"
# Go's module and build caches live under $HOME/.cache too, so a CI rerun on the same machine is quick.
export GOMODCACHE="${GOMODCACHE_ORCA:-$ORCA_CACHE/go/mod}"
export GOCACHE="${GOCACHE:-$HOME/.cache/go-build}"
export GOFLAGS=-mod=mod CGO_ENABLED=0

# use_k8s_version RELEASE: the Kubernetes release this script builds or runs (default
# versions.env's K8S_VERSION; ORCA_K8S_VERSION picks another, as the version matrix does).
use_k8s_version() {
  [[ "$1" =~ ^v1\.[0-9]+\.[0-9]+$ ]] || die "a Kubernetes release is v1.MINOR.PATCH, not ${1@Q}"
  K8S_VERSION=$1
  K8S_BIN="$ORCA_CACHE/controlplane/kubernetes-$K8S_VERSION"
}
ETCD_BIN="$ORCA_CACHE/controlplane/etcd-$ETCD_VERSION"
MOTO_VENV="$ORCA_CACHE/venv/moto-$MOTO_VERSION"
AWSCLI_VENV="$ORCA_CACHE/venv/awscli-$AWSCLI_VERSION"
METRICS_SERVER_BIN="$ORCA_CACHE/controlplane/metrics-server-$METRICS_SERVER_VERSION"

# Runtime state of one running cluster (certificates, data, logs, pids). `down` removes it.
STATE_DIR="${ORCA_CLUSTER_STATE:-${TMPDIR:-/tmp}/orca-cluster-$(id -u)}"

# version_at_least HAVE WANT: true when dotted version HAVE is WANT or newer.
version_at_least() { [[ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" == "$2" ]]; }

# The version of the go on PATH, without letting it switch toolchains ("1.26.8"; "devel" for a
# development build).
local_go_version() {
  local v; v=$(GOTOOLCHAIN=local go env GOVERSION 2>/dev/null) || return 1
  case "$v" in devel*) echo devel ;; *) v=${v#go}; echo "${v%% *}" ;; esac
}

# go_toolchain: the GOTOOLCHAIN value that builds the control plane. `local` when the go on PATH
# is $GO_MIN_VERSION or newer; else go$GO_MIN_VERSION, which Go 1.21+ downloads once from the
# module proxy into GOMODCACHE; fails when the local go is too old even for that.
go_toolchain() {
  local have; have=$(local_go_version) || return 1
  if [[ "$have" == devel ]] || version_at_least "$have" "$GO_MIN_VERSION"; then echo local
  elif version_at_least "$have" 1.21; then echo "go$GO_MIN_VERSION"
  else return 1; fi
}

log() { printf '[cluster] %s\n' "$*" >&2; }
die() { printf '[cluster] error: %s\n' "$*" >&2; exit 1; }

# must_build PATH WHAT FILE: whether FILE (what PATH holds once built) is still to be built, and
# if so with the lock beside PATH (PATH.lock) held, on a descriptor whose number is left in
# BUILD_LOCK (not printed: a $(…) subshell would take the lock with it as it ends); the caller
# closes it (exec {fd}>&-) once PATH is in place, or exits. A build another process has under
# way (tests/quickstart and tests/run start them in the background, `up` may want the same, the
# tests of one binary start registries side by side) is waited for, and then found built, rather
# than done twice. Used by lib/build.sh and by tests/registry's builds.
must_build() {
  local path=$1 what=$2 file=$3
  [[ -e "$file" ]] && return 1
  mkdir -p "$(dirname "$path")"
  exec {BUILD_LOCK}>"$path.lock"
  if ! flock -n "$BUILD_LOCK"; then
    log "another build of $what is under way: waiting for it"
    flock "$BUILD_LOCK" || die "waiting for the lock of $path failed"
  fi
  if [[ -e "$file" ]]; then
    exec {BUILD_LOCK}>&-
    return 1
  fi
}

use_k8s_version "${ORCA_K8S_VERSION:-$K8S_VERSION}"
