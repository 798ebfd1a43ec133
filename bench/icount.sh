#!/usr/bin/env bash
# Instructions per operation, by callgrind: each operation's noinline wrapper is the only function
# counted (--toggle-collect), the program runs it N and 2N times, and the difference over N is the
# cost of one call with set-up and loop cancelled. Prints "icount <tl> <op> <instructions>".
# Usage: [ICOUNT_PARTS="shm rc pair"] [ICOUNT_ROWS="put8 ..."] bench/icount.sh [N]
#                                (binaries: build/bench/icount_shm, icount_tag, icount_rc(_db),
#                                icount_tag_rc, icount_dc, icount_tag_dc, icount_pair)
# The pair build's rows end with "goal" lines: each within 2 instructions of the same operation in
# the single-transport build.
set -u
cd "$(dirname "$0")/.."
N=${1:-20000}
(( N % 16 == 0 )) || { echo "icount: N must be a multiple of 16 (the batch rows)"; exit 1; }
bin=build/bench/icount_shm
tl=shm
command -v valgrind >/dev/null || { echo "icount: valgrind is not installed (make deps)"; exit 1; }
[ -x $bin ] || { echo "icount: build $bin first (make)"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# ICOUNT_PARTS: which builds to count (default all: shm tag rc dc pair)
want() { [[ " ${ICOUNT_PARTS:-shm tag rc dc pair} " == *" $1 "* ]]; }
declare -A seen  # "tl op" -> instructions, for the pair rows' goals
row() { # tl, printed name, count at N operations, count at 2N: prints
  # "icount <tl> <op> <per operation>"
  local v
  v=$(awk -v a="$3" -v b="$4" -v n="$N" 'BEGIN { printf "%.1f", (b - a) / n }')
  seen["$1 $2"]=$v
  echo "icount $1 $2 $v"
}

count() { # op, wrapper function(s), iterations -> instructions inside the wrapper
  # --fair-sched: over rvxsim the counted thread waits on the model's engine thread now and then,
  # which valgrind's default scheduling starves (the counts do not depend on it)
  # "wrapper,await": a blocking call; the function in which it waits for its CQE (rvx's
  # rvx__mlx5_cq_await, the floors' floor_cq_await) toggles collection off while it runs, so the
  # call counts as if the CQE were there at its second look, whatever the model's latency
  local fn toggles=()
  IFS=, read -ra fn <<<"$2"
  for f in "${fn[@]}"; do toggles+=(--toggle-collect="$f"); done
  valgrind --tool=callgrind --fair-sched=yes --callgrind-out-file="$tmp/cg" "${toggles[@]}" \
    "$bin" "$1" "$3" >/dev/null 2>"$tmp/err" || { cat "$tmp/err" >&2; echo 0; return; }
  awk '/^(summary|totals):/ { print $2; exit }' "$tmp/cg"
}

# A batch row (op_batch16) counts calls of 16 operations: N/16 and 2N/16 calls are N and 2N
# operations, so its row is the cost of one operation.
per() { [[ $1 == *_batch16 ]] && echo 16 || echo 1; }
ops=(put8:bench_put8 ref_put8:ref_put8 get8:bench_get8 flush_idle:bench_flush_idle
     progress_idle:bench_progress_idle progress_live_empty:bench_progress_live_empty
     am_short8:bench_am_short8 amo_add8:bench_amo_add8 put8_batch16:bench_put8_batch16
     am_short8_batch16:bench_am_short8_batch16)
want shm && for entry in "${ops[@]}"; do
  op=${entry%%:*}; fn=${entry#*:}; k=$(per "$op")
  a=$(count "$op" "$fn" $((N / k)))
  b=$(count "$op" "$fn" $((2 * N / k)))
  row "$tl" "$op" "$a" "$b"
done

# Tag matching (RVX_TAG=1 build, build/bench/icount_tag): send, the tag layer's part of a matched
# expected receive (post + the tl's upcall), the same through shm's ring (post + progress), and
# progress with nothing to do in a tag build. Entries: printed name:op:wrapper.
bin=build/bench/icount_tag
if ! want tag; then :
elif [ -x $bin ]; then
  for entry in tag_send8:tag_send8:bench_tag_send8 tag_recv8:tag_recv8:bench_tag_recv8 \
               tag_recv8_progress:tag_recv8_progress:bench_tag_recv8_progress \
               tag_progress_idle:progress_idle:bench_tag_progress_idle; do
    IFS=: read -r name op fn <<<"$entry"
    a=$(count "$op" "$fn" "$N")
    b=$(count "$op" "$fn" $((2 * N)))
    row "$tl" "$name" "$a" "$b"
  done
else
  echo "icount: $bin not built (make): tag operations skipped"
fi

# rc_mlx5 (build/bench/icount_rc, and icount_rc_db with the 8-byte doorbell), on rvxsim unless
# RVX_ICOUNT_HW=1 asks for the system's rdma-core and a real adapter. Only the application thread
# runs the wrappers, so the model's engine thread is not counted.
simlib=$([ "${RVX_ICOUNT_HW:-0}" = 1 ] && echo "" || echo "$PWD/build/sim")
mlx5_rows() { # tl, entries name:binary:op:wrapper...
  local tl=$1 entry name b op fn bin a c k; shift
  for entry in "$@"; do
    IFS=: read -r name b op fn <<<"$entry"
    [[ -z "${ICOUNT_ROWS:-}" || " $ICOUNT_ROWS " == *" $name "* ]] || continue  # only these mlx5 rows
    bin=build/bench/$b
    [ -x $bin ] || { echo "icount: $bin not built (make): $name skipped"; continue; }
    k=$(per "$op")
    a=$(LD_LIBRARY_PATH=$simlib count "$op" "$fn" $((N / k)))
    c=$(LD_LIBRARY_PATH=$simlib count "$op" "$fn" $((2 * N / k)))
    row "$tl" "$name" "$a" "$c"
  done
}
# Doorbells per put, single and in batches of 16: rvxsim counts the MMIO writes that tell the NIC
# (RVXSIM_COUNT_MMIO=1: doorbell records; 8-byte doorbells and BlueFlame copies, one register
# write each) around each counted call, in a native run (the mode traps stores: not under
# valgrind, and only on the model). Rows: doorbells_per_put8, doorbells_per_put_batch16 and
# dbrec_per_put_batch16.
mmio_rows() { # tl, binary
  local tl=$1 bin=build/bench/$2 op line puts db bfc dbrec
  [ -z "$simlib" ] && { echo "icount: doorbell rows need rvxsim's counts: skipped on an adapter"; return; }
  for op in put8 put8_batch16; do
    line=$(RVXSIM_COUNT_MMIO=1 LD_LIBRARY_PATH=$simlib "$bin" mmio_$op 64 2>"$tmp/err" | grep '^mmio ') ||
      { echo "icount: $tl doorbell counts failed:"; sed 's/^/icount:   /' "$tmp/err" | head -3; return; }
    read -r puts dbrec db bfc <<<"$(sed 's/[a-z_0-9]*=//g; s/^mmio [a-z_0-9]* //' <<<"$line")"
    if [ "$op" = put8 ]; then
      awk -v p="$puts" -v d="$db" -v b="$bfc" -v t="$tl" 'BEGIN { printf "icount %s doorbells_per_put8 %.4f\n", t, (d + b) / p }'
    else
      awk -v p="$puts" -v d="$db" -v b="$bfc" -v r="$dbrec" -v t="$tl" 'BEGIN {
        printf "icount %s doorbells_per_put_batch16 %.4f\n", t, (d + b) / p
        printf "icount %s dbrec_per_put_batch16 %.4f\n", t, r / p }'
    fi
  done
}

want rc && mlx5_rows rc_mlx5 put8:icount_rc:put8:bench_put8 ref_put8:icount_rc:ref_put8:ref_put8 \
             put8_db:icount_rc_db:put8:bench_put8 ref_put8_db:icount_rc_db:ref_put8:ref_put8 \
             get8:icount_rc:get8:bench_get8,rvx__mlx5_cq_await floor_get8:icount_rc:floor_get8:floor_get8,floor_cq_await \
             get8_req:icount_rc:get8_req:bench_get8_req flush_ready:icount_rc:flush_ready:bench_flush_ready \
             progress_idle:icount_rc:progress_idle:bench_progress_idle \
             progress_live_empty:icount_rc:progress_live_empty:bench_progress_live_empty \
             am_short8:icount_rc:am_short8:bench_am_short8 amo_add8:icount_rc:amo_fadd8:bench_amo_fadd8,rvx__mlx5_cq_await \
             floor_amo_add8:icount_rc:floor_amo_add8:floor_amo_add8,floor_cq_await \
             amo_add8_nf:icount_rc:amo_add8:bench_amo_add8 \
             get8_req_wait:icount_rc:get8_req_wait:bench_wait amo_fadd8_req_wait:icount_rc:amo_fadd8_req_wait:bench_wait \
             tag_send8:icount_tag_rc:tag_send8:bench_tag_send8 tag_recv8:icount_tag_rc:tag_recv8:bench_tag_recv8 \
             tag_progress_idle:icount_tag_rc:progress_idle:bench_tag_progress_idle \
             put8_batch16:icount_rc:put8_batch16:bench_put8_batch16 \
             floor_put8_batch16:icount_rc:floor_put8_batch16:floor_put8_batch16 \
             am_short8_batch16:icount_rc:am_short8_batch16:bench_am_short8_batch16
want rc && mmio_rows rc_mlx5 icount_rc

# dc_mlx5 (build/bench/icount_dc, icount_tag_dc), on rvxsim likewise: an endpoint to the
# process's own DCT. floor_put8 is the same put8 WQE posted by hand in the same binary.
# On both: get8 is a blocking 8-byte get and amo_add8 a fetching add that waits for the old value
# (floor_get8, floor_amo_add8: the same posted and waited for by hand, bench/floor_fetch.h);
# get8_req is the get posted with a request and amo_add8_nf the add without a fetch, their
# completions outside the count; get8_req_wait and amo_fadd8_req_wait are rvx_wait alone on such a
# get or fetching add whose CQE is already there (the general path's retirement).
want dc && mlx5_rows dc_mlx5 put8:icount_dc:put8:bench_put8 floor_put8:icount_dc:floor_put8:floor_put8 \
             get8:icount_dc:get8:bench_get8,rvx__mlx5_cq_await floor_get8:icount_dc:floor_get8:floor_get8,floor_cq_await \
             get8_req:icount_dc:get8_req:bench_get8_req flush_ready:icount_dc:flush_ready:bench_flush_ready \
             progress_idle:icount_dc:progress_idle:bench_progress_idle \
             progress_live_empty:icount_dc:progress_live_empty:bench_progress_live_empty \
             am_short8:icount_dc:am_short8:bench_am_short8 amo_add8:icount_dc:amo_fadd8:bench_amo_fadd8,rvx__mlx5_cq_await \
             floor_amo_add8:icount_dc:floor_amo_add8:floor_amo_add8,floor_cq_await \
             amo_add8_nf:icount_dc:amo_add8:bench_amo_add8 \
             get8_req_wait:icount_dc:get8_req_wait:bench_wait amo_fadd8_req_wait:icount_dc:amo_fadd8_req_wait:bench_wait \
             tag_send8:icount_tag_dc:tag_send8:bench_tag_send8 tag_recv8:icount_tag_dc:tag_recv8:bench_tag_recv8 \
             tag_progress_idle:icount_tag_dc:progress_idle:bench_tag_progress_idle \
             put8_batch16:icount_dc:put8_batch16:bench_put8_batch16 \
             floor_put8_batch16:icount_dc:floor_put8_batch16:floor_put8_batch16 \
             am_short8_batch16:icount_dc:am_short8_batch16:bench_am_short8_batch16
want dc && mmio_rows dc_mlx5 icount_dc

# The pair build (shm on the node, rc_mlx5 between nodes: build/bench/icount_pair), 3 ranks: 0 and
# 1 on node 0, 2 on node 1, on rvxsim. Rank 0 runs under callgrind and counts the same wrappers
# through its endpoint to rank 1 (_intra, the shm path) and to rank 2 (_inter, the rc_mlx5 path);
# the other two serve. Goal: each row at most 2 instructions above the single-transport build's
# row (shm for _intra, rc_mlx5 for _inter, the larger of the two for progress_idle).
bin=build/bench/icount_pair
pair_count() { # op, wrapper function, iterations [, binary] -> instructions inside rank 0's wrapper
  local bin=${4:-$bin}
  LD_LIBRARY_PATH=$simlib RVX_BOOT_TIMEOUT=300 build/bin/rvxrun -n 3 -t 900 -- sh -c '
    export RVX_NODE=$((RVX_RANK / 2))
    if [ "$RVX_RANK" = 0 ]; then
      exec valgrind --tool=callgrind --fair-sched=yes --callgrind-out-file="$1" --toggle-collect="$2" "$3" "$4" "$5"
    fi
    exec "$3" "$4" "$5"' sh "$tmp/cg" "$2" "$bin" "$1" "$3" >/dev/null 2>"$tmp/err" || { cat "$tmp/err" >&2; echo 0; return; }
  awk '/^(summary|totals):/ { print $2; exit }' "$tmp/cg"
}
goal() { # pair op, reference rows ("tl op")...: the verdict against the largest reference
  local op=$1 ref r v best=""; shift
  v=${seen["pair_rc_mlx5 $op"]:-}
  for r in "$@"; do
    ref=${seen["$r"]:-}
    [ -n "$ref" ] && { [ -z "$best" ] || awk -v a="$ref" -v b="$best" 'BEGIN { exit !(a > b) }'; } && best=$ref
  done
  if [ -z "$v" ] || [ -z "$best" ]; then echo "goal pair_rc_mlx5 $op <= reference + 2: n/a (a row is missing)"; return; fi
  awk -v op="$op" -v v="$v" -v r="$best" -v refs="$*" 'BEGIN {
    printf "goal pair_rc_mlx5 %s <= %.1f + 2 (%s): %.1f, %+.1f: %s\n", op, r, refs, v, v - r,
           v <= r + 2 ? "met" : "NOT MET" }'
}
if ! want pair; then :
elif [ ! -x $bin ]; then
  echo "icount: pair build not present ($bin not built: it needs include/rvx/tl/pair.h): pair rows skipped"
elif [ ! -x build/bin/rvxrun ]; then
  echo "icount: build/bin/rvxrun not built (make): pair rows skipped"
elif ! LD_LIBRARY_PATH=$simlib build/bin/rvxrun -n 3 -t 120 -- sh -c 'RVX_NODE=$((RVX_RANK / 2)) exec "$0" "$@"' \
       $bin progress_idle 1 >/dev/null 2>"$tmp/err"; then
  # e.g. a bootstrap that does not read RVX_NODE: every rank on one node, no off-node path
  echo "icount: the pair program does not run as 3 ranks on 2 nodes: pair rows skipped:"
  grep -v '^rvxrun: ' "$tmp/err" | head -3 | sed 's/^/icount:   /'
else
  for entry in put8_intra:bench_put8 put8_inter:bench_put8 am_short8_intra:bench_am_short8 \
               am_short8_inter:bench_am_short8 progress_idle:bench_progress_idle \
               progress_live_empty:bench_progress_live_empty; do
    op=${entry%%:*}; fn=${entry#*:}
    a=$(pair_count "$op" "$fn" "$N")
    b=$(pair_count "$op" "$fn" $((2 * N)))
    row pair_rc_mlx5 "$op" "$a" "$b"
  done
  goal put8_intra "shm put8"
  goal put8_inter "rc_mlx5 put8"
  goal am_short8_intra "shm am_short8"
  goal am_short8_inter "rc_mlx5 am_short8"
  goal progress_idle "shm progress_idle" "rc_mlx5 progress_idle"
  # the tag build (RVX_TAG=1, build/bench/icount_tag_pair): 8-byte eager sends
  tbin=build/bench/icount_tag_pair
  if [ -x $tbin ]; then
    for op in tag_send8_intra tag_send8_inter; do
      a=$(pair_count "$op" bench_tag_send8 "$N" $tbin)
      b=$(pair_count "$op" bench_tag_send8 $((2 * N)) $tbin)
      row pair_rc_mlx5 "$op" "$a" "$b"
    done
    goal tag_send8_intra "shm tag_send8"
    goal tag_send8_inter "rc_mlx5 tag_send8"
  else
    echo "icount: $tbin not built (make): pair tag rows skipped"
  fi
fi
