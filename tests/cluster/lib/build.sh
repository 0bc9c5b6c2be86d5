#!/usr/bin/env bash
# Builds the control plane from the Go module proxy, once per version:
#   kube-apiserver, kube-controller-manager, kube-scheduler, kubectl (Kubernetes $K8S_VERSION)
#   etcd ($ETCD_VERSION)
# and installs moto's EC2 server into a venv. Each result is written to a temporary directory and
# renamed into place only when complete, so an interrupted build never leaves a half cache behind.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

K8S_COMPONENTS=(kube-apiserver kube-controller-manager kube-scheduler kubectl)

# check_go_floor GO_MOD: versions.env's GO_MIN_VERSION is what tests/setup and the docs promise;
# a module that needs a newer Go makes it a lie, so a version bump that forgets it stops here.
check_go_floor() {
  local needed
  needed=$(sed -nE 's/^go[[:space:]]+([0-9.]+).*/\1/p' "$1")
  [[ -n "$needed" ]] || return 0
  version_at_least "$GO_MIN_VERSION" "$needed" ||
    die "$1 needs Go $needed, newer than GO_MIN_VERSION=$GO_MIN_VERSION: raise it in tests/cluster/versions.env (and the prerequisites in docs/src/getting-started/contributor.md)"
}

# k8s.io/kubernetes points its staging modules (k8s.io/api, k8s.io/client-go, ...) at ./staging
# with `replace` directives, which Go ignores in a dependency. A wrapper module must pin each of
# them to the published v0.X.Y that matches v1.X.Y; the list is read from kubernetes' own go.mod.
write_kubernetes_wrapper() {
  local dir=$1 staging_version="v0.${K8S_VERSION#v1.}"
  local gomod
  gomod=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
  check_go_floor "$gomod"
  {
    echo "module orca.local/controlplane"
    echo
    echo "go $(go env GOVERSION | sed -E 's/^go([0-9]+\.[0-9]+).*/\1/')"
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo
    echo "replace ("
    local module
    while read -r module; do
      printf '\t%s => %s %s\n' "$module" "$module" "$(staging_pin "$module" "$staging_version")"
    done < <(sed -nE 's#^[[:space:]]*(k8s\.io/[^[:space:]]+)[[:space:]]+=>[[:space:]]+\./staging/.*#\1#p' "$gomod")
    echo ")"
  } >"$dir/go.mod"
  grep -q 'k8s.io/client-go => ' "$dir/go.mod" || die "no staging replaces found in $gomod"
  {
    echo "//go:build tools"
    echo
    echo "// Package tools records the commands this module builds, so go mod tidy keeps their deps."
    echo "package tools"
    echo
    echo "import ("
    for c in "${K8S_COMPONENTS[@]}"; do echo "	_ \"k8s.io/kubernetes/cmd/$c\""; done
    echo ")"
  } >"$dir/tools.go"
}

# staging_pin MODULE WANTED: the version of a Kubernetes staging module the wrapper pins: WANTED
# (v0.X.Y for v1.X.Y) when the Go module proxy serves it. The proxy this project builds from
# lacks a few (k8s.io/kube-scheduler, kube-controller-manager, endpointslice and kube-proxy at
# v0.31.14): then the nearest patch of the same minor that it serves, said on stderr (patches of
# one minor differ in fixes only, and these four hold configuration types); WANTED still when it
# serves none of that minor (the sample modules, which no component imports).
staging_pin() {
  local module=$1 wanted=$2 candidate
  if go mod download "$module@$wanted" >/dev/null 2>&1; then
    echo "$wanted"
    return
  fi
  local minor=${wanted%.*} patch=${wanted##*.}
  for candidate in $(go list -m -versions "$module" 2>/dev/null | tr ' ' '\n' |
    awk -F. -v minor="$minor" -v patch="$patch" '
      $1 "." $2 == minor && $3 ~ /^[0-9]+$/ { d = $3 - patch; if (d < 0) d = -d; print d, $3, $0 }' |
    sort -k1,1n -k2,2nr | cut -d' ' -f3); do
    if go mod download "$module@$candidate" >/dev/null 2>&1; then
      log "  the Go module proxy does not serve $module $wanted: pinned to $candidate, the nearest patch it serves"
      echo "$candidate"
      return
    fi
  done
  echo "$wanted"
}

# Version ldflags so `kubectl version` and /version report the real release, not v0.0.0-master.
kubernetes_ldflags() {
  local minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
  local date; date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  local flags="-s -w" pkg
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    flags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$date"
  done
  echo "$flags"
}

build_kubernetes() {
  # One build of a release at a time: tests/run builds the version matrix's releases in the
  # background (tests/cluster/build-releases) while `up` may want one of them; the second waits
  # for the first and finds it built. The directory is renamed into place whole: its last
  # component there means all are.
  must_build "$K8S_BIN" "Kubernetes $K8S_VERSION" "$K8S_BIN/${K8S_COMPONENTS[-1]}" || return 0
  local lock=$BUILD_LOCK
  log "building Kubernetes $K8S_VERSION from the Go module proxy (once; cached in $K8S_BIN)"
  # What a build that was stopped half way left (it held the lock, so none runs now).
  rm -rf "$K8S_BIN".tmp.*
  local src="$ORCA_CACHE/src/kubernetes-$K8S_VERSION" out="$K8S_BIN.tmp.$$"
  mkdir -p "$src" "$out"
  write_kubernetes_wrapper "$src"
  (cd "$src" && go mod tidy >/dev/null)
  local ldflags c packages=(); ldflags=$(kubernetes_ldflags)
  for c in "${K8S_COMPONENTS[@]}"; do packages+=("k8s.io/kubernetes/cmd/$c"); done
  # One go build for all of them: it loads and hashes the packages they share (most of
  # Kubernetes) once, and links them side by side; each binary is named after its command.
  log "  go build ${K8S_COMPONENTS[*]}"
  (cd "$src" && go build -trimpath -ldflags "$ldflags" -o "$out/" "${packages[@]}")
  rm -rf "$K8S_BIN" && mv "$out" "$K8S_BIN"
  exec {lock}>&-
}

# etcd's server module also uses local replaces, so it gets the same wrapper treatment.
build_etcd() {
  must_build "$ETCD_BIN" "etcd $ETCD_VERSION" "$ETCD_BIN/etcd" || return 0
  local lock=$BUILD_LOCK
  log "building etcd $ETCD_VERSION from the Go module proxy (once; cached in $ETCD_BIN)"
  local src="$ORCA_CACHE/src/etcd-$ETCD_VERSION" out="$ETCD_BIN.tmp.$$"
  mkdir -p "$src" "$out"
  local gomod
  gomod=$(go mod download -json "go.etcd.io/etcd/server/v3@$ETCD_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
  check_go_floor "$gomod"
  {
    echo "module orca.local/etcd"
    echo
    echo "go $(go env GOVERSION | sed -E 's/^go([0-9]+\.[0-9]+).*/\1/')"
    echo
    echo "require go.etcd.io/etcd/server/v3 $ETCD_VERSION"
    echo
    echo "replace ("
    sed -nE 's#^[[:space:]]*(go\.etcd\.io/etcd/[^[:space:]]+)[[:space:]]+=>[[:space:]]+\.\./.*#\t\1 => \1 '"$ETCD_VERSION"'#p' "$gomod"
    echo ")"
  } >"$src/go.mod"
  printf '//go:build tools\n\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' >"$src/tools.go"
  (cd "$src" && go mod tidy >/dev/null)
  local pkg=go.etcd.io/etcd/api/v3/version
  (cd "$src" && go build -trimpath -ldflags "-s -w -X $pkg.GitSHA=release-$ETCD_VERSION" -o "$out/etcd" go.etcd.io/etcd/server/v3)
  rm -rf "$ETCD_BIN" && mv "$out" "$ETCD_BIN"
  exec {lock}>&-
}

# metrics-server's module has no local replaces: `go install` builds it at its version as is.
build_metrics_server() {
  must_build "$METRICS_SERVER_BIN" "metrics-server $METRICS_SERVER_VERSION" "$METRICS_SERVER_BIN/metrics-server" || return 0
  local lock=$BUILD_LOCK
  log "building metrics-server $METRICS_SERVER_VERSION from the Go module proxy (once; cached in $METRICS_SERVER_BIN)"
  local out="$METRICS_SERVER_BIN.tmp.$$" gomod
  gomod=$(go mod download -json "sigs.k8s.io/metrics-server@$METRICS_SERVER_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
  check_go_floor "$gomod"
  mkdir -p "$out"
  GOBIN="$out" go install -trimpath \
    -ldflags "-s -w -X sigs.k8s.io/metrics-server/pkg/version.gitVersion=$METRICS_SERVER_VERSION" \
    "sigs.k8s.io/metrics-server/cmd/metrics-server@$METRICS_SERVER_VERSION"
  rm -rf "$METRICS_SERVER_BIN" && mv "$out" "$METRICS_SERVER_BIN"
  exec {lock}>&-
}

# install_venv VENV CONSTRAINTS REQUIREMENT: a pinned Python package with its pinned dependencies
# in a venv of its own, installed once. The stamp is written last: a venv without it is a half
# install and is rebuilt.
install_venv() {
  local venv=$1 constraints=$2 requirement=$3
  must_build "$venv" "$requirement" "$venv/.complete" || return 0
  local lock=$BUILD_LOCK
  log "installing $requirement into $venv (once)"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -c "$constraints" "$requirement"
  touch "$venv/.complete"
  exec {lock}>&-
}

install_moto() {
  install_venv "$MOTO_VENV" "$HARNESS_DIR/moto-constraints.txt" "moto[server]==$MOTO_VERSION"
}

install_awscli() {
  install_venv "$AWSCLI_VENV" "$HARNESS_DIR/awscli-constraints.txt" "awscli==$AWSCLI_VERSION"
}

build_all() {
  command -v go >/dev/null || die "Go $GO_MIN_VERSION or newer is required to build the control plane (tests/setup says how to get it)"
  # Never `auto`: a dependency's go line would then switch toolchains silently, mid-build.
  GOTOOLCHAIN=$(go_toolchain) || die "go $(local_go_version) is older than $GO_MIN_VERSION and than 1.21, which could fetch it (tests/setup says how to get it)"
  export GOTOOLCHAIN
  mkdir -p "$ORCA_CACHE/controlplane"
  install_moto
  build_etcd
  build_kubernetes
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then build_all "$@"; fi
