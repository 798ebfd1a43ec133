#!/usr/bin/env bash
# Run every rvx test: the C tests (build/tests/t_*), their rc_mlx5 and dc_mlx5 builds
# (build/tests-rc/t_*, build/tests-dc/t_*, run on rvxsim), the script tests (tests/t_*.sh) and the rvxsim tests (build/sim/tests/t_*). One line per test, the log of each failure,
# and a last line "N passed, N failed, N skipped". Exit status 1 if anything failed.
# A test exits 0 (pass), 77 (skip: it prints why) or anything else (fail).
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
for t in build/tests/t_*; do
  [ -x "$t" ] && run_one "$(basename "$t")" "$t"
done
for t in tests/t_*.sh; do
  run_one "$(basename "$t" .sh)" bash "$t"
done
# rc_mlx5 builds of the tests: on rvxsim, the software ConnectX (no adapter here; `make hwcheck`
# runs them on a real one)
for t in build/tests-rc/t_*; do
  [ -x "$t" ] && run_one "rc/$(basename "$t")" env LD_LIBRARY_PATH=build/sim "$t"
done
# dc_mlx5 builds, on rvxsim as well
for t in build/tests-dc/t_*; do
  [ -x "$t" ] && run_one "dc/$(basename "$t")" env LD_LIBRARY_PATH=build/sim "$t"
done
if ls build/sim/tests/t_* >/dev/null 2>&1; then
  for t in build/sim/tests/t_*; do
    [ -x "$t" ] && run_one "sim/$(basename "$t")" env -u RVXSIM_STRICT LD_LIBRARY_PATH=build/sim "$t"
  done
fi

[ ${#failed[@]} -gt 0 ] && echo "failed: ${failed[*]}"
echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
