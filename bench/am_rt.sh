#!/usr/bin/env bash
# Instructions of one 8-byte AM round trip on shm, by part (build/bench/icount_am_rt: one process,
# an endpoint to itself, each part a noinline wrapper counted alone by callgrind over N and 2N
# round trips, difference / N). Prints "am_rt shm <part> <instructions>":
#   send    the client's request (rvx_am_short, one argument)
#   serve   the server's progress call that finds the request; its handler replies
#   finish  the client's progress call that finds the reply and runs its handler
#   empty   a progress call with nothing arrived (one pass of a side's wait)
# and "am_rt shm round_trip <send + serve + finish>", the work of both sides without their waits.
# Usage: bench/am_rt.sh [N]
set -u
cd "$(dirname "$0")/.." || exit 1
N=${1:-10000}
bin=build/bench/icount_am_rt
[ -x $bin ] || { echo "am_rt: build $bin first (make $bin)"; exit 1; }
command -v valgrind >/dev/null || { echo "am_rt: valgrind is not installed (make deps)"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
count() { # wrapper, round trips -> instructions inside the wrapper
  valgrind --tool=callgrind --callgrind-out-file="$tmp/cg" --toggle-collect="$1" "$bin" "$2" \
    >/dev/null 2>"$tmp/err" || { cat "$tmp/err" >&2; echo 0; return; }
  awk '/^(summary|totals):/ { print $2; exit }' "$tmp/cg"
}
total=0
for part in send serve finish empty; do
  a=$(count "rt_$part" "$N"); b=$(count "rt_$part" $((2 * N)))
  v=$(awk -v a="$a" -v b="$b" -v n="$N" 'BEGIN { printf "%.1f", (b - a) / n }')
  echo "am_rt shm $part $v"
  [ "$part" = empty ] || total=$(awk -v t="$total" -v v="$v" 'BEGIN { print t + v }')
done
echo "am_rt shm round_trip $total"
