#!/usr/bin/env bash
# Under a real launcher: Open MPI's mpirun starts the PMIx builds (RVX_BOOT_PMIX) on shm.
#   t_boot           the bootstrap contract (rank, size, allgather sizes and order, progress
#                    while a rank waits in a fence), 3 ranks and 1; and with the data left at
#                    the PMIx server (gds=hash), so it is fetched with non-blocking gets
#   t_finalize_gone  ranks leave one after another; nobody waits for a departed peer, 3 ranks
#   ring, halo       the examples, 4 ranks (3 for halo too), data checked
# and, once the rc_mlx5 transport is in the tree, t_boot, ring and halo over rc_mlx5 on rvxsim.
set -u
cd "$(dirname "$0")/.."
. tests/mpirun_env.sh
mpirun_setup build/pmix/t_boot build/pmix/t_finalize_gone build/examples/ring-pmix build/examples/halo-pmix
echo "launcher: ${MPIRUN[*]}"

mpirun_check "bootstrap contract, mpirun -np 3" "bootstrap \(pmix\) ok" 3 \
  "${MPIRUN[@]}" -np 3 build/pmix/t_boot 3
mpirun_check "bootstrap contract, mpirun -np 1" "rank 0 of 1: bootstrap \(pmix\) ok" 1 \
  "${MPIRUN[@]}" -np 1 build/pmix/t_boot 1
# With PMIx's hash store the fence leaves the data at the server: the values are then fetched with
# non-blocking gets, the path a launcher that does not bring collected data to the client takes.
mpirun_check "bootstrap contract, data fetched from the PMIx server (gds=hash), mpirun -np 3" \
  "bootstrap \(pmix\) ok" 3 env PMIX_MCA_gds=hash "${MPIRUN[@]}" -x PMIX_MCA_gds -np 3 build/pmix/t_boot 3
mpirun_check "finalize with departed peers, mpirun -np 3" "left (first|in bounded time)" 3 \
  "${MPIRUN[@]}" -np 3 build/pmix/t_finalize_gone
mpirun_check "ring example, mpirun -np 4" \
  "ring: 4 ranks, 100 rounds of 3 steps, 4096-byte blocks: every block correct on every rank" 1 \
  "${MPIRUN[@]}" -np 4 build/examples/ring-pmix
mpirun_check "ring example prints its build" "ring: rvx .*tl=shm .*boot=pmix" 1 \
  "${MPIRUN[@]}" -np 3 build/examples/ring-pmix 100 5
mpirun_check "halo example, mpirun -np 4" "4 ranks x 1000 cells, 200 steps: every cell matches" 1 \
  "${MPIRUN[@]}" -np 4 build/examples/halo-pmix
mpirun_check "halo example, mpirun -np 3" "3 ranks x 333 cells, 50 steps: every cell matches" 1 \
  "${MPIRUN[@]}" -np 3 build/examples/halo-pmix 333 50

# The PMIx build refuses to run without a PMIx server, and says how to start it.
out=$(timeout 20 build/examples/ring-pmix 2>&1); rc=$?
if [ $rc -ne 0 ] && grep -q "started by a PMIx launcher" <<<"$out"; then
  echo "ok: a PMIx build started without a launcher says how to start it"
else
  echo "FAIL: ring-pmix without mpirun (exit $rc): $out"; mpirun_fails=$((mpirun_fails + 1))
fi

# rc_mlx5 on rvxsim, when the transport exists: the same programs, the model's libraries.
rc_flags=(-DRVX_TL=RVX_TL_RC_MLX5 -DRVX_BOOT=RVX_BOOT_PMIX)
if [ -f include/rvx/tl/rc_mlx5.h ] && [ -f build/sim/libibverbs.so.1 ] &&
   echo '#include <rvx/rvx.h>' | cc -xc -Iinclude -DRVX_TL=RVX_TL_RC_MLX5 -E - >/dev/null 2>&1; then
  mkdir -p build/pmix-rc
  ok=1
  for src in tests/t_boot.c examples/ring.c examples/halo.c; do
    bin=build/pmix-rc/$(basename "$src" .c)
    if ! cc -std=c11 -O2 -Wall -Wextra -Werror -Iinclude -Itests "${rc_flags[@]}" -o "$bin" "$src" \
         $(pkg-config --cflags --libs pmix) -libverbs -lmlx5 2>build/pmix-rc/build.log; then
      echo "FAIL: $src does not build for rc_mlx5 + PMIx"; sed 's/^/  | /' build/pmix-rc/build.log | head -10
      mpirun_fails=$((mpirun_fails + 1)); ok=0
    fi
  done
  if [ $ok = 1 ]; then
    sim=(-x LD_LIBRARY_PATH="$PWD/build/sim")
    MPIRUN_LIMIT=60 # rc_mlx5's endpoint teardown can wait ~20 s for an unsignaled reply's completion
    mpirun_check "bootstrap contract on rc_mlx5 (rvxsim), mpirun -np 3" "bootstrap \(pmix\) ok" 3 \
      "${MPIRUN[@]}" "${sim[@]}" -np 3 build/pmix-rc/t_boot 3
    mpirun_check "ring example on rc_mlx5 (rvxsim), mpirun -np 3" \
      "ring: 3 ranks, .*every block correct on every rank" 1 \
      "${MPIRUN[@]}" "${sim[@]}" -np 3 build/pmix-rc/ring 4096 50
    mpirun_check "halo example on rc_mlx5 (rvxsim), mpirun -np 3" \
      "halo: 3 ranks x 200 cells, 50 steps: every cell matches" 1 \
      "${MPIRUN[@]}" "${sim[@]}" -np 3 build/pmix-rc/halo 200 50
  fi
else
  echo "note: rc_mlx5 under mpirun not run: the rc_mlx5 transport (include/rvx/tl/rc_mlx5.h, RVX_TL_RC_MLX5) is not in this tree yet"
fi
[ $mpirun_fails -eq 0 ]
