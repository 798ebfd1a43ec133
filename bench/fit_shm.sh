#!/usr/bin/env bash
# fit_shm.sh (make fit-shm): measure what include/rvx/fabric/shm_local.h is fitted to, and print the
# constants the fit gives, beside the header's.
#   build/bench/tag_lat_eager  tag ping-pong with the switch pinned above 4 MiB: every size eager
#   build/bench/tag_lat_rndv   the same pinned at 1 byte: every size rendezvous (GET)
# ROUNDS rounds (default 3), medians of the one-way latencies (tag_lat's "lat_ns" column). From them:
#   eager 8 B, rendezvous 8 B      fixed costs; their difference is what the model's fixed
#                                  difference d*(2C + 4L + 3O) - C - O must equal (rrc = 1)
#   slopes, 64 KiB .. 2 MiB        ns per byte of each protocol
# and the fit (the reasoning is in shm_local.h):
#   RVX_FAB_LATENCY_NS           eager 8 B
#   RVX_FAB_BW_MBS, _BCOPY_BW    1000 / eager slope (copies at memory speed either way)
#   RVX_FAB_REG_GROWTH_NS_PER_KB 1000 * (rendezvous slope - eager slope) / 2, at least 0
#   RVX_FAB_REG_OVERHEAD_NS      C from the fixed difference, with RVX_FAB_OVERHEAD_NS kept
# then the model's thresholds for the fitted constants (build/bin/rvxthresh --set ...).
set -u
cd "$(dirname "$0")/.." || exit 1
ROUNDS="${ROUNDS:-3}"
for b in tag_lat_eager tag_lat_rndv; do
  [ -x "build/bench/$b" ] || { echo "fit_shm: build build/bench/$b first (make fit-shm)"; exit 1; }
done
raw=$(mktemp); trap 'rm -f "$raw"' EXIT
for r in $(seq 1 "$ROUNDS"); do
  for b in eager rndv; do
    echo "# fit_shm: round $r of $ROUNDS: $b" >&2
    timeout -k 2 300 "build/bench/tag_lat_$b" 2>&1 |
      awk -v b="$b" '$1 ~ /^[0-9]+$/ && NF >= 6 { print b, $1, $2 }' >>"$raw"
  done
done
# medians per protocol and size
med=$(sort -k1,1 -k2,2n -k3,3g "$raw" | awk '
  { k = $1 " " $2; v[k, ++n[k]] = $3; if (!(k in seen)) { seen[k] = 1; keys[++nk] = k } }
  END { for (i = 1; i <= nk; i++) { k = keys[i]; c = n[k]; m = (c % 2) ? v[k, (c + 1) / 2] : (v[k, c / 2] + v[k, c / 2 + 1]) / 2; print k, m } }')
echo "# medians of $ROUNDS rounds: one-way latency (ns)"
echo "#       size      eager       rndv"
echo "$med" | awk '{ l[$1, $2] = $3; s[$2] = 1 } END { for (z in s) printf "%12d %10.1f %10.1f\n", z, l["eager", z], l["rndv", z] }' | sort -n
echo "$med" | awk -v ov="$(awk '/RVX_FAB_OVERHEAD_NS/ { print $3 }' include/rvx/fabric/shm_local.h)" '
  { l[$1, $2] = $3 }
  END {
    lo = 65536; hi = 2097152; d = 0.99
    e0 = l["eager", 8]; r0 = l["rndv", 8]
    es = (l["eager", hi] - l["eager", lo]) / (hi - lo); rs = (l["rndv", hi] - l["rndv", lo]) / (hi - lo)
    L = e0; G = 1000 * (rs - es) / 2
    C = ((r0 - e0) - (d * (4 * L + 3 * ov) - ov)) / (2 * d - 1)
    if (G < 0) G = 0   # rendezvous as fast per byte as eager or faster: no pinning term
    if (C < 0) C = 0
    printf "fit eager_8B_ns %.0f rndv_8B_ns %.0f eager_ns_per_B %.4f rndv_ns_per_B %.4f\n", e0, r0, es, rs
    printf "fit RVX_FAB_LATENCY_NS %.0f RVX_FAB_BW_MBS %.0f RVX_FAB_REG_OVERHEAD_NS %.0f RVX_FAB_REG_GROWTH_NS_PER_KB %.0f\n", L, 1000 / es, C, G
    printf "%.0f %.0f %.0f %.0f %d\n", L, 1000 / es, C, G, ov > "/dev/stderr"
  }' 2>"$raw.fit"
read -r L BW C G OV <"$raw.fit"; rm -f "$raw.fit"
echo "# the header (include/rvx/fabric/shm_local.h):"
grep -E '^#define RVX_FAB_(LATENCY_NS|OVERHEAD_NS|BW_MBS|BCOPY_BW_MBS|REG_OVERHEAD_NS|REG_GROWTH_NS_PER_KB|RNDV_THRESH_FALLBACK)' include/rvx/fabric/shm_local.h | awk '{ print "#   " $2, $3 }'
echo "# the model with this run's fit:"
build/bin/rvxthresh --points 2 --set latency_ns="$L" --set bw_mbs="$BW" --set bcopy_bw_mbs="$BW" \
  --set reg_overhead_ns="$C" --set reg_growth_ns_per_kb="$G" | grep '^threshold'
