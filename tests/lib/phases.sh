# How long each phase of a run took (issue 60). Sourced by .ci/run, tests/run and
# tests/versions, never executed: each script's `step` calls `phase`, which ends the phase
# before and starts the next. The times go to the file $ORCA_PHASES names, which a script run
# from another inherits, so .ci/run's summary holds every phase of the whole run; without it,
# nothing is recorded.
#   phase NAME            ends the current phase (if any) and starts NAME
#   phase_end             ends the current phase (a script calls it as it exits)
#   phase_parts           passes cargo test's output through, recording each test binary's
#                         time as a part of the current phase
#   phases_summary FILE   the table of FILE: each phase's seconds and share of the total, its
#                         longest parts under it, and the total
#   phases_budget FILE KIND
#                         the total against the budget of a run of KIND (cold, warm, partly
#                         warm): over it, names the longest phase and the one that grew most
#                         since the last run of that kind
# A line of the file is `seconds<TAB>phase<TAB>name`, or `seconds<TAB>part<TAB>name` for a part.

_phase_name=
_phase_started=

phase() {
  phase_end
  _phase_name=$1
  _phase_started=$EPOCHSECONDS
}

phase_end() {
  if [[ -n "$_phase_name" && -n "${ORCA_PHASES:-}" ]]; then
    printf '%s\tphase\t%s\n' "$((EPOCHSECONDS - _phase_started))" "$_phase_name" >>"$ORCA_PHASES"
  fi
  _phase_name=
}

phase_parts() {
  local line kind part= started=$EPOCHSECONDS
  while IFS= read -r line; do
    printf '%s\n' "$line"
    # `Running e2e/aws.rs (…/deps/aws-…)`, `Running unittests src/lib.rs (…/deps/orca-…)`,
    # `Doc-tests orca`.
    [[ "$line" =~ ^[[:space:]]+(Running|Doc-tests)\ (.*)$ ]] || continue
    _phase_part "$part" "$started"
    kind=${BASH_REMATCH[1]}
    part=${BASH_REMATCH[2]}
    if [[ "$kind" == Doc-tests ]]; then
      part="doc tests of $part"
    elif [[ "$part" =~ ^unittests\ .*/deps/([^/]+)-[0-9a-f]+\)$ ]]; then
      part="unit tests of ${BASH_REMATCH[1]}"
    fi
    part=${part% (*}
    started=$EPOCHSECONDS
  done
  _phase_part "$part" "$started"
}

_phase_part() {
  [[ -n "$1" && -n "${ORCA_PHASES:-}" ]] || return 0
  printf '%s\tpart\t%s\n' "$((EPOCHSECONDS - $2))" "$1" >>"$ORCA_PHASES"
}

# The phases in the order they ran, each with its five longest parts (a phase's parts are
# written before the phase itself, which is written as it ends); the total counts phases only.
phases_summary() {
  awk -F'\t' '
    $2 == "part" { pending++; psecs[pending] = $1; pname[pending] = $3; next }
    $2 == "phase" {
      n++; secs[n] = $1; name[n] = $3; total += $1; parts[n] = ""
      for (a = 1; a <= pending; a++) for (b = a + 1; b <= pending; b++) if (psecs[b] > psecs[a]) {
        t = psecs[a]; psecs[a] = psecs[b]; psecs[b] = t
        t = pname[a]; pname[a] = pname[b]; pname[b] = t
      }
      for (a = 1; a <= pending && a <= 5; a++) parts[n] = parts[n] sprintf("          %5d s   %s\n", psecs[a], pname[a])
      if (pending > 5) parts[n] = parts[n] sprintf("                    (%d more)\n", pending - 5)
      pending = 0
    }
    END {
      for (i = 1; i <= n; i++) {
        printf "  %5d s  %3d%%  %s\n", secs[i], total ? 100 * secs[i] / total : 0, name[i]
        printf "%s", parts[i]
      }
      printf "  %5d s        total (%d min %02d s)\n", total, int(total / 60), total % 60
    }' "$1"
}

# phases_budget FILE KIND: the budget is CI_BUDGET_WARM_MINUTES (20) for a warm run,
# CI_BUDGET_COLD_MINUTES (45) otherwise (docs/src/contributing/tests.md). This run's phases are
# kept in $ORCA_CACHE/ci-phases-KIND.tsv for the next run of that kind to compare with. It says,
# it does not fail the run: the limit CI enforces is its own (90 minutes).
phases_budget() {
  local file=$1 kind=$2 budget total longest grew last
  if [[ "$kind" == warm ]]; then
    budget=$((${CI_BUDGET_WARM_MINUTES:-20} * 60))
  else
    budget=$((${CI_BUDGET_COLD_MINUTES:-45} * 60))
  fi
  last="${ORCA_CACHE:-$HOME/.cache/orca}/ci-phases-${kind// /-}.tsv"
  total=$(awk -F'\t' '$2 == "phase" { t += $1 } END { print t + 0 }' "$file")
  if ((total <= budget)); then
    printf '==> [ci] %d s, within the %s budget of %d s\n' "$total" "$kind" "$budget"
  else
    longest=$(awk -F'\t' '$2 == "phase" && $1 > m { m = $1; n = $3 } END { printf "%s (%d s)", n, m }' "$file")
    grew="no earlier $kind run to compare with"
    if [[ -f "$last" ]]; then
      grew=$(awk -F'\t' '
        NR == FNR { if ($2 == "phase") before[$3] = $1; next }
        $2 == "phase" { d = $1 - before[$3]; if (d > m) { m = d; n = $3; now = $1 } }
        END { if (n == "") print "no phase grew since the last run of this kind"; else printf "%s grew most since the last run of this kind: %d s, +%d s", n, now, m }' "$last" "$file")
    fi
    printf '==> [ci] warning: %d s, over the %s budget of %d s by %d s. The longest phase: %s; %s\n' \
      "$total" "$kind" "$budget" "$((total - budget))" "$longest" "$grew"
  fi
  mkdir -p "$(dirname "$last")" && cp "$file" "$last"
}
