#!/usr/bin/env bash
# UCX's own mlx5 transports, unmodified (Debian's ucx_perftest), between two processes on rvxsim:
# UCT put_lat and am_lat over rc_mlx5 and over dc_mlx5 (DCIs and a DCT on the model); UCP tag_lat
# with UCX's default transports (UCP wires up over ud_mlx5 and keeps an rc_mlx5 lane), and UCP
# tag_lat and ucp_put_lat with the shared-memory transports excluded, so that every message goes
# through the model. Few iterations: this checks that UCX runs, the latencies are printed only for
# reading.
set -u
cd "$(dirname "$0")/.."
. tests/ucx_lib.sh
fail=0
perftest uct_put_lat 200 -t put_lat -x rc_mlx5 -d mlx5_0:1 || fail=1
perftest uct_am_lat 200 -t am_lat -x rc_mlx5 -d mlx5_0:1 || fail=1
perftest uct_dc_put_lat 200 -t put_lat -x dc_mlx5 -d mlx5_0:1 || fail=1
perftest uct_dc_am_lat 200 -t am_lat -x dc_mlx5 -d mlx5_0:1 || fail=1
perftest ucp_tag_lat_default 200 -t tag_lat || fail=1
grep -q "ep_cfg\[[0-9]*\]: tag(.*rc_mlx5/mlx5_0:1" "$tmp/ucp_tag_lat_default" ||
  { echo "FAIL: default transports: no rc_mlx5 lane in UCP's endpoint configuration"; fail=1; }
export UCX_TLS=^sm,cma,tcp
perftest ucp_tag_lat_model 200 -t tag_lat || fail=1
grep -q "ep_cfg\[[0-9]*\]: tag(rc_mlx5/mlx5_0:1)" "$tmp/ucp_tag_lat_model" ||
  { echo "FAIL: tag_lat did not run over rc_mlx5 alone"; grep ep_cfg "$tmp/ucp_tag_lat_model"; fail=1; }
perftest ucp_put_lat_model 200 -t ucp_put_lat || fail=1
grep -q "ep_cfg\[[0-9]*\]: rma(rc_mlx5/mlx5_0:1)" "$tmp/ucp_put_lat_model" ||
  { echo "FAIL: ucp_put_lat did not run over rc_mlx5"; grep ep_cfg "$tmp/ucp_put_lat_model"; fail=1; }
exit $fail
