#!/usr/bin/env bash
# The pair build's shared-memory mailbox is sized by the node, not the job (tests/pair/t_mailbox.c,
# built with the Makefile's PAIR_DEFS, on rvxsim):
#   8 ranks as 2 nodes, 6 ranks as 4 nodes (uneven: 2, 1, 2, 1 ranks): each rank's own mailbox
#   holds the rings of its node's ranks only, it maps one mailbox per rank of its node, and AMs
#   to every rank arrive through rings at node-local slots
#   a rank that claims node 0 with node 1's local rank, and a rank without RVX_LOCAL_RANK/SIZE
#   beside ranks with them: every rank of node 0 is refused at worker creation with a line
#   naming the disagreement, node 1's ranks start; nobody dies of a signal
# Skips (77) when the tree has no pair build.
set -u
cd "$(dirname "$0")/.."
PAIR_DEFS=${PAIR_DEFS:--DRVX_TL=RVX_TL_RC_MLX5 -DRVX_TL_INTRA=RVX_TL_SHM}
[ -f build/sim/libibverbs.so.1 ] || { echo "FAIL: rvxsim is not built (make sim)"; exit 1; }
[ -x build/bin/rvxrun ] || { echo "FAIL: build/bin/rvxrun is missing (make)"; exit 1; }
if ! printf '#include <rvx/rvx.h>\n#if !defined(RVX_PAIR) || !RVX_PAIR\n#error no pair\n#endif\n' |
     cc -xc -E -Iinclude $PAIR_DEFS - >/dev/null 2>&1; then
  echo "SKIP: pair build not present (RVX_PAIR not defined by $PAIR_DEFS)"
  exit 77
fi
mkdir -p build/pair
export LD_LIBRARY_PATH=build/sim
# shellcheck disable=SC2086
cc -std=c11 -O2 -g -Wall -Wextra -Werror -Iinclude -Itests $PAIR_DEFS -o build/pair/t_mailbox \
  tests/pair/t_mailbox.c -libverbs -lmlx5 || { echo "FAIL: tests/pair/t_mailbox.c does not build"; exit 1; }
fails=0
run=(build/bin/rvxrun -t 60 -g 5)

for nk in "8 2" "6 4"; do
  set -- $nk
  out=$("${run[@]}" -n "$1" --nodes "$2" build/pair/t_mailbox size 2>&1); rc=$?
  echo "$out"
  if [ $rc -eq 0 ] && [ "$(grep -c '^mailbox: rank .* own ' <<<"$out")" -eq "$1" ]; then
    echo "ok: $1 ranks as $2 nodes: mailboxes sized by the node"
  else
    echo "FAIL: $1 ranks as $2 nodes (exit $rc)"; fails=$((fails + 1))
  fi
done

refused() { # mode, the line node 0's ranks must print
  local out rc
  out=$("${run[@]}" -n 8 --nodes 2 build/pair/t_mailbox "$1" 2>&1); rc=$?
  echo "$out"
  if [ $rc -eq 0 ] && grep -q "$2" <<<"$out" &&
     [ "$(grep -c 'worker invalid parameter' <<<"$out")" -eq "$3" ] &&
     [ "$(grep -c 'worker created' <<<"$out")" -eq $((8 - $3)) ] &&
     ! grep -qi "signal\|SIGBUS\|SIGSEGV\|out of bounds" <<<"$out"; then
    echo "ok: $1: node 0 refused, node 1 started"
  else
    echo "FAIL: $1 (exit $rc)"; fails=$((fails + 1))
  fi
}
refused liar "ranks 1 and 5 are both local rank 1 on node 0" 5
refused unset "rank 1 is on node 0 as local rank 1 of 8" 4

[ $fails -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "all mailbox checks passed"
