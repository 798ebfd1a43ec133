#!/usr/bin/env bash
# make scale's tool, cheaply: (1) the least-squares fit, projections and goal verdicts of
# bench/scale.sh on points whose answer is known; (2) a real run of build/bench/scale_dc at
# N = 2 and 4 on rvxsim: every figure measured at both N, a fit and projections at 1,024 and
# 16,384 for each, the projections on the fitted line, figures that make sense (a QP at least,
# registered memory, a creation time above zero), and the resident memory's parts (rvx's, the
# model's, the rest) each measured and consistent. bench/RESULTS.md is not touched.
set -u
cd "$(dirname "$0")/.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
expect() { # file, line
  grep -qxF "$2" "$1" || fail "expected the line '$2'"
}
fit() { # name input [VAR=value...]: bench/scale.sh fits the input's lines, runs nothing; f is its output
  local name=$1 in=$2
  shift 2
  env "$@" SCALE_OUT="$tmp/$name" SCALE_INPUT="$in" bench/scale.sh >"$tmp/$name.out" 2>&1 || fail "fit $name: exit $?"
  f=$tmp/$name.out
}

# (1) known points: qps constant 9; heap_kib 10 + 0.25 N exactly; create_s (2,1) (4,2) (8,6),
# whose least-squares line is -1 + 6/7 N; verbs growing 1 per rank (a goal not met)
cat >"$tmp/in.txt" <<'EOF'
scale dc_mlx5 2 qps 9
scale dc_mlx5 4 qps 9
scale dc_mlx5 8 qps 9
scale dc_mlx5 2 heap_kib 10.5
scale dc_mlx5 4 heap_kib 11
scale dc_mlx5 8 heap_kib 12
scale dc_mlx5 2 create_s 1
scale dc_mlx5 4 create_s 2
scale dc_mlx5 8 create_s 6
scale dc_mlx5 2 verbs 40
scale dc_mlx5 4 verbs 42
scale dc_mlx5 8 verbs 46
EOF
fit fit "$tmp/in.txt"
expect "$f" "scale-fit dc_mlx5 qps 9 0"
expect "$f" "scale-proj dc_mlx5 16384 qps 9"
expect "$f" "scale-fit dc_mlx5 heap_kib 10 0.25"
expect "$f" "scale-proj dc_mlx5 1024 heap_kib 266"
expect "$f" "scale-proj dc_mlx5 16384 heap_kib 4106"
expect "$f" "scale-fit dc_mlx5 create_s -1 0.857143"
expect "$f" "scale-proj dc_mlx5 1024 create_s 876.714"
expect "$f" "scale-goal dc_mlx5 qps@16384 9 64 met"
expect "$f" "scale-goal dc_mlx5 heap_bytes_per_peer 256 256 met"
expect "$f" "scale-goal dc_mlx5 verbs_per_peer 1 0 not met"
grep -q "registered_mib" "$f" && fail "a goal or fit for a figure that was not measured"
expect "$f" "scale-fit-from dc_mlx5 2"

# (1b) a figure that grows to a cap by N = 8 is fitted from N = 16 (three points there: the cap
# is flat); rc_mlx5's heap beside its QPs' state, 1024 - 512 B, and beside its operation records
# too, 1024 - 256 - 512 B
awk 'BEGIN { for (n = 2; n <= 64; n *= 2)
  printf "scale rc_mlx5 %d srq_entries %d\nscale rc_mlx5 %d heap_kib %g\nscale rc_mlx5 %d op_pool_kib %g\nscale rc_mlx5 %d qp_heap_kib %g\n",
         n, n < 8 ? 128 * n : 1024, n, 10 + n, n, n / 4, n, n / 2 }' >"$tmp/in2.txt"
fit fit2 "$tmp/in2.txt"
expect "$f" "scale-fit-from rc_mlx5 16"
expect "$f" "scale-fit rc_mlx5 srq_entries 1024 0"
expect "$f" "scale-proj rc_mlx5 16384 srq_entries 1024"
expect "$f" "scale-goal rc_mlx5 heap_bytes_per_peer_beside_op_pool 768 256 not met"
expect "$f" "scale-goal rc_mlx5 heap_bytes_per_peer_beside_qp 512 256 not met"
expect "$f" "scale-goal rc_mlx5 heap_bytes_per_peer_beside_op_pool_and_qp 256 256 met"
fit fit3 "$tmp/in2.txt" SCALE_FIT_FROM=2
grep -q "^scale-fit rc_mlx5 srq_entries [0-9.e+-]* 0$" "$f" &&
  fail "SCALE_FIT_FROM=2: the capped figure's line through every point is flat"

# (2) a real run
if [ ! -x build/bench/scale_dc ] || [ ! -e build/sim/libibverbs.so.1 ] || [ ! -x build/bin/rvxrun ]; then
  echo "SKIP: build/bench/scale_dc, build/sim or build/bin/rvxrun not built (make all)"
  exit 77
fi
SCALE_OUT=$tmp/run SCALE_TL=dc_mlx5 SCALE_N="2 4" SCALE_LAUNCH= SCALE_TIMEOUT_S=60 bench/scale.sh >"$tmp/run.out" 2>&1 ||
  { fail "bench/scale.sh on dc_mlx5, N = 2 4: exit $?"; cat "$tmp/run.out"; }
f=$tmp/run.out
for field in qps registered_mib rss_mib cq_entries create_s verbs heap_kib; do
  for n in 2 4; do
    grep -Eq "^scale dc_mlx5 $n $field -?[0-9.e+-]+$" "$f" || fail "no figure '$field' at N = $n"
  done
  grep -Eq "^scale-fit dc_mlx5 $field -?[0-9.e+-]+ -?[0-9.e+-]+$" "$f" || fail "no fit of '$field'"
  for n in 1024 16384; do
    # the projection is the fitted line at n (to the printed precision)
    awk -v f="$field" -v n="$n" '
      $1 == "scale-fit" && $3 == f { a = $4; b = $5 }
      $1 == "scale-proj" && $3 == n && $4 == f { p = $5; have = 1 }
      END { want = a + b * n; d = p - want; if (d < 0) d = -d
            exit !(have && d <= 1e-5 * (want < 0 ? -want : want) + 1e-9) }' "$f" ||
      fail "projection of '$field' at N = $n is missing or off the fitted line"
  done
done
awk '$1 == "scale" && $4 == "qps" && $5 < 1 { bad = 1 }
     $1 == "scale" && $4 == "registered_mib" && $5 <= 0 { bad = 1 }
     $1 == "scale" && $4 == "create_s" && $5 <= 0 { bad = 1 }
     $1 == "scale" && $4 == "rss_mib" && $5 <= 0 { bad = 1 }
     END { exit bad }' "$f" || fail "a figure that cannot be: $(grep '^scale ' "$f" | tr '\n' ';')"
grep -q "^scale-goal dc_mlx5 qps@16384 " "$f" || fail "no verdict on dc_mlx5's QPs at 16,384"
# where the resident memory is: every part measured; what is resident of the registered memory
# no more than was registered; the queues and the fabric inboxes resident; the rest (code and
# data of the executable and libraries at least) above zero
for field in rss_kib rvx_kib reg_rss_kib queue_kib shm_kib model_kib fabric_kib rest_kib op_pool_kib; do
  for n in 2 4; do
    grep -Eq "^scale dc_mlx5 $n $field -?[0-9.e+-]+$" "$f" || fail "no figure '$field' at N = $n"
  done
done
awk '$1 == "scale" { v[$3, $4] = $5 }
     END { for (n = 2; n <= 4; n += 2) {
             if (v[n, "reg_rss_kib"] > v[n, "registered_mib"] * 1024 + 4) bad = bad " registered" n
             if (v[n, "queue_kib"] <= 0 || v[n, "fabric_kib"] <= 0 || v[n, "rest_kib"] <= 0) bad = bad " zero" n
             if (v[n, "rvx_kib"] < v[n, "reg_rss_kib"] + v[n, "queue_kib"]) bad = bad " parts" n
             if (v[n, "op_pool_kib"] <= 0 || v[n, "op_pool_kib"] > v[n, "heap_kib"]) bad = bad " pool" n }
           if (bad != "") { print bad; exit 1 } }' "$f" ||
  fail "the resident memory's parts do not add up: $(grep -E '^scale dc_mlx5 [0-9]+ (registered_mib|heap_kib|op_pool_kib|rss_kib|rvx_kib|reg_rss_kib|queue_kib|fabric_kib|rest_kib) ' "$f" | tr '\n' ';')"

[ $fails -eq 0 ] || { echo "--- output"; cat "$tmp/run.out"; exit 1; }
echo "t_scale: fit, projections and verdicts on known points; dc_mlx5 at N = 2, 4:"
grep -E "^scale(-goal)? " "$f"
exit 0
