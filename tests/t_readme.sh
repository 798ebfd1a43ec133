#!/usr/bin/env bash
# README's program is real: extract the first C block, build it with -Wall -Wextra -Werror, run it
# on 3 ranks and check what it prints.
set -u
cd "$(dirname "$0")/.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
awk '/^```c$/ { on = 1; next } on && /^```$/ { exit } on' README.md > "$tmp/readme.c"
[ -s "$tmp/readme.c" ] || { echo "FAIL: no C block in README.md"; exit 1; }
cc -std=c11 -O2 -Wall -Wextra -Werror -Iinclude -o "$tmp/readme" "$tmp/readme.c" || { echo "FAIL: README program does not build"; exit 1; }
out=$(build/bin/rvxrun -n 3 -t 60 "$tmp/readme" 2>&1) || { echo "FAIL: README program failed:"; echo "$out"; exit 1; }
for r in 0 1 2; do
  grep -q "rank $r: pong from rank $(( (r + 1) % 3 ))" <<<"$out" || { echo "FAIL: rank $r output missing:"; echo "$out"; exit 1; }
done
echo "ok: the README program builds and runs on 3 ranks"
