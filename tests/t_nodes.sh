#!/usr/bin/env bash
# Node numbers (rvx__boot_t.node), which a build pairing shared memory with the network uses to
# tell on-node peers from the rest:
#   rvxrun --nodes K   rank r is on node r*K/N (8 ranks as 1, 2, 3 and 8 nodes); K above N or
#                      below 1 is a usage error; RVXRUN_NODES=K is its default; without
#                      either every rank is on node 0
#   RVX_NODE           outside 0..size-1 stops rvx_init with a message naming it
#   mpirun (PMIx)      all ranks of this machine share a node; RVX_NODE set per rank overrides;
#                      and, once the tree has the pair build, its ring example (PMIx) as one
#                      node and as 2 emulated nodes over rvxsim
# tests/pair/t_node.c gathers the nodes and checks them on rank 0.
set -u
cd "$(dirname "$0")/.."
fails=0
ok()   { echo "ok: $1"; }
bad()  { echo "FAIL: $1"; fails=$((fails + 1)); }
mkdir -p build/pair
cc -std=c11 -O2 -g -Wall -Wextra -Werror -Iinclude -Itests -o build/pair/t_node tests/pair/t_node.c ||
  { echo "FAIL: tests/pair/t_node.c does not build"; exit 1; }
run=(build/bin/rvxrun -t 60 -g 5)
[ -x build/bin/rvxrun ] || { echo "FAIL: build/bin/rvxrun is missing (make)"; exit 1; }

for k in 1 2 3 8; do
  out=$("${run[@]}" -n 8 --nodes $k build/pair/t_node blocks $k 2>&1)
  if [ $? -eq 0 ] && grep -q "nodes ok: 8 ranks, blocks of $k (local)" <<<"$out"; then
    ok "rvxrun -n 8 --nodes $k"
  else
    bad "rvxrun -n 8 --nodes $k"; echo "$out" | tail -10 | sed 's/^/  | /'
  fi
done
# RVXRUN_NODES is --nodes' default: how run.sh makes tests that start themselves run as 2 nodes
out=$(RVXRUN_NODES=2 "${run[@]}" -n 6 build/pair/t_node blocks 2 2>&1)
if [ $? -eq 0 ] && grep -q "nodes ok: 6 ranks, blocks of 2 (local)" <<<"$out"; then
  ok "RVXRUN_NODES=2 rvxrun -n 6"
else
  bad "RVXRUN_NODES=2 rvxrun -n 6"; echo "$out" | tail -10 | sed 's/^/  | /'
fi
out=$(env -u RVX_NODE -u RVXRUN_NODES "${run[@]}" -n 3 build/pair/t_node same 2>&1)
if [ $? -eq 0 ] && grep -q "nodes ok: 3 ranks, all on node 0 (local)" <<<"$out"; then
  ok "without --nodes every rank is on node 0"
else
  bad "without --nodes"; echo "$out" | tail -10 | sed 's/^/  | /'
fi
# the check of t_node itself can fail: claiming 2 nodes where there is 1 is caught
out=$("${run[@]}" -n 4 build/pair/t_node blocks 2 2>&1)
if [ $? -ne 0 ] && grep -q "rank 2 is on node 0, expected 1" <<<"$out"; then
  ok "t_node catches a wrong node"
else
  bad "t_node did not catch ranks on the wrong node"; echo "$out" | tail -5 | sed 's/^/  | /'
fi
for args in "-n 2 --nodes 3" "-n 4 --nodes 0" "-n 4 --nodes x"; do
  out=$(build/bin/rvxrun $args true 2>&1); rc=$?
  if [ $rc -eq 2 ] && grep -q "usage: rvxrun" <<<"$out"; then ok "rvxrun $args: usage error"
  else bad "rvxrun $args (exit $rc): $out"; fi
done
out=$(RVX_NODE=4 "${run[@]}" -q -n 4 build/pair/t_node same 2>&1); rc=$?
if [ $rc -ne 0 ] && grep -q "RVX_NODE is this rank's node number" <<<"$out"; then
  ok "RVX_NODE=4 with 4 ranks is refused"
else
  bad "RVX_NODE=4 with 4 ranks (exit $rc)"; echo "$out" | tail -5 | sed 's/^/  | /'
fi

# PMIx: Open MPI's mpirun on this machine
. tests/mpirun_env.sh
if command -v mpirun.openmpi >/dev/null && pkg-config --exists pmix; then
  cc -std=c11 -O2 -g -Wall -Wextra -Werror -Iinclude -Itests -DRVX_BOOT=RVX_BOOT_PMIX \
     -o build/pair/t_node-pmix tests/pair/t_node.c $(pkg-config --cflags --libs pmix) ||
    { echo "FAIL: tests/pair/t_node.c does not build with PMIx"; exit 1; }
  mpirun_setup build/pair/t_node-pmix
  mpirun_check "mpirun -np 3: one node for every rank (PMIX_NODEID)" "nodes ok: 3 ranks, all on node" 1 \
    env -u RVX_NODE "${MPIRUN[@]}" -np 3 build/pair/t_node-pmix same
  mpirun_check "mpirun -np 4 with RVX_NODE per rank: 2 emulated nodes" "nodes ok: 4 ranks, blocks of 2 \(pmix\)" 1 \
    "${MPIRUN[@]}" -np 4 sh -c 'RVX_NODE=$((PMIX_RANK / 2)) exec build/pair/t_node-pmix blocks 2'
  pair=(-DRVX_TL=RVX_TL_RC_MLX5 -DRVX_TL_INTRA=RVX_TL_SHM)
  if printf '#include <rvx/rvx.h>\n#if !defined(RVX_PAIR) || !RVX_PAIR\n#error no pair\n#endif\n' |
     cc -xc -E -Iinclude "${pair[@]}" - >/dev/null 2>&1 && [ -f build/sim/libibverbs.so.1 ]; then
    cc -std=c11 -O2 -g -Wall -Wextra -Werror -Iinclude "${pair[@]}" -DRVX_BOOT=RVX_BOOT_PMIX \
       -o build/pair/ring-pmix-pair examples/ring.c $(pkg-config --cflags --libs pmix) -libverbs -lmlx5 ||
      { echo "FAIL: examples/ring.c does not build as a pair with PMIx"; exit 1; }
    sim=(-x LD_LIBRARY_PATH="$PWD/build/sim" -x RVXSIM_FABRIC_DIR -x RVXSIM_STRICT)
    export RVXSIM_FABRIC_DIR=${RVXSIM_FABRIC_DIR:-/dev/shm/rvxsim-$(id -u)} RVXSIM_STRICT=${RVXSIM_STRICT:-1}
    MPIRUN_LIMIT=60
    mpirun_check "pair ring (PMIx), mpirun -np 4 on one node" \
      "ring: 4 ranks, .*every block correct on every rank" 1 \
      env -u RVX_NODE "${MPIRUN[@]}" "${sim[@]}" -np 4 build/pair/ring-pmix-pair 4096 50
    mpirun_check "pair ring (PMIx), mpirun -np 4 as 2 nodes (RVX_NODE per rank, rc_mlx5 on rvxsim between)" \
      "ring: 4 ranks, .*every block correct on every rank" 1 \
      "${MPIRUN[@]}" "${sim[@]}" -np 4 sh -c 'RVX_NODE=$((PMIX_RANK / 2)) exec build/pair/ring-pmix-pair 4096 50'
  else
    echo "note: the pair build under mpirun not run: the tree has no pair build yet"
  fi
  fails=$((fails + mpirun_fails))
else
  echo "note: PMIx part not run: needs Open MPI's mpirun and libpmix-dev (make deps)"
fi
[ $fails -eq 0 ]
