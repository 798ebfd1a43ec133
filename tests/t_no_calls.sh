#!/usr/bin/env bash
# The proof is in the machine code: the benchmark wrappers of the fast-path operations, built at
# -O2, contain no call and no indirect jump or call. Their cold halves (errors, full rings or
# queues, the signaled WQE: compiled into separate .cold blocks and reached by a jump or a tail
# call) may call; the path a successful operation takes may not.
set -u
cd "$(dirname "$0")/.."
command -v objdump >/dev/null || { echo "FAIL: objdump missing (make deps installs binutils)"; exit 1; }
fails=0

check() { # binary, wrapper functions...
  local bin=$1 fn body bad n; shift
  if [ ! -x "$bin" ]; then echo "FAIL: $bin not built (make)"; fails=$((fails + 1)); return; fi
  for fn in "$@"; do
    body=$(objdump -d --no-show-raw-insn "$bin" | awk -v f="<$fn>:" '$2 == f { on = 1; next } on && NF == 0 { exit } on')
    if [ -z "$body" ]; then echo "FAIL: $fn not found in $bin"; fails=$((fails + 1)); continue; fi
    bad=$(grep -E '\b(call|callq)\b|\bjmp[q]? +\*' <<<"$body")
    n=$(grep -c . <<<"$body")
    if [ -n "$bad" ]; then
      echo "FAIL: $bin $fn has a call or an indirect branch:"; echo "$bad"; fails=$((fails + 1))
    else
      echo "ok: $bin $fn: $n instructions, no call, no indirect branch"
    fi
  done
}

check build/bench/icount_shm bench_put8 bench_get8 bench_flush_idle bench_progress_idle \
  bench_progress_live_empty bench_am_short8 bench_amo_add8
# the tag build's wrappers (send, the receive's match-and-complete, progress)
check build/bench/icount_tag bench_tag_send8 bench_tag_recv8 bench_tag_recv8_progress \
  bench_tag_progress_idle
# rc_mlx5: put8, flush with the completion present, progress idle and live, AM short send, in
# both doorbell builds
for rcbin in build/bench/icount_rc build/bench/icount_rc_db; do
  check $rcbin bench_put8 bench_flush_ready bench_progress_idle bench_progress_live_empty \
    bench_am_short8 bench_amo_add8
done
# dc_mlx5: put8, flush, progress idle and live, AM short send, atomic; the tag build's send,
# receive and progress
check build/bench/icount_dc bench_put8 bench_flush_ready bench_progress_idle bench_progress_live_empty \
  bench_am_short8 bench_amo_add8
check build/bench/icount_tag_dc bench_tag_send8 bench_tag_recv8 bench_tag_progress_idle
# the pair build (shm on the node, rc_mlx5 between nodes): each wrapper holds both paths and the
# branch between them; neither may be reached through a call or a pointer
if [ -f include/rvx/tl/pair.h ]; then
  check build/bench/icount_pair bench_put8 bench_progress_idle bench_progress_live_empty bench_am_short8
  check build/bench/icount_tag_pair bench_tag_send8
else
  echo "note: pair build not present (no include/rvx/tl/pair.h): its wrappers not checked"
fi
[ $fails -eq 0 ]
