#!/usr/bin/env bash
# make scale: what one process of an N-rank job costs, per transport, on rvxsim.
#
# For each transport, build/bench/scale_<tl> (bench/scale.c) runs under `rvxrun -n N` at
# N = SCALE_N (default 2 4 8 ... 64), each job on a fresh fabric directory; then a least-squares
# line y = a + b*N per field gives the cost per added rank (b) and the projection at N = 1,024
# and 16,384. Output (stdout, and build/scale/scale.txt):
#   scale <tl> <N> <field> <value>          measured: the worst rank of the job
#   scale-fit <tl> <field> <a> <b>          the fitted line (b: per added rank)
#   scale-fit-from <tl> <N>                 the smallest N the lines of <tl> are fitted over
#   scale-proj <tl> <N> <field> <value>     projected from the fit
#   scale-goal <tl> <what> <value> <limit> <met|not met>
#   scale-cap <tl> <N> <reason>             a point not run (or failed twice), and why
#   scale-retry <tl> <N> <reason>           a job that failed and was run once more
# Fields: qps registered_mib rss_mib cq_entries create_s (the figures the goals name), and
# create_cpu_s srq_entries verbs heap_kib heap_proc_kib exchange_s (bench/scale.c says what each
# one is; heap_kib is rvx's own heap, heap_proc_kib the process's less rvxsim's model); and where
# the resident memory is after the exchange: rss_kib = rvx_kib (heap_kib, reg_rss_kib, queue_kib,
# shm_kib) + model_kib (fabric_kib and the model's heap) + rest_kib.
#
# Launchers: every transport runs under rvxrun (the local bootstrap); SCALE_LAUNCH_TL (dc_mlx5)
# also under the launchers of SCALE_LAUNCH ("mpirun srun": build/bench/scale_dc-pmix, the PMIx
# bootstrap) at N = SCALE_LAUNCH_N ("2 4 8 16 32 64"), labelled <tl>@<launcher>, for the
# wire-up's CPU under each (wireup_cpu_s). mpirun is SCALE_MPIRUN (the Makefile's MPIRUN_LOCAL);
# srun runs on a one-machine Slurm that tools/slurm_local.sh starts for it (root, slurm-wlm,
# munge). A launcher that cannot run here gets a scale-cap line that says why.
#
# Environment: SCALE_OUT (build/scale), SCALE_INPUT (fit these lines, run nothing), SCALE_N
# ("2 4 8 16 32 64 128"), SCALE_TL ("dc_mlx5 rc_mlx5"), SCALE_BUDGET_S (420: wall-clock seconds
# per transport; a next N whose predicted run does not fit, in time or in half of the memory
# available, is not run, and said so), SCALE_TIMEOUT_S (300, per job), SCALE_RESULTS=1 to write
# the table into bench/RESULTS.md and the plot bench/scale.png (make scale does; a partial run
# does not).
set -u
cd "$(dirname "$0")/.."
ns=${SCALE_N:-"2 4 8 16 32 64 128"}
tls=${SCALE_TL:-"dc_mlx5 rc_mlx5"}
budget=${SCALE_BUDGET_S:-420}
tmo=${SCALE_TIMEOUT_S:-300}
out=${SCALE_OUT:-build/scale}
mkdir -p "$out"
: >"$out/scale.txt"
: >"$out/builds.txt"
say() { echo "$*" | tee -a "$out/scale.txt"; }
fabric=${RVXSIM_FABRIC_DIR:-/dev/shm/rvxsim-$(id -u)}
fail=0
slurm_dir=
trap '[ -n "$slurm_dir" ] && tools/slurm_local.sh stop "$slurm_dir" >/dev/null 2>&1' EXIT

# One run: label bin launcher N-list. The label is the transport, or <transport>@<launcher>.
runs=()
for tl in $tls; do runs+=("$tl build/bench/scale_${tl%_mlx5} rvxrun $ns"); done
if [ -z "${SCALE_INPUT:-}" ]; then
  for launch in ${SCALE_LAUNCH-mpirun srun}; do
    for tl in ${SCALE_LAUNCH_TL:-dc_mlx5}; do
      case " $tls " in *" $tl "*) ;; *) continue ;; esac
      runs+=("$tl@$launch build/bench/scale_${tl%_mlx5}-pmix $launch ${SCALE_LAUNCH_N:-2 4 8 16 32 64}")
    done
  done
fi

# A launcher set up to run (in this shell: srun's Slurm stays up for the later runs); else 1
# with the reason in $why.
launch_ready() { # launcher
  why=
  case $1 in
    rvxrun) [ -x build/bin/rvxrun ] || why="build/bin/rvxrun is missing" ;;
    mpirun) [ -n "${SCALE_MPIRUN:-}" ] && command -v "${SCALE_MPIRUN%% *}" >/dev/null ||
              why="no mpirun (SCALE_MPIRUN; Debian's openmpi-bin)" ;;
    srun)
      [ -n "$slurm_dir" ] && return 0
      if [ "$(id -u)" != 0 ]; then why="tools/slurm_local.sh needs root"
      elif ! command -v srun >/dev/null || ! command -v munged >/dev/null; then
        why="no srun or munged (slurm-wlm, munge)"
      else
        slurm_dir=$(mktemp -d /tmp/rvx-scale-slurm.XXXXXX)
        if tools/slurm_local.sh start "$slurm_dir" >"$out/slurm.log" 2>&1; then
          export SLURM_CONF=$slurm_dir/slurm.conf
        else
          slurm_dir=
          why="the one-machine Slurm did not start ($out/slurm.log)"
        fi
      fi ;;
  esac
  [ -z "$why" ]
}
launch_run() { # launcher n bin (environment exported)
  case $1 in
    rvxrun) build/bin/rvxrun -n "$2" -t "$tmo" -g 5 "$3" ;;
    mpirun) timeout "$tmo" $SCALE_MPIRUN -np "$2" -x LD_LIBRARY_PATH -x RVXSIM_FABRIC_DIR \
              -x RVXSIM_RETRY_TIMEOUT_MS "$3" ;;
    srun) timeout "$tmo" srun --mpi=pmix -O -n "$2" --kill-on-bad-exit=1 "$3" ;;
  esac
}

# SCALE_INPUT=file: no runs, the fit of the `scale` lines in that file (tests/t_scale.sh)
[ -n "${SCALE_INPUT:-}" ] && { grep "^scale " "$SCALE_INPUT" >"$out/scale.txt"; runs=(); }
for run in "${runs[@]}"; do
  read -r tl bin launch rns <<<"$run"
  [ -x "$bin" ] || { echo "scale: $bin is missing (make $bin)"; exit 1; }
  if ! launch_ready "$launch"; then
    say "scale-cap $tl 0 not run: $why"
    continue
  fi
  start=$SECONDS last_n=0 last_s=0 last_rss=0
  for n in $rns; do
    used=$((SECONDS - start))
    # the next job's wall time, if it grows with N^2 as a full wire-up does (at least 1 s more)
    if [ "$last_n" -gt 0 ]; then
      predict=$(awk -v s="$last_s" -v a="$last_n" -v b="$n" 'BEGIN { printf "%d", s * (b / a) ^ 2 + 1 }')
      if [ $((used + predict)) -gt "$budget" ]; then
        say "scale-cap $tl $n predicted ${predict} s, over the ${budget} s budget (${used} s used; SCALE_BUDGET_S)"
        break
      fi
      # and its memory: N processes of the last job's worst RSS, grown by the N ratio, within
      # half of what the machine has available now
      avail=$(awk '/^MemAvailable:/ { print int($2 / 1024) }' /proc/meminfo)
      need=$(awk -v r="$last_rss" -v a="$last_n" -v b="$n" 'BEGIN { printf "%d", r * (b / a) * b }')
      if [ -n "$avail" ] && [ "$need" -gt $((avail / 2)) ]; then
        say "scale-cap $tl $n predicted ${need} MiB of RSS for $n processes, over half of the ${avail} MiB available"
        break
      fi
    fi
    for try in 1 2; do
      log=$out/${tl/@/-}_$n.log
      [ "$try" = 2 ] && log=$out/${tl/@/-}_$n.again.log
      t0=$SECONDS
      # A fresh fabric directory per job: inboxes of an earlier job are never in the way. The
      # transport timer follows the QPs' own timeout (about 1 s, 7 retries) rather than rvxsim's
      # 2 s cap on all retries: with 64 processes on 2 cores (and other load), a responder's
      # engine can wait seconds for the CPU, which a NIC never does.
      # The program prints its transport; a run under another launcher gets its label.
      (export RVXSIM_FABRIC_DIR=$fabric-scale-$n RVXSIM_RETRY_TIMEOUT_MS=${RVXSIM_RETRY_TIMEOUT_MS:-30000} \
         LD_LIBRARY_PATH=build/sim
       launch_run "$launch" "$n" "$bin") 2>"$log" | sed "s/^scale ${tl%@*} /scale $tl /" >"$log.out"
      rc=${PIPESTATUS[0]}
      rm -rf "$fabric-scale-$n"
      last_n=$n last_s=$((SECONDS - t0))
      [ $rc -eq 0 ] && grep -q "^scale $tl $n create_s" "$log.out" && break
      if [ "$try" = 1 ] && [ $((SECONDS - start + last_s)) -le "$budget" ]; then
        say "scale-retry $tl $n the job failed (exit $rc after ${last_s} s; log $log): once more"
      else
        say "scale-cap $tl $n the job failed (exit $rc after ${last_s} s; log $log)"
        try=2
      fi
      grep -v "killed by signal" "$log" | tail -n 3 | sed 's/^/  | /'
      [ "$try" = 2 ] && break
    done
    if [ $rc -ne 0 ] || ! grep -q "^scale $tl $n create_s" "$log.out"; then
      fail=1
      break
    fi
    last_rss=$(awk -v t="$tl" '$1 == "scale" && $2 == t && $4 == "rss_mib" { print $5 }' "$log.out")
    grep "^scale " "$log.out" | tee -a "$out/scale.txt"
    grep -h "^scale-build " "$log.out" >>"$out/builds.txt"
  done
done

# UCX's own figures on the same model beside rvx's (bench/scale_ucx.sh), in a run that writes
# bench/RESULTS.md (or with SCALE_UCX=1): their lines join the fit, labelled ucx_<tl>. A UCX that
# cannot run here is said so; rvx's figures stand without it.
if [ -z "${SCALE_INPUT:-}" ] && [ "${SCALE_UCX:-${SCALE_RESULTS:-0}}" = 1 ]; then
  if [ ! -x build/bench/scale_ucx ]; then
    say "scale-cap ucx 0 not run: build/bench/scale_ucx is missing (make build/bench/scale_ucx; libucx-dev)"
  elif SCALE_OUT=$out SCALE_N="${SCALE_UCX_N:-2 4 8 16 32}" bench/scale_ucx.sh >"$out/ucx.log" 2>&1; then
    grep "^scale ucx_" "$out/scale_ucx.txt" | tee -a "$out/scale.txt"
  else
    say "scale-cap ucx 0 UCX's run failed ($out/ucx.log): its lines are left out"
  fi
fi

# Least squares per transport and field over the measured points; projections; goals.
# A line is fitted over the points at N >= SCALE_FIT_FROM (16) where a label has three of them:
# below it rvx grows its receive buffers, registrations and SRQ with the peers up to caps it
# reaches by N = 8, and a line through those points would project the cap as growing. Fewer than
# three such points (a short run, UCX's up to 32), and the line runs over every point.
awk -v from="${SCALE_FIT_FROM:-16}" '
  $1 == "scale" { np++; pt[np] = $2; pn[np] = $3; pf[np] = $4; pv[np] = $5; if ($3 >= from) hi[$2, $4]++
                  if (!($2 in tl)) { tl[$2] = 1; tls[++ntl] = $2 } }
  END {
    for (i = 1; i <= np; i++) {
      if (hi[pt[i], pf[i]] >= 3 && pn[i] < from) continue
      k = pt[i] SUBSEP pf[i]; x = pn[i]; y = pv[i]
      n[k]++; sx[k] += x; sy[k] += y; sxx[k] += x * x; sxy[k] += x * y; lo[k] = lo[k] == "" || x < lo[k] ? x : lo[k]
    }
    split("qps registered_mib rss_mib cq_entries create_s create_cpu_s srq_entries verbs heap_kib heap_proc_kib exchange_s op_pool_kib qp_heap_kib " \
          "rss_kib rvx_kib reg_rss_kib queue_kib shm_kib model_kib fabric_kib rest_kib file_kib tool_kib wireup_cpu_s", order, " ")
    for (j = 1; j <= ntl; j++) for (i = 1; i in order; i++) {
      t = tls[j]; f = order[i]; k = t SUBSEP f
      if (n[k] < 2) continue         # a line needs two points
      d = n[k] * sxx[k] - sx[k] * sx[k]
      b = d > 0 ? (n[k] * sxy[k] - sx[k] * sy[k]) / d : 0
      a = (sy[k] - b * sx[k]) / n[k]
      A[t, f] = a; B[t, f] = b
      printf "scale-fit %s %s %.6g %.6g\n", t, f, a, b
      if (!(t in said)) { said[t] = 1; printf "scale-fit-from %s %d\n", t, lo[k] }
      printf "scale-proj %s 1024 %s %.6g\n", t, f, a + b * 1024
      printf "scale-proj %s 16384 %s %.6g\n", t, f, a + b * 16384
    }
    # the goals: dc_mlx5 at 16,384 projected; rc_mlx5 at 128 projected (at: 0 means the slope)
    goal("dc_mlx5", "qps", 16384, 1, 64)
    goal("dc_mlx5", "registered_mib", 16384, 1, 32)
    goal("dc_mlx5", "heap_kib", 0, 1024, 256, "heap_bytes_per_peer")
    goal("dc_mlx5", "verbs", 0, 1, 0, "verbs_per_peer")
    goal("dc_mlx5", "rvx_kib", 0, 1024, 4096, "rvx_rss_bytes_per_peer")
    beside("dc_mlx5", "heap_kib", "op_pool_kib", 256, "heap_bytes_per_peer_beside_op_pool")
    goal("rc_mlx5", "registered_mib", 128, 1, 16)
    goal("rc_mlx5", "qps", 0, 1, 1, "qps_per_peer")
    goal("rc_mlx5", "heap_kib", 0, 1024, 256, "heap_bytes_per_peer")
    goal("rc_mlx5", "cq_entries", 0, 1, 0, "cq_entries_per_peer")
    beside("rc_mlx5", "heap_kib", "op_pool_kib", 256, "heap_bytes_per_peer_beside_op_pool")
    # on rc_mlx5 rvx may grow by one QP per peer (its buffers and the state that drives it); what
    # grows besides is held to the dc_mlx5 goal, with the operation records and without them
    beside("rc_mlx5", "heap_kib", "qp_heap_kib", 256, "heap_bytes_per_peer_beside_qp")
    beside("rc_mlx5", "heap_kib", "op_pool_kib qp_heap_kib", 256, "heap_bytes_per_peer_beside_op_pool_and_qp")
    beside("rc_mlx5", "rvx_kib", "queue_kib qp_heap_kib", 4096, "rvx_rss_bytes_per_peer_beside_qp")
  }
  # The slope of f less those of its parts (a list), in bytes per added rank, against its limit.
  function beside(t, f, parts, lim, name,   val, g, i, ng) {
    if (!((t, f) in B)) return
    val = B[t, f]
    ng = split(parts, g, " ")
    for (i = 1; i <= ng; i++) { if (!((t, g[i]) in B)) return; val -= B[t, g[i]] }
    val *= 1024
    printf "scale-goal %s %s %.4g %s %s\n", t, name, val, lim, val <= lim + 1e-6 ? "met" : "not met"
  }
  # A fitted figure against its limit; a slope within rounding of the limit meets it (fits of
  # integer counts leave residues of 1e-15).
  function goal(t, f, at, scale, lim, name,   val) {
    if (!((t, f) in A)) return
    val = (at ? A[t, f] + B[t, f] * at : B[t, f]) * scale
    if (name == "") name = f "@" at
    printf "scale-goal %s %s %.4g %s %s\n", t, name, val, lim, val <= lim + 1e-6 ? "met" : "not met"
  }
' "$out/scale.txt" | tee "$out/fit.txt"
cat "$out/fit.txt" >>"$out/scale.txt"

if [ "${SCALE_RESULTS:-0}" = 1 ]; then
  bench/scale_report.sh "$out/scale.txt" || fail=1
fi
exit $fail
