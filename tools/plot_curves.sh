#!/usr/bin/env bash
# plot_curves.sh: draw bench/curves.sh's data with gnuplot (pngcairo, as `make thresh` draws its
# PNGs; gnuplot-nox comes from tools/deps.sh): latency and bandwidth against message size, rvx
# beside UCX, log x axis, a labelled vertical line at rvx's eager/rendezvous switch.
# Usage: tools/plot_curves.sh DATA THRESH_BYTES RNDV_NAME LAT_PNG BW_PNG
#   DATA columns: size rvx_lat_ns rvx_lat_p50_ns ucx_lat_ns ucx_lat_p50_ns rvx_bw_MBs ucx_bw_MBs protocol
set -u
[ $# -eq 5 ] || { echo "usage: $0 DATA THRESH_BYTES RNDV_NAME LAT_PNG BW_PNG" >&2; exit 2; }
data=$1 thr=$2 rndv=$3 lat_png=$4 bw_png=$5
command -v gnuplot >/dev/null || { echo "plot_curves: gnuplot is not installed (make deps)" >&2; exit 1; }

# common: one figure; $1 output, $2 title, $3 y label
common() {
  cat <<GP
set terminal pngcairo size 900,600 font ',10' noenhanced
set output '$1'
set title "$2"
set logscale x 2
set logscale y
set xtics ('8 B' 8, '64 B' 64, '512 B' 512, '4 KiB' 4096, '32 KiB' 32768, '256 KiB' 262144, '2 MiB' 2097152)
set xlabel 'message size (bytes)'
set ylabel '$3'
set grid
set key top left
set arrow 1 from $thr, graph 0 to $thr, graph 1 nohead dt 2 lw 1.5 lc rgb 'dark-green'
set label 1 sprintf("eager/rendezvous switch\nRVX_RNDV_THRESH_BYTES = %d B (rndv=%s)", $thr, '$rndv') \
    at $thr, graph 0.5 offset 0.7, 0 left tc rgb 'dark-green'
GP
}

{
  common "$lat_png" "tag one-way latency over shared memory: rvx tag_lat and ucx_perftest -t tag_lat (medians of rounds)" \
    "one-way latency (ns)"
  echo "plot '$data' using 1:2 with linespoints lw 2 pt 7 ps 0.6 lc rgb 'red' title 'rvx, median of block means', \\"
  echo "     '' using 1:3 with linespoints lw 1 dt 2 pt 6 ps 0.6 lc rgb 'red' title 'rvx, median round trip', \\"
  echo "     '' using 1:4 with linespoints lw 2 pt 5 ps 0.6 lc rgb 'blue' title 'UCX UCP tag_lat (posix,self), average', \\"
  echo "     '' using 1:5 with linespoints lw 1 dt 2 pt 4 ps 0.6 lc rgb 'blue' title 'UCX UCP tag_lat, median round trip'"
} | gnuplot || exit 1
{
  common "$bw_png" "tag bandwidth over shared memory: rvx tag_lat and ucx_perftest -t tag_bw (medians of rounds)" \
    "bandwidth (MB/s, 10^6 bytes)"
  echo "set key bottom right"
  echo "plot '$data' using 1:6 with linespoints lw 2 pt 7 ps 0.6 lc rgb 'red' title 'rvx (windows of 64 sends)', \\"
  echo "     '' using 1:7 with linespoints lw 2 pt 5 ps 0.6 lc rgb 'blue' title 'UCX UCP tag_bw (posix,self)'"
} | gnuplot || exit 1
echo "wrote $lat_png $bw_png"
