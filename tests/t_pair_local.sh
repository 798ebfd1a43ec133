#!/usr/bin/env bash
# tests/pair/t_pair_local.c on rvxsim, 4 ranks as 2 emulated nodes (it starts itself under
# rvxrun -n 4 --nodes 2), built twice from the same source:
#   rc_mlx5 alone   on-node traffic goes through the NIC, and rvxsim's count of this process's
#                   send WQEs (rvxsim_counters wqes=) must show it: the check can fail
#   pair            shm on the node + rc_mlx5 between nodes (PAIR_DEFS, the flags the Makefile's
#                   pair builds use): on-node puts, gets, AMs and tag messages leave that count
#                   where it was; off-node traffic and on-node atomics (through the NIC by
#                   design) move it
# Then tests/pair/t_pair_order.c, built the same two ways: on an on-node endpoint an atomic (the
# NIC's) and the put after it (shared memory in the pair) land in the order posted; and
# tests/pair/t_pair_handler.c: a handler's requests are refused on both paths, whichever path
# delivered its message; and tests/pair/t_pair_reg.c: rvx_mem_reg memory reached from on and off
# the node (atomics on one word from both exact), on-node endpoints destroyed and created again.
# Skips (77) after the rc_mlx5 runs when the tree has no pair build yet.
set -u
cd "$(dirname "$0")/.."
PAIR_DEFS=${PAIR_DEFS:--DRVX_TL=RVX_TL_RC_MLX5 -DRVX_TL_INTRA=RVX_TL_SHM}
flags=(-std=c11 -O2 -g -Wall -Wextra -Werror -Iinclude -Itests)
[ -f build/sim/libibverbs.so.1 ] || { echo "FAIL: rvxsim is not built (make sim)"; exit 1; }
[ -x build/bin/rvxrun ] || { echo "FAIL: build/bin/rvxrun is missing (make)"; exit 1; }
mkdir -p build/pair
export LD_LIBRARY_PATH=build/sim
cc "${flags[@]}" -DRVX_TL=RVX_TL_RC_MLX5 -o build/pair/t_pair_local_rc tests/pair/t_pair_local.c \
  -libverbs -lmlx5 || { echo "FAIL: t_pair_local does not build for rc_mlx5"; exit 1; }
out=$(build/pair/t_pair_local_rc 2>&1); rc=$?
echo "$out"
if [ $rc -ne 0 ] || [ "$(grep -c 'on-node traffic seen on the NIC' <<<"$out")" -ne 4 ]; then
  echo "FAIL: rc_mlx5 build (exit $rc)"; exit 1
fi
order() { # build [defs...]: t_pair_order and t_pair_handler built with defs, run, must pass
  local sfx=$1 t; shift
  for t in t_pair_order t_pair_handler t_pair_reg; do
    cc "${flags[@]}" "$@" -o "build/pair/$t$sfx" "tests/pair/$t.c" -libverbs -lmlx5 ||
      { echo "FAIL: $t does not build ($*)"; return 1; }
    "build/pair/$t$sfx" || { echo "FAIL: $t ($*)"; return 1; }
  done
}
order _rc -DRVX_TL=RVX_TL_RC_MLX5 || exit 1
if ! printf '#include <rvx/rvx.h>\n#if !defined(RVX_PAIR) || !RVX_PAIR\n#error no pair\n#endif\n' |
     cc -xc -E -Iinclude $PAIR_DEFS - >/dev/null 2>&1; then
  echo "SKIP: pair build not present (RVX_PAIR not defined by $PAIR_DEFS); the rc_mlx5 check passed"
  exit 77
fi
# shellcheck disable=SC2086
cc "${flags[@]}" $PAIR_DEFS -o build/pair/t_pair_local tests/pair/t_pair_local.c -libverbs -lmlx5 ||
  { echo "FAIL: t_pair_local does not build as a pair"; exit 1; }
out=$(build/pair/t_pair_local 2>&1); rc=$?
echo "$out"
if [ $rc -ne 0 ] || [ "$(grep -c 'on-node traffic stayed off the NIC' <<<"$out")" -ne 4 ]; then
  echo "FAIL: pair build (exit $rc)"; exit 1
fi
# shellcheck disable=SC2086
order '' $PAIR_DEFS || exit 1
