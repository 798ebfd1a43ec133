#!/usr/bin/env bash
# OpenSHMEM (<shmem.h>, docs/openshmem.md): the programs of tests/shmem/, built by rvxshcc once per
# transport (make: build/shmem-<tl>/), run under rvxrun: shm on 4 PEs; rc_mlx5 and dc_mlx5 on
# rvxsim with 4 PEs; the pair (shm on the node, rc_mlx5 between nodes) on rvxsim with 4 PEs as 2
# emulated nodes x 2, so every PE has peers on both paths; f_peer_exit on each, where a PE's
# death must end the job, not hang it; the PMIx build of t_shmem_api under mpirun (4 PEs, shm);
# t_shmem_api with AddressSanitizer and UBSan; puts to memory that is not symmetric on every
# transport; a
# program of two translation units.
# Then the wrapper's refusals: a
# generic call for a type the specification does not give it, and an unknown transport, fail
# to build. Exit 0 pass, 1 fail, 77 skip (nothing built).
set -u
cd "$(dirname "$0")/.."
run=build/bin/rvxrun
cc=build/bin/rvxshcc
fail=0 ran=0
[ -x "$run" ] && [ -x "$cc" ] || { echo "SKIP: build/bin/rvxrun or rvxshcc missing (make shmem)"; exit 77; }
for tl in shm rc dc pair; do
  for exe in build/shmem-$tl/t_*; do
    [ -x "$exe" ] || continue
    env=() nodes=()
    case $tl in
      shm) ;;
      pair) env=(LD_LIBRARY_PATH=build/sim); nodes=(--nodes 2) ;;
      *) env=(LD_LIBRARY_PATH=build/sim) ;;
    esac
    ran=$((ran + 1))
    if out=$(env "${env[@]}" SHMEM_SYMMETRIC_SIZE=8M "$run" -n 4 "${nodes[@]}" -t 120 "$exe" 2>&1); then
      echo "ok   $tl/$(basename "$exe"): $(tail -n 1 <<<"$out")"
    else
      echo "FAIL $tl/$(basename "$exe")"
      sed 's/^/  | /' <<<"$out" | tail -n 25
      fail=1
    fi
  done
done
[ $ran -gt 0 ] || { echo "SKIP: no OpenSHMEM test built (make shmem)"; exit 77; }

# a PE that dies (f_peer_exit: PE 1 leaves without finalize) ends the job: each waiting PE ends
# with a line naming a failed PE (PE 1, or one that ended after finding PE 1 gone first: PE 0's
# wait_until looks at every PE); rvxrun's grace period (-g 100) is far longer, so the PEs ended
# themselves
for tl in shm rc dc pair; do
  exe=build/shmem-$tl/f_peer_exit
  [ -x "$exe" ] || continue
  env=(); nodes=()
  [ $tl = shm ] || env=(LD_LIBRARY_PATH=build/sim)
  [ $tl = pair ] && nodes=(--nodes 2)
  start=$SECONDS
  out=$(env "${env[@]}" SHMEM_SYMMETRIC_SIZE=8M "$run" -n 4 "${nodes[@]}" -g 100 -t 120 "$exe" 2>&1)
  rc=$?
  if [ $rc -ne 0 ] && grep -Eq "shmem: PE 0: PE [123] failed" <<<"$out" && ! grep -q "must not" <<<"$out" &&
     [ $((SECONDS - start)) -lt 100 ]; then
    echo "ok   $tl/f_peer_exit: PE 1's exit ended the job in $((SECONDS - start)) s (exit $rc)"
  else
    echo "FAIL $tl/f_peer_exit (exit $rc after $((SECONDS - start)) s)"
    sed 's/^/  | /' <<<"$out" | tail -n 15
    fail=1
  fi
done

tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# the PMIx build (rvxshcc --boot=pmix) of the same program under Open MPI's mpirun, 4 PEs on shm
if pkg-config --exists pmix 2>/dev/null && command -v mpirun.openmpi >/dev/null; then
  root=(); [ "$(id -u)" = 0 ] && root=(--allow-run-as-root)
  if ! "$cc" --boot=pmix -std=c11 -O2 -o "$tmp/api_pmix" tests/shmem/t_shmem_api.c >"$tmp/log" 2>&1; then
    echo "FAIL: rvxshcc --boot=pmix"; head -n 5 "$tmp/log"; fail=1
  elif out=$(SHMEM_SYMMETRIC_SIZE=8M timeout 120 mpirun.openmpi --oversubscribe --bind-to none --mca plm isolated \
               "${root[@]}" -np 4 "$tmp/api_pmix" 2>&1); then
    echo "ok   mpirun/t_shmem_api (PMIx build): $(grep -m1 'failure' <<<"$out")"
  else
    echo "FAIL mpirun/t_shmem_api (PMIx build)"; sed 's/^/  | /' <<<"$out" | tail -n 15; fail=1
  fi
else
  echo "--   mpirun/t_shmem_api: not run (no PMIx or mpirun: make deps)"
fi

# the same program built with AddressSanitizer and UndefinedBehaviorSanitizer (shm, 4 PEs): the
# data segment's move, the heap and every call path without a report
if "$cc" -std=c11 -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer \
     -o "$tmp/api_san" tests/shmem/t_shmem_api.c >"$tmp/log" 2>&1; then
  if out=$(SHMEM_SYMMETRIC_SIZE=8M "$run" -n 4 -t 120 "$tmp/api_san" 2>&1) && ! grep -q "Sanitizer" <<<"$out"; then
    echo "ok   sanitizers/t_shmem_api: $(grep -m1 'failure' <<<"$out")"
  else
    echo "FAIL sanitizers/t_shmem_api"; sed 's/^/  | /' <<<"$out" | grep -v "^  | *$" | head -n 25; fail=1
  fi
else
  echo "--   sanitizers/t_shmem_api: not built ($(head -n 1 "$tmp/log"))"
fi

# a put to memory that is not symmetric ends the job with a line from PE 0, never "accepted",
# never a hang (PE 1 waits in the barrier for PE 0, whose endpoint failed):
#  - end: 8 bytes, 4 of them past the heap's end (rvx's state is read to find it): the access
#    error, at the put (shm: the heap is mapped, the copy is checked) or at the quiet after it
#    (the NIC refused it);
#  - malloc: below the heap, outside the data segment: "not symmetric", at the put;
#  - stack: above the heap: "not symmetric" at the put, except on rc_mlx5 and dc_mlx5 alone,
#    whose heap test is one compare and leaves it to the target's NIC (the access error)
cat >"$tmp/bad_dest.c" <<'EOF'
#include <shmem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(int argc, char **argv)
{
    long v = 42, local = 0;
    shmem_init();
    if (argc > 1 && shmem_my_pe() == 0) {
        char *end = (char *)rvx__sh.heap_base + rvx__sh.heap_len;
        void *dest = !strcmp(argv[1], "end") ? (void *)(end - 4)
                   : !strcmp(argv[1], "malloc") ? malloc(64) : (void *)&local;
        shmem_putmem(dest, &v, 8, 1);
        shmem_quiet();
        printf("PE 0: a put to %s was accepted (%ld)\n", argv[1], local);
    }
    shmem_barrier_all();
    shmem_finalize();
    return 0;
}
EOF
access="(a put of 8 bytes failed|shmem_quiet: .*failed): remote access error"
nonsym="address 0x[0-9a-f]+ \(8 bytes\) is not symmetric"
for tl in shm rc dc pair; do
  env=(); nodes=()
  [ $tl = shm ] || env=(LD_LIBRARY_PATH=build/sim)
  [ $tl = pair ] && nodes=(--nodes 2)
  if ! "$cc" --tl=$tl -std=c11 -O2 -o "$tmp/bad_dest_$tl" "$tmp/bad_dest.c" >"$tmp/log" 2>&1; then
    echo "FAIL $tl/bad_dest: did not build"; sed 's/^/  | /' "$tmp/log" | head -5; fail=1; continue
  fi
  for where in end malloc stack; do
    case $where:$tl in
      end:*|stack:rc|stack:dc) want=$access ;;
      *) want=$nonsym ;;
    esac
    start=$SECONDS
    out=$(env "${env[@]}" SHMEM_SYMMETRIC_SIZE=1M "$run" -n 2 "${nodes[@]}" -t 60 "$tmp/bad_dest_$tl" $where 2>&1)
    rc=$?
    if [ $rc -ne 0 ] && [ $((SECONDS - start)) -lt 50 ] && ! grep -q accepted <<<"$out" &&
       grep -Eq "^shmem: PE 0: $want" <<<"$out"; then
      echo "ok   $tl/bad_dest $where: $(grep -m1 '^shmem: PE 0' <<<"$out")"
    else
      echo "FAIL $tl/bad_dest $where (exit $rc after $((SECONDS - start)) s; wanted \"$want\")"
      sed 's/^/  | /' <<<"$out" | tail -n 12; fail=1
    fi
  done
done

# a program of two translation units shares one state (a weak global): atomics on a global and
# a heap word from the second file, checked in the first (shm, 3 PEs)
cat >"$tmp/tu1.c" <<'EOF'
#include <shmem.h>
#include <stdio.h>
long counter;
void bump(long *c, int pe);
int main(void)
{
    long *h;
    int pe, ok;
    shmem_init();
    h = (long *)shmem_calloc(1, sizeof(long));
    for (pe = 0; pe < shmem_n_pes(); pe++) { bump(&counter, pe); bump(h, pe); }
    shmem_barrier_all();
    ok = counter == shmem_n_pes() && *h == shmem_n_pes();
    printf("PE %d: %s\n", shmem_my_pe(), ok ? "ok" : "BAD");
    shmem_finalize();
    return !ok;
}
EOF
printf '#include <shmem.h>\nvoid bump(long *c, int pe) { shmem_long_atomic_inc(c, pe); }\n' >"$tmp/tu2.c"
if "$cc" -std=c11 -O2 -Wall -Wextra -Werror -o "$tmp/tu" "$tmp/tu1.c" "$tmp/tu2.c" >"$tmp/log" 2>&1 &&
   out=$("$run" -n 3 -t 60 "$tmp/tu" 2>&1) && [ "$(grep -c ': ok' <<<"$out")" = 3 ]; then
  echo "ok   two translation units share one state"
else
  echo "FAIL: two translation units"; cat "$tmp/log"; echo "${out:-}"; fail=1
fi

# what is left out does not compile: a bitwise atomic on a double, and an unknown transport
cat >"$tmp/bad.c" <<'EOF'
#include <shmem.h>
double d;
int main(void) { shmem_init(); shmem_atomic_and(&d, 1.0, 0); shmem_finalize(); return 0; }
EOF
if "$cc" -std=c11 -O2 -c -o "$tmp/bad.o" "$tmp/bad.c" >"$tmp/log" 2>&1; then
  echo "FAIL: shmem_atomic_and on a double compiled"; fail=1
else
  echo "ok   a generic call for a type without the routine does not compile"
fi
if "$cc" --tl=ib -c -o "$tmp/x.o" "$tmp/bad.c" >"$tmp/log" 2>&1; then
  echo "FAIL: rvxshcc --tl=ib accepted"; fail=1
else
  echo "ok   rvxshcc refuses an unknown transport: $(head -n 1 "$tmp/log")"
fi
exit $fail
