#!/usr/bin/env bash
# OpenSHMEM calls beside rvx's own, instructions per call, by the method of compare_mlx5.sh:
# callgrind counts the instructions inside one noinline wrapper per operation (--toggle-collect),
# each program runs it N and 2N times, and (count(2N) - count(N)) / N is one call with set-up
# cancelled. bench/icount_shmem.c, built by rvxshcc for shm, rc_mlx5 and dc_mlx5 (these on
# rvxsim): PE 0 of 2 operates on PE 1 (both under callgrind, PE 0's count kept). A get's and
# a fetching atomic's wait for its CQE is left out on both sides (rvx__mlx5_cq_await, toggled
# off inside the wrapper, as make icount does; and rvx__sh_wait, should rvx answer
# RVX_INPROGRESS): its length is the model's timing. With Debian's Open MPI OSHMEM installed
# (oshrun, liboshmem), the same source is built against it and counted the same way on rvxsim
# (UCX through build/sim/rvxsim-env): putmem, long_p and quiet. Its long_g and fetch_add wait in
# a loop compiled into the call itself (mca_spml_ucx_get, the atomic's), which turns
# ucp_request_check_status and ucp_worker_progress until the answer is there and opal_progress
# every 100 turns: no function holds just the wait, so bench/cg_once.py counts them with the loop
# as one turn (every instruction at most once per call, from --dump-instr of the N and 2N runs;
# opal_progress left out), the turn whose progress finds the answer included. Lazy binding is
# off for every OSHMEM row (LD_BIND_NOW), so that no symbol lookup falls into one run's calls and
# not the other's. Where OSHMEM does not run, its rows say so. Only the PE that ran the wrapper is
# counted (the other's waits would toggle collection on).
# Writes the "OpenSHMEM" section of bench/RESULTS.md and prints its lines.
# Usage: bench/compare_shmem.sh [N]      (make compare-shmem; COMPARE_SHMEM_REPS: runs per
# rvxsim row, the median is kept, default 3)
set -u
cd "$(dirname "$0")/.."
N=${1:-2000}
REPS=${COMPARE_SHMEM_REPS:-3}
command -v valgrind >/dev/null || { echo "compare-shmem: valgrind is not installed (make deps)"; exit 1; }
command -v python3 >/dev/null || { echo "compare-shmem: python3 is not installed (make deps)"; exit 1; }
for t in shm rc dc; do
  [ -x build/bench/icount_shmem_$t ] || { echo "compare-shmem: build/bench/icount_shmem_$t is not built (make compare-shmem builds it)"; exit 1; }
done
unset RVXSIM_STRICT
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

run_cg() { # out-dir launcher binary op wrapper n [callgrind options] -> the file of the PE that ran the wrapper
  local dir=$1 pre=$2 bin=$3 op=$4 fn=$5 n=$6
  shift 6
  rm -rf "$dir" && mkdir -p "$dir"
  $pre valgrind --tool=callgrind --fair-sched=yes --callgrind-out-file="$dir/cg.%p" \
    --toggle-collect="$fn" "$@" "$bin" "$op" "$n" >"$dir/out" 2>"$dir/err"
  local rc=$?
  if [ $rc -ne 0 ]; then
    grep -v "^==" "$dir/err" | head -3 >&2
    echo "compare-shmem: $bin $op $n exited $rc" >&2
    return
  fi
  # the PE that ran the wrapper alone: the other one's waits would toggle collection on
  local f
  for f in "$dir"/cg.*; do grep -q "$fn" "$f" && { echo "$f"; return; }; done
  echo "compare-shmem: $bin $op $n: no process ran $fn" >&2
}

count() { # launcher binary op wrapper n -> instructions inside the wrapper, its wait left out
  local w ws toggles=() f
  read -ra ws <<<"${WAITFN-rvx__sh_wait* rvx__mlx5_cq_await}" # no globbing
  for w in "${ws[@]}"; do toggles+=(--toggle-collect="$w"); done
  f=$(run_cg "$tmp/cg" "$@" "${toggles[@]}")
  [ -n "$f" ] && awk '/^(summary|totals):/ { print $2; exit }' "$f"
}

once() { # env-prefix binary op wrapper n -> one (count(2N) - count(N)) / N
  local a b
  a=$(count "$1" "$2" "$3" "$4" "$5")
  b=$(count "$1" "$2" "$3" "$4" $((2 * $5)))
  [ -n "$a" ] && [ -n "$b" ] || { echo "nan"; return; }
  awk -v a="$a" -v b="$b" -v n="$5" 'BEGIN { printf "%.1f", (b - a) / n }'
}

# A call whose wait loop is compiled into it: the loop as one turn (bench/cg_once.py). A quarter
# of the calls: every instruction counts at most once a call, so the count does not depend on
# how many calls there are, and each call spins for thousands of turns under callgrind.
once_turn() { # env-prefix binary op wrapper n
  local a b n=$(($5 / 4)) opts=(--dump-instr=yes --separate-callers=40)
  a=$(run_cg "$tmp/t1" "$1" "$2" "$3" "$4" $n "${opts[@]}")
  b=$(run_cg "$tmp/t2" "$1" "$2" "$3" "$4" $((2 * n)) "${opts[@]}")
  [ -n "$a" ] && [ -n "$b" ] || { echo "nan"; return; }
  python3 bench/cg_once.py "$a" "$b" "$4" $n opal_progress || echo "nan"
}

# On rvxsim how often a put takes the queue's slow path follows the engine's timing, which moves
# a row by a few instructions from run to run: such rows are the median of REPS runs (shm's are
# exact and run once).
per_call() { # env-prefix binary op wrapper n
  local i v=() reps=1
  [[ $2 == *_shm ]] || reps=$REPS
  for ((i = 0; i < reps; i++)); do v+=("$(${ONCE:-once} "$@")"); done
  printf '%s\n' "${v[@]}" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'
}

RUN="build/bin/rvxrun -n 2 -t 600"
SIM="env LD_LIBRARY_PATH=$PWD/build/sim $RUN"
rows=(
  # label | shmem op wrapper | rvx op wrapper | goal: rvx + this
  "shmem_putmem 8 B|putmem8 bench_sh_putmem8|rvx_put8 bench_rvx_put8|5"
  "shmem_long_p|long_p bench_sh_long_p|rvx_put8 bench_rvx_put8|5"
  "shmem_quiet, nothing outstanding|quiet bench_sh_quiet|rvx_flush bench_rvx_flush|5"
  "shmem_long_g (wait left out)|long_g bench_sh_long_g|rvx_get8 bench_rvx_get8|10"
  "shmem_long_atomic_fetch_add (wait left out)|fetch_add bench_sh_fetch_add|rvx_fadd8 bench_rvx_fadd8|10"
)
declare -A val
lines=()
for tl in shm rc dc; do
  pre=$RUN; [ $tl = shm ] || pre=$SIM
  for row in "${rows[@]}"; do
    IFS='|' read -r label s r goal <<<"$row"
    read -r sop sfn <<<"$s"
    read -r rop rfn <<<"$r"
    sv=$(per_call "$pre" build/bench/icount_shmem_$tl "$sop" "$sfn" "$N")
    val[$tl:$sop]=$sv
    key="$tl:$rop"
    [ -n "${val[$key]:-}" ] || val[$key]=$(per_call "$pre" build/bench/icount_shmem_$tl "$rop" "$rfn" "$N")
    rv=${val[$key]}
    verdict=$(awk -v s="$sv" -v r="$rv" -v g="$goal" 'BEGIN { if (s == "nan" || r == "nan") print "n/a"; else if (s <= r + g) print "met"; else printf "missed by %.1f", s - r - g }')
    echo "compare-shmem $tl $sop=$sv $rop=$rv goal<=+$goal $verdict"
    lines+=("| $tl | $label | $sv | $rop $rv | <= +$goal: $verdict |")
  done
done

# Open MPI's OSHMEM on rvxsim, where it runs (oshcc, oshrun; UCX through rvxsim-env)
osh=()
if command -v oshcc >/dev/null && command -v oshrun >/dev/null && [ -x build/sim/rvxsim-env ]; then
  # Debian installs liboshmem without its header and its -dev link: the source declares the
  # calls it uses, and the library is named by its file
  L=$(oshcc --showme:libdirs 2>/dev/null | awk '{ print $1 }'); L=${L:-/usr/lib/x86_64-linux-gnu/openmpi/lib}
  if ${CC:-cc} -O2 -g -DBENCH_OSHMEM -o "$tmp/icount_oshmem" bench/icount_shmem.c -L"$L" -l:liboshmem.so.40 \
       -Wl,-rpath,"$L" 2>"$tmp/oshcc.err"; then
    root=$([ "$(id -u)" = 0 ] && echo --allow-run-as-root)
    for tls in "rc_mlx5,ud_mlx5,self" "dc_mlx5,self"; do
      OSH="build/sim/rvxsim-env env UCX_TLS=$tls LD_BIND_NOW=1 oshrun -np 2 --oversubscribe $root --mca osc ^rdma -x UCX_TLS -x LD_LIBRARY_PATH -x LD_PRELOAD -x LD_BIND_NOW"
      for row in "${rows[@]}"; do
        IFS='|' read -r label s r goal <<<"$row"
        read -r sop sfn <<<"$s"
        how=once
        case $sop in long_g|fetch_add) how=once_turn ;; esac # the wait loop inside the call
        ov=$(WAITFN= ONCE=$how per_call "$OSH" "$tmp/icount_oshmem" "$sop" "$sfn" "$N" 2>>"$tmp/osh.err")
        t=${tls%%_*}; mine=${val[$t:$sop]:-nan}
        ratio=$(awk -v r="$mine" -v o="$ov" 'BEGIN { if (o + 0 > 0 && r != "nan") printf "%.3f", r / o; else print "n/a" }')
        echo "compare-shmem OSHMEM ${tls%%,*} $sop=$ov rvx=$mine ratio=$ratio"
        [ $how = once ] || label=${label/(wait left out)/(its wait loop as one turn)}
        osh+=("| OSHMEM ${tls%%,*} | $label | $ov | $mine | $ratio |")
      done
    done
  else
    osh+=("| OSHMEM | (build failed: $(head -c 120 "$tmp/oshcc.err" | tr '\n' ' ')) | n/a | | |")
  fi
else
  osh+=("| OSHMEM | not measured: oshcc/oshrun or build/sim/rvxsim-env missing | n/a | | |")
fi

{
  echo "<!-- compare-shmem: written by bench/compare_shmem.sh -->"
  echo "## OpenSHMEM (<shmem.h>) beside rvx's own calls (make compare-shmem)"
  echo
  echo "\`bench/compare_shmem.sh $N\` on $(date -u +%Y-%m-%d), callgrind, N and 2N calls of one noinline"
  echo "wrapper per operation (bench/icount_shmem.c, built by rvxshcc), PE 0 of 2 on PE 1; rc_mlx5 and"
  echo "dc_mlx5 on rvxsim, each such row the median of $REPS runs. Gets and fetching atomics are rvx's"
  echo "blocking forms on both sides; their wait for the CQE (rvx__mlx5_cq_await) is left out."
  echo "Goal (issue 29): putmem and long_p <= rvx put8 + 5, quiet <= rvx flush + 5, long_g and"
  echo "fetch_add <= rvx's blocking get8 and fetching add + 10."
  echo
  echo "| transport | call | rvx OpenSHMEM | rvx's own | goal |"
  echo "|---|---|---|---|---|"
  printf '%s\n' "${lines[@]}"
  echo
  echo "Open MPI's OSHMEM: the same source against Debian's liboshmem, run by oshrun -np 2 on rvxsim"
  echo "(--mca osc ^rdma, UCX_TLS as named, LD_BIND_NOW=1), counted the same way; its long_g and"
  echo "fetch_add wait in a loop inside the call, counted as one turn by bench/cg_once.py (each"
  echo "instruction at most once per call; opal_progress, which the loop calls every 100 turns, left"
  echo "out): the progress call that finds the answer is in, where rvx's side leaves its whole wait"
  echo "out, the test that finds the CQE included. Ratio = rvx OpenSHMEM / OSHMEM on the same"
  echo "transport (goal: <= 0.125)."
  echo
  echo "| implementation | call | OSHMEM | rvx OpenSHMEM | ratio |"
  echo "|---|---|---|---|---|"
  printf '%s\n' "${osh[@]}"
  echo "<!-- /compare-shmem -->"
} >"$tmp/section"
if grep -q '<!-- compare-shmem:' bench/RESULTS.md; then
  awk -v f="$tmp/section" '
    /<!-- compare-shmem:/ { while ((getline l < f) > 0) print l; skip = 1; next }
    skip && /<!-- \/compare-shmem -->/ { skip = 0; next }
    !skip' bench/RESULTS.md >"$tmp/r" && cp "$tmp/r" bench/RESULTS.md
else
  { echo; cat "$tmp/section"; } >>bench/RESULTS.md
fi
echo "compare-shmem: bench/RESULTS.md updated"
