#!/usr/bin/env bash
# rndv_sim.sh: rendezvous PIPELINE against GET over rc_mlx5 on rvxsim, with registration cost
# modelled: build/bench/rndv_pipeline_rc, rndv_pipeline_get_rc and rndv_pipeline_put_rc
# (bench/rndv_pipeline.c built with -DRVX_TL=RVX_TL_RC_MLX5, fabric ib-edr, threshold 746129 B;
# PUT, one RDMA WRITE of the whole message after the CTS, is the one-transfer reference), run with
# LD_LIBRARY_PATH=build/sim at each registration cost RVXSIM_REG_COST_NS_PER_PAGE in COSTS, ROUNDS
# rounds (default 3) taking the protocols in turn, medians per size of each round's rate (itself
# bytes / the median of ITERS single transfers).
#
# rvxsim charges ibv_reg_mr a busy wait per 4 KiB page and nothing per call. COSTS (ns per page):
#   0     control: no registration cost, so what differs is the protocols' own traffic
#   246   ib_edr.h's RVX_FAB_REG_GROWTH_NS_PER_KB, 60 ns per 1000 bytes, x 4.096; its fixed
#         RVX_FAB_REG_OVERHEAD_NS (16 us a call) has no knob in rvxsim and is left out
#   3000  the same ratio of registration to wire time as ib_edr.h (60 ns per KB against 83 ns per KB
#         at 12000 MB/s: 0.72) at rvxsim's own rate (about 1 GB/s here: 4 us per page, x 0.72)
# rvxsim's engine is threads moving packets through shared memory on this machine: the rates are
# the model's, not a fabric's, and they move with the machine's load.
# Output per cost: the table of medians, then "rndv_sim <cost> <rndv> <first|reused> <size> <MB/s>".
# Environment: COSTS ("0 246 3000"), ROUNDS (3), RNDV_MAX (largest size, default 16 MiB),
# RNDV_ITERS (transfers per size and column, default 9).
set -u
cd "$(dirname "$0")/.." || exit 1
ROUNDS="${ROUNDS:-3}"
COSTS="${COSTS:-0 246 3000}"
MAX="${RNDV_MAX:-16777216}"
ITERS="${RNDV_ITERS:-9}"
for b in rndv_pipeline_rc rndv_pipeline_get_rc rndv_pipeline_put_rc; do
  [ -x build/bench/$b ] || { echo "rndv_sim: build build/bench/$b first (make)"; exit 1; }
done
[ -e build/sim/libibverbs.so.1 ] || { echo "rndv_sim: build rvxsim first (make)"; exit 1; }
raw=$(mktemp); out=$(mktemp); trap 'rm -f "$raw" "$out"' EXIT

first=1
for cost in $COSTS; do
  : >"$raw"
  for r in $(seq 1 "$ROUNDS"); do
    for b in rndv_pipeline_rc rndv_pipeline_get_rc rndv_pipeline_put_rc; do
      RVXSIM_REG_COST_NS_PER_PAGE=$cost LD_LIBRARY_PATH=build/sim timeout -k 2 300 build/bench/$b "$MAX" "$ITERS" \
        >"$out" 2>&1 || echo "# rndv_sim: cost $cost round $r: $b exit code $?"
      [ "$first" = 1 ] && grep '^#' "$out" | grep -v '^#  *size' | sed "s/^# /# $b: /"
      # "  size first reused   rndv: steps" rows; the sender's steps of the first round shown
      awk '$1 ~ /^[0-9]+$/ && $4 ~ /:$/ { sub(/:$/, "", $4); print $4, $1, $2, $3 }' "$out" >>"$raw"
      [ "$first" = 1 ] && grep -E '^ +[0-9]+ ' "$out" | sed "s/^ */# $b, sender's steps per transfer (first-time \/ reused: bounce writes, chunk writes, pinned): /; s/ \+[0-9.]\+ \+[0-9.]\+ \+[a-z]\+: / B: /"
    done
    first=0
  done
  echo
  echo "# RVXSIM_REG_COST_NS_PER_PAGE=$cost: MB/s, medians of $ROUNDS rounds (each: bytes / median of $ITERS transfers)"
  awk -v cost="$cost" 'function med(list,   a, k, i, j, t) {
         k = split(list, a, " "); if (k == 0) return 0
         for (i = 2; i <= k; i++) for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
         return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2 }
       function q(a, b) { return b > 0 ? a / b : 0 }
       { if (!(($2) in seen)) { seen[$2] = 1; sizes[++n] = $2 }
         f[$1, $2] = f[$1, $2] " " $3; u[$1, $2] = u[$1, $2] " " $4 }
       END {
         printf "# %9s | %27s | %27s | %9s %9s %9s\n", "", "first-time buffers", "reused buffers", "PIPE/GET", "PIPE/PUT", "PIPE/GET"
         printf "# %9s | %9s%9s%9s | %9s%9s%9s | %9s %9s %9s\n", "size", "PIPELINE", "GET", "PUT", "PIPELINE", "GET", "PUT",
                "first", "reused", "reused"
         for (i = 1; i <= n; i++) { s = sizes[i]
           pf = med(f["pipeline", s]); gf = med(f["get", s]); uf = med(f["put", s])
           pr = med(u["pipeline", s]); gr = med(u["get", s]); ur = med(u["put", s])
           printf "  %9d | %9.1f%9.1f%9.1f | %9.1f%9.1f%9.1f | %9.2f %9.2f %9.2f\n", s, pf, gf, uf, pr, gr, ur,
                  q(pf, gf), q(pr, ur), q(pr, gr)
           printf "rndv_sim %s pipeline first %d %.1f\nrndv_sim %s get first %d %.1f\nrndv_sim %s put first %d %.1f\n",
                  cost, s, pf, cost, s, gf, cost, s, uf >"/dev/stderr"
           printf "rndv_sim %s pipeline reused %d %.1f\nrndv_sim %s get reused %d %.1f\nrndv_sim %s put reused %d %.1f\n",
                  cost, s, pr, cost, s, gr, cost, s, ur >"/dev/stderr" } }' "$raw"
done
