#!/usr/bin/env bash
# rvxsim exports rdma-core 44's whole ABI: every name at every version node that Debian's
# libibverbs.so.1 and libmlx5.so.1 define (nm -D --defined-only, "name@VER" and "name@@VER"
# alike) is defined by build/sim's libraries too, and the libraries built against rdma-core
# resolve every symbol on the model at load time (LD_BIND_NOW): librdmacm, and pyverbs and
# perftest where they are installed. What the model lacks refuses when called (sim/tests/t_abi).
set -u
cd "$(dirname "$0")/.."
lib=/usr/lib/$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
[ -e build/sim/libibverbs.so.1 ] || { echo "FAIL: rvxsim not built (make sim)"; exit 1; }
command -v nm >/dev/null || { echo "SKIP: nm missing (binutils)"; exit 77; }
[ -e "$lib/libibverbs.so.1" ] && [ -e "$lib/libmlx5.so.1" ] ||
  { echo "SKIP: Debian's rdma-core libraries are not in $lib (make deps)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
syms() { nm -D --defined-only "$1" | awk '$2 != "A" { print $3 }' | sort -u; }
for l in libibverbs.so.1 libmlx5.so.1; do
  syms "$lib/$l" >"$tmp/ref"
  syms "build/sim/$l" >"$tmp/sim"
  comm -23 "$tmp/ref" "$tmp/sim" >"$tmp/missing"
  if [ -s "$tmp/missing" ]; then
    echo "FAIL: $l: $(wc -l <"$tmp/missing") of $(wc -l <"$tmp/ref") symbols missing:"
    sed 's/^/  | /' "$tmp/missing" | head -40
    fails=$((fails + 1))
  else
    echo "ok: $l: all $(wc -l <"$tmp/ref") of rdma-core's symbols and versions (the model has $(wc -l <"$tmp/sim"))"
  fi
done
# every undefined symbol of a client library resolves on the model's libraries
resolves() { # path
  local out
  out=$(LD_LIBRARY_PATH=$PWD/build/sim ldd -r "$1" 2>&1 | grep -E "undefined symbol|not found")
  if [ -n "$out" ]; then
    echo "FAIL: $1 does not load on the model:"; echo "$out" | sed 's/^/  | /' | head -10
    fails=$((fails + 1))
  else
    echo "ok: $1 resolves every symbol against build/sim"
  fi
}
if [ -e "$lib/librdmacm.so.1" ]; then resolves "$lib/librdmacm.so.1"; else echo "note: librdmacm1 not installed"; fi
# pyverbs' modules also leave Python's own symbols to the interpreter: only rdma-core's count
pv=/usr/lib/python3/dist-packages/pyverbs
if [ -d "$pv" ]; then
  n=0 bad=0
  for m in $(find "$pv" -name '*.so'); do
    n=$((n + 1))
    u=$(LD_LIBRARY_PATH=$PWD/build/sim ldd -r "$m" 2>&1 |
        grep -E "not found|undefined symbol: _*(ibv|mlx5|rdma|verbs|execute|ioctl)")
    [ -n "$u" ] && { echo "FAIL: $m:"; echo "$u" | sed 's/^/  | /' | head -5; bad=$((bad + 1)); }
  done
  [ $bad -eq 0 ] && echo "ok: pyverbs: all $n modules resolve rdma-core's symbols against build/sim"
  fails=$((fails + bad))
fi
for b in ib_write_lat ib_send_bw; do
  p=$(command -v $b) && resolves "$p"
done
[ $fails -eq 0 ] && echo "PASS" || { echo "FAIL ($fails)"; exit 1; }
