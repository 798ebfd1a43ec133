#!/usr/bin/env bash
# fuzz/run.sh HARNESS...: run each libFuzzer harness of build/fuzz/ for FUZZ_S seconds (default
# 600), two at a time at nice FUZZ_NICE (default 19), starting from its corpus in
# fuzz/corpus/<harness>/ (read only; new inputs go to build/fuzz/corpus/<harness>/). Logs in
# build/fuzz/<harness>.log, crashes, leaks and timeouts in build/fuzz/artifacts/<harness>/.
# FUZZ_MERGE=1 adds the inputs that found new coverage to fuzz/corpus/<harness>/ afterwards
# (-merge=1). Prints one line per harness: executions, exec/s, edge coverage, features, crashes,
# leaks, timeouts; exits 1 if any harness failed.
set -u
cd "$(dirname "$0")/.."
FUZZ_S=${FUZZ_S:-600}
FUZZ_NICE=${FUZZ_NICE:-19}
export RVXSIM_FABRIC_DIR=${RVXSIM_FABRIC_DIR:-/dev/shm/rvxsim-fuzz-$(id -u)}
mkdir -p build/fuzz

one() {
  local h=$1 extra=()
  mkdir -p "build/fuzz/corpus/$h" "build/fuzz/artifacts/$h" "fuzz/corpus/$h"
  case $h in
    rx_*) extra+=(-max_len=2048) ;;
  esac
  # -timeout is wall time: a niced harness on a loaded machine was seen descheduled for over 10 s
  # on inputs that run in 20 ms; a hang of rvx is a loop, found at 120 s as well. -reload=0: no
  # other process adds to the corpus, so it is not re-read every second
  env LD_LIBRARY_PATH=build/sim nice -n "$FUZZ_NICE" "build/fuzz/$h" -max_total_time="$FUZZ_S" -timeout=120 -reload=0 \
    -rss_limit_mb=2560 -print_final_stats=1 -artifact_prefix="build/fuzz/artifacts/$h/" \
    "${extra[@]}" "build/fuzz/corpus/$h" "fuzz/corpus/$h" >"build/fuzz/$h.log" 2>&1
  if [ "${FUZZ_MERGE:-0}" = 1 ]; then
    env LD_LIBRARY_PATH=build/sim nice -n "$FUZZ_NICE" "build/fuzz/$h" -merge=1 "${extra[@]}" \
      "fuzz/corpus/$h" "build/fuzz/corpus/$h" >>"build/fuzz/$h.merge.log" 2>&1
  fi
}
export -f one
export FUZZ_S FUZZ_NICE
printf '%s\n' "$@" | xargs -P 2 -I{} bash -c 'one {}'

bad=0
printf '%-18s %12s %8s %7s %9s %7s %6s %8s\n' harness executions exec/s edges features crashes leaks timeouts
for h in "$@"; do
  log=build/fuzz/$h.log
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -E '^#[0-9]+' "$log" | tail -1 | sed -n 's/.*cov: \([0-9]*\).*/\1/p')
  ft=$(grep -E '^#[0-9]+' "$log" | tail -1 | sed -n 's/.*ft: \([0-9]*\).*/\1/p')
  a=build/fuzz/artifacts/$h
  nc=$(ls "$a" | grep -c '^crash-\|^oom-\|^deadly-'); nl=$(ls "$a" | grep -c '^leak-'); nt=$(ls "$a" | grep -c '^timeout-')
  printf '%-18s %12s %8s %7s %9s %7s %6s %8s\n' "$h" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "$nc" "$nl" "$nt"
  [ -z "$execs" ] || [ "$nc" != 0 ] || [ "$nl" != 0 ] || [ "$nt" != 0 ] && bad=1
done
exit $bad
