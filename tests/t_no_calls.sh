#!/usr/bin/env bash
# The proof is in the machine code: the benchmark wrappers of the fast-path operations, built at
# -O2, contain no call and no indirect jump or call. Their cold halves (errors, full rings,
# compiled into separate .cold blocks) may call; the path a successful operation takes may not.
set -u
cd "$(dirname "$0")/.."
bin=build/bench/icount_shm
[ -x $bin ] || { echo "FAIL: $bin not built (make)"; exit 1; }
command -v objdump >/dev/null || { echo "FAIL: objdump missing (make deps installs binutils)"; exit 1; }
fails=0
for fn in bench_put8 bench_get8 bench_flush_idle bench_progress_idle bench_progress_live_empty \
          bench_am_short8 bench_amo_add8; do
  body=$(objdump -d --no-show-raw-insn "$bin" | awk -v f="<$fn>:" '$2 == f { on = 1; next } on && NF == 0 { exit } on')
  if [ -z "$body" ]; then echo "FAIL: $fn not found in $bin"; fails=$((fails + 1)); continue; fi
  bad=$(grep -E '\b(call|callq)\b|\bjmp[q]? +\*' <<<"$body")
  n=$(grep -c . <<<"$body")
  if [ -n "$bad" ]; then
    echo "FAIL: $fn has a call or an indirect branch:"; echo "$bad"; fails=$((fails + 1))
  else
    echo "ok: $fn: $n instructions, no call, no indirect branch"
  fi
done
# the tag build's wrappers (send, the receive's match-and-complete, progress) likewise
tagbin=build/bench/icount_tag
[ -x $tagbin ] || { echo "FAIL: $tagbin not built (make)"; exit 1; }
for fn in bench_tag_send8 bench_tag_recv8 bench_tag_recv8_progress bench_tag_progress_idle; do
  body=$(objdump -d --no-show-raw-insn "$tagbin" | awk -v f="<$fn>:" '$2 == f { on = 1; next } on && NF == 0 { exit } on')
  if [ -z "$body" ]; then echo "FAIL: $fn not found in $tagbin"; fails=$((fails + 1)); continue; fi
  bad=$(grep -E '\b(call|callq)\b|\bjmp[q]? +\*' <<<"$body")
  n=$(grep -c . <<<"$body")
  if [ -n "$bad" ]; then
    echo "FAIL: $fn has a call or an indirect branch:"; echo "$bad"; fails=$((fails + 1))
  else
    echo "ok: $fn: $n instructions, no call, no indirect branch"
  fi
done
# rc_mlx5 (issue: put8, flush with the completion present, progress idle, AM short send), both
# doorbell builds
for rcbin in build/bench/icount_rc build/bench/icount_rc_db; do
  [ -x $rcbin ] || { echo "FAIL: $rcbin not built (make)"; fails=$((fails + 1)); continue; }
  for fn in bench_put8 bench_flush_ready bench_progress_idle bench_progress_live_empty \
            bench_am_short8 bench_amo_add8; do
    body=$(objdump -d --no-show-raw-insn "$rcbin" | awk -v f="<$fn>:" '$2 == f { on = 1; next } on && NF == 0 { exit } on')
    if [ -z "$body" ]; then echo "FAIL: $fn not found in $rcbin"; fails=$((fails + 1)); continue; fi
    # a jmp to the function's own .cold part is the slow path (tail call); calls are not allowed
    bad=$(grep -E '\b(call|callq)\b|\bjmp[q]? +\*' <<<"$body")
    n=$(grep -c . <<<"$body")
    if [ -n "$bad" ]; then
      echo "FAIL: $rcbin $fn has a call or an indirect branch:"; echo "$bad"; fails=$((fails + 1))
    else
      echo "ok: $rcbin $fn: $n instructions, no call, no indirect branch"
    fi
  done
done
[ $fails -eq 0 ]
