# Shared settings for the registry harness scripts. Sourced, never executed.

REGISTRY_HARNESS_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# The cluster harness's conventions, reused rather than copied: the cache root ($ORCA_CACHE), Go's
# module and build caches, GOTOOLCHAIN selection against GO_MIN_VERSION, and the process helpers
# (start_process, process_alive, stop_process, free_ports; each keeps pids/ and logs/ in $STATE_DIR).
# shellcheck source=../../cluster/lib/common.sh
. "$REGISTRY_HARNESS_DIR/../cluster/lib/common.sh"
# shellcheck source=../../cluster/lib/processes.sh
. "$REGISTRY_HARNESS_DIR/../cluster/lib/processes.sh"
# shellcheck source=../versions.env
. "$REGISTRY_HARNESS_DIR/versions.env"

REGISTRY_MODULE=github.com/distribution/distribution/v3
# The registry binary and its htpasswd helper, built once per version by `build`.
REGISTRY_BIN="$ORCA_CACHE/registry/distribution-$REGISTRY_VERSION"

log() { printf '[registry] %s\n' "$*" >&2; }
die() { printf '[registry] error: %s\n' "$*" >&2; exit 1; }

# state_dir_arg DIR: the absolute path of a registry's state directory (created), which `up` and
# `down` take as their only argument. Its path goes unquoted into registry.env and config.yml, so
# it may not contain whitespace, quotes, backslashes or `$`.
state_dir_arg() {
  [[ -n "${1:-}" ]] || die "usage: $(basename "$0") DIR"
  [[ "$1" != *[[:space:]\'\"\\\$]* ]] || die "DIR must not contain whitespace, quotes, backslashes or \$: $1"
  mkdir -p "$1"
  (cd "$1" && pwd)
}
