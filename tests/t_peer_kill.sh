#!/usr/bin/env bash
# A rank killed with SIGKILL mid-run under rvxrun (tests/launch/peer_kill.c, 4 ranks): every
# survivor reports it failed within a bounded time, keeps exchanging checked data with the other
# survivors, and leaves cleanly; rvxrun names the killed rank and exits 128+9.
set -u
cd "$(dirname "$0")/.."
bin=build/launch/peer_kill
[ -x $bin ] || { echo "FAIL: $bin is missing: make all"; exit 1; }
fails=0
for victim in 1 0 3; do
  out=$(timeout -k 5 60 build/bin/rvxrun -n 4 -t 50 -g 20 $bin $victim 2>&1); rc=$?
  survivors=$(grep -cE "peer_kill: rank [0-3]: ok: rank $victim, killed" <<<"$out")
  if [ $rc -eq 137 ] && [ "$survivors" -eq 3 ] && ! grep -q FAIL <<<"$out" &&
     grep -q "rvxrun: rank $victim killed by signal 9" <<<"$out"; then
    echo "ok: rank $victim killed: 3 survivors carried on; rvxrun reported it (exit $rc)"
    grep "peer_kill:" <<<"$out" | sed 's/^/  /'
  else
    echo "FAIL: rank $victim killed: exit $rc (expected 137), $survivors of 3 survivors ok"
    echo "$out" | tail -15 | sed 's/^/  | /'
    fails=$((fails + 1))
  fi
done
[ $fails -eq 0 ]
