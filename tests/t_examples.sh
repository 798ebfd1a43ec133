#!/usr/bin/env bash
# The examples run under rvxrun and say what they should.
set -u
cd "$(dirname "$0")/.."
run=build/bin/rvxrun
fails=0
check() { # description, expected fragment, command...
  local what=$1 want=$2; shift 2
  local out
  out=$("$@" 2>&1); rc=$?
  if [ $rc -ne 0 ] || ! grep -qE -- "$want" <<<"$out"; then
    echo "FAIL: $what (exit $rc)"; echo "$out" | tail -5; fails=$((fails + 1))
  else
    echo "ok: $what"
  fi
}
check "hello_put, 3 ranks" "rank 0 received: hello from rank 2" $run -n 3 -t 60 build/examples/hello_put
check "hello_put, 1 rank (no launcher)" "rank 0 received: hello from rank 0" build/examples/hello_put
check "atomic_counter, 4 ranks" "total 20000, expected 20000: correct" $run -n 4 -t 60 build/examples/atomic_counter 5000
check "pingpong short" "p50 [0-9]+ +p90" $run -n 2 -t 60 build/examples/pingpong 20000
check "pingpong medium" "3992-byte medium" $run -n 2 -t 60 build/examples/pingpong 2000 3992
check "pingpong prints the build" "pingpong: rvx .* tl=shm" $run -n 2 -t 60 build/examples/pingpong 10
check "pingpong refuses 3 ranks" "needs exactly 2 ranks" bash -c "! $run -n 3 -t 60 build/examples/pingpong 10"
check "ring, 4 ranks" "4 ranks, 100 rounds of 3 steps, 4096-byte blocks: every block correct" $run -n 4 -t 60 build/examples/ring
check "ring, 2 ranks, odd block size" "every block correct" $run -n 2 -t 60 build/examples/ring 1001 50
check "ring, 1 rank (no launcher)" "1 rank, 10 rounds of 0 steps.*every block correct" build/examples/ring 64 10
check "ring prints the build" "ring: rvx .* tl=shm .*boot=local" $run -n 2 -t 60 build/examples/ring 8 1
check "halo, 4 ranks" "4 ranks x 1000 cells, 200 steps: every cell matches the serial run" $run -n 4 -t 60 build/examples/halo
check "halo, 2 ranks (one neighbour on both sides)" "every cell matches" $run -n 2 -t 60 build/examples/halo 7 100
check "halo, 1 rank (its own neighbour)" "1 rank x 50 cells.*every cell matches" build/examples/halo 50 20
check "rvxrun reports a failing rank" "rank 0 exited with status 3" bash -c "! $run -n 2 -t 60 -g 1 sh -c 'exit \$((RVX_RANK == 0 ? 3 : 0))'"
check "rvxrun bounds a hanging job" "exceeded 1 s" bash -c "$run -n 2 -t 1 sleep 30; [ \$? -eq 124 ]"
check "rvxrun usage" "usage: rvxrun" bash -c "! $run"
check "rvxrun --help prints its options and exits 0" "^  --nodes K" $run --help
[ $fails -eq 0 ]
