#!/usr/bin/env bash
# make hwcheck: run the rc_mlx5 tests on a real ConnectX through the system's rdma-core (not
# rvxsim). Exit 77 (skip) when the machine has no RDMA adapter; otherwise the tests' result.
set -u
cd "$(dirname "$0")/.."
unset LD_LIBRARY_PATH
if ! command -v ibv_devinfo >/dev/null; then
  echo "SKIP: ibv_devinfo not found (make deps installs ibverbs-utils)"; exit 77
fi
devs=$(ibv_devinfo -l 2>/dev/null | awk 'NR > 1 && $1 ~ /^mlx5/ { print $1 }')
if [ -z "$devs" ]; then
  echo "SKIP: no mlx5 RDMA adapter on this machine (ibv_devinfo -l lists none); the rc_mlx5"
  echo "      tests run on the rvxsim model in 'make test' instead"
  exit 77
fi
echo "hwcheck: adapters: $devs (RVX_DEV=${RVX_DEV:-first mlx5 device})"
pass=0 fail=0
for t in build/tests-rc/t_*; do
  [ -x "$t" ] || continue
  if timeout -k 5 600 "$t" >"build/test-logs/hw_$(basename "$t").log" 2>&1; then
    pass=$((pass + 1)); echo "PASS  hw/$(basename "$t")"
  else
    fail=$((fail + 1)); echo "FAIL  hw/$(basename "$t") (log build/test-logs/hw_$(basename "$t").log)"
  fi
done
echo "== instruction counts on the adapter"
RVX_ICOUNT_HW=1 bench/icount.sh 20000 | grep rc_mlx5 || true
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
