#!/usr/bin/env bash
# t_fuzz: every libFuzzer harness (fuzz/) replays its whole corpus, fuzz/corpus/<harness>/, and
# then fuzzes for 3 s from it; any crash, sanitizer report, leak, timeout or request left pending
# fails (docs/robustness.md). 26 harnesses: about 2 minutes on 2 cores.
# Skips where the harnesses were not built (no clang with libFuzzer: make deps installs it).
set -u
cd "$(dirname "$0")/.."
S=${FUZZ_TEST_S:-3}
export RVXSIM_FABRIC_DIR=${RVXSIM_FABRIC_DIR:-/dev/shm/rvxsim-$(id -u)}/fuzz-test
hs=$(ls fuzz/corpus)
fail=0 n=0
for h in $hs; do
  b=build/fuzz/$h
  [ -x "$b" ] || { echo "SKIP: $b is not built (make fuzz-build needs clang with libFuzzer)"; exit 77; }
  tmp=$(mktemp -d)
  # the corpus, every input once, each reset checked against the state after set-up (fuzz/rx.c);
  # then S seconds of fuzzing into a scratch directory
  if ! env LD_LIBRARY_PATH=build/sim FUZZ_CHECK_RESET=1 "$b" -runs=0 -timeout=120 -rss_limit_mb=2560 \
        -artifact_prefix="$tmp/" "fuzz/corpus/$h" >"$tmp/replay.log" 2>&1; then
    echo "FAIL: $h: replaying fuzz/corpus/$h"; tail -n 30 "$tmp/replay.log"; fail=1
  fi
  if ! env LD_LIBRARY_PATH=build/sim "$b" -max_total_time="$S" -timeout=120 -rss_limit_mb=2560 \
        -artifact_prefix="$tmp/" -max_len=2048 "$tmp" "fuzz/corpus/$h" >"$tmp/fuzz.log" 2>&1; then
    echo "FAIL: $h: $S s of fuzzing"; tail -n 30 "$tmp/fuzz.log"; fail=1
  fi
  echo "$h: $(ls "fuzz/corpus/$h" | wc -l) corpus inputs replayed, $(sed -n 's/^#\([0-9]*\).*DONE.*/\1/p' "$tmp/fuzz.log") executions in $S s"
  rm -rf "$tmp"
  n=$((n + 1))
done
[ $fail = 0 ] && echo "$n harnesses: corpora replayed and fuzzed, nothing found"
exit $fail
