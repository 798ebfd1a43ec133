#!/usr/bin/env bash
# Same binary, two worlds: Debian's own, unmodified ibv_devinfo, ibv_rc_pingpong and
# ibv_srq_pingpong (ibverbs-utils, linked against the real rdma-core) run on rvxsim, the
# pingpongs between two processes, with only LD_LIBRARY_PATH pointing at the model. Their
# out-of-band exchange is TCP on 127.0.0.1.
set -u
cd "$(dirname "$0")/.."
[ -e build/sim/libibverbs.so.1 ] || { echo "FAIL: rvxsim not built (make)"; exit 1; }
for b in ibv_devinfo ibv_rc_pingpong ibv_srq_pingpong; do
  command -v $b >/dev/null || { echo "FAIL: $b missing (make deps installs ibverbs-utils)"; exit 1; }
done
export LD_LIBRARY_PATH=$PWD/build/sim
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$tmp"' EXIT
. tests/ports.sh # free_port: the pingpong servers' ports
fails=0
expect_devinfo() { # description, pattern, env...
  local what=$1 pat=$2; shift 2
  if env "$@" ibv_devinfo -v >"$tmp/devinfo" 2>&1 && grep -qE "$pat" "$tmp/devinfo"; then
    echo "ok: ibv_devinfo: $what"
  else
    echo "FAIL: ibv_devinfo: $what"; head -20 "$tmp/devinfo" | sed 's/^/  | /'; fails=$((fails + 1))
  fi
}
expect_devinfo "a ConnectX-6 (part 4123)" "vendor_part_id:[[:space:]]+4123"
expect_devinfo "port active" "PORT_ACTIVE"
expect_devinfo "two devices" "hca_id:[[:space:]]+mlx5_1" RVXSIM_NUM_DEVICES=2
expect_devinfo "RoCE v2 GID" "GID\[  1\]:.*RoCE v2" RVXSIM_LINK=eth
# per-device port speed and width, decoded by rdma-core's own ibv_devinfo (its speed/width tables)
expect_devinfo "default 4X HDR" "active_width:[[:space:]]+4X \(2\)" 
expect_devinfo "default 50 Gb/s per lane (HDR)" "active_speed:[[:space:]]+50.0 Gbps \(64\)"
ps="RVXSIM_NUM_DEVICES=2 RVXSIM_PORT_SPEED=mlx5_0:HDR,mlx5_1:1xEDR"
expect_devinfo "mlx5_1 1X EDR: width" "active_width:[[:space:]]+1X \(1\)" $ps
expect_devinfo "mlx5_1 1X EDR: speed" "active_speed:[[:space:]]+25.0 Gbps \(32\)" $ps
expect_devinfo "one setting for all: 12X QDR" "active_width:[[:space:]]+12X \(8\)" RVXSIM_PORT_SPEED=12xQDR
expect_devinfo "one setting for all: QDR" "active_speed:[[:space:]]+10.0 Gbps \(4\)" RVXSIM_PORT_SPEED=12xQDR
if env LD_LIBRARY_PATH=$LD_LIBRARY_PATH RVXSIM_NUM_DEVICES=2 RVXSIM_PORT_SPEED=mlx5_0:HDR,mlx5_1:1xEDR \
     ibv_devinfo -d mlx5_0 -v 2>&1 | grep -qE "active_speed:[[:space:]]+50.0 Gbps \(64\)"; then
  echo "ok: ibv_devinfo: mlx5_0 keeps HDR beside mlx5_1's EDR"
else
  echo "FAIL: ibv_devinfo: mlx5_0's speed"; fails=$((fails + 1))
fi
run_pair() { # program, extra args...
  local prog=$1; shift
  local port try
  port=$(free_port)
  for try in 1 2 3; do
    timeout 30 "$prog" -p $port "$@" >"$tmp/server" 2>&1 &
    local spid=$!
    for _ in $(seq 200); do listening "$port" && break; kill -0 $spid 2>/dev/null || break; sleep 0.05; done
    if timeout 30 "$prog" -p $port "$@" 127.0.0.1 >"$tmp/client" 2>&1 && wait $spid; then
      if grep -q "iters in" "$tmp/client" && grep -q "iters in" "$tmp/server"; then
        echo "ok: $prog $*: $(grep 'iters in' "$tmp/client")"
        return 0
      fi
    fi
    wait $spid 2>/dev/null
    port=$(free_port)
  done
  echo "FAIL: $prog $*"; sed 's/^/  client| /' "$tmp/client"; sed 's/^/  server| /' "$tmp/server"
  fails=$((fails + 1))
}
run_pair ibv_rc_pingpong -n 1000 -s 4096
run_pair ibv_rc_pingpong -n 200 -s 65536
run_pair ibv_srq_pingpong -n 500 -q 4
RVXSIM_LINK=eth run_pair ibv_rc_pingpong -g 1 -n 200   # RoCE: addressed by GID
[ $fails -eq 0 ]
