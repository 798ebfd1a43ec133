#!/usr/bin/env bash
# UCX's own per-process cost against the job's size on rvxsim, for beside make scale's rvx
# figures: build/bench/scale_ucx (bench/scale_ucx.c, the system's UCX) under `rvxrun -n N` for
# each transport and N, each job on a fresh fabric directory. Prints the program's lines
#   scale ucx_<tl> <N> <field> <value>   (the worst rank; bench/scale_ucx.c says what each is)
#   scale-lanes ucx_<tl> <N> ...         (the transports UCX chose for rank 0's endpoint to rank 1)
# and writes them to $SCALE_OUT/scale_ucx.txt (build/scale). Exits 1 if a job failed.
# Environment: SCALE_N ("2 4 8 16 32"), SCALE_UCX_TL ("dc_mlx5 rc_mlx5"), SCALE_UCX_AUX (ud_mlx5):
# UCX_TLS is <tl>,<aux>,self; rc_mlx5 needs ud_mlx5 to connect (UCX refuses it alone), dc_mlx5 does
# not, but with ud_mlx5 listed UCX opens a UD interface too (SCALE_UCX_AUX= leaves it out; the
# label is then ucx_<tl>-<aux>, ucx_<tl>-noaux for none),
# SCALE_TIMEOUT_S (300, per job), SCALE_OUT (build/scale), UCX_IB_PCI_RELAXED_ORDERING (off: UCX
# 1.13.1 turns PCIe relaxed ordering on from the CPU's model alone, and then registers every region
# twice, with and without it; it takes AMD family 0x19 model 0x11 for Milan, so its registered
# bytes would double or not with the machine the run lands on. Off, they are one region's).
set -u
cd "$(dirname "$0")/.."
ns=${SCALE_N:-"2 4 8 16 32"}
tls=${SCALE_UCX_TL:-"dc_mlx5 rc_mlx5"}
tmo=${SCALE_TIMEOUT_S:-300}
aux=${SCALE_UCX_AUX-ud_mlx5}
out=${SCALE_OUT:-build/scale}
bin=build/bench/scale_ucx
for f in $bin build/bin/rvxrun build/sim/librvxsim_preload.so; do
  [ -e $f ] || { echo "scale_ucx: $f is missing (make sim build/bin/rvxrun $bin)"; exit 1; }
done
mkdir -p "$out"
: >"$out/scale_ucx.txt"
fabric=${RVXSIM_FABRIC_DIR:-/dev/shm/rvxsim-ucx}
unset RVXSIM_STRICT   # UCX leaves reserved bytes stale, as the hardware allows
fail=0
for tl in $tls; do
  lab=ucx_$tl
  [ "$aux" = ud_mlx5 ] || lab=ucx_$tl-${aux:-noaux}
  for n in $ns; do
    log=$out/scale_${lab}_$n.log
    dir=$fabric-$n
    rm -rf "$dir"
    # the transport timer as in bench/scale.sh: many ranks on few cores wait for the CPU
    env LD_LIBRARY_PATH="$PWD/build/sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
      LD_PRELOAD="$PWD/build/sim/librvxsim_preload.so" UCX_TLS="$tl${aux:+,$aux},self" SCALE_UCX_LABEL="$lab" \
      UCX_NET_DEVICES=mlx5_0:1 RVXSIM_FABRIC_DIR="$dir" UCX_IB_PCI_RELAXED_ORDERING="${UCX_IB_PCI_RELAXED_ORDERING:-off}" \
      RVXSIM_RETRY_TIMEOUT_MS="${RVXSIM_RETRY_TIMEOUT_MS:-30000}" \
      build/bin/rvxrun -n "$n" -t "$tmo" -g 5 $bin >"$log.out" 2>"$log"
    rc=$?
    rm -rf "$dir"
    if [ $rc -ne 0 ] || ! grep -q "^scale $lab $n wireup_cpu_s " "$log.out"; then
      echo "scale_ucx: $lab N=$n failed (exit $rc; log $log)"
      grep -v "DEVX" "$log" | tail -n 3 | sed 's/^/  | /'
      fail=1
      continue
    fi
    grep "^scale" "$log.out" | tee -a "$out/scale_ucx.txt"
  done
done
exit $fail
