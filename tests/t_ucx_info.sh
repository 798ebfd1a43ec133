#!/usr/bin/env bash
# `ucx_info -d` (Debian's UCX, unmodified) on rvxsim lists the model's device with UCX's mlx5
# transports: rc_mlx5, ud_mlx5 and dc_mlx5 on mlx5_0:1 (and mlx5_1:1 with two devices). UCX keeps a device
# only if it reads a Mellanox PCI vendor and a ConnectX device id through ibdev_path and finds
# /dev/infiniband/uverbsN, so this checks the model's sysfs view and rvxsim-env's device view.
set -u
cd "$(dirname "$0")/.."
. tests/ucx_lib.sh
fail=0
check() { # devices
  local out=$tmp/info.$1
  RVXSIM_NUM_DEVICES=$1 timeout 60 "$ENV" ucx_info -d >"$out" 2>&1 || { echo "FAIL: ucx_info -d exit $?"; fail=1; }
  for d in $(seq 0 $(($1 - 1))); do
    for tl in rc_mlx5 ud_mlx5 dc_mlx5; do
      awk -v tl="$tl" -v dev="mlx5_$d:1" '/Transport:/ { t = $3 } /Device:/ && t == tl && $3 == dev { f = 1 }
        END { exit !f }' "$out" || { echo "FAIL: $tl on mlx5_$d:1 not listed (devices: $1)"; fail=1; }
    done
  done
  # without the device view UCX must not see it: the check above is about rvxsim-env
  [ $1 = 1 ] && [ ! -e /dev/infiniband/uverbs0 ] && LD_LIBRARY_PATH=build/sim timeout 60 ucx_info -d 2>/dev/null | grep -q "Transport: rc_mlx5" &&
    { echo "FAIL: rc_mlx5 listed without rvxsim-env's device view"; fail=1; }
  grep -q "mlx5_0" "$out" && echo "ok: $1 device(s): $(grep -c 'Transport: .*_mlx5' "$out") mlx5 transport entries"
}
check 1
check 2
exit $fail
