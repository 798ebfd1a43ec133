#!/usr/bin/env bash
# make install puts the headers, rvx.pc and rvxrun under PREFIX; a program outside the tree builds
# with `pkg-config --cflags rvx` and runs with the installed rvxrun.
set -u
cd "$(dirname "$0")/.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
make -s install PREFIX="$tmp/prefix" >/dev/null || { echo "FAIL: make install"; exit 1; }
for f in include/rvx/rvx.h include/rvx/tl/shm.h include/rvx/proto/am.h lib/pkgconfig/rvx.pc bin/rvxrun; do
  [ -e "$tmp/prefix/$f" ] || { echo "FAIL: $f not installed"; exit 1; }
done
cp examples/hello_put.c "$tmp/app.c"
flags=$(PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" pkg-config --cflags rvx) || { echo "FAIL: pkg-config"; exit 1; }
cc $flags -O2 -o "$tmp/app" "$tmp/app.c" || { echo "FAIL: building against the installed headers"; exit 1; }
out=$("$tmp/prefix/bin/rvxrun" -n 2 -t 30 "$tmp/app") || { echo "FAIL: running"; echo "$out"; exit 1; }
grep -q "rank 1 received: hello from rank 0" <<<"$out" || { echo "FAIL: output"; echo "$out"; exit 1; }
echo "ok: installed, built with pkg-config ($flags), ran"
