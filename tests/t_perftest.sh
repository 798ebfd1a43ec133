#!/usr/bin/env bash
# Debian's perftest 4.5, unmodified, between two processes on rvxsim (build/sim/rvxsim-env; the
# tools' own out-of-band exchange is TCP on 127.0.0.1): ib_write_lat/bw, ib_read_lat/bw,
# ib_send_lat/bw and ib_atomic_lat/bw over RC and over DC (-c DC: DCIs driven through ibv_wr_*
# and mlx5dv_wr_set_dc_addr_stream, DCTs on an SRQ), ib_send_lat/bw over UD (-c UD). Each pair
# must exit 0 with its result table printed by the client. One short run each (-n 200): 18 runs,
# about 20 s.
set -u
cd "$(dirname "$0")/.."
[ -x build/sim/rvxsim-env ] || { echo "FAIL: rvxsim not built (make sim)"; exit 1; }
command -v ib_write_lat >/dev/null || { echo "SKIP: perftest not installed (make deps)"; exit 77; }
tmp=$(mktemp -d)
export RVXSIM_FABRIC_DIR=$tmp/fabric
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$tmp"' EXIT
port=$((20000 + $$ % 20000))
fails=0 runs=0

# waits (by event, up to 30 s) until a TCP socket listens on the port: perftest's client does
# not retry, and a probe connection would take the server's only accept
listening() {
  local hex; hex=$(printf ':%04X ' "$1")
  for _ in $(seq 300); do
    grep -q "$hex[0-9A-F:]* 0A" /proc/net/tcp /proc/net/tcp6 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}

run() { # tool, args...
  local tool=$1; shift
  local what="$tool $*" srv=$tmp/srv.log cli=$tmp/cli.log rs rc
  port=$((port + 1)); runs=$((runs + 1))
  timeout 60 build/sim/rvxsim-env "$tool" -d mlx5_0 -n 200 -p $port "$@" >"$srv" 2>&1 &
  local sp=$!
  if ! listening $port; then
    echo "FAIL: $what: the server never listened"; sed 's/^/  | /' "$srv" | head; fails=$((fails + 1))
    kill $sp 2>/dev/null; wait $sp 2>/dev/null; return
  fi
  timeout 60 build/sim/rvxsim-env "$tool" -d mlx5_0 -n 200 -p $port "$@" 127.0.0.1 >"$cli" 2>&1
  rc=$?
  wait $sp; rs=$?
  if [ $rc -eq 0 ] && [ $rs -eq 0 ] && grep -q "#bytes" "$cli"; then
    echo "ok: $what: $(grep -A1 '#bytes' "$cli" | tail -1 | tr -s ' \t' ' ')"
  else
    echo "FAIL: $what: client exit $rc, server exit $rs"
    sed 's/^/  client | /' "$cli" | tail -8; sed 's/^/  server | /' "$srv" | tail -8
    fails=$((fails + 1))
  fi
}

for c in RC DC; do
  for t in ib_write_lat ib_write_bw ib_read_lat ib_read_bw ib_send_lat ib_send_bw ib_atomic_lat ib_atomic_bw; do
    run $t -c $c
  done
done
run ib_send_lat -c UD
run ib_send_bw -c UD
[ $fails -eq 0 ] && echo "PASS: $runs perftest runs" || { echo "FAIL: $fails of $runs runs"; exit 1; }
