#!/usr/bin/env bash
# The "Scale" section of bench/RESULTS.md and bench/scale.png, from the lines bench/scale.sh
# wrote (build/scale/scale.txt). Usage: bench/scale_report.sh [scale.txt]
set -u
cd "$(dirname "$0")/.."
in=${1:-build/scale/scale.txt}
res=bench/RESULTS.md
png=bench/scale.png
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[ -s "$in" ] || { echo "scale_report: $in is empty"; exit 1; }

# One table row per transport and N (rvx's runs: no launcher or UCX label): the given fields,
# "-" where one is missing; decimals: 0 = integers whole, else 3 digits; 1 = one decimal. A row
# is printed only where the field `need` was measured (none: every row).
rows() { # fields decimals need
  awk -v fields="$1" -v dec="$2" -v need="$3" '
    $1 == "scale" && $2 !~ /@|^ucx_/ { v[$2, $3, $4] = $5; if (!(($2, $3) in seen)) { seen[$2, $3] = 1; row[++nr] = $2 SUBSEP $3 } }
    END {
      nf = split(fields, f, " ")
      for (i = 1; i <= nr; i++) {
        split(row[i], k, SUBSEP); line = "| " k[1] " | " k[2]
        if (need != "" && !((k[1], k[2], need) in v)) continue
        for (j = 1; j <= nf; j++) line = line " | " (((k[1], k[2], f[j]) in v) ? fmt(v[k[1], k[2], f[j]]) : "-")
        print line " |"
      }
    }
    function fmt(x) { return dec ? sprintf("%.1f", x) : x == int(x) ? sprintf("%d", x) : sprintf("%.3g", x) }' "$in"
}

fields="qps registered_mib rss_mib cq_entries create_s create_cpu_s verbs heap_kib srq_entries exchange_s"
heads="| transport | N | QPs | registered MiB | peak RSS MiB | CQ entries | creation s | creation CPU s | verbs calls | heap KiB | SRQ entries | exchange s |"
{
  echo "<!-- scale: written by make scale (bench/scale.sh, bench/scale_report.sh); edits are overwritten -->"
  echo "## Scale: per-process cost against the job's size, on rvxsim"
  echo
  echo "Produced by \`make scale\` on $(date -u +%Y-%m-%d): $(nproc) cores, $(uname -sr)."
  echo "bench/scale.c built per transport as an application builds it (builds: $(awk '$1 == "scale-build" { b[$2 " " $4] = 1 } END { for (k in b) s = s (s ? ", " : "") k; print s }' "$(dirname "$in")/builds.txt" 2>/dev/null | sed 's/ am+tag/: AM + tags/g; s/ rma/: RMA only (no messages in this release)/g')),"
  echo "run by \`rvxrun -n N\` on rvxsim: each rank creates a worker and an endpoint to every peer, then"
  echo "puts to, sends an active message to and sends a tag message to every peer (RMA only where"
  echo "there are no messages). Figures of the worst rank. QPs, registered bytes, CQ and SRQ entries and"
  echo "verbs calls are rvxsim's counters (\`rvxsim_counters\`); creation time and peak RSS are the"
  echo "process's own (clock, getrusage). Heap: rvx's own, the blocks the program's code allocated from"
  echo "before creation to after the exchange and still holds (malloc interposed), less the registered"
  echo "bytes among them; of it, the pools of operation records (tag layer and transport, \`op_pool_kib\`)"
  echo "grow with the operations in flight (N-1 receives here), not with the job; and on rc_mlx5,"
  echo "\`qp_heap_kib\`, the state it keeps because each peer has a QP (each conn's send-queue state, the"
  echo "QPN table, the BlueFlame records). Peak RSS includes the model's"
  echo "objects and the pages of the fabric inboxes the process touched (the next table says how much)."
  echo "Verbs calls: control verbs of worker and endpoint creation (a kernel command each on hardware)."
  echo
  echo "$heads"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
  rows "$fields" 0 ""
  echo
  echo "Where each process's resident memory is after the exchange, KiB (worst rank per column; rss ="
  echo "rvx + model + rest + bench, the last the measuring program's own table of heap blocks). rvx: its heap (heap KiB above), the resident part of what it registered"
  echo "and of its queues' buffers (rvxsim's \`mr_rss\`, \`queue_rss\`: mincore) and its shared-memory"
  echo "mappings. model: rvxsim's fabric inboxes (this process's and each peer's it sent to: the wire"
  echo "on an adapter) and its heap besides the queues (DC and QP state an adapter keeps on the card)."
  echo "rest: code and data of the executable and libraries, stacks, libc and allocator slack, the"
  echo "launcher's, and what rvx allocated before the worker (bench/scale.c)."
  echo
  echo "| transport | N | rss | rvx | rvx heap | registered | queues | shm | model | fabric | rest | of it files | bench |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  rows "rss_kib rvx_kib heap_kib reg_rss_kib queue_kib shm_kib model_kib fabric_kib rest_kib file_kib tool_kib" 1 rss_kib
  echo
  echo "The wire-up's CPU per process (\`wireup_cpu_s\`: worker and endpoint creation, CPU seconds of the"
  echo "whole process less rvxsim's engine threads, so the bootstrap's own threads count), under each"
  echo "launcher: rvxrun (the local bootstrap), and the PMIx build under mpirun and under srun on a"
  echo "one-machine Slurm (worst rank):"
  echo
  echo "| launch | N | wire-up CPU s |"
  echo "|---|---|---|"
  awk '$1 == "scale" && $4 == "wireup_cpu_s" && $2 ~ /^dc_mlx5/ { printf "| %s | %s | %.4g |\n", $2 ~ /@/ ? $2 : $2 "@rvxrun", $3, $5 }' "$in"
  echo
  echo "Least squares y = a + b·N (b: the cost of one more rank) over the measured points from"
  echo "N = $(awk '$1 == "scale-fit-from" && $2 == "dc_mlx5" { print $3 }' "$in") on (\`SCALE_FIT_FROM\`, 16: below it rvx grows its receive buffers, registrations"
  echo "and SRQ with the peers up to caps it reaches by N = 8; a label with fewer than three points"
  echo "there, UCX's, is fitted over all of them), and the line at N = 1,024 and 16,384:"
  echo
  echo "| transport | field | a | b per rank | N = 1,024 | N = 16,384 |"
  echo "|---|---|---|---|---|---|"
  awk '$1 == "scale-fit" && ($2 !~ /@|^ucx_/ || $3 == "wireup_cpu_s" || ($2 ~ /^ucx_/ && $3 ~ /^(qps|registered_mib|rss_mib|verbs|cq_entries)$/)) { a[$2, $3] = $4; b[$2, $3] = $5; if (!(($2, $3) in s)) { s[$2, $3] = 1; o[++n] = $2 SUBSEP $3 } }
       $1 == "scale-proj" { p[$2, $4, $3] = $5 }
       END { for (i = 1; i <= n; i++) { split(o[i], k, SUBSEP)
               printf "| %s | %s | %.4g | %.4g | %.4g | %.4g |\n", k[1], k[2], a[k[1], k[2]], b[k[1], k[2]],
                      p[k[1], k[2], 1024], p[k[1], k[2], 16384] } }' "$in"
  echo
  echo "At 1,024 and 16,384 ranks, on paper: every figure is projected from the fit above (measured"
  echo "up to N = $(awk '$1 == "scale" && $2 == "dc_mlx5" { if ($3 > m) m = $3 } END { print m + 0 }' "$in") for rvx; UCX's, from bench/scale_ucx.sh on the same model, up to"
  echo "N = $(awk '$1 == "scale" && $2 ~ /^ucx_/ { if ($3 > m) m = $3 } END { print m + 0 }' "$in"), UCX_TLS=<tl>,ud_mlx5,self; \"-\": not measured). Heap: rvx's own (UCX's is not"
  echo "separated); wire-up CPU: rvx under rvxrun; UCX's includes its first put and flush, which finish"
  echo "its lazy wire-up."
  echo
  echo "| figure | ranks | rvx dc_mlx5 | UCX dc_mlx5 | rvx rc_mlx5 | UCX rc_mlx5 |"
  echo "|---|---|---|---|---|---|"
  awk '$1 == "scale-proj" { p[$2, $3, $4] = $5 }
       END { nf = split("qps registered_mib rss_mib heap_kib cq_entries srq_entries verbs wireup_cpu_s", f, " ")
             split("dc_mlx5 ucx_dc_mlx5 rc_mlx5 ucx_rc_mlx5", t, " ")
             for (i = 1; i <= nf; i++) for (n = 1024; n <= 16384; n *= 16) {
               line = "| " f[i] " | " n
               for (j = 1; j <= 4; j++) line = line " | " (((t[j], n, f[i]) in p) ? val(p[t[j], n, f[i]]) : "-")
               print line " |" }
             # the process less the model and the measuring table: what would be left on a ConnectX
             for (n = 1024; n <= 16384; n *= 16) {
               line = "| rss less the model and the bench, MiB | " n
               for (j = 1; j <= 4; j++)
                 line = line " | " ((((t[j], n, "rss_kib") in p) && ((t[j], n, "model_kib") in p)) ? val((p[t[j], n, "rss_kib"] - p[t[j], n, "model_kib"] - p[t[j], n, "tool_kib"]) / 1024) : "-")
               print line " |" } }
       function val(x) { return x < 0 ? "under 0: the fit falls, flat within its noise" : sprintf("%.4g", x) }' "$in"
  echo
  echo "Goals (dc_mlx5 projected at N = 16,384; rc_mlx5 at N = 128):"
  echo
  echo "| transport | figure | value | goal | verdict |"
  echo "|---|---|---|---|---|"
  awk '$1 == "scale-goal" { v = $6; for (i = 7; i <= NF; i++) v = v " " $i
         printf "| %s | %s | %s | <= %s | %s |\n", $2, $3, $4, $5, v }' "$in"
  if grep -q "^scale-cap \|^scale-retry " "$in"; then
    echo
    echo "Not run, or run twice:"
    echo
    grep "^scale-cap \|^scale-retry " "$in" | sed 's/^scale-\(cap\|retry\) \([^ ]*\) \([0-9]*\) /- \2 at N = \3: /'
  fi
  echo
  echo "Command: \`make scale\` (bench/scale.sh; the plot: bench/scale.png). Raw lines: build/scale/scale.txt."
  echo "<!-- /scale -->"
} >"$tmp/section"

if grep -q "^<!-- scale:" "$res"; then
  awk -v f="$tmp/section" '/^<!-- scale:/ { while ((getline l < f) > 0) print l; skip = 1; next }
    /^<!-- \/scale -->/ { skip = 0; next } !skip' "$res" >"$tmp/res" && cat "$tmp/res" >"$res"
else
  { echo; cat "$tmp/section"; } >>"$res"
fi
echo "scale: section written to $res"

# The plot: one panel per figure, measured points and the fitted line out to 16,384 ranks.
command -v gnuplot >/dev/null || { echo "scale: gnuplot missing (make deps); no plot"; exit 1; }
for tl in $(awk '$1 == "scale" && $2 !~ /@|^ucx_/ { print $2 }' "$in" | sort -u); do
  for f in $fields; do
    awk -v t="$tl" -v f="$f" '$1 == "scale" && $2 == t && $4 == f { print $3, $5 }' "$in" >"$tmp/$tl.$f.dat"
    awk -v t="$tl" -v f="$f" '$1 == "scale-fit" && $2 == t && $3 == f { print $4, $5 }' "$in" >"$tmp/$tl.$f.fit"
  done
done
tls=$(awk '$1 == "scale" && $2 !~ /@|^ucx_/ { print $2 }' "$in" | sort -u)
{
  echo "set terminal pngcairo size 1600,800 font ',9' noenhanced"
  echo "set output '$png'"
  echo "set multiplot layout 2,4 title 'rvx per-process cost against ranks (rvxsim; points measured, lines fitted)'"
  echo "set logscale x 2; set xrange [2:16384]; set grid; set key top left; set xlabel 'ranks N'"
  echo "set samples 200"
  for f in qps registered_mib rss_mib cq_entries create_s create_cpu_s verbs heap_kib; do
    echo "set title '$f'; set logscale y"
    plot="plot"
    i=1
    for tl in $tls; do
      fit=$(cat "$tmp/$tl.$f.fit" 2>/dev/null)
      [ -s "$tmp/$tl.$f.dat" ] || continue
      a=${fit% *} b=${fit#* }
      plot="$plot '$tmp/$tl.$f.dat' with points pt 7 lc $i title '$tl',"
      [ -n "$fit" ] && plot="$plot (($a)+($b)*x) > 0 ? ($a)+($b)*x : 1/0 with lines lc $i notitle,"
      i=$((i + 1))
    done
    echo "${plot%,}"
  done
  echo "unset multiplot"
} >"$tmp/plot.gp"
gnuplot "$tmp/plot.gp" && echo "scale: plot written to $png"
