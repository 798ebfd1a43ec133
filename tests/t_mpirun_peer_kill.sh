#!/usr/bin/env bash
# A rank killed with SIGKILL under mpirun. Open MPI's mpirun aborts the whole job when a rank
# dies abnormally (checked here, so README's statement stays true); with --enable-recovery it
# lets the survivors run on, and they must report the dead rank as failed within a bounded time,
# keep exchanging data among themselves, and leave cleanly (tests/launch/peer_kill.c).
# Note: with --enable-recovery mpirun 4.1 exits 0 although a rank was killed; the survivors'
# lines are what is checked.
set -u
cd "$(dirname "$0")/.."
. tests/mpirun_env.sh
mpirun_setup build/pmix/peer_kill
echo "launcher: ${MPIRUN[*]}"

for victim in 2 1 0; do
  mpirun_check "mpirun --enable-recovery -np 3, rank $victim killed: every survivor carries on" \
    "peer_kill: rank [0-2]: ok: rank $victim, killed" 2 \
    "${MPIRUN[@]}" --enable-recovery -np 3 build/pmix/peer_kill $victim
done
mpirun_check "mpirun --enable-recovery -np 4, rank 3 killed" "peer_kill: rank [0-2]: ok: rank 3, killed" 3 \
  "${MPIRUN[@]}" --enable-recovery -np 4 build/pmix/peer_kill 3

# Without it, mpirun ends the job when the rank is killed.
out=$(timeout -k 5 60 "${MPIRUN[@]}" -np 3 build/pmix/peer_kill 2 2>&1); rc=$?
if [ $rc -ne 0 ] && grep -q "signal 9" <<<"$out"; then
  echo "ok: plain mpirun aborts the job when a rank is killed (exit $rc)"
else
  echo "FAIL: plain mpirun with a killed rank: exit $rc"; echo "$out" | tail -8 | sed 's/^/  | /'
  mpirun_fails=$((mpirun_fails + 1))
fi
[ $mpirun_fails -eq 0 ]
