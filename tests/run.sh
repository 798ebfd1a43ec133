#!/usr/bin/env bash
# Run every rvx test that tests/MANIFEST lists, in the variants it lists: the C tests
# (build/tests/), their rc_mlx5, dc_mlx5 and pair builds on rvxsim (build/tests-rc/, tests-dc/,
# tests-pair/, tests-pair-dc/), the script tests (tests/t_*.sh) and rvxsim's own tests
# (build/sim/tests/). One line per test, the log of each failure, and a last line
# "N passed, N failed, N skipped". Exit status 1 if anything failed.
# A test exits 0 (pass), 77 (skip: it prints why) or anything else (fail). A test the manifest
# lists but make did not build fails (it is skipped when a filter picks it: a partial build).
# Usage: tests/run.sh [name-filter]
set -u
cd "$(dirname "$0")/.."
filter=${1:-}
logs=build/test-logs
mkdir -p "$logs"
pass=0 fail=0 skip=0 failed=()
limit=${RVX_TEST_TIMEOUT:-600}

run_one() { # name, command...
  local name=$1; shift
  [ -n "$filter" ] && [[ "$name" != *"$filter"* ]] && return
  local log="$logs/${name//\//_}.log" start=$SECONDS rc
  timeout -k 5 "$limit" "$@" >"$log" 2>&1 </dev/null
  rc=$?
  local took=$((SECONDS - start))
  if [ $rc -eq 0 ]; then
    pass=$((pass + 1)); printf 'PASS  %-32s %3ss\n' "$name" "$took"
  elif [ $rc -eq 77 ]; then
    skip=$((skip + 1)); printf 'SKIP  %-32s %s\n' "$name" "$(grep -m1 -i 'skip' "$log" | cut -c1-100)"
  else
    fail=$((fail + 1)); failed+=("$name")
    [ $rc -eq 124 ] && echo "(timed out after ${limit}s)" >>"$log"
    printf 'FAIL  %-32s %3ss (exit %d; log %s)\n' "$name" "$took" "$rc" "$log"
    tail -n 15 "$log" | sed 's/^/      | /'
  fi
}

# rvx's own tests run the model as a lint: stale reserved WQE bytes are faults (the hardware, and
# the model by default, ignore them). The model's tests and the unmodified clients run without it.
export RVXSIM_STRICT=1
not_built() { echo "${3:-}$1: in tests/MANIFEST but not built (make)"; exit "$2"; }
runs=$(tests/manifest.sh runs) || { echo "FAIL  tests/MANIFEST cannot be read"; exit 1; }
while IFS=$'\t' read -r name file cmd; do
  if [ -e "$file" ]; then
    run_one "$name" $cmd  # no word of the manifest has a space: $cmd splits into its words
  elif [ -n "$filter" ]; then
    run_one "$name" bash -c "$(declare -f not_built); not_built $file 77 SKIP:\ "
  else
    run_one "$name" bash -c "$(declare -f not_built); not_built $file 1"
  fi
done <<<"$runs"

[ ${#failed[@]} -gt 0 ] && echo "failed: ${failed[*]}"
echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
