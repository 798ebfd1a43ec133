#!/usr/bin/env bash
# Multi-lane rendezvous on rvxsim: two devices with different port speeds, RVX_LANES=2, for GET,
# PUT and PIPELINE (build/lanes/t_lanes_*, from tests/t_lanes.c). For each protocol:
#   sweep  sizes around the threshold, the stripe minimum and the pipeline phases up to 4 MiB,
#          every byte checked by the receiver; lane 1 (mlx5_1) must have carried some of it
#   small  rendezvous messages below the stripe minimum: mlx5_1 moves no RDMA byte at all
#   share  8 x 4 MiB: each device's RDMA byte count, as the model counted it (RVXSIM_STATS_FILE),
#          against its share of the summed port bandwidth, for two speed settings:
#            mlx5_0 4x HDR (25000 MB/s), mlx5_1 4x EDR (12500 MB/s): mlx5_1 carries 1/3
#            mlx5_0 1x HDR ( 6250 MB/s), mlx5_1 4x EDR (12500 MB/s): mlx5_1 carries 2/3
#          tolerance: 1 percentage point (GET, PUT: the split is exact to 64 bytes per message);
#          2 points for PIPELINE (its phase-2 bounce copies of the first message go on lane 0);
#          and the devices together moved every byte (within the pipeline's phase-1 bytes,
#          which travel in the RTS, and a few credit writes)
#   fail   mlx5_1 refuses every RDMA (RVXSIM_RDMA_DENY): a striped message ends with
#          RVX_ERR_REMOTE_ACCESS on both sides (no hang); messages on lane 0 alone still arrive
# The same sweep over dc_mlx5 (build/lanes/t_lanes_dc_*), and its peer death with GET.
# Also: t_tag_peer_death built with two lanes (no hang when peers die mid-rendezvous), and a build
# with two lanes but one device or one RVX_DEV name says what to do.
set -u
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH=$PWD/build/sim
[ -e build/sim/libibverbs.so.1 ] || { echo "FAIL: rvxsim not built (make)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# dev_bytes FILE DEV: RDMA WRITE + READ bytes of device DEV summed over every process
dev_bytes() {
  awk -v d="dev=$2" '$3 == d { split($4, w, "="); split($5, r, "="); s += w[2] + r[2] } END { printf "%d\n", s }' "$1"
}
run() { # protocol mode port-speed -> stats file in $tmp/stats
  rm -f "$tmp/stats"
  if ! RVXSIM_NUM_DEVICES=2 RVXSIM_PORT_SPEED=$3 RVXSIM_STATS_FILE=$tmp/stats \
       timeout 200 "build/lanes/t_lanes_$1" "$2" >"$tmp/out" 2>&1; then
    fail "$1 $2 ($3): exit status"; sed 's/^/  | /' "$tmp/out" | tail -20; return 1
  fi
  [ -s "$tmp/stats" ] || { fail "$1 $2: no stats written"; return 1; }
  return 0
}
for p in get put pipeline; do
  [ -x "build/lanes/t_lanes_$p" ] || { fail "build/lanes/t_lanes_$p not built (make)"; continue; }
  if run $p sweep mlx5_0:HDR,mlx5_1:EDR; then
    b1=$(dev_bytes "$tmp/stats" mlx5_1)
    [ "$b1" -gt 0 ] && echo "ok: $p sweep: every byte arrived; mlx5_1 moved $b1 bytes" ||
      fail "$p sweep: mlx5_1 moved nothing (no striping)"
  fi
  if run $p small mlx5_0:HDR,mlx5_1:EDR; then
    b0=$(dev_bytes "$tmp/stats" mlx5_0) b1=$(dev_bytes "$tmp/stats" mlx5_1)
    [ "$b1" -eq 0 ] && [ "$b0" -gt 100000 ] && echo "ok: $p below the stripe minimum: all $b0 bytes on mlx5_0" ||
      fail "$p below the stripe minimum: mlx5_0 $b0, mlx5_1 $b1 bytes (want all on mlx5_0)"
  fi
  if RVXSIM_RDMA_DENY=mlx5_1 run $p fail mlx5_0:HDR,mlx5_1:EDR; then
    echo "ok: $p: an RDMA error on lane 1 fails the message on both sides; lane 0 keeps working"
  fi
  tol=10; [ $p = pipeline ] && tol=20   # per mille
  for cfg in "mlx5_0:HDR,mlx5_1:EDR 333" "mlx5_0:1xHDR,mlx5_1:4xEDR 667"; do
    set -- $cfg
    run $p share "$1" || continue
    b0=$(dev_bytes "$tmp/stats" mlx5_0) b1=$(dev_bytes "$tmp/stats" mlx5_1)
    total=$((b0 + b1)) want=$((8 * 4194304))
    share=$((b1 * 1000 / (total > 0 ? total : 1)))
    d=$((share - $2)); [ $d -lt 0 ] && d=$((-d))
    line="$p share ($1): mlx5_0 $b0 bytes, mlx5_1 $b1 bytes: mlx5_1 carried $share/1000, want $2 +- $tol"
    if [ $d -le $tol ] && [ $total -ge $((want - 8 * 4096)) ] && [ $total -le $((want + 4096)) ]; then
      echo "ok: $line"
    else
      fail "$line (total $total of $want)"
    fi
  done
done
# peers that die mid-rendezvous in a two-lane build (tests/t_tag_peer_death.c, RVX_LANES=2):
# every request gets a status, no hang
for p in get put pipeline; do
  b=build/lanes/t_tag_peer_death_$p
  [ -x $b ] || { fail "$b not built (make)"; continue; }
  if RVXSIM_NUM_DEVICES=2 RVXSIM_PORT_SPEED=mlx5_0:HDR,mlx5_1:EDR timeout 200 $b >"$tmp/out" 2>&1; then
    echo "ok: $p, two lanes: peers dying mid-rendezvous give every request a status"
  else
    fail "$p, two lanes: peer death"; tail -15 "$tmp/out" | sed 's/^/  | /'
  fi
done

# dc_mlx5 with two lanes (build/lanes/t_lanes_dc_*): the sweep's bytes all arrive, lane 1 carries
# its stripes, and peers dying mid-rendezvous give every request a status
for p in get put pipeline; do
  [ -x "build/lanes/t_lanes_dc_$p" ] || { fail "build/lanes/t_lanes_dc_$p not built (make)"; continue; }
  rm -f "$tmp/stats"
  if RVXSIM_NUM_DEVICES=2 RVXSIM_PORT_SPEED=mlx5_0:HDR,mlx5_1:EDR RVXSIM_STATS_FILE=$tmp/stats \
     timeout 200 "build/lanes/t_lanes_dc_$p" sweep >"$tmp/out" 2>&1; then
    b1=$(dev_bytes "$tmp/stats" mlx5_1)
    [ "$b1" -gt 0 ] && echo "ok: dc_mlx5 $p sweep: every byte arrived; mlx5_1 moved $b1 bytes" ||
      fail "dc_mlx5 $p sweep: mlx5_1 moved nothing (no striping)"
  else
    fail "dc_mlx5 $p sweep: exit status"; tail -15 "$tmp/out" | sed 's/^/  | /'
  fi
done
b=build/lanes/t_tag_peer_death_dc_get
if [ ! -x $b ]; then
  fail "$b not built (make)"
elif RVXSIM_NUM_DEVICES=2 RVXSIM_PORT_SPEED=mlx5_0:HDR,mlx5_1:EDR timeout 200 $b >"$tmp/out" 2>&1; then
  echo "ok: dc_mlx5 get, two lanes: peers dying mid-rendezvous give every request a status"
else
  fail "dc_mlx5 get, two lanes: peer death"; tail -15 "$tmp/out" | sed 's/^/  | /'
fi

# fewer devices than lanes: a clear error, not a crash
for e in "RVXSIM_NUM_DEVICES=1|RVXSIM_NUM_DEVICES=2" "RVX_DEV=mlx5_0|names no device for lane 1"; do
  IFS='|' read -r setting msg <<<"$e"
  if env RVXSIM_NUM_DEVICES=2 $setting timeout 60 build/lanes/t_lanes_get >"$tmp/out" 2>&1; then
    fail "$setting: two lanes started"
  elif grep -qF -- "$msg" "$tmp/out"; then
    echo "ok: $setting: refused with '$msg'"
  else
    fail "$setting: no '$msg' in:"; head -5 "$tmp/out" | sed 's/^/  | /'
  fi
done
[ $fails -eq 0 ]
