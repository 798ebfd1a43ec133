#!/usr/bin/env bash
# curves.sh (make curves): tag latency and bandwidth against message size over shared memory, rvx
# (build/bench/tag_lat) beside UCX (ucx_perftest -t tag_lat and -t tag_bw, UCX_TLS=posix,self) at
# the same sizes, in one run: ROUNDS rounds (default 3), each running rvx then UCX at every size,
# then the median of every figure over the rounds. Writes
#   bench/tag_curves.dat   one row per size: the medians (see its header)
#   bench/tag_lat.png      one-way latency against size (tools/plot_curves.sh, gnuplot)
#   bench/tag_bw.png       bandwidth against size
# both with a vertical line at rvx's eager/rendezvous switch, RVX_RNDV_THRESH_BYTES of the build.
#
# Prints the table, and "curves ratio_tag_lat_8 <x>" and "curves ratio_tag_lat_p50_8 <x>": rvx over
# UCX one-way latency at 8 bytes, means and medians.
#
# Latency, two figures each: "mean", rvx's median over blocks of a block's mean one-way time
# (tag_lat) beside ucx_perftest's overall average (what bench/compare.sh uses); "p50", the median of
# single round trips, halved, on both sides (on a loaded machine the means carry preemptions, the
# medians mostly not). Bandwidth: bytes per second, 10^6 bytes = 1 MB; rvx streams windows of 64
# sends, UCX's is rate x size from ucx_perftest -t tag_bw.
# UCX's iterations shrink with the size so that the run stays a few minutes.
# Environment: ROUNDS (3), UCX_LOG (raw ucx_perftest output, default build/bench/ucx_curves.log).
set -u
cd "$(dirname "$0")/.." || exit 1

ROUNDS="${ROUNDS:-3}"
TAG_BIN=build/bench/tag_lat
DAT=bench/tag_curves.dat
export UCX_LOG="${UCX_LOG:-build/bench/ucx_curves.log}" UCX_LOG_APPEND=1
mkdir -p build/bench
: >"$UCX_LOG"
[ -x "$TAG_BIN" ] || { echo "curves: build $TAG_BIN first (make)"; exit 1; }
raw=$(mktemp); tagout=$(mktemp); trap 'rm -f "$raw" "$tagout"' EXIT

for r in $(seq 1 "$ROUNDS"); do
  echo "# curves: round $r of $ROUNDS: rvx tag_lat" >&2
  timeout -k 2 300 "$TAG_BIN" >"$tagout" 2>&1 || echo "# curves: round $r: tag_lat exit code $?" >&2
  [ "$r" = 1 ] && { grep -m1 '^# rvx' "$tagout"; grep -m1 '^# eager/rendezvous' "$tagout"; }
  # rows: size lat_ns p50_ns bw_MBs rate_Mps protocol...
  awk -v r="$r" '$1 ~ /^[0-9]+$/ && NF >= 6 { p = $6; for (i = 7; i <= NF; i++) p = p "_" $i
                  print r, $1, "rvx_lat_ns", $2; print r, $1, "rvx_lat_p50_ns", $3
                  print r, $1, "rvx_bw_MBs", $4; print r, $1, "proto", p }' "$tagout" >>"$raw"
  sizes=$(awk '$1 ~ /^[0-9]+$/ && NF >= 6 { print $1 }' "$tagout")
  [ -n "$sizes" ] || { echo "curves: tag_lat printed no rows:"; cat "$tagout"; exit 1; }
  echo "# curves: round $r of $ROUNDS: ucx_perftest tag_lat, tag_bw at $(echo $sizes | wc -w) sizes" >&2
  for s in $sizes; do
    # about 16 MiB each way for latency, 64 MiB for bandwidth, within [50, 20000] and [100, 200000]
    lat_it=$(( (16 << 20) / s )); [ $lat_it -gt 20000 ] && lat_it=20000; [ $lat_it -lt 50 ] && lat_it=50
    bw_it=$(( (64 << 20) / s )); [ $bw_it -gt 200000 ] && bw_it=200000; [ $bw_it -lt 100 ] && bw_it=100
    UCX_MSG_SIZE=$s UCX_LAT_ITERS=$lat_it UCX_BW_ITERS=$bw_it bench/ucx_perftest.sh tag_lat tag_bw |
      awk -v r="$r" -v s="$s" '$3 == "lat_us" { print r, s, "ucx_lat_ns", $4 * 1000 }
                               $3 == "lat_p50_us" { print r, s, "ucx_lat_p50_ns", $4 * 1000 }
                               $3 == "bw_MBs" { print r, s, "ucx_bw_MBs", $4 }
                               $3 == "error" { print "# ucx " $2 " at " s ": " $0 > "/dev/stderr" }' >>"$raw"
  done
done

thr=$(awk '/^# eager\/rendezvous switch at/ { print $5; exit }' "$tagout")
rndv=$(awk '/^# eager\/rendezvous switch at/ { sub(/.*rndv=/, ""); sub(/\).*/, ""); print; exit }' "$tagout")
# medians per size and figure (sizes in tag_lat's order)
{
  echo "# tag latency and bandwidth over shm, medians of $ROUNDS rounds (bench/curves.sh, $(date -u +%Y-%m-%d))"
  echo "# eager/rendezvous switch $thr bytes (rvx, rndv=$rndv)"
  echo "# size rvx_lat_ns rvx_lat_p50_ns ucx_lat_ns ucx_lat_p50_ns rvx_bw_MBs ucx_bw_MBs rvx_protocol"
  awk '
    $3 == "proto" { proto[$2] = $4; if (!($2 in seen)) { seen[$2] = 1; order[++n] = $2 } next }
    { v[$2, $3] = v[$2, $3] " " $4 }
    function med(list,   a, k, i, j, t) {
      k = split(list, a, " "); if (k == 0) return "nan"
      for (i = 2; i <= k; i++) for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
      return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
    }
    END { for (i = 1; i <= n; i++) { s = order[i]
            printf "%d %.1f %.1f %.1f %.1f %.1f %.1f %s\n", s, med(v[s, "rvx_lat_ns"]), med(v[s, "rvx_lat_p50_ns"]),
                   med(v[s, "ucx_lat_ns"]), med(v[s, "ucx_lat_p50_ns"]), med(v[s, "rvx_bw_MBs"]),
                   med(v[s, "ucx_bw_MBs"]), proto[s] } }' "$raw"
} >"$DAT"

echo "# medians of $ROUNDS rounds; one-way latency in ns (mean: rvx median of block means, UCX overall"
echo "# average; p50: median of single round trips, both), bandwidth in MB/s (10^6 B); x = rvx / UCX"
printf "# %8s %10s %10s %6s %9s %9s %6s %9s %9s %6s  %s\n" size rvx_mean ucx_mean x rvx_p50 ucx_p50 x \
  rvx_bw ucx_bw x "rvx protocol"
awk 'function r(a, b) { return b > 0 ? a / b : 0 }
     !/^#/ { printf "  %8d %10.1f %10.1f %6.2f %9.1f %9.1f %6.2f %9.1f %9.1f %6.2f  %s\n", $1, $2, $4, r($2, $4),
             $3, $5, r($3, $5), $6, $7, r($6, $7), $8 }' "$DAT"
awk '!/^#/ && $1 == 8 && $4 > 0 && $5 > 0 { printf "curves ratio_tag_lat_8 %.3f\ncurves ratio_tag_lat_p50_8 %.3f\n", $2 / $4, $3 / $5 }' "$DAT"
tools/plot_curves.sh "$DAT" "$thr" "$rndv" bench/tag_lat.png bench/tag_bw.png ||
  echo "curves: plotting failed (gnuplot: make deps)"
