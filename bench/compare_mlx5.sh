#!/usr/bin/env bash
# rvx and UCX's own rc_mlx5 (and dc_mlx5) transports side by side on rvxsim, by one method: callgrind counts the
# instructions inside one noinline wrapper per operation (--toggle-collect), each program runs it
# N and 2N times, and (count(2N) - count(N)) / N is one call with set-up cancelled. rvx's wrappers
# are bench/icount_rc.c and bench/icount_tag.c (the rc_mlx5 builds), UCX's bench/icount_ucx.c,
# linked against the system's UCX and run unmodified on the model through build/sim/rvxsim-env.
# Writes the "rvx beside UCX on rvxsim" section of bench/RESULTS.md and prints its lines.
# Usage: bench/compare_mlx5.sh [N]      (make compare-mlx5)
set -u
cd "$(dirname "$0")/.."
N=${1:-2000}
command -v valgrind >/dev/null || { echo "compare-mlx5: valgrind is not installed (make deps)"; exit 1; }
for b in build/bench/icount_rc build/bench/icount_tag_rc build/bench/icount_ucx build/sim/rvxsim-env; do
  [ -x $b ] || { echo "compare-mlx5: $b is not built (make compare-mlx5 builds it)"; exit 1; }
done
unset RVXSIM_STRICT          # UCX leaves reserved bytes stale, as the hardware allows
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

count() { # env-prefix binary op wrapper n [tl] -> instructions inside the wrapper (empty on failure)
  local pre=$1 bin=$2 op=$3 fn=$4 n=$5 tl=${6:-}
  $pre valgrind --tool=callgrind --fair-sched=yes --callgrind-out-file="$tmp/cg" \
    --toggle-collect="$fn" "$bin" "$op" "$n" $tl >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [ $rc -ne 0 ]; then
    grep -h "icount" "$tmp/err" "$tmp/out" | grep -v "^==" | head -3 >&2
    echo "compare-mlx5: $bin $op $n exited $rc" >&2
  fi
  awk '/^(summary|totals):/ { print $2; exit }' "$tmp/cg"
}

per_call() { # env-prefix binary op wrapper n [tl]
  local a b
  a=$(count "$1" "$2" "$3" "$4" "$5" "${6:-}")
  b=$(count "$1" "$2" "$3" "$4" $((2 * $5)) "${6:-}")
  [ -n "$a" ] && [ -n "$b" ] || { echo "nan"; return; }
  awk -v a="$a" -v b="$b" -v n="$5" 'BEGIN { printf "%.1f", (b - a) / n }'
}

RVX="env LD_LIBRARY_PATH=$PWD/build/sim"
UCX="build/sim/rvxsim-env"
NF=$((N / 8 > 50 ? N / 8 : 50))   # flush_ready sleeps between calls: fewer of them
rows=(
  # label | rvx binary op wrapper n | UCX binary op wrapper n
  "8-byte put, UCT (uct_ep_put_short)|icount_rc put8 bench_put8 $N|uct_put8 bench_uct_put8 $N"
  "8-byte put, UCP (ucp_put_nbx)|icount_rc put8 bench_put8 $N|ucp_put8 bench_ucp_put8 $N"
  "8-byte AM short (uct_ep_am_short)|icount_rc am_short8 bench_am_short8 $N|uct_am_short8 bench_uct_am_short8 $N"
  "idle progress, one live endpoint, UCT (uct_worker_progress)|icount_rc progress_live_empty bench_progress_live_empty $N|uct_progress_idle bench_uct_progress_idle $N"
  "idle progress, one live endpoint, UCP (ucp_worker_progress)|icount_rc progress_live_empty bench_progress_live_empty $N|ucp_progress_idle bench_ucp_progress_idle $N"
  "flush, completion in the CQ (UCT progress + uct_ep_flush)|icount_rc flush_ready bench_flush_ready $NF|uct_flush_ready bench_uct_flush_ready $NF"
  "8-byte tag send (ucp_tag_send_nbx)|icount_tag_rc tag_send8 bench_tag_send8 $N|ucp_tag_send8 bench_ucp_tag_send8 $N"
  # dc_mlx5: UCX only, rvx has no DC transport yet ("-" = no rvx column)
  "dc_mlx5: 8-byte put, UCT (uct_ep_put_short)|-|uct_put8 bench_uct_put8 $N dc_mlx5"
  "dc_mlx5: 8-byte put, UCP (ucp_put_nbx)|-|ucp_put8 bench_ucp_put8 $N dc_mlx5"
  "dc_mlx5: 8-byte AM short (uct_ep_am_short)|-|uct_am_short8 bench_uct_am_short8 $N dc_mlx5"
  "dc_mlx5: idle progress, one live endpoint, UCT (uct_worker_progress)|-|uct_progress_idle bench_uct_progress_idle $N dc_mlx5"
  "dc_mlx5: flush, completion in the CQ (UCT progress + uct_ep_flush)|-|uct_flush_ready bench_uct_flush_ready $NF dc_mlx5"
  "dc_mlx5: 8-byte tag send (ucp_tag_send_nbx)|-|ucp_tag_send8 bench_ucp_tag_send8 $N dc_mlx5"
)
lines=()
for row in "${rows[@]}"; do
  IFS='|' read -r label r u <<<"$row"
  read -r rb rop rfn rn <<<"$r"
  read -r uop ufn un utl <<<"$u"
  uv=$(per_call "$UCX" build/bench/icount_ucx "$uop" "$ufn" "$un" "${utl:-}")
  if [ "$rb" = "-" ]; then
    echo "compare-mlx5 ${utl:-rc_mlx5} $uop=$uv (rvx: dc_mlx5 not paired here yet)"
    lines+=("| $label | n/a: not paired yet | $uop $uv | n/a |")
    continue
  fi
  rv=$(per_call "$RVX" "build/bench/$rb" "$rop" "$rfn" "$rn")
  ratio=$(awk -v r="$rv" -v u="$uv" 'BEGIN { if (u + 0 > 0 && r != "nan") printf "%.2f", r / u; else print "n/a" }')
  echo "compare-mlx5 $rop=$rv $uop=$uv ratio=$ratio"
  lines+=("| $label | $rop $rv | $uop $uv | $ratio |")
done

ucxver=$(ucx_info -v 2>/dev/null | head -1 | sed 's/^# *//')
pkg=$(dpkg-query -W -f='${Package} ${Version}' libucx0 2>/dev/null)
{
  echo "<!-- compare-mlx5: written by bench/compare_mlx5.sh -->"
  echo "## rvx beside UCX's rc_mlx5 (and UCX's dc_mlx5) on rvxsim (make compare-mlx5)"
  echo
  echo "Instructions per call inside one noinline wrapper per operation (callgrind --toggle-collect,"
  echo "N and 2N calls, difference / N; N = $N, $NF for flush), both over rc_mlx5 on the model, same"
  echo "machine, same run ($(date -u '+%Y-%m-%d %H:%M UTC')). UCX measured: Debian's build"
  echo "(\`$pkg\`, $ucxver), built with assertions and parameter checks. Reference figures for a"
  echo "release build of UCX 1.13.1 (not measured here): uct_ep_put_short 157 (Debian's 269),"
  echo "ucp_put_nbx 212 (342), idle progress 74 UCT / 92 UCP (80 / 105). Ratio = rvx / UCX (lower is"
  echo "fewer instructions for rvx). UCX's flush row is one uct_worker_progress (which takes the"
  echo "CQE) plus uct_ep_flush, the two calls a UCT user needs to learn the put completed; rvx's is"
  echo "rvx_ep_flush_nb with the CQE present. The dc_mlx5 rows are UCX's alone (the same wrappers over"
  echo "dc_mlx5, UCP with UCX_TLS=dc_mlx5,ud_mlx5): rvx's dc_mlx5 (a first cut, RMA and atomics only)"
  echo "is counted by make icount (bench/icount_dc.c) but not yet paired with them here."
  echo
  echo "| operation | rvx | UCX | rvx / UCX |"
  echo "|---|---|---|---|"
  printf '%s\n' "${lines[@]}"
  echo
  echo "Command: \`make compare-mlx5\` (bench/compare_mlx5.sh $N)."
  echo "<!-- /compare-mlx5 -->"
} >"$tmp/section"
res=bench/RESULTS.md
if grep -q "^<!-- compare-mlx5:" "$res"; then
  awk -v f="$tmp/section" '/^<!-- compare-mlx5:/ { while ((getline l < f) > 0) print l; skip = 1; next }
    /^<!-- \/compare-mlx5 -->/ { skip = 0; next } !skip' "$res" >"$tmp/res" && cat "$tmp/res" >"$res"
else
  { echo; cat "$tmp/section"; } >>"$res"
fi
echo "compare-mlx5: section written to $res"
