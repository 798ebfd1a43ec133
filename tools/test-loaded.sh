#!/usr/bin/env bash
# make test-loaded: the whole suite beside CPU hogs, as on a shared machine. A test that fails only
# here assumed a timing that load breaks (docs/tests.md, "Under load").
#   LOADED_RUNS=3   how many suite runs in a row (each must pass)
#   LOADED_HOGS=N   busy loops beside it (default: twice the CPUs)
#   arguments       passed to tests/run.sh (a name filter)
set -u
cd "$(dirname "$0")/.."
runs=${LOADED_RUNS:-1}
hogs=${LOADED_HOGS:-$(( 2 * $(nproc) ))}
pids=()
stop_hogs() { [ ${#pids[@]} -gt 0 ] && kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; pids=(); }
trap stop_hogs EXIT
trap 'exit 130' INT TERM
for ((i = 0; i < hogs; i++)); do
  bash -c 'while :; do :; done' &
  pids+=($!)
done
echo "test-loaded: $hogs busy loops beside the suite, $runs run(s)"
for ((r = 1; r <= runs; r++)); do
  start=$SECONDS
  echo "== run $r of $runs (load average $(cut -d' ' -f1-3 /proc/loadavg))"
  if ! tests/run.sh "$@"; then
    echo "test-loaded: run $r failed after $((SECONDS - start)) s"
    exit 1
  fi
  echo "test-loaded: run $r passed in $((SECONDS - start)) s"
done
